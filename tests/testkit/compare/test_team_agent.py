"""The gate on a team's agent: nine harness changes (and more), each with the verdict a team
expects written down before it ran, judged by ``compare`` with its default settings.

The agent (``_team_agent.py``) is a plain ``openai``-SDK tool loop of three short scenarios,
run against the loopback mock as a team's CI runs it, two ways:

- **suite**: each scenario a test on a freshly reset mock, its traffic kept as the pytest
  baseline keeps it (a failing test's marked failed), the two run folders compared;
- **recording**: the three scenarios through one mock in one recording, each under its own
  ``x-dsh-conversation`` key (as the recording proxy keeps a suite), the two files compared.

Every clock is fixed, so each run sends the same bytes every time; and a cache unit of 128
tokens moves the cost of these short scenarios by tens of percent either way when a prompt
grows by a few tokens — the rounding the verdicts must see through.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import openai
import pytest

from dsh_testkit.compare import RunComparison, compare_runs
from dsh_testkit.mock import MockDeepSeek, MockServer
from dsh_testkit.pytest_plugin._baseline import write_baseline
from dsh_testkit.traces._file import TraceWriter

from ._team_agent import CHANGES, SCENARIOS, make_clock, routes, run_scenario


@dataclass(frozen=True)
class Expected:
    verdict: str
    causes: tuple[str, ...] = ()
    """Cause codes that must be among those that appeared (or went away, for an improvement)."""


# Written before any of these ran (the team's expectations; issue 33's nine first).
EXPECTED: Final = {
    "refactor": Expected("identical"),
    "timestamp": Expected("regression", ("volatile-system-text",)),
    "tools-reordered": Expected("regression", ("tools-changed",)),
    "args-reserialized": Expected("regression", ("tool-args-reserialized",)),
    "reasoning-dropped": Expected("regression", ("request-refused",)),
    "tool-appended": Expected("benign"),
    "history-trimmed": Expected("regression", ("history-rewritten",)),
    "last-user-reworded": Expected("benign"),
    # more of what a team changes
    "timestamp-ticking": Expected("regression", ("volatile-system-text",)),
    "args-respaced": Expected("benign"),
    "system-lines-2": Expected("benign"),
    "system-lines-5": Expected("benign"),
    "system-lines-8": Expected("benign"),
    "first-user-reworded": Expected("benign"),
    "tool-described": Expected("benign"),
}
FIXES: Final = {
    # the timestamp removed again: base is the timestamp run, new the clean agent
    "timestamp": Expected("improvement", ("volatile-system-text",)),
    "timestamp-ticking": Expected("improvement", ("volatile-system-text",)),
}


def _suite_run(server: MockServer, client: openai.OpenAI, change: str, folder: Path) -> Path:
    """Each scenario a test on a reset mock; its traffic kept as the pytest baseline does."""
    clock = make_clock(change)
    for scenario in SCENARIOS:
        server.mock.reset()
        for document in routes(scenario):
            server.mock.add_route_json(document)
        failed = False
        try:
            run_scenario(client, scenario, change, clock)
        except openai.BadRequestError:
            failed = True
        node = f"tests/test_agent.py::test_scenario[{scenario.name}]"
        path = folder / "tests" / "test_agent" / f"test_scenario[{scenario.name}].trace.jsonl"
        write_baseline(server.mock.to_trace(), path, scenario=node, failed=failed)
    return folder


def _recorded_run(server: MockServer, client: openai.OpenAI, change: str, path: Path) -> Path:
    """The three scenarios through one mock, in one recording."""
    clock = make_clock(change)
    server.mock.reset()
    for scenario in SCENARIOS:
        for document in routes(scenario):
            server.mock.add_route_json(document)
    for scenario in SCENARIOS:
        # a refused request ends its scenario; the next one still runs, as a suite's would
        with contextlib.suppress(openai.BadRequestError):
            run_scenario(client, scenario, change, clock)
    with TraceWriter(path, source="proxy") as writer:
        for exchange in server.mock.to_trace().exchanges:
            writer.append(exchange.to_json())
    return path


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Path]:
    folder = tmp_path_factory.mktemp("team")
    out: dict[tuple[str, str], Path] = {}
    # One SDK client for all 102 scenarios: the bytes each sends do not depend on the client
    # object, and building one per scenario (its TLS context loads the CA bundle, ~0.1 s, for a
    # plain-HTTP loopback URL) was a sixth of this fixture's time.
    with (
        MockServer(MockDeepSeek(seed=0)) as server,
        openai.OpenAI(base_url=server.base_url, api_key="sk-team", max_retries=0) as client,
    ):
        for change in ["baseline", *EXPECTED]:
            out["suite", change] = _suite_run(server, client, change, folder / "suite" / change)
            out["recording", change] = _recorded_run(
                server, client, change, folder / f"{change}.trace"
            )
        out["suite", "again"] = _suite_run(server, client, "baseline", folder / "suite" / "again")
        out["recording", "again"] = _recorded_run(
            server, client, "baseline", folder / "again.trace"
        )
    return out


def _causes(result: RunComparison, moves: tuple[str, ...]) -> set[str]:
    return {c.code for s in result.scenarios for c in s.causes if c.change in moves and c.decides}


MODES: Final = ("suite", "recording")


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("change", list(EXPECTED))
def test_each_change_gets_the_verdict_the_team_expects(
    runs: dict[tuple[str, str], Path], change: str, mode: str
) -> None:
    expected = EXPECTED[change]
    result = compare_runs(runs[mode, "baseline"], runs[mode, change])
    assert result.verdict == expected.verdict, result.total_reasons
    assert result.exit_status == (1 if expected.verdict == "regression" else 0)
    assert set(expected.causes) <= _causes(result, ("appeared", "grew"))
    # Every scenario is named by what it is, never by a run's file name.
    names = {s.name for s in result.scenarios}
    if mode == "recording":
        assert names <= {"bugfix", "review", "docs"}
    else:
        assert all(name.startswith("tests/test_agent.py::test_scenario[") for name in names)
    if expected.verdict == "benign":
        # Said to be what it is: within the rounding, the bound shown, or within the thresholds.
        for s in result.scenarios:
            assert s.verdict in ("benign", "identical"), (s.name, s.reasons)
            if s.verdict == "benign":
                assert "rounding can move it by ±$" in s.reasons[0], s.reasons


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("change", list(FIXES))
def test_removing_the_timestamp_again_is_an_improvement(
    runs: dict[tuple[str, str], Path], change: str, mode: str
) -> None:
    expected = FIXES[change]
    result = compare_runs(runs[mode, change], runs[mode, "baseline"])
    assert result.verdict == expected.verdict, result.total_reasons
    assert set(expected.causes) <= _causes(result, ("went-away", "shrank"))
    assert result.exit_status == 0


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_run_after_run_the_same_agent_is_identical(
    runs: dict[tuple[str, str], Path], mode: str
) -> None:
    result = compare_runs(runs[mode, "baseline"], runs[mode, "again"])
    assert result.verdict == "identical"
    # The recording's later scenarios start on the prefix the first cached: no "warm from an
    # earlier run" note for what the same recording explains.
    assert not [n for s in result.scenarios for n in s.notes if "warm" in n]


def test_every_change_has_its_expectation_and_a_description() -> None:
    assert set(EXPECTED) | {"baseline"} == set(CHANGES)
    assert set(FIXES) <= set(EXPECTED)
