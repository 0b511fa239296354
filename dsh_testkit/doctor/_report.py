"""The doctor's report: its values, figures, totals, and its JSON document.

One report for every input (a session log, a proxy trace, a capture, a cassette, the mock's
log, a HAR export, OpenTelemetry spans): per request the figures and findings, per
conversation and for the whole trace the totals, with one definition of each term
(``_codes.TERMS``).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias

from dsh_core.providers import Prices, prices_for

from ..prompt._granularity import CacheGranularity
from ._branches import Relation
from ._codes import CODES, CauseCode, Severity
from ._text import TextDiff

__all__ = [
    "DOCTOR_FORMAT_VERSION",
    "ConversationDiagnosis",
    "DoctorReport",
    "FigureSource",
    "Finding",
    "FindingGroup",
    "RequestDiagnosis",
    "Segment",
    "Totals",
    "money",
    "report_figures",
    "report_head",
    "request_ranges",
]

DOCTOR_FORMAT_VERSION: Final = 3
"""Version of the cache report's JSON document (2: one report for logs and traces; 3: the cache
granularity under its one name, ``granularity``, where 2 said ``unit``)."""

FigureSource: TypeAlias = Literal["reported", "simulated"]
"""Where one figure of a request comes from: the recording's usage, or the mock's prefix-cache
simulator."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """One cause found on one request, with its evidence and what it cost."""

    code: CauseCode
    severity: Severity
    detail: str
    """What happened here, in wire terms."""
    evidence: tuple[str, ...] = ()
    """Lines showing it: both sides of the differing text around the first difference, the
    arguments as produced and as resent, the timing, what the session log says."""
    where: str | None = None
    """The wire location (``system line 31 column 9``, ``tools[1]``, ``messages[3]``)."""
    lost_tokens: int = 0
    """The tokens this finding cost here (``severity == "loss"``)."""
    rejected: bool = False
    """Whether the API refuses the request for it."""
    rendered: bool = True
    """Whether the change reaches the prompt as DeepSeek's template renders it (a change that
    does not cannot cost a hit; it still breaks a byte-level prefix)."""
    diff: TextDiff | None = None
    """The differing text, for highlighting."""
    signature: str = ""
    """What makes two findings the same change (for grouping repeats)."""

    @property
    def sentence(self) -> str:
        return CODES[self.code].sentence

    @property
    def advice(self) -> str:
        return CODES[self.code].advice

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity,
            "sentence": self.sentence,
            "detail": self.detail,
            "where": self.where,
            "evidence": list(self.evidence),
            "lostTokens": self.lost_tokens,
            "rejected": self.rejected,
            "rendered": self.rendered,
            "diff": self.diff.to_json() if self.diff is not None else None,
            "signature": self.signature,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Segment:
    """One component of a request's prompt and its size, for the prompt bar."""

    label: str
    """``system``, ``tools``, ``messages[3] user``, …"""
    tokens: int

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "tokens": self.tokens}


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestDiagnosis:
    """The doctor's view of one request."""

    index: int
    """The exchange's index in the trace (shown as ``#index+1``)."""
    position: int
    """1-based position in its conversation."""
    conversation: str
    parent: int | None
    """The index of the request it is compared with (``None``: first of its conversation)."""
    relation: Relation
    model: str | None = None
    status: int | None = None
    error: str | None = None
    outcome: str | None = None
    prompt_tokens: int | None = None
    hit_tokens: int | None = None
    """``None`` when the figures are reported and this request has none."""
    completion_tokens: int | None = None
    prompt_source: FigureSource | None = None
    """Where :attr:`prompt_tokens` comes from (``None``: unknown)."""
    hit_source: FigureSource | None = None
    """Where :attr:`hit_tokens` comes from (``None``: unknown)."""
    usage_origin: str | None = None
    """Where the reader found the reported figures, when it says (telemetry)."""
    reusable_tokens: int = 0
    shared_tokens: int = 0
    """What it shares with the request it is compared with (≤ reusable): what a perfect cache
    would have given."""
    rounded_off_tokens: int = 0
    """What it could reuse beyond its last whole cache unit: the unrounded reusable part less
    :attr:`reusable_tokens` (0 ≤ it < the unit). A prompt a few tokens longer or shorter moves
    this across a unit boundary, which moves the hit (and the cost) by a whole unit."""
    divergence: str | None = None
    """Where it first departs from the request it is compared with, as the prompt renders."""
    findings: tuple[Finding, ...] = ()
    log_events: tuple[str, ...] = ()
    """What the session log says happened before it (session-log traces)."""
    notes: tuple[str, ...] = ()
    """What the doctor could not tell about it, and why."""
    segments: tuple[Segment, ...] = ()
    started: float | None = None
    cost: float | None = None
    """Estimated dollars (list prices) of its prompt and output."""
    lost_cost: float | None = None
    """Estimated dollars its lost tokens cost beyond a hit."""

    @property
    def measured(self) -> bool:
        """Whether it counts in the totals: it has a hit figure and was not refused."""
        return self.hit_tokens is not None and not (self.status or 0) >= 400

    @property
    def counted_hit_tokens(self) -> int:
        return min(self.hit_tokens or 0, self.reusable_tokens)

    @property
    def lost_tokens(self) -> int:
        return self.reusable_tokens - self.counted_hit_tokens if self.measured else 0

    @property
    def hit_rate(self) -> float | None:
        if self.hit_tokens is None or not self.prompt_tokens:
            return None
        return self.hit_tokens / self.prompt_tokens

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(f.code for f in self.findings)

    @property
    def side_call(self) -> bool:
        """A side call (a compaction, a title): reported apart from the main line's figures."""
        return self.relation == "branch"

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "position": self.position,
            "conversation": self.conversation,
            "parent": self.parent,
            "relation": self.relation,
            "model": self.model,
            "status": self.status,
            "error": self.error,
            "outcome": self.outcome,
            "promptTokens": self.prompt_tokens,
            "hitTokens": self.hit_tokens,
            "completionTokens": self.completion_tokens,
            "figures": {
                "prompt": self.prompt_source,
                "hit": self.hit_source,
                "origin": self.usage_origin,
            },
            "hitRate": _round(self.hit_rate),
            "reusableTokens": self.reusable_tokens,
            "sharedTokens": self.shared_tokens,
            "roundedOffTokens": self.rounded_off_tokens,
            "lostTokens": self.lost_tokens,
            "divergence": self.divergence,
            "findings": [f.to_json() for f in self.findings],
            "logEvents": list(self.log_events),
            "notes": list(self.notes),
            "segments": [s.to_json() for s in self.segments],
            "started": self.started,
            "cost": _round(self.cost, 8),
            "lostCost": _round(self.lost_cost, 8),
        }


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


