"""``compare``: what a change did to the prompt cache and the bill, between two runs.

A golden shows that a harness change altered the requests; the cache report explains one run.
This module puts two runs side by side — before the change (BASE) and after it (NEW) — and says,
per scenario and in total, what happened to the requests, the cache and the estimated cost, with
a verdict a build can gate on::

    result = compare_runs("baseline/", "run/")
    print(result.verdict)          # identical | benign | regression | improvement
    result.check()                 # raises CacheRegression on a regression

**Runs and scenarios.** A run is one recording (any input the doctor reads) or a folder of
them: every file under the folder whose content the readers' registry recognizes (hidden files
and folders skipped; anything else is skipped with a note). Each file is one scenario, except a
file whose requests carry two or more explicit conversation keys (a proxy recording of a whole
suite, each test under its own ``x-dsh-conversation``): that file is one scenario per key
(requests without a key form one more).

**Matching**, in this order, each step only among the scenarios still unmatched:

1. the declared id: the ``scenario`` in a dsh-trace file's header (the pytest cache baseline
   writes the test's node id there) or in a cassette's metadata;
2. the explicit conversation key all of a scenario's requests carry (a session log's id, a
   session header);
3. the file's path relative to its folder (with ``#key`` for a split file).

An id or key is used only when it names exactly one scenario on each side (a suite's cassettes
may all share one session id; runs of an agent that draws a random session id fall through to
their paths). Two single files of one scenario each are compared whatever their names. A
scenario only in NEW is ``added``, only in BASE ``removed``; neither counts in the totals.

**Within a scenario** requests are paired in order. The first pair that differs as the one wire
view renders them (``_wire_view.py``: parameters, system, tools, each message) is the first
changed request, its differences worded as everywhere in the project (``_diff.diff_chat``);
each run goes through the doctor (:func:`~dsh_testkit.doctor.diagnose`), and the cause codes
that appeared, went away or changed their count are listed with the doctor's evidence.

**Figures and cost.** Efficiency, hit rate and lost tokens are the doctor's (``_codes.TERMS``).
Both runs are priced alike — each request at its model's list price in force at the date of
the NEW run (its latest request; today when it has no dates), or at ``prices`` when given — so
a price change between the runs never reads as a regression.

**Verdicts** (per scenario, and for the run):

- ``regression``: efficiency fell more than ``max_efficiency_drop`` percentage points, the
  estimated cost rose more than ``max_cost_increase`` percent, or more requests were refused;
- ``improvement``: no regression, and efficiency rose or cost fell by more than those margins;
- ``identical``: every request byte-identical as the wire view renders it, and the figures
  equal (or measured on neither side);
- ``benign``: anything else — requests changed, cache and cost within the thresholds.

The run is a regression when a scenario is one or the totals are; it is identical only when
every scenario is and none was added or removed.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Final, Literal, TypeAlias

from dsh_core.providers import Prices, prices_for

from .._diff import diff_chat
from .._errors import TestkitError
from .._wire_view import canonical_json, wire_view
from ..traces import Exchange, Trace, TraceError, identify, trace_of
from ..traces._model import paused_gc
from ._codes import CauseCode, Severity
from ._diagnose import diagnose
from ._report import DoctorReport, Finding, RequestDiagnosis, Totals, request_ranges

__all__ = [
    "COMPARE_FORMAT_VERSION",
    "CacheRegression",
    "CauseChange",
    "RequestChange",
    "RequestPair",
    "RunComparison",
    "RunSummary",
    "ScenarioComparison",
    "Thresholds",
    "TraceLoader",
    "UnmatchedScenario",
    "Verdict",
    "compare_runs",
    "money",
]

COMPARE_FORMAT_VERSION: Final = 1
"""Version of ``compare``'s JSON document."""

Verdict: TypeAlias = Literal["identical", "benign", "regression", "improvement"]

_HEAD_BYTES: Final = 65536
_EPSILON: Final = 1e-9
_ABSOLUTE_TIME: Final = 1e9
"""Times below this are relative to the recording (a capture's clock), not dates."""
_GRAVITY: Final[Mapping[str, int]] = {"note": 0, "loss": 1, "refusal": 2}


