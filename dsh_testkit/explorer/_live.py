"""The live routes: the report of a growing trace as JSON and as the Cache Explorer page.

``dsh-testkit proxy`` and ``dsh-testkit serve`` answer two paths with a :class:`LiveReport`:

- ``GET /_dsh/report?format=json``: the compact report document (``compact_report``,
  formatVersion 4) with an ``ETag``; a request whose ``If-None-Match`` names the current ETag
  gets ``304 Not Modified`` and no body, so a page polling every few hundred milliseconds costs
  nothing while no exchange arrives;
- ``GET /_dsh/explorer``: the page, with the report so far embedded and that endpoint to poll.

The report is diagnosed again only when the trace changed: each answer first reads a cheap
*marker* of the trace (its records: their count and the first and last record, compared by
identity, so a reset log with as many records is still new), and then, when it changed, the
whole trace. The marker is read before the trace, so the cached report is never older than its
ETag says.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import parse_qs
from weakref import WeakKeyDictionary, ref

from ..doctor._compact import compact_report, dumps_compact
from ..doctor._diagnose import diagnose
from ..doctor._report import DoctorReport
from ._page import render_html

__all__ = [
    "LIVE_PATHS",
    "REPORT_JSON_URL",
    "LiveAnswer",
    "LiveReport",
    "live_report_of",
    "wants_json",
]

REPORT_JSON_URL: Final = "/_dsh/report?format=json"
"""The endpoint a served page polls."""

LIVE_PATHS: Final = ("/_dsh/report", "/_dsh/explorer")
"""The paths :meth:`LiveReport.answer` serves (``/_dsh/report`` only with ``format=json``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LiveAnswer:
    """One HTTP answer of a live route."""

    status: int
    body: bytes
    content_type: str
    headers: tuple[tuple[str, str], ...] = ()
    """Besides ``content-type`` and ``content-length``: ``etag``, ``cache-control``."""


def wants_json(query: str) -> bool:
    """Whether a ``/_dsh/report`` query asks for JSON (``format=json``)."""
    return parse_qs(query).get("format") == ["json"]


def _etags(header: str | None) -> set[str]:
    if not header:
        return set()
    out = set()
    for item in header.split(","):
        tag = item.strip()
        out.add(tag[2:] if tag.startswith("W/") else tag)
    return out


@dataclass(frozen=True, slots=True)
class _Cached:
    marker: tuple[int, object, object]
    etag: str
    report: DoctorReport
    document: dict[str, Any]
    json: bytes


class LiveReport:
    """The report of a growing trace for live pages, diagnosed again only when it changed.

    ``source`` returns what :func:`~dsh_testkit.doctor.diagnose` takes (a trace, a mock);
    ``records`` returns the records it is built from (the proxy's exchanges, the mock's request
    log): their count and their first and last record (by identity) mark a change.
    """

    def __init__(
        self,
        source: Callable[[], Any],
        records: Callable[[], Sequence[object]],
        *,
        build: Callable[[], DoctorReport] | None = None,
        version: Callable[[], int] | None = None,
    ) -> None:
        self._source = source
        self._records = records
        self._build = build if build is not None else lambda: diagnose(self._source())
        """How the report is made: by default ``diagnose(source())``; the proxy passes its
        incremental report, so a long session is never diagnosed again from the start."""
        self._version = version
        """With ``build``: a number that grows whenever the report would change."""
        self._lock = threading.Lock()
        self._cached: _Cached | None = None
        self._token = secrets.token_hex(4)
        """Tells this server's ETags from a previous run's (a page kept open across runs)."""
        self._count = 0

    def _marker(self) -> tuple[int, object, object]:
        if self._version is not None:
            return (self._version(), None, None)
        records = self._records()
        if not records:
            return (0, None, None)
        return (len(records), records[0], records[-1])

    def current(self) -> _Cached:
        """The report as of now (diagnosed again when the trace changed)."""
        with self._lock:
            marker = self._marker()
            cached = self._cached
            if cached is not None and (
                cached.marker[0] == marker[0]
                and cached.marker[1] is marker[1]
                and cached.marker[2] is marker[2]
            ):
                return cached
            report = self._build()
            document = compact_report(report)
            self._count += 1
            cached = _Cached(
                marker=marker,
                etag=f'"{self._token}-{self._count}"',
                report=report,
                document=document,
                json=dumps_compact(document).encode("utf-8"),
            )
            self._cached = cached
            return cached

    def answer(self, path: str, query: str = "", if_none_match: str | None = None) -> LiveAnswer:
        """The answer to ``GET path?query`` for a path of :data:`LIVE_PATHS`."""
        cached = self.current()
        common = (("etag", cached.etag), ("cache-control", "no-store"))
        if path == "/_dsh/explorer":
            page = render_html(cached.report, live=REPORT_JSON_URL, version=cached.etag)
            return LiveAnswer(
                status=200,
                body=page.encode("utf-8"),
                content_type="text/html; charset=utf-8",
                headers=(("cache-control", "no-store"),),
            )
        if cached.etag in _etags(if_none_match):
            return LiveAnswer(status=304, body=b"", content_type="application/json", headers=common)
        return LiveAnswer(
            status=200, body=cached.json, content_type="application/json", headers=common
        )


def _requests_of(mock: Any) -> Sequence[object]:
    return () if mock is None else tuple(mock.requests)


_MOCKS: WeakKeyDictionary[Any, LiveReport] = WeakKeyDictionary()
_MOCKS_LOCK = threading.Lock()


def live_report_of(mock: Any) -> LiveReport:
    """The :class:`LiveReport` of a mock (one per mock, made on first use): its request log,
    diagnosed as ``diagnose(mock)``."""
    with _MOCKS_LOCK:
        found = _MOCKS.get(mock)
        if found is None:
            # Weak references only: the mock is this table's key, so the value may not hold it.
            weak = ref(mock)
            found = LiveReport(weak, lambda: _requests_of(weak()))
            _MOCKS[mock] = found
        return found
