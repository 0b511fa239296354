"""The report as one self-contained HTML page: the Cache Explorer (``_explorer/``).

:func:`render_html` is what ``cache-report --html`` and the demo write; the live servers
(``dsh-testkit proxy``, ``dsh-testkit serve``) serve the same page with a URL to poll.
"""

from __future__ import annotations

from ._explorer import render_page
from ._report import DoctorReport

__all__ = ["render_html"]


def render_html(
    report: DoctorReport, *, live: str | None = None, version: str | None = None
) -> str:
    """The Cache Explorer of ``report``: one HTML document that needs no network (opens from
    ``file://``). ``live``: the URL of a JSON endpoint answering the report, which the page
    polls for new requests; ``version``: the embedded report's ETag there."""
    return render_page(report, live=live, version=version)