class CacheRegression(TestkitError, AssertionError):
    """A change made caching or the estimated cost worse beyond the thresholds.

    ``.comparison`` is the :class:`RunComparison`; ``.scenarios`` the scenarios that regressed.
    """

    def __init__(self, message: str, *, comparison: RunComparison) -> None:
        self.comparison = comparison
        self.scenarios = tuple(s for s in comparison.scenarios if s.verdict == "regression")
        super().__init__(message)


@dataclass(frozen=True, slots=True, kw_only=True)
class Thresholds:
    """How much worse a run may get before it is a regression (and better, an improvement)."""

    max_efficiency_drop: float = 2.0
    """Percentage points the cache efficiency may fall."""
    max_cost_increase: float = 5.0
    """Percent the estimated cost may rise."""

    def __post_init__(self) -> None:
        for name in ("max_efficiency_drop", "max_cost_increase"):
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or value < 0
            ):
                raise ValueError(f"Thresholds.{name} must be a number ≥ 0, got {value!r}")

    def to_json(self) -> dict[str, Any]:
        return {
            "maxEfficiencyDrop": self.max_efficiency_drop,
            "maxCostIncrease": self.max_cost_increase,
        }


# ------------------------------------------------------------------------------ values


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestChange:
    """The first request whose shape changed between the runs."""

    request: int
    """Its 1-based position in the scenario (the same in both runs: requests pair in order)."""
    kind: Literal["changed", "added", "removed"]
    """``changed``: both runs sent a request here and they differ; ``added``: only the new run
    did (it sends more requests); ``removed``: only the base run did."""
    differences: tuple[str, ...]
    """What differs, in the project's wording (``system line 1 column 30: base '…' new '…'``)."""
    changed_requests: int
    """How many positions differ in all (a request only one run sent counts)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "request": self.request,
            "kind": self.kind,
            "differences": list(self.differences),
            "changedRequests": self.changed_requests,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class CauseChange:
    """A cause code found on a different set of requests, or costing differently, after."""

    code: CauseCode
    change: Literal["appeared", "went-away", "changed"]
    severity: Severity
    """The gravest severity on the side it is shown from (NEW, or BASE when it went away)."""
    base_requests: tuple[int, ...]
    """0-based positions in the base run's scenario (``request_ranges`` shows them)."""
    new_requests: tuple[int, ...]
    base_lost_tokens: int
    new_lost_tokens: int
    finding: Finding
    """The first finding on the side it is shown from: its detail and evidence."""

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "change": self.change,
            "severity": self.severity,
            "baseRequests": list(self.base_requests),
            "newRequests": list(self.new_requests),
            "baseLostTokens": self.base_lost_tokens,
            "newLostTokens": self.new_lost_tokens,
            "finding": self.finding.to_json(),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestPair:
    """One position of a scenario: the figures of each run's request there."""

    request: int
    """1-based position."""
    same: bool
    """Whether both runs sent it byte-identical (as the wire view renders it)."""
    base: RequestDiagnosis | None
    new: RequestDiagnosis | None

    def to_json(self) -> dict[str, Any]:
        return {
            "request": self.request,
            "same": self.same,
            "base": _request_figures(self.base),
            "new": _request_figures(self.new),
        }


def _request_figures(r: RequestDiagnosis | None) -> dict[str, Any] | None:
    if r is None:
        return None
    return {
        "promptTokens": r.prompt_tokens,
        "hitTokens": r.hit_tokens,
        "reusableTokens": r.reusable_tokens,
        "lostTokens": r.lost_tokens,
        "status": r.status,
        "cost": _round(r.cost, 8),
        "codes": list(dict.fromkeys(r.codes)),
    }


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None or not math.isfinite(value) else round(value, digits)


