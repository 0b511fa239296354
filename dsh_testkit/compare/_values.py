"""``compare``'s values, and the rule that turns two runs into verdicts.

A :class:`ComparisonFigures` holds one :class:`ScenarioComparison` per matched scenario (its
totals on each side, the first changed request, the cause codes that changed, what the cache
unit's rounding can do to its figures) and the scenarios only one run has. :func:`judge` is the
one place a scenario's verdict is decided; :attr:`ComparisonFigures.verdict` the run's (the
rules are in ``_runs.py``'s docstring and ``docs/guides/ci.md``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Literal, TypeAlias

from ..doctor._codes import CODES, CauseCode, Severity
from ..doctor._report import Finding, RequestDiagnosis, Totals, money, request_ranges

__all__ = [
    "COMPARE_FORMAT_VERSION",
    "FIXABLE_KINDS",
    "GRAVITY",
    "CauseChange",
    "ComparisonFigures",
    "Decided",
    "RequestChange",
    "RequestPair",
    "Rounding",
    "RunSummary",
    "ScenarioComparison",
    "Thresholds",
    "UnmatchedScenario",
    "Verdict",
    "judge",
]

COMPARE_FORMAT_VERSION: Final = 2
"""Version of ``compare``'s JSON document (2: verdicts from what the change did — causes,
refusals, missing traffic, figures beyond the cache unit's rounding — with the rounding shown)."""

Verdict: TypeAlias = Literal["identical", "benign", "regression", "improvement"]
"""What a comparison concludes; a build gates on ``regression``."""

Decided: TypeAlias = Literal["traffic", "causes", "figures", "none"]
"""What decided a scenario's verdict: its traffic (failed or missing), its causes (a fixable
cause or a refusal that appeared, grew, shrank or went away; volatile text), or its figures
(efficiency or cost beyond the thresholds and the rounding); ``none`` for ``identical`` and
``benign``."""

_EPSILON: Final = 1e-9
_HEADLINE_REASONS: Final = 10
"""The most scenarios the headline names (a large run lists the rest below it)."""
GRAVITY: Final[Mapping[str, int]] = {"note": 0, "loss": 1, "refusal": 2}

FIXABLE_KINDS: Final = ("change", "refusal")
"""Cause kinds the harness can fix (``_codes.CodeInfo.kind``): only these decide a verdict.
``size``, ``timing`` and ``provider`` causes are the provider's or the prompt's lot."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Thresholds:
    """How much worse a run may get before it is a regression (and better, an improvement).

    The figures are judged beyond what the cache unit's rounding can explain
    (:class:`Rounding`): a prompt a few tokens longer or shorter moves each hit by up to one
    unit, and that is never a regression."""

    max_efficiency_drop: float = 2.0
    """Percentage points the cache efficiency may fall beyond the rounding bound."""
    max_cost_increase: float = 5.0
    """Percent the estimated cost may rise beyond the rounding bound."""
    max_net_cost_increase: float | None = None
    """Percent the estimated cost *net of rounding* (the rounding actually present taken out,
    not its bound) may rise; ``None`` (default): not gated. Gates the bill itself: a longer
    prompt that caches as well as before costs more, and this catches it."""
    allow_missing: bool = False
    """Whether a scenario of the base run that the new run lacks may pass (default: it fails
    the run: missing traffic never passes)."""

    def __post_init__(self) -> None:
        for name in ("max_efficiency_drop", "max_cost_increase", "max_net_cost_increase"):
            value = getattr(self, name)
            if value is None and name == "max_net_cost_increase":
                continue
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or value < 0
            ):
                raise ValueError(f"Thresholds.{name} must be a number ≥ 0, got {value!r}")
        if not isinstance(self.allow_missing, bool):
            raise ValueError(f"Thresholds.allow_missing must be a bool, got {self.allow_missing!r}")

    def to_json(self) -> dict[str, Any]:
        return {
            "maxEfficiencyDrop": self.max_efficiency_drop,
            "maxCostIncrease": self.max_cost_increase,
            "maxNetCostIncrease": self.max_net_cost_increase,
            "allowMissing": self.allow_missing,
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


CauseMove: TypeAlias = Literal["appeared", "grew", "changed", "shrank", "went-away"]
"""How a cause code moved between the runs: it appeared or went away; its lost tokens grew or
shrank by more than one cache unit per request carrying it (rounding moves each by at most one);
``changed``: other requests, or lost tokens within rounding."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CauseChange:
    """A cause code found on a different set of requests, or costing differently, after."""

    code: CauseCode
    change: CauseMove
    severity: Severity
    """The gravest severity on the side it is shown from (NEW, or BASE when it went away)."""
    base_requests: tuple[int, ...]
    """0-based positions in the base run's scenario (``request_ranges`` shows them)."""
    new_requests: tuple[int, ...]
    base_lost_tokens: int
    new_lost_tokens: int
    finding: Finding
    """The first finding on the side it is shown from: its detail and evidence."""
    risk: bool = False
    """Found by what the text is (a volatile value in the system prompt or the tools, between
    the runs or within one), whether or not a request lost by it yet."""

    @property
    def fixable(self) -> bool:
        """Whether the harness can fix it (:data:`FIXABLE_KINDS`)."""
        return CODES[self.code].kind in FIXABLE_KINDS

    @property
    def decides(self) -> bool:
        """Whether it decides a verdict: a fixable cause that cost tokens or a refusal (a note
        never does), or a volatile risk."""
        return self.risk or (self.fixable and self.severity != "note")

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "change": self.change,
            "severity": self.severity,
            "risk": self.risk,
            "fixable": self.fixable,
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
        "roundedOffTokens": r.rounded_off_tokens,
        "lostTokens": r.lost_tokens,
        "status": r.status,
        "cost": _round(r.cost, 8),
        "codes": list(dict.fromkeys(r.codes)),
    }


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None or not math.isfinite(value) else round(value, digits)


