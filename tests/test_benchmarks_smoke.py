"""`make bench` must keep working: a quick run (toy sizes, nothing written) exits cleanly.

Timings are not asserted here (benchmarks measure, tests assert behaviour): only that every
section runs and reports its figures.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_every_benchmark_section_runs_in_quick_mode() -> None:
    result = subprocess.run(
        [sys.executable, "benchmarks/run.py", "--quick", "--no-write"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    for title in (
        "1. Loop overhead per step",
        "2. Reconstruction and audit scaling",
        "3. Prefix-cache simulator throughput",
        "4. Cassette replay",
        "5. Mock server",
        "6. Header codec",
        "7. Cache efficiency",
        "8. Recording proxy",
        "9. Trace analysis",
        "10. The loop against its peers",
        "11. Calibrate",
        "12. The Cache Explorer",
        "13. Compare two folders",
        "14. Cache doctor: verdict accuracy",
    ):
        assert title in result.stdout, title