@dataclass(frozen=True, slots=True, kw_only=True)
class ScenarioComparison:
    """One scenario in both runs."""

    name: str
    """What it is called: its declared id (a test's node id) when matched by it, else the new
    run's path for it (``#key`` for a part of a split file)."""
    matched_by: Literal["id", "conversation", "path", "file"]
    base_path: str | None
    new_path: str | None
    base: Totals
    new: Totals
    verdict: Verdict
    reasons: tuple[str, ...]
    """Why the verdict, one sentence each (thresholds named)."""
    first_change: RequestChange | None
    causes: tuple[CauseChange, ...]
    pairs: tuple[RequestPair, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def identical_requests(self) -> bool:
        return self.first_change is None

    @property
    def efficiency_change(self) -> float | None:
        """NEW − BASE efficiency in percentage points (``None`` when either has none)."""
        return _points(self.base, self.new)

    @property
    def cost_change(self) -> float | None:
        """NEW cost relative to BASE in percent (``inf`` from zero; ``None`` unpriced)."""
        return _percent(self.base, self.new)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "matchedBy": self.matched_by,
            "verdict": self.verdict,
            "reasons": list(self.reasons),
            "base": {"path": self.base_path, "totals": self.base.to_json()},
            "new": {"path": self.new_path, "totals": self.new.to_json()},
            "efficiencyChange": _round(self.efficiency_change, 2),
            "costChange": _round(self.cost_change, 2),
            "firstChange": self.first_change.to_json() if self.first_change else None,
            "causes": [c.to_json() for c in self.causes],
            "requests": [p.to_json() for p in self.pairs],
            "notes": list(self.notes),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class UnmatchedScenario:
    """A scenario only one run has."""

    name: str
    path: str | None
    totals: Totals

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "path": self.path, "totals": self.totals.to_json()}


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSummary:
    """What one side of the comparison read."""

    path: str | None
    traces: int
    """Trace files read."""
    scenarios: int
    skipped: tuple[str, ...] = ()
    """Files of no known kind, left out."""

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "traces": self.traces,
            "scenarios": self.scenarios,
            "skipped": list(self.skipped),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class RunComparison:
    """Two runs compared: per scenario and in total, with the verdict a build gates on."""

    base: RunSummary
    new: RunSummary
    thresholds: Thresholds
    scenarios: tuple[ScenarioComparison, ...]
    added: tuple[UnmatchedScenario, ...] = ()
    removed: tuple[UnmatchedScenario, ...] = ()
    prices: tuple[str, ...] = ()
    """The price entries used (``deepseek-v4-flash since 2026-04-24``, or ``--price``)."""
    price_date: str | None = None
    """The date the prices are taken at (``None``: today, or ``--price``)."""
    notes: tuple[str, ...] = ()

    @property
    def base_totals(self) -> Totals:
        return _sum_totals(s.base for s in self.scenarios)

    @property
    def new_totals(self) -> Totals:
        return _sum_totals(s.new for s in self.scenarios)

    @property
    def efficiency_change(self) -> float | None:
        """NEW − BASE efficiency over the matched scenarios, in percentage points."""
        return _points(self.base_totals, self.new_totals)

    @property
    def cost_change(self) -> float | None:
        """NEW cost relative to BASE over the matched scenarios, in percent."""
        return _percent(self.base_totals, self.new_totals)

    @property
    def total_reasons(self) -> tuple[str, ...]:
        return _judge(self.thresholds, self.base_totals, self.new_totals, same=self.identical)[1]

    @property
    def identical(self) -> bool:
        return (
            not self.added
            and not self.removed
            and all(s.verdict == "identical" for s in self.scenarios)
        )

    @property
    def verdict(self) -> Verdict:
        if self.identical:
            return "identical"
        total = _judge(self.thresholds, self.base_totals, self.new_totals, same=False)[0]
        if total == "regression" or any(s.verdict == "regression" for s in self.scenarios):
            return "regression"
        return "improvement" if total == "improvement" else "benign"

    @property
    def exit_status(self) -> int:
        """1 on a regression, else 0."""
        return 1 if self.verdict == "regression" else 0

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys(("regression", "improvement", "benign", "identical"), 0)
        for s in self.scenarios:
            out[s.verdict] += 1
        out["added"] = len(self.added)
        out["removed"] = len(self.removed)
        return out

    def check(self) -> None:
        """Raise :class:`CacheRegression` (the text report as its message) on a regression."""
        if self.verdict == "regression":
            from ._compare_render import comparison_text

            raise CacheRegression(comparison_text(self, only_changes=True), comparison=self)

    def to_json(self) -> dict[str, Any]:
        base, new = self.base_totals, self.new_totals
        return {
            "formatVersion": COMPARE_FORMAT_VERSION,
            "kind": "dsh-testkit/cache-compare",
            "verdict": self.verdict,
            "counts": self.counts(),
            "thresholds": self.thresholds.to_json(),
            "prices": {"used": list(self.prices), "date": self.price_date},
            "base": self.base.to_json(),
            "new": self.new.to_json(),
            "totals": {
                "base": base.to_json(),
                "new": new.to_json(),
                "efficiencyChange": _round(_points(base, new), 2),
                "costChange": _round(_percent(base, new), 2),
                "reasons": list(self.total_reasons),
            },
            "scenarios": [s.to_json() for s in self.scenarios],
            "added": [s.to_json() for s in self.added],
            "removed": [s.to_json() for s in self.removed],
            "notes": list(self.notes),
        }


