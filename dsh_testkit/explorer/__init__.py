"""The Cache Explorer: the doctor's report as one self-contained page, static or live.

``render_html(report)`` writes the page (``cache-report --html``, the demo); :func:`live_pages`
serves it live, handed to a server as it is built (``MockServer(pages=live_pages)``,
``ProxyServer(upstream, pages=live_pages)``; ``dsh-testkit proxy`` and ``dsh-testkit serve``
attach it), at ``/_dsh/explorer``, with the report as JSON at ``/_dsh/report?format=json``,
which the page polls with ``If-None-Match``, and as text at ``/_dsh/report``.
The page's CSS and script live beside this module (``explorer.css``, ``js/``) and are inlined.
"""

from ._live import (
    LIVE_PATHS,
    REPORT_JSON_URL,
    LiveAnswer,
    LivePages,
    LiveReport,
    live_pages,
    live_report_of,
    wants_json,
)
from ._page import DOCS_PAGE, embed_json, page_config, render_html

__all__ = [
    "DOCS_PAGE",
    "LIVE_PATHS",
    "REPORT_JSON_URL",
    "LiveAnswer",
    "LivePages",
    "LiveReport",
    "embed_json",
    "live_pages",
    "live_report_of",
    "page_config",
    "render_html",
    "wants_json",
]
