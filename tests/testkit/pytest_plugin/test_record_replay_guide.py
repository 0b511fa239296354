"""The record-replay guide's pytest examples, run verbatim as a user's test files: recorded
once (through the in-process mock, the loopback mock server and the gateway's rewritten
origin), replayed with ``CI=true``, and refused when CI is asked to record."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

pytest_plugins = ["pytester"]

GUIDE = Path(__file__).resolve().parents[3] / "docs" / "guides" / "record-replay.md"
BLOCK = re.compile(r"<!-- no-run: ([^\n]*?) -->\n```python\n(.*?)^```", re.S | re.M)
INI = """
[pytest]
addopts = --strict-markers -p no:cacheprovider
filterwarnings = error
asyncio_default_fixture_loop_scope = function
"""


def guide_blocks() -> list[str]:
    text = GUIDE.read_text(encoding="utf-8")
    return [
        code
        for reason, code in BLOCK.findall(text)
        if "tests/testkit/pytest_plugin/test_record_replay_guide.py" in reason
    ]


def test_the_guide_names_this_test_for_its_examples() -> None:
    assert len(guide_blocks()) == 2


@pytest.mark.slow
@pytest.mark.parametrize("index", [0, 1], ids=["mock-patterns", "cassette-config"])
def test_the_guide_examples_record_then_replay_in_ci(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, index: int
) -> None:
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    monkeypatch.delenv("DEEPSEEK_BASE_URL", raising=False)
    pytester.makefile(".ini", pytest=INI)
    pytester.makepyfile(test_example=guide_blocks()[index])
    recording = pytester.runpytest("--dsh-record-mode=once")
    recording.assert_outcomes(passed=2 if index == 0 else 1)
    folder = pytester.path / "cassettes" / "test_example"
    recorded = {p.name: p.read_bytes() for p in folder.iterdir()}
    monkeypatch.setenv("CI", "true")
    replay = pytester.runpytest()
    replay.assert_outcomes(passed=2 if index == 0 else 1)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == recorded
    refused = pytester.runpytest("--dsh-record-mode=once")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["ERROR: record mode 'once' * is refused because CI=true*"])
    if index == 0:
        loopback = yaml.safe_load(recorded["test_on_loopback.yaml"])
        assert loopback["interactions"][0]["request"]["uri"] == "http://127.0.0.1/chat/completions"
        assert "dsh_mock_server" in loopback["metadata"]["recordedAgainst"]
        in_process = yaml.safe_load(recorded["test_in_process.yaml"])
        assert in_process["interactions"][0]["request"]["uri"] == (
            "https://api.deepseek.com/chat/completions"
        )
    else:
        text = recorded["test_through_the_gateway.yaml"].decode("utf-8")
        assert "uri: https://api.deepseek.com/chat/completions" in text
        assert "x-team-token: <REDACTED>" in text and "team-0123456789" not in text
        assert "x-request-start" not in text