@dataclass(frozen=True, slots=True, kw_only=True)
class Totals:
    """Sums over a set of requests (one definition everywhere: ``_codes.TERMS``)."""

    requests: int = 0
    measured: int = 0
    """Requests with a hit figure (refused ones excluded)."""
    prompt_tokens: int = 0
    hit_tokens: int = 0
    reusable_tokens: int = 0
    counted_hit_tokens: int = 0
    lost_tokens: int = 0
    cost: float | None = None
    lost_cost: float | None = None
    refused: int = 0
    simulated: int = 0
    """Measured requests whose hit was simulated (the recording has no cache figure for them)."""
    unknown: int = 0
    """Requests (not refused) with no hit figure at all: counted here, so no rate leaves them
    out unsaid."""
    unknown_prompt_tokens: int = 0
    """The prompt tokens of the :attr:`unknown` requests (when their prompt is known)."""

    @property
    def efficiency(self) -> float | None:
        """Σ min(hit, reusable) / Σ reusable (``None`` when nothing was reusable)."""
        if not self.reusable_tokens:
            return None
        return self.counted_hit_tokens / self.reusable_tokens

    @property
    def hit_rate(self) -> float | None:
        """Σ hit / Σ prompt over the measured requests."""
        if not self.prompt_tokens:
            return None
        return self.hit_tokens / self.prompt_tokens

    @classmethod
    def of(cls, requests: Iterable[RequestDiagnosis]) -> Totals:
        """The totals of ``requests``, taken in one pass (no list of them is kept)."""
        running = _RunningTotals()
        for request in requests:
            running.add(request)
        return running.totals()

    def to_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "measured": self.measured,
            "refused": self.refused,
            "simulatedHits": self.simulated,
            "unknownHits": self.unknown,
            "unknownPromptTokens": self.unknown_prompt_tokens,
            "promptTokens": self.prompt_tokens,
            "hitTokens": self.hit_tokens,
            "reusableTokens": self.reusable_tokens,
            "countedHitTokens": self.counted_hit_tokens,
            "lostTokens": self.lost_tokens,
            "efficiency": _round(self.efficiency),
            "hitRate": _round(self.hit_rate),
            "cost": _round(self.cost, 8),
            "lostCost": _round(self.lost_cost, 8),
        }


