"""A recording reverse proxy: any agent's live traffic to any chat API, as a trace.

``dsh-testkit proxy --upstream URL --out FILE`` (or :class:`ProxyServer` in tests) forwards
every request, streams answers back unbuffered, and appends each completed exchange to a
``dsh-trace`` file that ``dsh-testkit cache-report`` reads::

    with ProxyServer(upstream="https://api.deepseek.com", out="run.trace") as proxy:
        client = openai.OpenAI(base_url=proxy.base_url, api_key=os.environ["DEEPSEEK_API_KEY"])
        ...
"""

from ._server import ProxyError, ProxyServer, Recorder, report_text, serve_proxy

__all__ = ["ProxyError", "ProxyServer", "Recorder", "report_text", "serve_proxy"]