def _sum_totals(items: Iterable[Totals]) -> Totals:
    out = Totals()
    costs: list[float] = []
    lost_costs: list[float] = []
    for t in items:
        out = replace(
            out,
            requests=out.requests + t.requests,
            measured=out.measured + t.measured,
            prompt_tokens=out.prompt_tokens + t.prompt_tokens,
            hit_tokens=out.hit_tokens + t.hit_tokens,
            reusable_tokens=out.reusable_tokens + t.reusable_tokens,
            counted_hit_tokens=out.counted_hit_tokens + t.counted_hit_tokens,
            lost_tokens=out.lost_tokens + t.lost_tokens,
            refused=out.refused + t.refused,
        )
        if t.cost is not None:
            costs.append(t.cost)
        if t.lost_cost is not None:
            lost_costs.append(t.lost_cost)
    return replace(
        out,
        cost=sum(costs) if costs else None,
        lost_cost=sum(lost_costs) if lost_costs else None,
    )


# ------------------------------------------------------------------------------- verdicts


def _points(base: Totals, new: Totals) -> float | None:
    if base.efficiency is None or new.efficiency is None:
        return None
    return (new.efficiency - base.efficiency) * 100


def _percent(base: Totals, new: Totals) -> float | None:
    if base.cost is None or new.cost is None:
        return None
    if base.cost == 0:
        return 0.0 if new.cost == 0 else math.inf
    return (new.cost - base.cost) / base.cost * 100


def _num(value: float) -> str:
    """A threshold as written: ``2``, ``0.5``."""
    return f"{value:g}"


def _judge(
    thresholds: Thresholds, base: Totals, new: Totals, *, same: bool
) -> tuple[Verdict, tuple[str, ...]]:
    """The verdict on two sets of figures and why (``same``: the requests were identical)."""
    points = _points(base, new)
    percent = _percent(base, new)
    worse: list[str] = []
    better: list[str] = []
    if points is not None:
        if -points > thresholds.max_efficiency_drop + _EPSILON:
            worse.append(
                f"efficiency fell {-points:.1f} pp ({_pct(base.efficiency)} → "
                f"{_pct(new.efficiency)}; more than {_num(thresholds.max_efficiency_drop)} pp)"
            )
        elif points > thresholds.max_efficiency_drop + _EPSILON:
            better.append(
                f"efficiency rose {points:.1f} pp ({_pct(base.efficiency)} → "
                f"{_pct(new.efficiency)})"
            )
    if percent is not None:
        if percent > thresholds.max_cost_increase + _EPSILON:
            rise = "from nothing" if math.isinf(percent) else f"{percent:.1f} %"
            worse.append(
                f"estimated cost rose {rise} ({money(base.cost)} → {money(new.cost)}; more "
                f"than {_num(thresholds.max_cost_increase)} %)"
            )
        elif -percent > thresholds.max_cost_increase + _EPSILON:
            better.append(
                f"estimated cost fell {-percent:.1f} % ({money(base.cost)} → {money(new.cost)})"
            )
    if new.refused > base.refused:
        worse.append(
            f"{new.refused - base.refused} more request(s) refused by the API "
            f"({base.refused} → {new.refused})"
        )
    if worse:
        return "regression", tuple(worse)
    if better:
        return "improvement", tuple(better)
    if same and base == new:
        return "identical", ("every request byte-identical, the same figures",)
    if same:
        return "benign", ("the same requests; figures differ within the thresholds",)
    return "benign", ("requests changed; efficiency and cost within the thresholds",)


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.1f} %"


def money(value: float | None) -> str:
    """Dollars with enough digits to tell small costs apart (``$0.000198``, ``$1.24``)."""
    if value is None:
        return "–"
    if value == 0 or value >= 1:
        return f"${value:,.2f}"
    digits = max(2, 2 - math.floor(math.log10(value)))
    return f"${value:.{digits}f}"


# ------------------------------------------------------------------------------ reading


