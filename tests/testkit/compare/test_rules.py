"""The verdict rule, rule by rule: what decides a scenario (its traffic, its causes, its figures
beyond the cache unit's rounding), what decides the run, and missing traffic."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dsh_testkit.compare import CauseChange, Rounding, Thresholds, compare_runs
from dsh_testkit.compare._values import (
    ComparisonFigures,
    RunSummary,
    ScenarioComparison,
    judge_scenario,
)
from dsh_testkit.doctor import Finding, Totals
from tests.testkit.compare._traces import SYSTEM, conversation, write

LIMITS = Thresholds()


def totals(cost: float, *, reusable: int = 1000, counted: int = 1000, refused: int = 0) -> Totals:
    return Totals(
        requests=4,
        measured=4,
        prompt_tokens=4000,
        hit_tokens=counted,
        reusable_tokens=reusable,
        counted_hit_tokens=counted,
        cost=cost,
        refused=refused,
    )


def rounding(bound: float, *, present: float = 0.0, provider: float = 0.0) -> Rounding:
    return Rounding(
        unit_tokens=128,
        requests=3,
        cost_bound=bound,
        unit_price=bound / 3,
        cost_rounding=present,
        provider_cost=provider,
    )


def cause(code: str, change: str, severity: str = "loss", *, risk: bool = False) -> CauseChange:
    finding = Finding(code=code, severity=severity, detail="d")  # type: ignore[arg-type]
    return CauseChange(
        code=code,  # type: ignore[arg-type]
        change=change,  # type: ignore[arg-type]
        severity=severity,  # type: ignore[arg-type]
        base_requests=(),
        new_requests=(1,),
        base_lost_tokens=0,
        new_lost_tokens=256 if severity == "loss" else 0,
        finding=finding,
        risk=risk,
    )


@pytest.mark.parametrize(
    ("new_cost", "kwargs", "expected"),
    [
        # +20 %, all of it within what rounding can move (±30 %): benign, said so
        (1.20, {"rounding": rounding(0.30, present=0.19)}, ("benign", "none")),
        # +40 %: 10 points beyond the bound, more than the 5 % threshold
        (1.40, {"rounding": rounding(0.30)}, ("regression", "figures")),
        # the same +40 % with no rounding bound (one request: nothing could move)
        (1.04, {"rounding": rounding(0.0)}, ("benign", "none")),
        # a fixable cause appeared: a regression whatever the figures
        (0.90, {"causes": [cause("tools-changed", "appeared")]}, ("regression", "causes")),
        (1.00, {"causes": [cause("history-rewritten", "grew")]}, ("regression", "causes")),
        # volatile text found by what it is, before any request lost by it
        (
            1.01,
            {"causes": [cause("volatile-system-text", "appeared", "note", risk=True)]},
            ("regression", "causes"),
        ),
        # a note, or a cause the harness cannot fix, never decides
        (
            1.00,
            {"causes": [cause("tool-args-reserialized", "appeared", "note")]},
            ("benign", "none"),
        ),
        (1.00, {"causes": [cause("provider-miss", "appeared")]}, ("benign", "none")),
        # a cause that went away: an improvement even within the figures' margins
        (0.99, {"causes": [cause("volatile-system-text", "went-away")]}, ("improvement", "causes")),
        # the new run's traffic is a failed test's: it never passes
        (1.00, {"failed": True}, ("regression", "traffic")),
        # cheaper beyond the bound and the margin
        (0.60, {"rounding": rounding(0.30)}, ("improvement", "figures")),
    ],
)
def test_what_decides_a_scenario(
    new_cost: float, kwargs: dict[str, Any], expected: tuple[str, str]
) -> None:
    verdict, reasons, decided = judge_scenario(
        LIMITS, totals(1.0), totals(new_cost), same=False, **kwargs
    )
    assert (verdict, decided) == expected, reasons


def test_a_benign_change_within_the_rounding_says_so_and_shows_the_bound() -> None:
    verdict, reasons, _ = judge_scenario(
        LIMITS, totals(0.0005), totals(0.00058), same=False, rounding=rounding(0.0002, present=8e-5)
    )
    assert verdict == "benign"
    assert reasons == (
        "within cache-unit rounding: cost +16.0 % ($0.000500 → $0.000580); rounding can move it "
        "by ±$0.000200, ±40.0 % (3 request(s) × one 128-token unit × $0.521/M); net of rounding "
        "+0.0 %",
    )


def test_more_requests_refused_is_a_regression_by_its_causes() -> None:
    verdict, reasons, decided = judge_scenario(
        LIMITS, totals(1.0), totals(0.5, refused=1), same=False
    )
    assert (verdict, decided) == ("regression", "causes")
    assert reasons[0] == "1 more request(s) refused by the API (0 → 1)"


def test_the_net_of_rounding_cost_gate_is_opt_in() -> None:
    # +6 % net of rounding, well within the bound: benign by default, a regression when the
    # team gates the bill itself
    base, new = totals(1.0), totals(1.26)
    worst = rounding(0.40, present=0.20)
    assert judge_scenario(LIMITS, base, new, same=False, rounding=worst)[0] == "benign"
    strict = Thresholds(max_net_cost_increase=5)
    verdict, reasons, _ = judge_scenario(strict, base, new, same=False, rounding=worst)
    assert verdict == "regression"
    assert reasons[-1].startswith("estimated cost net of rounding rose 6.0 %")


def _scenario(name: str, verdict: str, decided: str, base: float, new: float) -> ScenarioComparison:
    return ScenarioComparison(
        name=name,
        matched_by="id",
        base_path=None,
        new_path=None,
        base=totals(base),
        new=totals(new),
        verdict=verdict,  # type: ignore[arg-type]
        reasons=(f"{name} reason",),
        first_change=None,
        causes=(),
        rounding=rounding(0.05 * base),
        decided_by=decided,  # type: ignore[arg-type]
    )


def _run(*scenarios: ScenarioComparison, **kw: object) -> ComparisonFigures:
    summary = RunSummary(path=None, traces=1, scenarios=len(scenarios))
    thresholds = kw.pop("thresholds", LIMITS)
    return ComparisonFigures(
        base=summary,
        new=summary,
        thresholds=thresholds,  # type: ignore[arg-type]
        scenarios=scenarios,
        **kw,  # type: ignore[arg-type]
    )


def test_the_headline_is_the_runs_totals_and_the_causes_that_appeared() -> None:
    # One small scenario costs more beyond its rounding; the run's totals do not: listed, and
    # the run is benign.
    worse = _scenario("small", "regression", "figures", 1.0, 1.2)
    same = _scenario("big", "benign", "none", 10.0, 9.9)
    run = _run(worse, same)
    assert run.verdict == "benign" and run.exit_status == 0
    assert run.total_reasons[-1].startswith("1 scenario(s) cost more beyond rounding")
    # A cause that appeared fails the run, however the totals moved.
    caused = _scenario("caused", "regression", "causes", 1.0, 0.5)
    assert _run(caused, same).verdict == "regression"
    # An improvement in the totals with no new cause is never a regression.
    cheaper = _scenario("fixed", "improvement", "causes", 10.0, 4.0)
    assert _run(worse, cheaper).verdict == "improvement"


def test_missing_traffic_fails_the_run_unless_allowed(tmp_path: Path) -> None:
    for side in ("base", "new"):
        write(tmp_path / side / "a.jsonl", conversation("hi", "more"), scenario="t::test_a")
    write(tmp_path / "base" / "b.jsonl", conversation("yo"), scenario="t::test_b")
    result = compare_runs(tmp_path / "base", tmp_path / "new")
    assert [s.name for s in result.removed] == ["t::test_b"]
    assert result.verdict == "regression" and result.exit_status == 1
    assert result.total_reasons == (
        "t::test_b: missing traffic: the base run has it, the new run has no traffic "
        "(--allow-missing lets it pass)",
    )
    allowed = compare_runs(
        tmp_path / "base", tmp_path / "new", thresholds=Thresholds(allow_missing=True)
    )
    assert allowed.verdict == "benign" and allowed.exit_status == 0


def test_a_failed_tests_traffic_fails_even_when_it_is_the_same(tmp_path: Path) -> None:
    requests = conversation("hi", "more")
    base = write(tmp_path / "base.jsonl", requests, scenario="t::test_a")
    new = write(tmp_path / "new.jsonl", requests, scenario="t::test_a")
    lines = new.read_text(encoding="utf-8").splitlines(keepends=True)
    header = json.loads(lines[0])
    new.write_text(json.dumps({**header, "failed": True}) + "\n" + "".join(lines[1:]), "utf-8")
    result = compare_runs(base, new)
    [scenario] = result.scenarios
    assert scenario.failed and scenario.decided_by == "traffic"
    assert result.verdict == "regression"


DAY = 1796644800.0  # 2026-12-07T12:00:00Z


@pytest.mark.parametrize(
    ("added", "started", "verdict"),
    [
        ("Build: 2026-12-07T09:00:00Z", None, "regression"),  # a clock, constant during the run
        ("Session 0b7c2f3e-1a2b-4c3d-8e9f-001122334455", None, "regression"),  # a per-run id
        ("Today is 2026-12-07.", DAY, "regression"),  # the run's own date
        ("13. Mention the test command you ran.", None, "benign"),  # a constant rule
        ("Released 2024-06-01.", DAY, "benign"),  # a fixed date, not a clock
        ("Office hours: 09:00-17:00.", None, "benign"),
    ],
)
def test_volatile_text_between_the_runs_is_named_by_what_it_is(
    tmp_path: Path, added: str, started: float | None, verdict: str
) -> None:
    requests = conversation("hi", "more", "again")
    base = write(tmp_path / "a.jsonl", requests, started=started)
    new = write(
        tmp_path / "b.jsonl",
        conversation("hi", "more", "again", system=f"{SYSTEM}\n{added}"),
        started=started,
    )
    result = compare_runs(base, new)
    assert result.verdict == verdict, result.total_reasons
    # and taking it out again is an improvement
    if verdict == "regression":
        assert compare_runs(new, base).verdict == "improvement"
