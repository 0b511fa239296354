"""The README's loop example runs as printed (so it cannot rot)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _example(after_heading: str) -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split(after_heading, 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


def test_the_loop_example_runs_and_its_requests_rebuild_from_the_log(tmp_path: Path) -> None:
    code = _example("### Run an agent, then rebuild its requests from the log alone")
    assert code.count("\n") <= 20, "the issue asks for a short example"
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "It is sunny in Paris.\n"
    assert (tmp_path / "demo.jsonl").is_file()  # the log the example rebuilt its requests from
