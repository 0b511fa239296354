"""The live routes: the report of a growing trace as text, as JSON and as the Cache Explorer page.

A server hands these paths to the :class:`LivePages` it was given (:func:`live_pages` makes
them; ``dsh-testkit serve`` and ``dsh-testkit proxy`` and the pytest plugin's fixtures attach
them; the servers themselves import nothing of the doctor or of this page)::

    with MockServer(pages=live_pages) as server: ...
    with ProxyServer(upstream, pages=live_pages) as proxy: ...

- ``GET /_dsh/report``: the cache doctor's report as text;
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
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol, runtime_checkable
from urllib.parse import parse_qs
from weakref import WeakKeyDictionary, ref

from .._loopback.pages import LiveAnswer
from ..doctor import DoctorReport, diagnose, report_text
from ..doctor._compact import compact_report, dumps_compact
from ..doctor._incremental import IncrementalReport
from ..traces import Exchange
from ._page import render_html

__all__ = [
    "LIVE_PATHS",
    "REPORT_JSON_URL",
    "ExchangeFeed",
    "FollowedRecorder",
    "LiveAnswer",
    "LivePages",
    "LiveReport",
    "live_pages",
    "live_report_of",
    "wants_json",
]

REPORT_JSON_URL: Final = "/_dsh/report?format=json"
"""The endpoint a served page polls."""

LIVE_PATHS: Final = ("/_dsh/report", "/_dsh/explorer")
"""The paths :meth:`LiveReport.answer` serves (``/_dsh/report`` only with ``format=json``)."""


def wants_json(query: str) -> bool:
    """Whether a ``/_dsh/report`` query asks for JSON (``format=json``)."""
    return parse_qs(query).get("format") == ["json"]


def _wants_all(query: str) -> bool | None:
    """What a text ``/_dsh/report`` query asks of its rows: ``all=1`` every request's, ``all=0``
    the summary only, else the report's own choice (by its size)."""
    given = parse_qs(query).get("all")
    if not given:
        return None
    return given[-1].lower() not in ("0", "false", "no", "off")


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


_FOLLOW_KEEP: Final = 8000
"""Exchanges a followed recorder keeps readable by index: four times the doctor's window of
earlier requests (2,000), so a parent it asks for is still there."""


class ExchangeFeed(Protocol):
    """Exchanges of a growing trace, each taken once (the recording proxy's
    :meth:`Recorder.follow() <dsh_testkit.proxy.Recorder.follow>`)."""

    @property
    def path(self) -> str | None: ...

    def waiting(self) -> int:
        """Exchanges recorded but not taken yet."""
        ...

    def take(self) -> Iterator[Exchange]:
        """The exchanges recorded since the last call, indexed from 0 on."""
        ...

    def exchange(self, index: int) -> Exchange:
        """A taken exchange again (``LookupError`` once it is no longer kept)."""
        ...


@runtime_checkable
class FollowedRecorder(Protocol):
    """What records a trace the live pages can follow (the recording proxy's ``Recorder``)."""

    def follow(self, *, keep: int) -> ExchangeFeed: ...


class _Incremental:
    """The report of a followed trace: each exchange diagnosed once, as it is taken."""

    def __init__(self, feed: ExchangeFeed) -> None:
        self._feed = feed
        self._report = IncrementalReport(lookup=feed.exchange)
        self._lock = threading.Lock()

    def version(self) -> int:
        return self._report.count + self._feed.waiting()

    def build(self) -> DoctorReport:
        with self._lock:
            for exchange in self._feed.take():
                self._report.add(exchange)
            return self._report.report(path=self._feed.path)


class LivePages:
    """The live pages of one source, as a server calls them:
    ``pages(path, query, if_none_match)`` answers ``GET /_dsh/report`` (text, or JSON with an
    ``ETag`` and ``304`` when ``format=json``) and ``GET /_dsh/explorer``."""

    def __init__(self, live: LiveReport, *, empty: str | None = None) -> None:
        self.live = live
        """The report, diagnosed again only when the source changed."""
        self._empty = empty
        """The text report while the report is empty (``None``: the doctor's own words)."""

    def report(self) -> DoctorReport:
        """The report as of now."""
        return self.live.current().report

    def text(self, *, full: bool | None = None) -> str:
        """The report as of now, as text (``GET /_dsh/report``; ``?all=1``: every request's
        row, ``?all=0``: the summary only; ``full`` as :func:`~dsh_testkit.doctor.report_text`
        takes it)."""
        report = self.report()
        if report.empty and self._empty is not None:
            return self._empty
        return report_text(report, full=full)

    def __call__(self, path: str, query: str = "", if_none_match: str | None = None) -> LiveAnswer:
        if path == "/_dsh/report" and not wants_json(query):
            return LiveAnswer(
                status=200,
                body=self.text(full=_wants_all(query)).encode("utf-8"),
                content_type="text/plain; charset=utf-8",
                headers=(("cache-control", "no-store"),),
            )
        return self.live.answer(path, query, if_none_match)


def live_pages(source: Any) -> LivePages:
    """The live pages of ``source``: hand this function to a server as it is built,
    ``MockServer(pages=live_pages)``, ``ProxyServer(upstream, pages=live_pages)``, and the
    server calls it with its mock or its recorder when it starts.

    ``source``: a mock (anything :func:`~dsh_testkit.doctor.diagnose` takes, whose
    ``requests`` are its records; the report is made again when they change, and every call
    for one mock shares it), or a recorder that can be followed (:class:`FollowedRecorder`:
    each exchange is diagnosed once, as it is recorded, so a long proxy session is never
    diagnosed again from the start; one call per recorder, before its first exchange, as the
    proxy does when it starts).
    """
    if isinstance(source, FollowedRecorder):
        incremental = _Incremental(source.follow(keep=_FOLLOW_KEEP))
        return LivePages(
            LiveReport(lambda: None, tuple, build=incremental.build, version=incremental.version),
            empty="Cache doctor (proxy trace) · the trace is empty: no model request was recorded\n",
        )
    return LivePages(live_report_of(source))
