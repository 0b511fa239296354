"""The Cache Explorer: the doctor's report as one self-contained page, static or live.

``render_html(report)`` writes the page (``cache-report --html``, the demo). The live page is
served by ``dsh-testkit proxy`` and ``dsh-testkit serve`` at ``/_dsh/explorer`` (``_live``: the
kit's servers answer with it), with the report as JSON at ``/_dsh/report?format=json``, which
the page polls with ``If-None-Match``. The page's CSS and script live beside this module
(``explorer.css``, ``js/``) and are inlined.
"""

from ._page import render_html

__all__ = ["render_html"]
