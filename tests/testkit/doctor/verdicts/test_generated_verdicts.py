"""The doctor on generated cache killers: four frameworks, one planted killer per scenario.

Each cell plays the three-turn notes conversation of ``_scenarios.py`` with one framework
against the loopback mock and checks, on the captured traffic: the killer is on the wire where
the scenario planted it (``_wire_checks.py``, without the doctor); the planted requests get the
planted code with the planted severity; no other request gets a loss or a refusal; the clean
run gets no finding at all; the doctor says the same of the mock's own request log. The openai
SDK's cells take a tenth of a second each; the other frameworks' cells (their imports, their
agent machinery) are marked slow.
"""

from __future__ import annotations

from typing import Any

import pytest

from ._scenarios import (
    FRAMEWORKS,
    KILLER_NAMES,
    KILLERS,
    NOT_PRODUCIBLE,
    cells,
    framework,
    run_scenario,
)
from ._scoring import verdict_of
from ._wire_checks import assert_planted_on_the_wire


def _cells() -> list[Any]:
    return [
        pytest.param(
            name,
            killer,
            id=f"{name}-{killer}",
            marks=[] if name == "openai-sdk" else [pytest.mark.slow],
        )
        for name, killer in cells()
    ]


@pytest.mark.parametrize(("name", "killer"), _cells())
def test_the_planted_killer_is_named_with_its_code_and_severity(name: str, killer: str) -> None:
    outcome = run_scenario(framework(name), killer)
    requests = outcome.capture.chat_requests()
    assert len(requests) == outcome.expected_requests, outcome.marks
    assert_planted_on_the_wire(outcome)

    wrong = [case.describe() for case in outcome.cases if not case.right]
    assert wrong == [], "\n".join(wrong)
    planted = {p.index for p in outcome.plants}
    for request in outcome.report.requests:
        if request.index not in planted:
            assert not [f for f in request.findings if f.severity in ("loss", "refusal")]

    # The mock's own request log, read by the doctor, says the same of every request.
    by_capture = {r.index: verdict_of(r) for r in outcome.report.requests}
    by_mock = {r.index: verdict_of(r) for r in outcome.mock_report.requests}
    assert {i: v.findings for i, v in by_mock.items()} == {
        i: v.findings for i, v in by_capture.items()
    }

    if killer == "clean":
        assert [f for r in outcome.report.requests for f in r.findings] == []
        assert outcome.report.totals.efficiency == 1.0
        assert len(outcome.report.conversations) == 1


def test_every_framework_plays_every_killer_or_says_why() -> None:
    assert {f for f, _ in NOT_PRODUCIBLE} <= set(FRAMEWORKS)
    assert {k for _, k in NOT_PRODUCIBLE} <= set(KILLER_NAMES)
    assert all(reason.strip() for reason in NOT_PRODUCIBLE.values())
    for name in FRAMEWORKS:
        assert sum(1 for f, _ in cells() if f == name) >= 8, name
    assert KILLERS[0].name == "clean"
