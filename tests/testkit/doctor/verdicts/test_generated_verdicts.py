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

from ._fw_agents import AGENTS_SDK
from ._fw_langchain import LANGCHAIN_DEEPSEEK
from ._fw_openai import OPENAI_SDK
from ._fw_pydantic_ai import PYDANTIC_AI
from ._scenarios import KILLER_NAMES, KILLERS, Framework, run_scenario
from ._scoring import verdict_of
from ._wire_checks import assert_planted_on_the_wire

FRAMEWORKS = (OPENAI_SDK, PYDANTIC_AI, AGENTS_SDK, LANGCHAIN_DEEPSEEK)


def _cells() -> list[Any]:
    cells = []
    for framework in FRAMEWORKS:
        marks = [] if framework is OPENAI_SDK else [pytest.mark.slow]
        for name in KILLER_NAMES:
            if name not in framework.skip:
                cells.append(
                    pytest.param(framework, name, id=f"{framework.name}-{name}", marks=marks)
                )
    return cells


@pytest.mark.parametrize(("framework", "name"), _cells())
def test_the_planted_killer_is_named_with_its_code_and_severity(
    framework: Framework, name: str
) -> None:
    outcome = run_scenario(framework, name)
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

    if name == "clean":
        assert [f for r in outcome.report.requests for f in r.findings] == []
        assert outcome.report.totals.efficiency == 1.0
        assert len(outcome.report.conversations) == 1


def test_every_framework_plays_every_killer_or_says_why() -> None:
    for framework in FRAMEWORKS:
        assert set(framework.skip) <= set(KILLER_NAMES)
        assert all(reason.strip() for reason in framework.skip.values())
        assert len(KILLER_NAMES) - len(framework.skip) >= 8, framework.name
    assert KILLERS[0].name == "clean"