_COMPENSATED: Final = sys.version_info >= (3, 12)
"""Whether this interpreter's ``sum()`` of floats is compensated (Neumaier, since 3.12)."""


class _FloatSum:
    """A running sum of floats that ends bit for bit where ``sum()`` of the same floats in the
    same order ends, on this interpreter: plain left to right up to 3.11, Neumaier's
    compensated summation from 3.12 (CPython's ``builtin_sum``: the first item added to the
    int 0, then a high sum and a compensation, the compensation added at the end when it is
    non-zero and finite). So a figure summed as requests stream by is the figure the list
    gave."""

    __slots__ = ("_high", "_low", "count")

    def __init__(self) -> None:
        self.count = 0
        self._high = 0.0
        self._low = 0.0

    def add(self, value: float) -> None:
        if not self.count:
            self._high = 0 + value  # sum() starts from the int 0
        elif _COMPENSATED:
            high = self._high
            total = high + value
            if abs(high) >= abs(value):
                self._low += (high - total) + value
            else:
                self._low += (value - total) + high
            self._high = total
        else:
            self._high += value
        self.count += 1

    @property
    def total(self) -> float | None:
        """The sum (``None``: nothing was added)."""
        if not self.count:
            return None
        low = self._low
        return self._high + low if low and math.isfinite(low) else self._high


class _RunningTotals:
    """:class:`Totals` of requests added one at a time (ints exactly, floats as ``sum()``)."""

    __slots__ = (
        "cost",
        "counted_hit_tokens",
        "hit_tokens",
        "lost_cost",
        "lost_tokens",
        "measured",
        "prompt_tokens",
        "refused",
        "requests",
        "reusable_tokens",
        "simulated",
        "unknown",
        "unknown_prompt_tokens",
    )

    def __init__(self) -> None:
        self.requests = self.measured = self.refused = self.simulated = self.unknown = 0
        self.prompt_tokens = self.hit_tokens = self.reusable_tokens = 0
        self.counted_hit_tokens = self.lost_tokens = self.unknown_prompt_tokens = 0
        self.cost = _FloatSum()
        self.lost_cost = _FloatSum()

    def add(self, r: RequestDiagnosis) -> None:
        self.requests += 1
        if r.cost is not None:
            self.cost.add(r.cost)
        if r.measured:
            self.measured += 1
            self.prompt_tokens += r.prompt_tokens or 0
            self.hit_tokens += r.hit_tokens or 0
            self.reusable_tokens += r.reusable_tokens
            self.counted_hit_tokens += r.counted_hit_tokens
            self.lost_tokens += r.lost_tokens
            if r.lost_cost is not None:
                self.lost_cost.add(r.lost_cost)
            if r.hit_source == "simulated":
                self.simulated += 1
        if (r.status or 0) >= 400:
            self.refused += 1
        elif not r.measured:
            self.unknown += 1
            self.unknown_prompt_tokens += r.prompt_tokens or 0

    def totals(self) -> Totals:
        return Totals(
            requests=self.requests,
            measured=self.measured,
            prompt_tokens=self.prompt_tokens,
            hit_tokens=self.hit_tokens,
            reusable_tokens=self.reusable_tokens,
            counted_hit_tokens=self.counted_hit_tokens,
            lost_tokens=self.lost_tokens,
            cost=self.cost.total,
            lost_cost=self.lost_cost.total,
            refused=self.refused,
            simulated=self.simulated,
            unknown=self.unknown,
            unknown_prompt_tokens=self.unknown_prompt_tokens,
        )


def money(value: float | None) -> str:
    """Dollars with enough digits to tell small costs apart (``$0.000198``, ``$1.24``)."""
    if value is None or not math.isfinite(value):
        return "–"
    if value < 0:
        return f"-{money(-value)}"
    if value == 0 or value >= 1:
        return f"${value:,.2f}"
    digits = max(2, 2 - math.floor(math.log10(value)))
    return f"${value:.{digits}f}"