@dataclass(frozen=True, slots=True, kw_only=True)
class _Scenario:
    name: str
    """What matching by path compares: the path relative to the folder (``#key`` when split);
    for a single-file run only the ``#key`` part."""
    label: str
    """What the report calls it."""
    path: str | None
    declared: str | None
    key: str | None
    trace: Trace


@dataclass(frozen=True, slots=True, kw_only=True)
class _Run:
    summary: RunSummary
    scenarios: tuple[_Scenario, ...]
    single: bool


TraceLoader: TypeAlias = Callable[[str, str, bytes], Trace]
"""How a file becomes a trace: ``(path, reader name, content) → Trace`` (the CLI's loads
session logs with their sidecars)."""


def _default_loader(path: str, reader: str, data: bytes) -> Trace:
    found = identify(data)
    assert found is not None and found.name == reader
    return found.read(data, path)


def _declared_id(reader: str, head: bytes) -> str | None:
    """A dsh-trace header's ``scenario``, or a cassette's ``metadata.scenario``."""
    text = head.decode("utf-8", "replace")
    if reader == "dsh-trace":
        try:
            first = json.loads(text.lstrip().split("\n", 1)[0])
        except ValueError:
            return None
        value = first.get("scenario") if isinstance(first, dict) else None
        return value if isinstance(value, str) and value else None
    if reader == "cassette":
        block = re.search(r"^metadata:[ \t]*\n((?:[ \t]+.*\n)+)", text, re.M)
        if block is None:
            return None
        import yaml

        try:
            metadata = yaml.safe_load(block.group(1))
        except yaml.YAMLError:
            return None
        value = metadata.get("scenario") if isinstance(metadata, dict) else None
        return str(value) if isinstance(value, (str, int)) and str(value) else None
    return None


def _split(trace: Trace, *, name: str, label: str, declared: str | None) -> list[_Scenario]:
    """One scenario, or one per explicit conversation key when the trace carries several."""
    keys = dict.fromkeys(e.conversation for e in trace.exchanges)
    explicit = [k for k in keys if k is not None]
    if len(explicit) < 2:
        key = explicit[0] if explicit and None not in keys else None
        return [
            _Scenario(
                name=name, label=label, path=trace.path, declared=declared, key=key, trace=trace
            )
        ]
    groups: dict[str | None, list[Exchange]] = {k: [] for k in keys}
    for exchange in trace.exchanges:
        groups[exchange.conversation].append(exchange)
    out = []
    for key, exchanges in groups.items():
        part = f"#{key}" if key is not None else "#(no key)"
        out.append(
            _Scenario(
                name=name + part,
                label=(declared or label) + part,
                path=trace.path,
                declared=None if declared is None else declared + part,
                key=key,
                trace=replace(
                    trace,
                    exchanges=tuple(replace(e, index=i) for i, e in enumerate(exchanges)),
                ),
            )
        )
    return out


def _read_run(target: Any, loader: TraceLoader) -> _Run:
    if isinstance(target, (str, os.PathLike)):
        path = os.fspath(target)
        if os.path.isdir(path):
            return _read_folder(path, loader)
        found = _read_file(path, loader)
        if found is None:
            raise TraceError("not a session log or any recognized trace", path=path)
        label = os.path.basename(path) or path
        scenarios = _split(found[0], name="", label=label, declared=found[1])
        return _Run(
            summary=RunSummary(path=path, traces=1, scenarios=len(scenarios)),
            scenarios=tuple(scenarios),
            single=True,
        )
    trace = trace_of(target)
    label = trace.path or trace.source
    scenarios = _split(trace, name="", label=label, declared=None)
    return _Run(
        summary=RunSummary(path=trace.path, traces=1, scenarios=len(scenarios)),
        scenarios=tuple(scenarios),
        single=True,
    )


def _read_file(path: str, loader: TraceLoader) -> tuple[Trace, str | None] | None:
    """The file's trace and declared id; ``None`` when it is of no known kind."""
    with open(path, "rb") as file:
        data = file.read()
    reader = identify(data[:_HEAD_BYTES])
    if reader is None:
        return None
    return loader(path, reader.name, data), _declared_id(reader.name, data[:_HEAD_BYTES])


