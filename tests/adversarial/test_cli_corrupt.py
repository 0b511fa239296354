"""The CLI on hostile logs, run as a user runs it: ``dsh-testkit audit`` and ``cache-report``
print the error on one line naming the file and line, exit 1 (2 for a file of no known kind),
and never print a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEADER = '{"type":"session","version":0,"id":"s1","createdAt":5}\n'
START = '{"type":"turn/start","seq":0,"time":7,"data":{"turn":1}}\n'


def _deep(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


CORRUPT: dict[str, tuple[bytes, int | None]] = {
    "type-is-a-list": ((HEADER + '{"type":["x"],"seq":0,"time":7,"data":{}}\n').encode(), 2),
    "step-is-a-string": (
        (
            HEADER + START + '{"type":"step/start","seq":1,"time":7,"data":{"turn":1,"step":"x"}}\n'
        ).encode(),
        3,
    ),
    "terminated-corrupt-last-line": ((HEADER + START + '{"type":"turn/e\n').encode(), 3),
    "garbled-final-newline": ((HEADER + START.rstrip("\n") + "x").encode(), 2),
    "nested-100000-deep": (
        (HEADER + '{"type":"x/y","seq":0,"time":7,"data":' + _deep(100_000) + "}\n").encode(),
        2,
    ),
    "not-utf8": (HEADER.encode() + b'{"type":"turn/start\xff","seq":0}\n', 2),
}


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dsh_testkit.cli", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CORRUPT))
def test_cache_report_prints_one_line_and_exits_1(tmp_path: Path, name: str) -> None:
    data, line = CORRUPT[name]
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(data)
    done = _run("cache-report", str(path))
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    first, *rest = done.stderr.splitlines()
    assert first.startswith(f"dsh-testkit cache-report: {path}:")
    if line is not None:
        assert f"line {line}:" in first
    assert rest == [f"run `dsh-testkit audit {path}` for details"]
    assert path.read_bytes() == data  # a report never touches the log


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", ["type-is-a-list", "step-is-a-string", "terminated-corrupt-last-line"]
)
def test_audit_reports_the_file_unreadable_and_exits_1(tmp_path: Path, name: str) -> None:
    data, line = CORRUPT[name]
    path = tmp_path / f"{name}.jsonl"
    path.write_bytes(data)
    done = _run("audit", "--json", str(path))
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    report = json.loads(done.stdout)
    (violation,) = report["violations"]
    assert violation["code"] == "unreadable"
    assert "\n" not in violation["message"] and str(path) in violation["message"]
    if line is not None:
        assert violation["line"] == line


@pytest.mark.slow
@pytest.mark.parametrize("command", ["audit", "cache-report"])
def test_a_file_that_is_not_a_log_at_all_is_one_line_too(tmp_path: Path, command: str) -> None:
    """Binary garbage is no known kind of recording: one line saying so, exit 2."""
    path = tmp_path / "garbage.jsonl"
    path.write_bytes(bytes(range(256)) * 4)
    done = _run(command, str(path))
    assert done.returncode == 2
    assert "Traceback" not in done.stderr + done.stdout
    assert len(done.stderr.strip().splitlines()) == 1
    assert done.stderr.startswith(f"dsh-testkit {command}: {path}: not a session log or any ")