def request_ranges(indexes: Sequence[int]) -> str:
    """``#2–#7, #9``: trace indexes (0-based) as 1-based request numbers, runs joined."""
    numbers = sorted({i + 1 for i in indexes})
    runs: list[str] = []
    start = prev = None
    for n in numbers:
        if start is None:
            start = prev = n
        elif prev is not None and n == prev + 1:
            prev = n
        else:
            runs.append(f"#{start}" if start == prev else f"#{start}–#{prev}")
            start = prev = n
    if start is not None:
        runs.append(f"#{start}" if start == prev else f"#{start}–#{prev}")
    return ", ".join(runs)


@dataclass(frozen=True, slots=True, kw_only=True)
class FindingGroup:
    """The same finding (code, what it says, severity) on requests of a conversation, said
    once."""

    code: CauseCode
    severity: Severity
    requests: tuple[int, ...]
    """Trace indexes of the requests it was found on, each once, in order."""
    lost_tokens: int
    first: Finding
    """The finding on its first request (its detail and evidence stand for the group)."""

    @property
    def label(self) -> str:
        return request_ranges(self.requests)

    @property
    def noun(self) -> str:
        """``request`` or ``requests``, as many as it was found on."""
        return "request" if len(self.requests) == 1 else "requests"

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity,
            "requests": list(self.requests),
            "label": self.label,
            "lostTokens": self.lost_tokens,
            "finding": self.first.to_json(),
        }


