"""``compare``'s values, and the rule that turns two sets of figures into a verdict.

A :class:`ComparisonFigures` holds one :class:`ScenarioComparison` per matched scenario (its
totals on each side, the first changed request, the cause codes that changed) and the
scenarios only one run has; :func:`judge` is the one place thresholds are applied, to a
scenario and to the run's totals alike (see ``_compare.py`` for what the verdicts mean).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, Literal, TypeAlias

from ..doctor._codes import CauseCode, Severity
from ..doctor._report import Finding, RequestDiagnosis, Totals, money

__all__ = [
    "COMPARE_FORMAT_VERSION",
    "GRAVITY",
    "CauseChange",
    "ComparisonFigures",
    "RequestChange",
    "RequestPair",
    "RunSummary",
    "ScenarioComparison",
    "Thresholds",
    "UnmatchedScenario",
    "Verdict",
    "judge",
]

COMPARE_FORMAT_VERSION: Final = 1
"""Version of ``compare``'s JSON document."""

Verdict: TypeAlias = Literal["identical", "benign", "regression", "improvement"]
"""What a comparison concludes; a build gates on ``regression``."""

_EPSILON: Final = 1e-9
GRAVITY: Final[Mapping[str, int]] = {"note": 0, "loss": 1, "refusal": 2}


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
class ComparisonFigures:
    """Two runs compared: per scenario and in total, with the verdict a build gates on.

    The figures only; :class:`~dsh_testkit.compare.RunComparison` (what ``compare_runs``
    returns) adds what needs the text report (``check``)."""

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
        return judge(self.thresholds, self.base_totals, self.new_totals, same=self.identical)[1]

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
        total = judge(self.thresholds, self.base_totals, self.new_totals, same=False)[0]
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


def judge(
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