@dataclass(frozen=True, slots=True, kw_only=True)
class Rounding:
    """What the cache unit's rounding can do to a scenario's figures, worked out from its own
    requests, and what it did.

    A provider serves hits in whole units, so a prompt that grows or shrinks by a few tokens
    moves each request's hit by at most one unit: **the bound** is one unit at the miss price
    less the hit price for every paired request that can hit (one with a hit, or a whole unit
    it could reuse, in either run: below one unit both hits are nothing; one both runs sent
    byte-identical with the same figures did not move). **The rounding present** is exact: each request's
    reusable part before rounding (``RequestDiagnosis.rounded_off_tokens``) shows what a unit
    of one token would have given. Losses the harness cannot cause (``provider-miss``,
    ``not-yet-persisted``, ``below-cache-unit``) are taken out of the figures too."""

    unit_tokens: int
    requests: int
    """Paired requests that can hit: each can move by one unit."""
    cost_bound: float | None
    """Dollars the rounding can move the cost by, either way (``None``: unpriced)."""
    unit_price: float | None
    """Dollars one unit moved costs (miss less hit price), when every request has one price."""
    cost_rounding: float | None
    """Dollars of the cost change the rounding made (|it| ≤ :attr:`cost_bound`)."""
    provider_cost: float | None
    """Dollars of the cost change from losses the harness cannot cause."""
    base_provider_tokens: int = 0
    """Tokens the base run lost to causes the harness cannot cause."""
    new_provider_tokens: int = 0

    @property
    def explained(self) -> float:
        """Dollars of a cost change the rounding and the provider may account for."""
        return (self.cost_bound or 0.0) + abs(self.provider_cost or 0.0)

    def efficiency_bound(self, base: Totals, new: Totals) -> float | None:
        """Percentage points the rounding can move the efficiency by: one unit per request
        that can hit, over the smaller side's reusable tokens (``None``: nothing reusable)."""
        least = min(base.reusable_tokens, new.reusable_tokens)
        if not least:
            return None
        return min(100.0, 100.0 * self.requests * self.unit_tokens / least)

    def to_json(self) -> dict[str, Any]:
        return {
            "unitTokens": self.unit_tokens,
            "requests": self.requests,
            "costBound": _round(self.cost_bound, 8),
            "unitPrice": _round(self.unit_price, 10),
            "costRounding": _round(self.cost_rounding, 8),
            "providerCost": _round(self.provider_cost, 8),
            "baseProviderTokens": self.base_provider_tokens,
            "newProviderTokens": self.new_provider_tokens,
        }


