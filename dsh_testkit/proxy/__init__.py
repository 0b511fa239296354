"""A recording reverse proxy: any agent's live traffic to any chat API, as a trace.

``dsh-testkit proxy --upstream URL --out FILE`` (or :class:`ProxyServer` in tests) forwards
every request, streams answers back unbuffered, and appends each exchange, with how it ended,
to a ``dsh-trace`` file that ``dsh-testkit cache-report`` reads (continued on a restart, one
proxy per file)::

    with ProxyServer(upstream="https://api.deepseek.com", out="run.trace") as proxy:
        client = openai.OpenAI(base_url=proxy.base_url, api_key=os.environ["DEEPSEEK_API_KEY"])
        ...

:class:`ProxyLimits` holds its timeouts and caps; :meth:`Recorder.subscribe` hands each
exchange record, as written, to a listener. The live report pages are handed in
(``ProxyServer(upstream, pages=dsh_testkit.explorer.live_pages)``); the cache doctor's report of
what it recorded is ``report_text(diagnose(proxy.trace()))`` (:mod:`dsh_testkit.doctor`).
"""

from ._recorder import Recorder
from ._server import ProxyError, ProxyLimits, ProxyServer

__all__ = ["ProxyError", "ProxyLimits", "ProxyServer", "Recorder"]
