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
scenario is called by what it is — its declared id, else its key, else its path in the folder —
never by the name of a run's file. A scenario only in NEW is ``added``, only in BASE ``removed``
(missing traffic: it fails the run unless ``allow_missing``); neither counts in the totals. A
recording marked ``failed`` (the pytest baseline keeps a failing test's traffic so) is compared,
and fails.

**Within a scenario** requests are paired in order. The first pair that differs as the one wire
view renders them (``_wire_view.py``: parameters, system, tools, each message) is the first
changed request, its differences worded as everywhere in the project (``_diff.diff_chat``);
each run goes through the doctor (:func:`~dsh_testkit.doctor.diagnose`), and the cause codes
that appeared, grew, shrank, went away or moved are listed with the doctor's evidence.

**Figures and cost.** Efficiency, hit rate and lost tokens are the doctor's (``_codes.TERMS``).
Both runs are priced alike — each request at its model's list price in force at the date of
the NEW run (its latest request; today when it has no dates), or at ``prices`` when given — so
a price change between the runs never reads as a regression.

**Verdicts**: what the change did, not what the rounding did. DeepSeek serves hits in whole
cache units (128 tokens), so a prompt a few tokens longer or shorter moves each request's hit,
and its cost, by up to one unit — on a scenario of a few short requests that is tens of percent
of its cost either way. Each scenario's **rounding bound** is worked out from its own requests:
one unit at the miss price less the hit price for every paired request that can hit (one with
a hit, or a whole unit it could reuse, in either run; one both runs sent byte-identical with
the same figures did not move). A scenario is:

1. ``regression`` — its new traffic is marked failed (a failing test's traffic is kept);
2. ``regression`` — more requests were refused;
3. ``regression`` — a cause the harness can fix (kind ``change`` or ``refusal``) cost tokens or
   a refusal and appeared, or its lost tokens grew by more than one unit per request carrying
   it; or volatile text appeared: the runs' system prompts (or tools) differ at a date, a time
   or an id, or the new run's system prompt holds the request's own date or time — even if no
   request lost by it yet;
4. ``regression`` — efficiency fell more than ``max_efficiency_drop`` points, or the cost rose
   more than ``max_cost_increase`` percent, *beyond the rounding bound* (and the losses the
   harness cannot cause: the provider's misses); with ``max_net_cost_increase`` set, also the
   cost net of the rounding actually present;
5. ``improvement`` — such a cause or volatile text went away or shrank, or the figures are
   better beyond the thresholds and the bound;
6. ``identical`` — every request byte-identical as the wire view renders it, the same figures;
7. ``benign`` — anything else, worded "within cache-unit rounding" with the bound and the cost
   net of the rounding present.

**The run** (the headline, and the exit status): a regression when a scenario is one by rules
1–3, when a scenario of the base run is missing from the new one (unless ``allow_missing``), or
when the totals are worse beyond the thresholds and the summed bounds; else an improvement when
a scenario improved by its causes or the totals improved; a scenario worse only by its own
figures is listed, not failing the run. An improvement in the totals with no new cause is never
a regression. Nothing to compare — a run with no recording, no scenario paired — is an error
(:class:`NothingCompared`), never a verdict.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from dsh_core.providers import Prices, prices_for
from dsh_core.providers._models import Endpoint

from ..doctor._codes import CODES, Severity
from ..doctor._diagnose import diagnose
from ..doctor._model_facts import template_of
from ..doctor._report import DoctorReport, Finding, RequestDiagnosis, Totals, request_ranges
from ..doctor._text import is_bare_date, own_date, text_diff, volatile_value
from ..prompt import PromptRenderer
from ..prompt._diff import diff_chat
from ..prompt._granularity import day_of
from ..prompt._wire_view import canonical_json, tool_ids_renamed, wire_view
from ..traces import Exchange, Trace
from ..traces._model import paused_gc
from ._inputs import (
    MAX_FILE_BYTES,
    Pair,
    Run,
    Scenario,
    TraceLoader,
    default_loader,
    match,
    read_run,
)
from ._result import NothingCompared, RunComparison
from ._values import (
    FIXABLE_KINDS,
    GRAVITY,
    CauseChange,
    CauseMove,
    RequestChange,
    RequestPair,
    Rounding,
    ScenarioComparison,
    Thresholds,
    UnmatchedScenario,
    judge_scenario,
)

__all__ = ["compare_runs"]

_ABSOLUTE_TIME: Final = 1e9
"""Times below this are relative to the recording (a capture's clock), not dates."""

_RISK: Final = "volatile-system-text risk"
"""The doctor's signature prefix of a volatile value named as a risk (``_changes.clock_risk``)."""

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

    def unit_gap(self, model: str | None) -> float:
        """Dollars per token a hit saves (miss less hit price)."""
        prices = self.of(model)
        return (prices.miss - prices.hit) / 1e6

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


def _tool_ids_renumbered(trace: Trace) -> list[Any]:
    """Each request body with its tool-call ids renamed ``call-1``, ``call-2``, … in the order
    the trace first shows them: ids the model makes up anew on every run (the live API, a
    long-running mock) do not make two runs of the same agent differ, while a call resent
    under another id than it was made still does."""
    names: dict[str, str] = {}

    def rename(value: str) -> str:
        return names.setdefault(value, f"call-{len(names) + 1}")

    return [tool_ids_renamed(exchange.body, rename) for exchange in trace.exchanges]


def _rendered(body: Any, endpoint: Endpoint) -> tuple[Any, ...]:
    """A request as the one wire view renders it: equal tuples, byte-identical requests."""
    view = wire_view(body, endpoint=endpoint)
    if view is None:
        return ("raw", canonical_json(body))
    return (view.endpoint, canonical_json(dict(view.params)), view.parts())


def _first_change(base: Trace, new: Trace) -> tuple[RequestChange | None, list[bool]]:
    """The first changed request (``None``: all identical), and per position whether same
    (tool-call ids aside: see :func:`_tool_ids_renumbered`)."""
    base_bodies, new_bodies = _tool_ids_renumbered(base), _tool_ids_renumbered(new)
    same = [
        _rendered(x, a.endpoint) == _rendered(y, b.endpoint)
        for a, b, x, y in zip(base.exchanges, new.exchanges, base_bodies, new_bodies, strict=False)
    ]
    extra = abs(len(base) - len(new))
    changed = same.count(False) + extra
    if not changed:
        return None, same
    if False in same:
        at = same.index(False)
        a, b = base[at], new[at]
        va = wire_view(base_bodies[at], endpoint=a.endpoint)
        vb = wire_view(new_bodies[at], endpoint=b.endpoint)
        differences: tuple[str, ...] = ()
        if va is not None and vb is not None:
            differences = diff_chat(va, vb, names=("base", "new"))
        if not differences:
            differences = (
                f"request #{at + 1} differs in its endpoint or body shape (base "
                f"{a.endpoint}, new {b.endpoint}); see the two recordings",
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


# ------------------------------------------------------------------------------ causes


def _fixable(code: str) -> bool:
    return CODES[code].kind in FIXABLE_KINDS


def _provider_lost(r: RequestDiagnosis) -> int:
    """Tokens ``r`` lost to causes the harness cannot cause (the provider, timing, size)."""
    return sum(f.lost_tokens for f in r.findings if f.severity == "loss" and not _fixable(f.code))


def _fixable_lost(r: RequestDiagnosis) -> int:
    return sum(f.lost_tokens for f in r.findings if f.severity == "loss" and _fixable(f.code))


@dataclass(slots=True)
class _Side:
    """One cause code on one side: where it cost (loss or refusal), where it is only a note."""

    costly: list[int] = field(default_factory=list)
    lost: int = 0
    notes: list[int] = field(default_factory=list)
    severity: Severity = "note"
    finding: Finding | None = None
    risk: Finding | None = None

    @property
    def present(self) -> bool:
        return bool(self.costly) or self.risk is not None


def _sides(report: DoctorReport) -> dict[str, _Side]:
    out: dict[str, _Side] = {}
    for request in sorted(report.requests, key=lambda r: r.index):
        for f in request.findings:
            side = out.setdefault(f.code, _Side())
            if f.signature.startswith(_RISK):
                side.risk = side.risk or f
                continue
            if f.severity == "note":
                if not side.notes or side.notes[-1] != request.index:
                    side.notes.append(request.index)
                if side.finding is None:
                    side.finding = f
                continue
            if not side.costly or side.costly[-1] != request.index:
                side.costly.append(request.index)
            side.lost += f.lost_tokens
            if side.finding is None or GRAVITY[f.severity] > GRAVITY[side.severity]:
                side.severity, side.finding = f.severity, f
    return out


def _cause_changes(
    base: DoctorReport, new: DoctorReport, unit: int, between: Finding | None, side: str | None
) -> tuple[CauseChange, ...]:
    """How each cause code moved. A code counts where it cost tokens or a refusal; notes are
    listed when they appear or go away, never deciding. ``volatile-system-text`` counts where
    it is present at all — a loss, or a risk found by what the text is (``between``: the
    runs' system prompts differ at a volatile value, on ``side``) — so a clock that happened
    not to tick during one run decides nothing."""
    before, after = _sides(base), _sides(new)
    if between is not None:
        holder = before if side == "base" else after
        found = holder.setdefault("volatile-system-text", _Side())
        found.risk = found.risk or between
    out: list[CauseChange] = []
    for code in dict.fromkeys([*after, *before]):
        b, n = before.get(code, _Side()), after.get(code, _Side())
        move: CauseMove | None
        shown: _Side
        if code == "volatile-system-text" and (b.present or n.present):
            if n.present and not b.present:
                move, shown = "appeared", n
            elif b.present and not n.present:
                move, shown = "went-away", b
            elif b.costly != n.costly or b.lost != n.lost:
                move, shown = "changed", n
            else:
                continue
            finding = shown.finding if shown.costly else shown.risk
            assert finding is not None
            out.append(
                CauseChange(
                    code="volatile-system-text",
                    change=move,
                    severity=shown.severity if shown.costly else "note",
                    base_requests=tuple(b.costly),
                    new_requests=tuple(n.costly),
                    base_lost_tokens=b.lost,
                    new_lost_tokens=n.lost,
                    finding=finding,
                    risk=not shown.costly,
                )
            )
            continue
        if b.costly or n.costly:
            slack = unit * max(len(b.costly), len(n.costly))
            if not b.costly:
                move, shown = "appeared", n
            elif not n.costly:
                move, shown = "went-away", b
            elif (
                n.severity == "refusal" and len(n.costly) > len(b.costly)
            ) or n.lost > b.lost + slack:
                move, shown = "grew", n
            elif (
                b.severity == "refusal" and len(b.costly) > len(n.costly)
            ) or b.lost > n.lost + slack:
                move, shown = "shrank", n
            elif b.costly != n.costly or b.lost != n.lost:
                move, shown = "changed", n
            else:
                continue
            severity = shown.severity
        else:
            # notes only: listed when they appear or go away (they never decide)
            if bool(b.notes) == bool(n.notes):
                continue
            move, shown = ("appeared", n) if n.notes else ("went-away", b)
            severity = "note"
        assert shown.finding is not None
        out.append(
            CauseChange(
                code=shown.finding.code,
                change=move,
                severity=severity,
                base_requests=tuple(b.costly or b.notes),
                new_requests=tuple(n.costly or n.notes),
                base_lost_tokens=b.lost,
                new_lost_tokens=n.lost,
                finding=shown.finding,
            )
        )
    order = {"appeared": 0, "grew": 1, "changed": 2, "shrank": 3, "went-away": 4}
    out.sort(key=lambda c: (not c.decides, order[c.change], -GRAVITY[c.severity]))
    return tuple(out)


def _stable_prefix(exchange: Exchange) -> tuple[str, str] | None:
    view = wire_view(exchange.body, endpoint=exchange.endpoint)
    if view is None:
        return None
    tools = view.rendered_tools()
    return view.system_text, tools if isinstance(tools, str) else canonical_json(tools)


def _volatile_between(base: Trace, new: Trace) -> tuple[Finding, str] | None:
    """Volatile text between the runs: the first paired requests whose system prompts (or
    tools) differ, differing at a date, a time or an id that the other run's text does not
    hold — ``(finding, side)``, the side whose text holds it (``new`` when both do)."""
    for a, b in zip(base.exchanges, new.exchanges, strict=False):
        x, y = _stable_prefix(a), _stable_prefix(b)
        if x is None or y is None or x == y:
            continue
        for label, old, fresh in (("system prompt", x[0], y[0]), ("tools", x[1], y[1])):
            diff = text_diff(old, fresh)
            if diff is None:
                continue
            found_old = volatile_value(diff.before, diff.start, diff.before_end)
            found_new = volatile_value(diff.after, diff.start, diff.after_end)
            if found_old is not None and found_old in fresh:
                found_old = None
            if found_new is not None and found_new in old:
                found_new = None
            # A bare date is a clock's only when it moved between the runs, or is the run's
            # own date (a release date, a knowledge cutoff is no clock).
            dates = [v for v in (found_old, found_new) if v is not None and is_bare_date(v)]
            one_side = not (found_old is not None and found_new is not None)
            if (
                dates
                and one_side
                and not any(
                    own_date(v, e.started) for v, e in ((found_old, a), (found_new, b)) if v
                )
            ):
                found_old = found_old if found_old not in dates else None
                found_new = found_new if found_new not in dates else None
            if found_old is None and found_new is None:
                continue
            value = found_new if found_new is not None else found_old
            side = "new" if found_new is not None else "base"
            text = fresh if side == "new" else old
            assert value is not None
            at = text.find(value)
            line = text.count("\n", 0, at) + 1
            where = f"{'system' if label == 'system prompt' else 'tools'} line {line}"
            lines = text.splitlines() or [""]
            shown = lines[min(line, len(lines)) - 1]
            return (
                Finding(
                    code="volatile-system-text",
                    severity="note",
                    detail=(
                        f"the {label} differs between the runs at a volatile-looking value: "
                        f"{value!r} (only in the {side} run's, at line {line}); it changes from "
                        "one run or request to the next, and nothing after it can be reused then "
                        "— whether or not a request of this run lost by it yet"
                    ),
                    evidence=(
                        f"base: {found_old!r}" if found_old else "base: (no such value)",
                        f"new: {found_new!r}" if found_new else "new: (no such value)",
                        f"{side} {where}: {shown[:160]!r}",
                    ),
                    where=where,
                    signature=f"{_RISK} between runs",
                    diff=diff,
                ),
                side,
            )
        return None
    return None


# ------------------------------------------------------------------------------ rounding


class _Earlier:
    """What a part of a split recording could have hit from the parts sent before it (a
    proxy trace of a suite: the second scenario starts on the system prompt and tools the
    first cached)."""

    def __init__(self) -> None:
        self._renderer = PromptRenderer()
        self._parts: dict[tuple[int, int], tuple[str, ...]] = {}

    def _parts_of(self, context: Trace, index: int) -> tuple[str, ...]:
        key = (id(context), index)
        found = self._parts.get(key)
        if found is None:
            exchange = context.exchanges[index]
            view = wire_view(exchange.body, endpoint=exchange.endpoint)
            found = self._parts[key] = tuple(view.parts()) if view is not None else ()
        return found

    def shared(self, scenario: Scenario) -> tuple[float, int] | None:
        """``(provider tokens, request index)``: the longest prefix the scenario's first
        request shares with one request sent before it in the same recording."""
        if scenario.context is None or not scenario.origin or not scenario.trace.exchanges:
            return None
        first_at = scenario.origin[0]
        first = scenario.context.exchanges[first_at]
        mine = self._parts_of(scenario.context, first_at)
        best, best_at = 0, -1
        for i in range(first_at):
            earlier = scenario.context.exchanges[i]
            if earlier.refused or earlier.endpoint != first.endpoint:
                continue
            theirs = self._parts_of(scenario.context, i)
            k = 0
            while k < min(len(mine), len(theirs)) and mine[k] == theirs[k]:
                k += 1
            if k and k >= best:
                best, best_at = k, i
        if best_at < 0 or first.endpoint != "chat" or first.usage is None:
            return None
        template = template_of(first)
        a = self._renderer.render_chat(first.body, template=template).tokens
        b = self._renderer.render_chat(
            scenario.context.exchanges[best_at].body, template=template
        ).tokens
        common = 0
        for x, y in zip(a, b, strict=False):
            if x != y:
                break
            common += 1
        ratio = first.usage.prompt_tokens / len(a) if a else 1.0
        return common * ratio, best_at


def _measured(requests: Sequence[RequestDiagnosis]) -> list[RequestDiagnosis]:
    return sorted(requests, key=lambda r: r.index)


def _adjustments(
    requests: Sequence[RequestDiagnosis], pricer: _Pricer, unit: int, warm: float | None
) -> tuple[float, float, int]:
    """Dollars of one side's cost the rounding to the unit added, dollars the losses the
    harness cannot cause added, and those losses in tokens."""
    rounding = provider = 0.0
    provider_tokens = 0
    for r in requests:
        if r.cost is None or not r.measured:
            continue
        gap = pricer.unit_gap(r.model)
        hit = r.hit_tokens or 0
        lost = _provider_lost(r)
        provider += gap * lost
        provider_tokens += lost
        if r.parent is not None:
            if not _fixable_lost(r) and hit + lost == r.reusable_tokens:
                rounding += gap * r.rounded_off_tokens
        elif r.index == 0 and warm is not None and hit and hit == int(warm) // unit * unit:
            rounding += gap * (warm - hit)
    return rounding, provider, provider_tokens


def _rounding(
    pairs: Sequence[RequestPair],
    base: Sequence[RequestDiagnosis],
    new: Sequence[RequestDiagnosis],
    pricer: _Pricer,
    unit: int,
    warm: tuple[float | None, float | None],
) -> Rounding:
    count = 0
    bound = 0.0
    gaps: set[float] = set()
    priced = True
    for p in pairs:
        if p.base is None or p.new is None or not (p.base.measured and p.new.measured):
            continue
        # Only a request that hit, or could reuse a whole unit, in either run can move by one:
        # below one unit both hits are nothing, whatever the rounding.
        can_hit = any((r.hit_tokens or 0) > 0 or r.reusable_tokens >= unit for r in (p.base, p.new))
        # A request both runs sent byte-identical, with the same figures, did not move at all.
        unmoved = p.same and (p.base.hit_tokens, p.base.reusable_tokens) == (
            p.new.hit_tokens,
            p.new.reusable_tokens,
        )
        if not can_hit or unmoved:
            continue
        count += 1
        if p.new.cost is None:
            priced = False
            continue
        gap = pricer.unit_gap(p.new.model)
        gaps.add(gap)
        bound += unit * gap
    base_provider, base_tokens = _adjustments(base, pricer, unit, warm[0])[1:]
    new_provider, new_tokens = _adjustments(new, pricer, unit, warm[1])[1:]
    # The rounding present is that of the requests both runs sent: a request only one run sent
    # is what the change did, never rounding.
    paired = [(p.base, p.new) for p in pairs if p.base is not None and p.new is not None]
    base_round = _adjustments([b for b, _ in paired], pricer, unit, warm[0])[0]
    new_round = _adjustments([n for _, n in paired], pricer, unit, warm[1])[0]
    return Rounding(
        unit_tokens=unit,
        requests=count,
        cost_bound=bound if priced else None,
        unit_price=unit * next(iter(gaps)) if len(gaps) == 1 else None,
        cost_rounding=new_round - base_round,
        provider_cost=new_provider - base_provider,
        base_provider_tokens=base_tokens,
        new_provider_tokens=new_tokens,
    )


# ------------------------------------------------------------------------------ a scenario


@dataclass(slots=True, kw_only=True)
class _Context:
    thresholds: Thresholds
    pricer: _Pricer
    simulate: bool | None
    granularity: int | None
    earlier: _Earlier = field(default_factory=_Earlier)
    notes: list[str] = field(default_factory=list)


def _diagnosed(scenario: Scenario, ctx: _Context) -> tuple[DoctorReport, list[RequestDiagnosis]]:
    report = diagnose(scenario.trace, simulate=ctx.simulate, granularity=ctx.granularity)
    return report, [ctx.pricer.reprice(r) for r in report.requests]


def _warm_note(
    side: str,
    scenario: Scenario,
    report: DoctorReport,
    requests: Sequence[RequestDiagnosis],
    shared: tuple[float, int] | None,
) -> str | None:
    """A first request that hit what nothing before it in the recording explains: the
    provider's cache was warm from an earlier run. A hit an earlier scenario of the same
    recording explains is no such thing (and is taken into the rounding instead)."""
    hit = next((r.hit_tokens for r in requests if r.index == 0), None)
    if report.figures != "reported" or not hit:
        return None
    if shared is not None and hit <= shared[0]:
        return None
    return (
        f"the {side} run's first request hit {hit:,} cached tokens that nothing sent before it "
        "in the same recording explains: the provider's cache was warm from an earlier run (a "
        "long-running mock, the same prompts shortly before), which favours that run — restart "
        "the mock between runs, or run with --simulate to compare both from a cold cache"
    )


def _name(pair: Pair) -> str:
    """What the scenario is: the id or key it was matched by, else its path in the folder;
    for two single files, the base's id, key or name (the committed side, not the artifact)."""
    b, n, how = pair
    if how == "id":
        assert b.declared is not None
        return b.declared
    if how == "conversation":
        assert b.key is not None
        return b.key
    if how == "path":
        return b.name[1:] if b.name.startswith("#") else b.name
    return b.label if b.declared or b.key or not (n.declared or n.key) else n.label


def _compare_pair(pair: Pair, ctx: _Context) -> ScenarioComparison:
    b, n, how = pair
    base_report, base_requests = _diagnosed(b, ctx)
    if (
        n.trace.exchanges == b.trace.exchanges
        and n.trace.time_resolution == b.trace.time_resolution
    ):
        # The same recording on both sides (most scenarios of a gated change): one diagnosis.
        new_report, new_requests = base_report, base_requests
    else:
        new_report, new_requests = _diagnosed(n, ctx)
    base_totals, new_totals = Totals.of(base_requests), Totals.of(new_requests)
    first, same = _first_change(b.trace, n.trace)
    unit = max(base_report.granularity.tokens, new_report.granularity.tokens)
    notes: list[str] = []
    if base_report.figures != new_report.figures:
        notes.append(
            f"figures: base {base_report.figures}, new {new_report.figures} — run with "
            "--simulate to put both runs on the simulator's footing"
        )
    shared = (ctx.earlier.shared(b), ctx.earlier.shared(n))
    for side, scenario, report, requests, found in (
        ("base", b, base_report, base_requests, shared[0]),
        ("new", n, new_report, new_requests, shared[1]),
    ):
        note = _warm_note(side, scenario, report, requests, found)
        if note is not None:
            notes.append(note)
    if base_report.granularity.tokens != new_report.granularity.tokens:
        notes.append(
            f"cache granularity: base {base_report.granularity.tokens} tokens, new "
            f"{new_report.granularity.tokens} (set one with --granularity)"
        )
    if b.failed:
        notes.append(
            "the base run's traffic is marked failed (its test failed): it may stop short; "
            "accept a baseline from a passing run"
        )
    by_position_base = _measured(base_requests)
    by_position_new = _measured(new_requests)
    pairs = tuple(
        RequestPair(
            request=i + 1,
            same=i < len(same) and same[i],
            base=by_position_base[i] if i < len(by_position_base) else None,
            new=by_position_new[i] if i < len(by_position_new) else None,
        )
        for i in range(max(len(by_position_base), len(by_position_new)))
    )
    rounding = _rounding(
        pairs,
        base_requests,
        new_requests,
        ctx.pricer,
        unit,
        (shared[0][0] if shared[0] else None, shared[1][0] if shared[1] else None),
    )
    between = _volatile_between(b.trace, n.trace)
    causes = _cause_changes(
        base_report,
        new_report,
        unit,
        between[0] if between else None,
        between[1] if between else None,
    )
    verdict, reasons, decided = judge_scenario(
        ctx.thresholds,
        base_totals,
        new_totals,
        same=first is None,
        rounding=rounding,
        causes=causes,
        failed=n.failed,
    )
    return ScenarioComparison(
        name=_name(pair),
        matched_by=how,
        base_path=b.path,
        new_path=n.path,
        base=base_totals,
        new=new_totals,
        verdict=verdict,
        reasons=reasons,
        first_change=first,
        causes=causes,
        pairs=pairs,
        notes=tuple(notes),
        rounding=rounding,
        decided_by=decided,
        failed=n.failed,
        base_failed=b.failed,
    )


def _unmatched(scenario: Scenario, ctx: _Context) -> UnmatchedScenario:
    _, requests = _diagnosed(scenario, ctx)
    return UnmatchedScenario(
        name=scenario.label, path=scenario.path, totals=Totals.of(requests), failed=scenario.failed
    )


def _run_date(run: Run) -> float | None:
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
    granularity: int | None = None,
    loader: TraceLoader | None = None,
    max_file_bytes: int = MAX_FILE_BYTES,
) -> RunComparison:
    """Compare two runs (see the module docstring for scenarios, matching and verdicts).

    ``base`` and ``new`` are each a recording (a path of any kind the doctor reads), a folder
    of them, or anything :func:`~dsh_testkit.traces.trace_of` takes (a trace, a capture, a
    mock). ``thresholds`` decide the verdicts (default :class:`Thresholds`); ``prices``
    replaces the model table's; ``simulate`` and ``granularity`` are :func:`diagnose`'s.
    ``loader`` reads one file (the CLI's fills session logs' placeholders from sidecars).
    Only regular files are read, at most ``max_file_bytes`` of each (links and special files
    in a folder are skipped with a note: ``_inputs.py``). Raises
    :class:`~dsh_testkit.traces.TraceError` or ``OSError`` for an input it cannot read, and
    :class:`NothingCompared` when a run holds no recording or no scenario pairs.
    """
    thresholds = thresholds if thresholds is not None else Thresholds()
    with paused_gc():
        base_run = read_run(base, loader or default_loader, max_file_bytes=max_file_bytes)
        new_run = read_run(new, loader or default_loader, max_file_bytes=max_file_bytes)
        pairs, removed, added = match(base_run, new_run)
        _check_something_compared(base_run, new_run, pairs, removed, added)
        when = _run_date(new_run)
        ctx = _Context(
            thresholds=thresholds,
            pricer=_Pricer(prices, when),
            simulate=simulate,
            granularity=granularity,
        )
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
        if run.not_read:
            shown = "; ".join(run.not_read[:5])
            more = len(run.not_read) - 5
            notes.append(
                f"{side}: {len(run.not_read)} folder entr{'y' if len(run.not_read) == 1 else 'ies'}"
                f" not read ({shown}" + (f"; and {more} more" if more > 0 else "") + ")"
            )
    return RunComparison(
        base=base_run.summary,
        new=new_run.summary,
        thresholds=thresholds,
        scenarios=scenarios,
        added=added_out,
        removed=removed_out,
        prices=tuple(ctx.pricer.used),
        price_date=None if prices is not None or when is None else day_of(when),
        notes=tuple(notes),
    )


def _check_something_compared(
    base: Run,
    new: Run,
    pairs: Sequence[Pair],
    removed: Sequence[Scenario],
    added: Sequence[Scenario],
) -> None:
    for side, run in (("BASE", base), ("NEW", new)):
        if not run.scenarios:
            unread = f" ({'; '.join(run.not_read[:5])})" if run.not_read else ""
            raise NothingCompared(
                f"{side} {run.summary.path or '(a trace)'}: no recording found{unread} (a folder "
                "of recordings, or one recording, is expected); an empty run is never compared",
                base=base.summary,
                new=new.summary,
            )
    if not pairs:
        # A renamed suite or a wrong artifact path must not pass a gate by comparing nothing.
        raise NothingCompared(
            f"no scenario of BASE matches one of NEW ({len(removed)} only in BASE, {len(added)} "
            "only in NEW): nothing was compared; scenarios pair by their declared id, then "
            "conversation key, then file path",
            base=base.summary,
            new=new.summary,
        )