def group_findings(requests: Sequence[RequestDiagnosis]) -> tuple[FindingGroup, ...]:
    """Findings grouped by what they say (code, signature and severity: a change that cost a
    unit is not said with one that cost nothing), in order of first appearance."""
    groups: dict[tuple[str, str, str], list[tuple[RequestDiagnosis, Finding]]] = {}
    for request in requests:
        for finding in request.findings:
            key = (finding.code, finding.signature or finding.detail, finding.severity)
            groups.setdefault(key, []).append((request, finding))
    return tuple(
        FindingGroup(
            code=items[0][1].code,
            severity=items[0][1].severity,
            requests=tuple(dict.fromkeys(r.index for r, _ in items)),
            lost_tokens=sum(f.lost_tokens for _, f in items),
            first=items[0][1],
        )
        for items in groups.values()
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationDiagnosis:
    """The doctor's view of one conversation."""

    key: str
    requests: tuple[RequestDiagnosis, ...]
    groups: tuple[FindingGroup, ...] = field(default=())

    @property
    def totals(self) -> Totals:
        """The main line's: side calls (:attr:`side_totals`) are reported apart."""
        return Totals.of(r for r in self.requests if not r.side_call)

    @property
    def side_totals(self) -> Totals:
        """The side calls' own figures (compactions, titles, marked side calls)."""
        return Totals.of(r for r in self.requests if r.side_call)

    @property
    def efficiency(self) -> float | None:
        return self.totals.efficiency

    def findings(self) -> list[tuple[RequestDiagnosis, Finding]]:
        return [(r, f) for r in self.requests for f in r.findings]

    def to_json(self) -> dict[str, Any]:
        totals = self.totals
        return {
            "key": self.key,
            "totals": totals.to_json(),
            "sideCalls": self.side_totals.to_json(),
            "efficiency": _round(totals.efficiency),
            "hitRate": _round(totals.hit_rate),
            "findingGroups": [g.to_json() for g in self.groups],
            "requests": [r.to_json() for r in self.requests],
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class DoctorReport:
    """The cache doctor's report of a trace."""

    source: str
    """Which reader built the trace (``session-log``, ``proxy``, ``har``, …)."""
    path: str | None
    figures: Literal["reported", "simulated", "mixed"]
    """Where the hit figures come from: the trace's usage, the simulator, or each request's
    usage where it has a cache figure and the simulator where it has none (each request says
    which: :attr:`RequestDiagnosis.hit_source`). Reported prompt counts are always kept."""
    granularity: CacheGranularity
    """Tokens per cache unit the figures are counted in, and where that came from."""
    conversations: Sequence[ConversationDiagnosis]
    """In trace order. Any sequence (one loaded from disk a conversation at a time, say): the
    report's own figures (:attr:`totals`, :meth:`counts`, :func:`report_head`, …) only iterate
    it, one pass each, never listing every request of the report."""
    notes: tuple[str, ...] = ()
    prices: Prices | None = None
    """The prices the cost figures use when one price applies to every request (``None``:
    each request's model and date decide, see ``Prices.label`` in the JSON)."""
    time_resolution: float | None = None

    @property
    def requests(self) -> list[RequestDiagnosis]:
        return [r for c in self.conversations for r in c.requests]

    @property
    def totals(self) -> Totals:
        """The main lines': side calls (:attr:`side_totals`) are reported apart."""
        return report_figures(self).totals

    @property
    def side_totals(self) -> Totals:
        """The side calls' own figures."""
        return report_figures(self).side_totals

    @property
    def empty(self) -> bool:
        return not self.conversations

    def counts(self) -> dict[str, int]:
        """How many requests each cause code was found on."""
        return report_figures(self).counts

    def savings(self) -> dict[str, dict[str, Any]]:
        """Per cause code that cost tokens: the requests, the lost tokens, and what fixing it
        would save at list prices."""
        return report_figures(self).savings

    def price_list(self) -> list[Prices]:
        """The list prices the cost figures use: the given ones, else each distinct entry the
        requests' models and dates chose (the engine's rule: ``prices_for(model, started)``)."""
        if self.prices is not None:
            return [self.prices]
        return report_figures(self).price_list

    def to_json(self) -> dict[str, Any]:
        return {
            **report_head(self),
            "conversations": [c.to_json() for c in self.conversations],
            "notes": list(self.notes),
        }


def report_head(report: DoctorReport) -> dict[str, Any]:
    """The full document's fields but its ``conversations`` and ``notes`` (the compact document
    shares them), from one pass over the report's conversations."""
    figures = report_figures(report)
    totals = figures.totals
    return {
        "formatVersion": DOCTOR_FORMAT_VERSION,
        "kind": "dsh-testkit/cache-report",
        "source": report.source,
        "path": report.path,
        "figures": report.figures,
        "granularity": report.granularity.to_json(),
        "timeResolution": report.time_resolution,
        "prices": report.prices.to_json() if report.prices is not None else None,
        "priceList": [p.to_json() for p in figures.price_list],
        "totals": totals.to_json(),
        "sideCalls": figures.side_totals.to_json(),
        "efficiency": _round(totals.efficiency),
        "hitRate": _round(totals.hit_rate),
        "causeCounts": figures.counts,
        "savings": figures.savings,
    }


@dataclass(frozen=True, slots=True, kw_only=True)
class _Figures:
    """A report's own figures (what :func:`report_head` says), from one pass."""

    totals: Totals
    side_totals: Totals
    counts: dict[str, int]
    savings: dict[str, dict[str, Any]]
    price_list: list[Prices]


def report_figures(report: DoctorReport) -> _Figures:
    """Every report-level figure from one pass over ``report.conversations``, one request at a
    time (no list of the report's requests: a report may hold its conversations on disk)."""
    main, side = _RunningTotals(), _RunningTotals()
    counts: dict[str, int] = {}
    savings: dict[str, dict[str, Any]] = {}
    found: dict[str, Prices] = {}
    for conversation in report.conversations:
        for request in conversation.requests:
            (side if request.side_call else main).add(request)
            for code in dict.fromkeys(request.codes):
                counts[code] = counts.get(code, 0) + 1
            lost = request.lost_tokens
            for finding in request.findings:
                if finding.severity != "loss" or not finding.lost_tokens:
                    continue
                entry = savings.setdefault(
                    finding.code, {"requests": 0, "lostTokens": 0, "savings": 0.0}
                )
                entry["requests"] += 1
                entry["lostTokens"] += finding.lost_tokens
                if request.lost_cost is not None and lost:
                    entry["savings"] += request.lost_cost * finding.lost_tokens / lost
            if report.prices is None and request.cost is not None:
                prices = prices_for(request.model, request.started)
                found.setdefault(prices.label, prices)
    return _Figures(
        totals=main.totals(),
        side_totals=side.totals(),
        counts=dict(sorted(counts.items())),
        savings={
            code: {**entry, "savings": round(entry["savings"], 8)}
            for code, entry in sorted(savings.items())
        },
        price_list=[report.prices] if report.prices is not None else list(found.values()),
    )
