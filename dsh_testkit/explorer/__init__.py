"""The Cache Explorer: the doctor's report as one self-contained page, static or live.

``render_html(report)`` writes the page (``cache-report --html``, the demo); :func:`live_pages`
serves it live, handed to a server as it is built (``MockServer(pages=live_pages)``,
``ProxyServer(upstream, pages=live_pages)``; ``dsh-testkit proxy`` and ``dsh-testkit serve``
attach it), at ``/_dsh/explorer``, with the report as JSON at ``/_dsh/report?format=json``,
which the page polls with ``If-None-Match``, and as text at ``/_dsh/report``.
The page's CSS and script live beside this module (``explorer.css``, ``js/``) and are inlined.
"""

from ._live import live_pages
from ._page import render_html

__all__ = ["live_pages", "render_html"]