def _read_folder(root: str, loader: TraceLoader) -> _Run:
    scenarios: list[_Scenario] = []
    skipped: list[str] = []
    traces = 0
    for directory, folders, files in os.walk(root):
        folders[:] = sorted(f for f in folders if not f.startswith("."))
        for filename in sorted(files):
            if filename.startswith("."):
                continue
            path = os.path.join(directory, filename)
            relative = os.path.relpath(path, root).replace(os.sep, "/")
            found = _read_file(path, loader)
            if found is None:
                skipped.append(relative)
                continue
            traces += 1
            trace, declared = found
            scenarios.extend(_split(trace, name=relative, label=relative, declared=declared))
    return _Run(
        summary=RunSummary(
            path=root, traces=traces, scenarios=len(scenarios), skipped=tuple(skipped)
        ),
        scenarios=tuple(scenarios),
        single=False,
    )


# ------------------------------------------------------------------------------- matching


_Pair: TypeAlias = tuple[_Scenario, _Scenario, Literal["id", "conversation", "path", "file"]]


def _unique(items: Sequence[_Scenario], attribute: str) -> dict[str, _Scenario]:
    seen: dict[str, list[_Scenario]] = {}
    for item in items:
        value = getattr(item, attribute)
        if value is not None:
            seen.setdefault(value, []).append(item)
    return {value: found[0] for value, found in seen.items() if len(found) == 1}


def _match(base: _Run, new: _Run) -> tuple[list[_Pair], list[_Scenario], list[_Scenario]]:
    """Pairs, then the base scenarios left (removed), then the new ones left (added)."""
    if base.single and new.single and len(base.scenarios) == len(new.scenarios) == 1:
        return [(base.scenarios[0], new.scenarios[0], "file")], [], []
    left, right = list(base.scenarios), list(new.scenarios)
    pairs: list[_Pair] = []
    steps: tuple[tuple[Literal["id", "conversation", "path"], str], ...] = (
        ("id", "declared"),
        ("conversation", "key"),
        ("path", "name"),
    )
    for how, attribute in steps:
        on_left, on_right = _unique(left, attribute), _unique(right, attribute)
        taken: set[int] = set()
        for value, b in on_left.items():
            n = on_right.get(value)
            if n is not None:
                pairs.append((b, n, how))
                taken.update((id(b), id(n)))
        left = [s for s in left if id(s) not in taken]
        right = [s for s in right if id(s) not in taken]
    order = {id(s): i for i, s in enumerate(new.scenarios)}
    pairs.sort(key=lambda p: order[id(p[1])])
    return pairs, left, right


# ------------------------------------------------------------------------------ comparing


class _Pricer:
    """Every request of both runs at one set of prices (see the module docstring)."""

    def __init__(self, prices: Prices | None, when: float | None) -> None:
        self.prices = prices
        self.when = when
        self.used: dict[str, None] = {}
        self._by_model: dict[str | None, Prices] = {}

    def of(self, model: str | None) -> Prices:
        if self.prices is not None:
            self.used[self.prices.label] = None
            return self.prices
        found = self._by_model.get(model)
        if found is None:
            found = self._by_model[model] = prices_for(model, self.when)
        self.used[found.label] = None
        return found

    def reprice(self, r: RequestDiagnosis) -> RequestDiagnosis:
        if r.prompt_tokens is None or (r.status or 0) >= 400:
            return replace(r, cost=None, lost_cost=None)
        prices = self.of(r.model)
        hit = r.hit_tokens or 0
        cost = prices.cost(
            hit_tokens=hit,
            miss_tokens=max(0, r.prompt_tokens - hit),
            output_tokens=r.completion_tokens or 0,
        )
        return replace(r, cost=cost, lost_cost=r.lost_tokens * (prices.miss - prices.hit) / 1e6)


def _rendered(exchange: Exchange) -> tuple[Any, ...]:
    """A request as the one wire view renders it: equal tuples, byte-identical requests."""
    view = wire_view(exchange.body, endpoint=exchange.endpoint)
    if view is None:
        return ("raw", canonical_json(exchange.body))
    return (view.endpoint, canonical_json(dict(view.params)), view.parts())