NO_ROUNDING: Final = Rounding(
    unit_tokens=1,
    requests=0,
    cost_bound=0.0,
    unit_price=None,
    cost_rounding=0.0,
    provider_cost=0.0,
)
"""Figures judged as they are (no rounding bound)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ScenarioComparison:
    """One scenario in both runs."""

    name: str
    """What it is: its declared id (a test's node id), else its conversation key, else its
    path inside the folder (``#key`` for a part of a split file) — never a file's name that
    changes from run to run."""
    matched_by: Literal["id", "conversation", "path", "file"]
    base_path: str | None
    new_path: str | None
    base: Totals
    new: Totals
    verdict: Verdict
    reasons: tuple[str, ...]
    """Why the verdict, one sentence each (thresholds and the rounding bound named)."""
    first_change: RequestChange | None
    causes: tuple[CauseChange, ...]
    pairs: tuple[RequestPair, ...] = ()
    notes: tuple[str, ...] = ()
    rounding: Rounding = NO_ROUNDING
    decided_by: Decided = "none"
    failed: bool = False
    """The new run's traffic was marked failed (the test failed; its traffic is kept)."""
    base_failed: bool = False

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

    @property
    def net_cost_change(self) -> float | None:
        """The cost change net of the rounding present and of losses the harness cannot cause,
        in percent of the base's cost (``None`` unpriced)."""
        return _net_percent(self.base, self.new, self.rounding)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "matchedBy": self.matched_by,
            "verdict": self.verdict,
            "decidedBy": self.decided_by,
            "reasons": list(self.reasons),
            "failed": self.failed,
            "baseFailed": self.base_failed,
            "base": {"path": self.base_path, "totals": self.base.to_json()},
            "new": {"path": self.new_path, "totals": self.new.to_json()},
            "efficiencyChange": _round(self.efficiency_change, 2),
            "costChange": _round(self.cost_change, 2),
            "netCostChange": _round(self.net_cost_change, 2),
            "rounding": self.rounding.to_json(),
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
    failed: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": self.path,
            "failed": self.failed,
            "totals": self.totals.to_json(),
        }


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
    def rounding(self) -> Rounding:
        """The scenarios' rounding, summed."""
        return _sum_rounding(s.rounding for s in self.scenarios)

    @property
    def efficiency_change(self) -> float | None:
        """NEW − BASE efficiency over the matched scenarios, in percentage points."""
        return _points(self.base_totals, self.new_totals)

    @property
    def cost_change(self) -> float | None:
        """NEW cost relative to BASE over the matched scenarios, in percent."""
        return _percent(self.base_totals, self.new_totals)

    @property
    def net_cost_change(self) -> float | None:
        """The totals' cost change net of rounding and of the provider's losses, in percent."""
        return _net_percent(self.base_totals, self.new_totals, self.rounding)

    @property
    def identical(self) -> bool:
        return (
            not self.added
            and not self.removed
            and all(s.verdict == "identical" for s in self.scenarios)
        )

    @property
    def missing(self) -> tuple[UnmatchedScenario, ...]:
        """Base scenarios the new run lacks that fail the run (none with ``allow_missing``)."""
        return () if self.thresholds.allow_missing else self.removed

    def _totals_judged(self) -> tuple[Verdict, tuple[str, ...]]:
        verdict, reasons, _ = _judge_figures(
            self.thresholds, self.base_totals, self.new_totals, self.rounding
        )
        return verdict, reasons

    @property
    def total_reasons(self) -> tuple[str, ...]:
        """Why the run's verdict: the scenarios and causes that decided it, the totals."""
        return self._headline()[1]

    def _headline(self) -> tuple[Verdict, tuple[str, ...]]:
        totals, total_reasons = self._totals_judged()
        if self.identical:
            return "identical", ("every scenario identical",)
        failing = [
            s for s in self.scenarios if s.verdict == "regression" and s.decided_by != "figures"
        ]
        reasons: list[str] = []
        for s in failing:
            reasons.append(f"{s.name}: {s.reasons[0]}")
        for m in self.missing:
            state = "failed before it sent anything" if m.failed else "has no traffic"
            reasons.append(
                f"{m.name}: missing traffic: the base run has it, the new run {state} "
                "(--allow-missing lets it pass)"
            )
        if len(reasons) > _HEADLINE_REASONS:
            more = len(reasons) - _HEADLINE_REASONS + 1
            reasons[_HEADLINE_REASONS - 1 :] = [f"and {more} more scenario(s) (listed below)"]
        if failing or self.missing:
            return "regression", tuple(reasons)
        if totals == "regression":
            return "regression", tuple(f"totals: {r}" for r in total_reasons)
        figures_only = [s for s in self.scenarios if s.verdict == "regression"]
        improving = [
            s for s in self.scenarios if s.verdict == "improvement" and s.decided_by == "causes"
        ]
        if improving or totals == "improvement":
            reasons = [f"{s.name}: {s.reasons[0]}" for s in improving]
            reasons += [f"totals: {r}" for r in total_reasons if totals == "improvement"]
            return "improvement", tuple(reasons)
        reasons = [f"totals: {r}" for r in total_reasons]
        if figures_only:
            names = ", ".join(s.name for s in figures_only)
            reasons.append(
                f"{len(figures_only)} scenario(s) cost more beyond rounding with no new cause "
                f"({names}), the run's totals do not: listed, not failing the run"
            )
        return "benign", tuple(reasons)

    @property
    def verdict(self) -> Verdict:
        """The run's verdict: a regression when a scenario's causes, refusals or traffic make it
        one, a base scenario is missing, or the totals are beyond the thresholds and the
        rounding; an improvement in the totals with no new cause is never a regression."""
        return self._headline()[0]

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
        rounding = self.rounding
        return {
            "formatVersion": COMPARE_FORMAT_VERSION,
            "kind": "dsh-testkit/cache-compare",
            "verdict": self.verdict,
            "reasons": list(self.total_reasons),
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
                "netCostChange": _round(self.net_cost_change, 2),
                "rounding": rounding.to_json(),
                "reasons": list(self._totals_judged()[1]),
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


def _sum_rounding(items: Iterable[Rounding]) -> Rounding:
    found = list(items)
    if not found:
        return NO_ROUNDING

    def total(values: Sequence[float | None]) -> float | None:
        known = [v for v in values if v is not None]
        return sum(known) if known else None

    prices = {r.unit_price for r in found if r.requests}
    return Rounding(
        unit_tokens=max(r.unit_tokens for r in found),
        requests=sum(r.requests for r in found),
        cost_bound=total([r.cost_bound for r in found]),
        unit_price=next(iter(prices)) if len(prices) == 1 else None,
        cost_rounding=total([r.cost_rounding for r in found]),
        provider_cost=total([r.provider_cost for r in found]),
        base_provider_tokens=sum(r.base_provider_tokens for r in found),
        new_provider_tokens=sum(r.new_provider_tokens for r in found),
    )


# ------------------------------------------------------------------------------- verdicts


def _points(base: Totals, new: Totals) -> float | None:
    if base.efficiency is None or new.efficiency is None:
        return None
    return (new.efficiency - base.efficiency) * 100


def _fixable_points(base: Totals, new: Totals, rounding: Rounding) -> float | None:
    """The efficiency change with the losses the harness cannot cause counted as hits."""
    if not base.reusable_tokens or not new.reusable_tokens:
        return None
    before = (base.counted_hit_tokens + rounding.base_provider_tokens) / base.reusable_tokens
    after = (new.counted_hit_tokens + rounding.new_provider_tokens) / new.reusable_tokens
    return (min(1.0, after) - min(1.0, before)) * 100


def _percent(base: Totals, new: Totals) -> float | None:
    if base.cost is None or new.cost is None:
        return None
    if base.cost == 0:
        return 0.0 if new.cost == 0 else math.inf
    return (new.cost - base.cost) / base.cost * 100


def _net_percent(base: Totals, new: Totals, rounding: Rounding) -> float | None:
    if base.cost is None or new.cost is None or not base.cost:
        return None
    net = new.cost - base.cost - (rounding.cost_rounding or 0.0) - (rounding.provider_cost or 0.0)
    return net / base.cost * 100


def _num(value: float) -> str:
    """A threshold as written: ``2``, ``0.5``."""
    return f"{value:g}"


def _bound_words(rounding: Rounding, base_cost: float | None) -> str:
    """``rounding can move it by ±$0.000158 (9 requests × one 128-token unit × $0.137/M)``."""
    if rounding.cost_bound is None:
        return "rounding bound unknown (unpriced)"
    share = (
        f", ±{rounding.cost_bound / base_cost * 100:.1f} %"
        if base_cost and rounding.cost_bound
        else ""
    )
    per_unit = (
        f" × ${rounding.unit_price / rounding.unit_tokens * 1e6:.3g}/M"
        if rounding.unit_price
        else ""
    )
    return (
        f"rounding can move it by ±{money(rounding.cost_bound)}{share} ({rounding.requests} "
        f"request(s) × one {rounding.unit_tokens}-token unit{per_unit})"
    )


def _net_words(base: Totals, new: Totals, rounding: Rounding) -> str:
    net = _net_percent(base, new, rounding)
    if net is None:
        return ""
    net = round(net, 1) or 0.0  # never "-0.0 %"
    if rounding.provider_cost:
        return (
            f"net of rounding and of the provider's misses "
            f"({'+' if rounding.provider_cost > 0 else '-'}{money(abs(rounding.provider_cost))}) "
            f"{net:+.1f} %"
        )
    return f"net of rounding {net:+.1f} %"


def _judge_figures(
    thresholds: Thresholds, base: Totals, new: Totals, rounding: Rounding
) -> tuple[Verdict, tuple[str, ...], bool]:
    """The figures' verdict beyond the rounding bound: ``(verdict, reasons, moved)``; ``moved``
    when the raw figures crossed a threshold that the rounding accounts for."""
    worse: list[str] = []
    better: list[str] = []
    moved = False
    points = _points(base, new)
    judged = _fixable_points(base, new, rounding)
    if points is not None and judged is not None:
        bound = rounding.efficiency_bound(base, new) or 0.0
        margin = thresholds.max_efficiency_drop
        beyond = f" beyond the rounding bound of ±{bound:.1f} pp" if bound else ""
        if rounding.base_provider_tokens or rounding.new_provider_tokens:
            beyond += f"; {judged:+.1f} pp without the provider's misses"
        if -judged - bound > margin + _EPSILON:
            worse.append(
                f"efficiency fell {-points:.1f} pp ({_pct(base.efficiency)} → "
                f"{_pct(new.efficiency)}; more than {_num(margin)} pp{beyond})"
            )
        elif judged - bound > margin + _EPSILON:
            better.append(
                f"efficiency rose {points:.1f} pp ({_pct(base.efficiency)} → "
                f"{_pct(new.efficiency)}{beyond})"
            )
        elif abs(points) > margin + _EPSILON:
            moved = True
    percent = _percent(base, new)
    if percent is not None:
        assert base.cost is not None and new.cost is not None
        explained = rounding.explained
        margin_cost = thresholds.max_cost_increase / 100 * base.cost
        delta = new.cost - base.cost
        bound_words = f"; {_bound_words(rounding, base.cost)}" if rounding.cost_bound else ""
        if math.isinf(percent) and delta > 0:
            worse.append(
                f"estimated cost rose from nothing ({money(base.cost)} → {money(new.cost)}; "
                f"more than {_num(thresholds.max_cost_increase)} %)"
            )
        elif delta - explained > margin_cost + _EPSILON * max(1.0, base.cost):
            beyond = " beyond what rounding explains" if explained else ""
            worse.append(
                f"estimated cost rose {percent:.1f} % ({money(base.cost)} → {money(new.cost)}; "
                f"more than {_num(thresholds.max_cost_increase)} %{beyond}{bound_words})"
            )
        elif -delta - explained > margin_cost + _EPSILON * max(1.0, base.cost):
            better.append(
                f"estimated cost fell {-percent:.1f} % ({money(base.cost)} → "
                f"{money(new.cost)}{bound_words})"
            )
        elif abs(percent) > thresholds.max_cost_increase + _EPSILON:
            moved = True
        net = _net_percent(base, new, rounding)
        limit = thresholds.max_net_cost_increase
        if limit is not None and net is not None and net > limit + _EPSILON:
            worse.append(
                f"estimated cost net of rounding rose {net:.1f} % ({money(base.cost)} → "
                f"{money(new.cost)} as measured; more than {_num(limit)} %, "
                "--max-net-cost-increase)"
            )
    if new.refused > base.refused:
        worse.insert(
            0,
            f"{new.refused - base.refused} more request(s) refused by the API "
            f"({base.refused} → {new.refused})",
        )
    if worse:
        return "regression", tuple(worse), moved
    if better:
        return "improvement", tuple(better), moved
    return "benign", (), moved


def _cause_words(c: CauseChange) -> str:
    what = "volatile text" if c.risk and c.code == "volatile-system-text" else c.code
    if c.change == "appeared":
        where = request_ranges(c.new_requests)
        lost = f", {c.new_lost_tokens:,} tokens lost" if c.new_lost_tokens else ""
        risk = " (a risk found by what the text is)" if c.risk else ""
        return f"{what} appeared{risk}" + (f" on {where}{lost}" if where else "")
    if c.change == "went-away":
        return f"{what} went away" + (
            f" (was on {request_ranges(c.base_requests)})" if c.base_requests else ""
        )
    return f"{c.code} {c.change}: tokens lost {c.base_lost_tokens:,} → {c.new_lost_tokens:,}"


def judge(
    thresholds: Thresholds,
    base: Totals,
    new: Totals,
    *,
    same: bool,
    rounding: Rounding = NO_ROUNDING,
    causes: Sequence[CauseChange] = (),
    failed: bool = False,
) -> tuple[Verdict, tuple[str, ...]]:
    """A scenario's verdict and why (``same``: its requests were identical); see
    :func:`judge_scenario` for what decided it."""
    verdict, reasons, _ = judge_scenario(
        thresholds, base, new, same=same, rounding=rounding, causes=causes, failed=failed
    )
    return verdict, reasons


def judge_scenario(
    thresholds: Thresholds,
    base: Totals,
    new: Totals,
    *,
    same: bool,
    rounding: Rounding = NO_ROUNDING,
    causes: Sequence[CauseChange] = (),
    failed: bool = False,
) -> tuple[Verdict, tuple[str, ...], Decided]:
    """A scenario's verdict, the first rule that applies:

    1. ``regression`` — its new traffic is marked failed (the test failed);
    2. ``regression`` — more requests were refused;
    3. ``regression`` — a cause the harness can fix appeared or grew (more than one unit per
       request carrying it), or volatile text appeared in the system prompt or the tools;
    4. ``regression`` — efficiency or cost worse beyond the thresholds *and* the rounding bound
       (and the net-of-rounding cost, when ``max_net_cost_increase`` is set);
    5. ``improvement`` — such a cause (or volatile text) went away or shrank, or the figures
       are better beyond the thresholds and the rounding bound;
    6. ``identical`` — every request byte-identical, the same figures;
    7. ``benign`` — anything else, said to be within cache-unit rounding when it is.
    """
    figures, figure_reasons, moved = _judge_figures(thresholds, base, new, rounding)
    deciding = [c for c in causes if c.decides]
    worse = [c for c in deciding if c.change in ("appeared", "grew")]
    better = [c for c in deciding if c.change in ("went-away", "shrank")]
    refusals = [r for r in figure_reasons if "refused by the API" in r]
    if failed:
        reasons = [
            "the new run's traffic is marked failed (its test failed): a failing test never "
            "passes the gate; its traffic is kept and compared",
            *refusals,
            *(_cause_words(c) for c in worse),
        ]
        return "regression", tuple(reasons), "traffic"
    if refusals or worse:
        reasons = [*refusals, *(_cause_words(c) for c in worse)]
        reasons += [r for r in figure_reasons if r not in refusals and figures == "regression"]
        return "regression", tuple(reasons), "causes"
    if figures == "regression":
        return "regression", figure_reasons, "figures"
    if better:
        reasons = [_cause_words(c) for c in better]
        reasons += list(figure_reasons) if figures == "improvement" else []
        return "improvement", tuple(reasons), "causes"
    if figures == "improvement":
        return "improvement", figure_reasons, "figures"
    if same and base == new:
        return "identical", ("every request byte-identical, the same figures",), "none"
    return "benign", (_benign_words(base, new, rounding, same=same, moved=moved),), "none"


def _benign_words(base: Totals, new: Totals, rounding: Rounding, *, same: bool, moved: bool) -> str:
    what = "the same requests" if same else "requests changed"
    percent = _percent(base, new)
    if percent is None or math.isinf(percent) or base.cost is None or new.cost is None:
        return f"{what}; efficiency and cost within the thresholds"
    cost = f"cost {percent:+.1f} % ({money(base.cost)} → {money(new.cost)})"
    if not rounding.requests or not rounding.cost_bound:
        return f"{what}; {cost}, within the thresholds"
    delta = new.cost - base.cost
    by: list[str] = []
    for amount, words in (
        (rounding.cost_rounding or 0.0, "cache-unit rounding"),
        (rounding.provider_cost or 0.0, "the provider's misses (not the harness's doing)"),
    ):
        if delta and amount * delta > 0 and abs(amount) * 2 >= abs(delta):
            by.append(words)
    if moved and not by:
        by.append("cache-unit rounding")
    details = _bound_words(rounding, base.cost)
    net = _net_words(base, new, rounding)
    if by:
        return f"within {' and '.join(by)}: {cost}; {details}" + (f"; {net}" if net else "")
    return f"{what}; {cost}, within the thresholds ({details})"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.1f} %"
