"""The README's cache-doctor example runs as printed and prints what the README shows."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
HEADING = "### Explain any agent's lost cache hits: the cache doctor"


@pytest.mark.slow
def test_the_cache_doctor_example_prints_what_the_readme_shows(tmp_path: Path) -> None:
    section = (ROOT / "README.md").read_text(encoding="utf-8").split(HEADING, 1)[1]
    code, after = section.split("```python\n", 1)[1].split("```\n", 1)
    shown = after.split("```\n", 1)[1].split("```", 1)[0]
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", code],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env={**os.environ, "COLUMNS": "120"},
    )
    assert result.returncode == 0, result.stderr
    printed = result.stdout.splitlines()
    expected = [line for line in shown.splitlines() if line.strip() and line.strip() != "…"]
    assert expected and all(line in printed for line in expected), (expected, printed)
    trace = (tmp_path / "agent.trace").read_text(encoding="utf-8")
    assert "sk-your-key" not in trace
