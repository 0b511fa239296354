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

from dataclasses import dataclass, field, replace
from typing import Any, Final

from dsh_core.providers import Prices, prices_for
from dsh_core.providers._models import Endpoint

from ..doctor._codes import Severity
from ..doctor._diagnose import diagnose
from ..doctor._report import DoctorReport, Finding, RequestDiagnosis, Totals, request_ranges
from ..prompt._diff import diff_chat
from ..prompt._granularity import day_of
from ..prompt._wire_view import canonical_json, tool_ids_renamed, wire_view
from ..traces import Trace
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
from ._result import RunComparison
from ._values import (
    GRAVITY,
    CauseChange,
    RequestChange,
    RequestPair,
    ScenarioComparison,
    Thresholds,
    UnmatchedScenario,
    judge,
)

__all__ = ["compare_runs"]

_ABSOLUTE_TIME: Final = 1e9
"""Times below this are relative to the recording (a capture's clock), not dates."""

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
            if GRAVITY[finding.severity] > GRAVITY[severity]:
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
    out.sort(key=lambda c: (order[c.change], -GRAVITY[c.severity]))
    return tuple(out)


@dataclass(slots=True, kw_only=True)
class _Context:
    thresholds: Thresholds
    pricer: _Pricer
    simulate: bool | None
    granularity: int | None
    notes: list[str] = field(default_factory=list)


def _diagnosed(scenario: Scenario, ctx: _Context) -> tuple[DoctorReport, list[RequestDiagnosis]]:
    report = diagnose(scenario.trace, simulate=ctx.simulate, granularity=ctx.granularity)
    return report, [ctx.pricer.reprice(r) for r in report.requests]


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
    verdict, reasons = judge(ctx.thresholds, base_totals, new_totals, same=first is None)
    notes: list[str] = []
    if base_report.figures != new_report.figures:
        notes.append(
            f"figures: base {base_report.figures}, new {new_report.figures} — run with "
            "--simulate to put both runs on the simulator's footing"
        )
    for side, report, requests in (
        ("base", base_report, base_requests),
        ("new", new_report, new_requests),
    ):
        warm = next((r.hit_tokens for r in requests if r.index == 0), None)
        if report.figures == "reported" and warm:
            notes.append(
                f"the {side} run's first request hit {warm:,} cached tokens: the provider's "
                "cache was warm from an earlier run (a long-running mock, the same prompts "
                "shortly before), which favours that run — restart the mock between runs, or "
                "run with --simulate to compare both from a cold cache"
            )
    if base_report.granularity.tokens != new_report.granularity.tokens:
        notes.append(
            f"cache granularity: base {base_report.granularity.tokens} tokens, new "
            f"{new_report.granularity.tokens} (set one with --granularity)"
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


def _unmatched(scenario: Scenario, ctx: _Context) -> UnmatchedScenario:
    _, requests = _diagnosed(scenario, ctx)
    return UnmatchedScenario(
        name=scenario.declared or scenario.label, path=scenario.path, totals=Totals.of(requests)
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
    :class:`~dsh_testkit.traces.TraceError` or ``OSError`` for an input it cannot read.
    """
    thresholds = thresholds if thresholds is not None else Thresholds()
    with paused_gc():
        base_run = read_run(base, loader or default_loader, max_file_bytes=max_file_bytes)
        new_run = read_run(new, loader or default_loader, max_file_bytes=max_file_bytes)
        when = _run_date(new_run)
        ctx = _Context(
            thresholds=thresholds,
            pricer=_Pricer(prices, when),
            simulate=simulate,
            granularity=granularity,
        )
        pairs, removed, added = match(base_run, new_run)
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
        price_date=None if prices is not None or when is None else day_of(when),
        notes=tuple(notes),
    )
