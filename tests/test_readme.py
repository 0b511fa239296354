"""The README's dsh_core examples run as printed, run again in the same directory, and do what
the text around them says (tests/test_docs.py runs every README example once; this file checks
what each one leaves behind)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from dsh_core import load_session

ROOT = Path(__file__).resolve().parents[1]


def _example(after_heading: str) -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert after_heading in readme, f"README lost its section {after_heading!r}"
    section = readme.split(after_heading, 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def _run(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-W", "error", "-c", code],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_loop_example_runs_and_its_requests_rebuild_from_the_log(tmp_path: Path) -> None:
    code = _example("### Run an agent, then rebuild its requests from the log alone")
    assert code.count("\n") <= 20, "the issue asks for a short example"
    result = _run(code, tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "It is sunny in Paris.\n"
    assert (tmp_path / "demo.jsonl").is_file()  # the log the example rebuilt its requests from


def test_the_loop_example_runs_again_in_the_same_directory(tmp_path: Path) -> None:
    code = _example("### Run an agent, then rebuild its requests from the log alone")
    first = _run(code, tmp_path)
    assert first.returncode == 0, first.stderr
    first_types = [event.type for event in load_session(tmp_path / "demo.jsonl").events]
    second = _run(code, tmp_path)
    assert second.returncode == 0, second.stderr  # no FileExistsError on demo.jsonl
    assert second.stdout == "It is sunny in Paris.\n"
    # the second run replaced the log: one session's events, not two appended
    assert [event.type for event in load_session(tmp_path / "demo.jsonl").events] == first_types


def test_the_resume_and_fork_example_continues_the_file_and_forks_after_turn_1(
    tmp_path: Path,
) -> None:
    code = _example("### Resume and fork a stored session")
    for _ in range(2):  # re-runnable in the same directory
        result = _run(code, tmp_path)
        assert result.returncode == 0, result.stderr
        assert result.stdout == "Paris.\nRome.\nchat 4\n"
    stored = load_session(tmp_path / "chat.jsonl").events
    turn_ends = [event for event in stored if event.type == "turn/end"]
    assert len(turn_ends) == 2  # the resumed turn 2 landed in the same file; the fork did not
    assert not any("Rome." in str(event.data) for event in stored)