def _first_change(base: Trace, new: Trace) -> tuple[RequestChange | None, list[bool]]:
    """The first changed request (``None``: all identical), and per position whether same."""
    same = [
        _rendered(a) == _rendered(b) for a, b in zip(base.exchanges, new.exchanges, strict=False)
    ]
    extra = abs(len(base) - len(new))
    changed = same.count(False) + extra
    if not changed:
        return None, same
    if False in same:
        at = same.index(False)
        a, b = base[at], new[at]
        va = wire_view(a.body, endpoint=a.endpoint)
        vb = wire_view(b.body, endpoint=b.endpoint)
        differences: tuple[str, ...] = ()
        if va is not None and vb is not None:
            differences = diff_chat(va, vb, names=("base", "new"))
        if not differences:
            differences = (
                "the request bodies differ where the wording does not name it (compare them "
                "with `dsh-testkit rebuild` or the trace files)",
            )
        return RequestChange(
            request=at + 1, kind="changed", differences=differences, changed_requests=changed
        ), same
    at = len(same)
    if len(new) > len(base):
        more = len(new) - len(base)
        text = (
            f"the new run sends {more} more request(s): {request_ranges(range(at, len(new)))} "
            "only in the new run"
        )
        return RequestChange(
            request=at + 1, kind="added", differences=(text,), changed_requests=changed
        ), same
    fewer = len(base) - len(new)
    text = (
        f"the new run sends {fewer} request(s) fewer: {request_ranges(range(at, len(base)))} "
        "only in the base run"
    )
    return RequestChange(
        request=at + 1, kind="removed", differences=(text,), changed_requests=changed
    ), same


def _by_code(
    report: DoctorReport,
) -> dict[str, tuple[list[int], int, Severity, Finding]]:
    """Per cause code: the requests it is on, the tokens it lost, its gravest severity, and the
    first finding of that severity (whose evidence stands for it)."""
    out: dict[str, tuple[list[int], int, Severity, Finding]] = {}
    for request in sorted(report.requests, key=lambda r: r.index):
        for finding in request.findings:
            found = out.get(finding.code)
            if found is None:
                out[finding.code] = (
                    [request.index],
                    finding.lost_tokens,
                    finding.severity,
                    finding,
                )
                continue
            indexes, lost, severity, first = found
            if indexes[-1] != request.index:
                indexes.append(request.index)
            if _GRAVITY[finding.severity] > _GRAVITY[severity]:
                severity, first = finding.severity, finding
            out[finding.code] = (indexes, lost + finding.lost_tokens, severity, first)
    return out


def _cause_changes(base: DoctorReport, new: DoctorReport) -> tuple[CauseChange, ...]:
    before, after = _by_code(base), _by_code(new)
    out: list[CauseChange] = []
    for code in dict.fromkeys([*after, *before]):
        b, n = before.get(code), after.get(code)
        if b is not None and n is not None and b[0] == n[0] and b[1] == n[1]:
            continue
        shown = n if n is not None else b
        assert shown is not None
        out.append(
            CauseChange(
                code=shown[3].code,
                change="appeared" if b is None else "went-away" if n is None else "changed",
                severity=shown[2],
                base_requests=tuple(b[0]) if b else (),
                new_requests=tuple(n[0]) if n else (),
                base_lost_tokens=b[1] if b else 0,
                new_lost_tokens=n[1] if n else 0,
                finding=shown[3],
            )
        )
    order = {"appeared": 0, "changed": 1, "went-away": 2}
    out.sort(key=lambda c: (order[c.change], -_GRAVITY[c.severity]))
    return tuple(out)


@dataclass(slots=True, kw_only=True)
class _Context:
    thresholds: Thresholds
    pricer: _Pricer
    simulate: bool | None
    unit_tokens: int | None
    notes: list[str] = field(default_factory=list)


def _diagnosed(scenario: _Scenario, ctx: _Context) -> tuple[DoctorReport, list[RequestDiagnosis]]:
    report = diagnose(scenario.trace, simulate=ctx.simulate, unit_tokens=ctx.unit_tokens)
    return report, [ctx.pricer.reprice(r) for r in report.requests]


