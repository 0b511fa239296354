"""The issue's two runs, for real: an openai-SDK agent on the loopback mock, compared by the CLI.

A timestamp added to the system prompt is a regression that names ``volatile-system-text``
with the differing characters and shows the cost increase (exit 1); a refactor that leaves
every request byte-identical is ``identical`` (exit 0).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests._support import run_cli
from tests.testkit.compare._agent import RefactoredAgent, cli, request_bodies, run_agent, stamped


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("runs")
    return {
        "base": run_agent(folder / "base.trace.jsonl"),
        "stamped": run_agent(folder / "stamped.trace.jsonl", system=stamped),
        "refactored": RefactoredAgent.run(folder / "refactored.trace.jsonl"),
    }


@pytest.mark.slow
def test_a_timestamp_in_the_system_prompt_is_a_regression(runs: dict[str, Path]) -> None:
    result = run_cli("compare", str(runs["base"]), str(runs["stamped"]))
    assert result.returncode == 1, result.stderr
    out = result.stdout
    assert "verdict: regression" in out
    # Called by what it is (here the committed base's name), never by the new run's file.
    assert "regression: base.trace.jsonl" in out
    assert "  base.trace.jsonl: volatile-system-text appeared on #2–#6, 2,176 tokens lost" in out
    # The cause the change introduced, with the characters that differ between two requests.
    assert "volatile-system-text appeared (loss) on #2–#6" in out
    assert "'2026-05-04T09:00:00Z' → '2026-05-04T09:00:01Z'" in out
    assert "request #1: 'Current time: 2026-05-04T09:00:00Z'" in out
    # The first request whose shape changed, in the project's wording.
    assert "first changed request: #1 (6 of 6 request(s) differ)" in out
    assert "system line 41 only in new: 'Current time: 2026-05-04T09:00:00Z'" in out
    # The cost increase, both figures and the percentage.
    cost = re.search(
        r"estimated cost rose ([\d.]+) % \((\$[\d.]+) → (\$[\d.]+); more than 5 % beyond what "
        r"rounding explains; rounding can move it by ±\$[\d.]+, ±[\d.]+ % \(5 request\(s\) × one "
        r"128-token unit × \$0\.137/M\)\)",
        out,
    )
    assert cost is not None, out
    assert float(cost.group(1)) > 5
    assert float(cost.group(3)[1:]) > float(cost.group(2)[1:])
    assert re.search(r"efficiency fell [\d.]+ pp \(100\.0 % → [\d.]+ %", out)


def test_the_regression_as_json_and_markdown(
    runs: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    markdown_file = tmp_path / "summary.md"
    status, out, err = cli(
        capsys,
        "compare",
        str(runs["base"]),
        str(runs["stamped"]),
        "--json",
        "--markdown-file",
        str(markdown_file),
    )
    assert status == 1, err
    document = json.loads(out)
    assert document["formatVersion"] == 2
    assert document["kind"] == "dsh-testkit/cache-compare"
    assert document["verdict"] == "regression"
    (scenario,) = document["scenarios"]
    assert scenario["verdict"] == "regression"
    assert scenario["matchedBy"] == "file"
    assert scenario["costChange"] > 5
    assert scenario["efficiencyChange"] < -2
    assert scenario["base"]["totals"]["lostTokens"] == 0
    assert scenario["new"]["totals"]["lostTokens"] > 0
    (cause,) = [c for c in scenario["causes"] if c["severity"] == "loss"]
    assert cause["code"] == "volatile-system-text"
    assert cause["change"] == "appeared"
    assert cause["newRequests"] == [1, 2, 3, 4, 5]
    assert "'2026-05-04T09:00:00Z' → '2026-05-04T09:00:01Z'" in cause["finding"]["detail"]
    assert scenario["firstChange"]["request"] == 1
    assert [p["same"] for p in scenario["requests"]] == [False] * 6
    markdown = markdown_file.read_text(encoding="utf-8")
    assert markdown.startswith("### Cache compare: regression\n")
    assert "| `base.trace.jsonl` | **regression** | 6 → 6 |" in markdown
    assert "<details open>" in markdown
    assert "- `volatile-system-text` appeared (loss) on #2–#6" in markdown
    # --markdown prints the same document on stdout.
    status, printed, _ = cli(
        capsys, "compare", str(runs["base"]), str(runs["stamped"]), "--markdown"
    )
    assert status == 1
    assert printed == markdown


@pytest.mark.slow
def test_a_refactor_that_keeps_every_request_byte_identical_is_identical(
    runs: dict[str, Path],
) -> None:
    assert request_bodies(runs["base"]) == request_bodies(runs["refactored"])  # truly a refactor
    result = run_cli("compare", str(runs["base"]), str(runs["refactored"]))
    assert result.returncode == 0, result.stderr
    assert (
        "verdict: identical (0 regressions, 0 improvements, 0 benign, 1 identical;" in result.stdout
    )
    assert "first changed request" not in result.stdout
    result = run_cli("compare", str(runs["base"]), str(runs["refactored"]), "--json")
    assert result.returncode == 0
    document = json.loads(result.stdout)
    (scenario,) = document["scenarios"]
    assert scenario["verdict"] == "identical"
    assert scenario["firstChange"] is None
    assert scenario["causes"] == []
    assert scenario["base"]["totals"] == scenario["new"]["totals"]


def test_removing_the_timestamp_is_an_improvement(
    runs: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, err = cli(capsys, "compare", str(runs["stamped"]), str(runs["base"]))
    assert status == 0, err
    assert "verdict: improvement" in out
    assert "volatile-system-text went-away (loss) was on #2–#6" in out
    assert re.search(r"estimated cost fell [\d.]+ %", out)
