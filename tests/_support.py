"""Helpers shared by test modules (plain module: conftest.py keeps only fixtures and hooks)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REFERENCE_LOGS = (
    Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "reference-logs"
)
"""Real logs of the reference harness, beside the checkout (absent on some machines)."""


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``dsh-testkit ARGS…`` in a fresh Python, as a user runs it (text output captured)."""
    return subprocess.run(
        [sys.executable, "-m", "dsh_testkit.cli", *args],
        cwd=cwd or Path(__file__).resolve().parents[1],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