def _compare_pair(pair: _Pair, ctx: _Context) -> ScenarioComparison:
    b, n, how = pair
    base_report, base_requests = _diagnosed(b, ctx)
    new_report, new_requests = _diagnosed(n, ctx)
    base_totals, new_totals = Totals.of(base_requests), Totals.of(new_requests)
    first, same = _first_change(b.trace, n.trace)
    verdict, reasons = _judge(ctx.thresholds, base_totals, new_totals, same=first is None)
    notes: list[str] = []
    if base_report.figures != new_report.figures:
        notes.append(
            f"figures: base {base_report.figures}, new {new_report.figures} — run with "
            "--simulate to put both runs on the simulator's footing"
        )
    if base_report.unit.tokens != new_report.unit.tokens:
        notes.append(
            f"cache unit: base {base_report.unit.tokens} tokens, new "
            f"{new_report.unit.tokens} (set one with --unit-tokens)"
        )
    by_position_base = sorted(base_requests, key=lambda r: r.index)
    by_position_new = sorted(new_requests, key=lambda r: r.index)
    pairs = tuple(
        RequestPair(
            request=i + 1,
            same=i < len(same) and same[i],
            base=by_position_base[i] if i < len(by_position_base) else None,
            new=by_position_new[i] if i < len(by_position_new) else None,
        )
        for i in range(max(len(by_position_base), len(by_position_new)))
    )
    return ScenarioComparison(
        name=(n.declared or n.label) if how in ("id", "file") else n.label,
        matched_by=how,
        base_path=b.path,
        new_path=n.path,
        base=base_totals,
        new=new_totals,
        verdict=verdict,
        reasons=reasons,
        first_change=first,
        causes=_cause_changes(base_report, new_report),
        pairs=pairs,
        notes=tuple(notes),
    )


def _unmatched(scenario: _Scenario, ctx: _Context) -> UnmatchedScenario:
    _, requests = _diagnosed(scenario, ctx)
    return UnmatchedScenario(
        name=scenario.declared or scenario.label, path=scenario.path, totals=Totals.of(requests)
    )


def _run_date(run: _Run) -> float | None:
    times = [
        e.started
        for s in run.scenarios
        for e in s.trace.exchanges
        if e.started is not None and e.started >= _ABSOLUTE_TIME
    ]
    return max(times) if times else None


def compare_runs(
    base: Any,
    new: Any,
    *,
    thresholds: Thresholds | None = None,
    prices: Prices | None = None,
    simulate: bool | None = None,
    unit_tokens: int | None = None,
    loader: TraceLoader | None = None,
) -> RunComparison:
    """Compare two runs (see the module docstring for scenarios, matching and verdicts).

    ``base`` and ``new`` are each a recording (a path of any kind the doctor reads), a folder
    of them, or anything :func:`~dsh_testkit.traces.trace_of` takes (a trace, a capture, a
    mock). ``thresholds`` decide the verdicts (default :class:`Thresholds`); ``prices``
    replaces the model table's; ``simulate`` and ``unit_tokens`` are :func:`diagnose`'s.
    ``loader`` reads one file (the CLI's fills session logs' placeholders from sidecars).
    Raises :class:`~dsh_testkit.traces.TraceError` or ``OSError`` for an input it cannot read.
    """
    thresholds = thresholds if thresholds is not None else Thresholds()
    with paused_gc():
        base_run = _read_run(base, loader or _default_loader)
        new_run = _read_run(new, loader or _default_loader)
        when = _run_date(new_run)
        ctx = _Context(
            thresholds=thresholds,
            pricer=_Pricer(prices, when),
            simulate=simulate,
            unit_tokens=unit_tokens,
        )
        pairs, removed, added = _match(base_run, new_run)
        scenarios = tuple(_compare_pair(pair, ctx) for pair in pairs)
        added_out = tuple(_unmatched(s, ctx) for s in added)
        removed_out = tuple(_unmatched(s, ctx) for s in removed)
    notes: list[str] = []
    for side, run in (("base", base_run), ("new", new_run)):
        if run.summary.skipped:
            shown = ", ".join(run.summary.skipped[:5])
            more = len(run.summary.skipped) - 5
            notes.append(
                f"{side}: {len(run.summary.skipped)} file(s) of no known kind skipped ({shown}"
                + (f", and {more} more" if more > 0 else "")
                + ")"
            )
        if not run.scenarios:
            notes.append(f"{side}: no recording found in {run.summary.path}")
    return RunComparison(
        base=base_run.summary,
        new=new_run.summary,
        thresholds=thresholds,
        scenarios=scenarios,
        added=added_out,
        removed=removed_out,
        prices=tuple(ctx.pricer.used),
        price_date=None
        if prices is not None or when is None
        else datetime.fromtimestamp(when, UTC).date().isoformat(),
        notes=tuple(notes),
    )
