"""What every benchmark shares: result values, robust statistics, the machine description.

Timings use ``time.perf_counter``. These machines are shared and noisy, so a figure is a median
over many samples, and every comparison is a ratio of medians measured side by side in one run,
with the compared cases interleaved round by round (a noisy minute hurts both sides alike).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "REPO_ROOT",
    "Figure",
    "Section",
    "machine_info",
    "median",
    "percentile",
    "run_apart",
]

REPO_ROOT = Path(__file__).resolve().parents[1]
"""The checkout this benchmark belongs to."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Figure:
    """One reported number, with its goal and verdict when it has one."""

    label: str
    """What was measured, e.g. ``step time, 10,000 events (invariants off)``."""
    value: float | None
    """``None`` when the figure could not be measured in this run."""
    unit: str
    """``ms``, ``×``, ``tokens/s``, ``bytes``, …"""
    goal: str | None = None
    """The goal as written in the issue, e.g. ``≤ 1.5``; ``None`` for an informational figure."""
    ok: bool | None = None
    """Whether the goal is met (``None`` when there is no goal or no value)."""
    note: str = ""
    """A short qualifier shown beside the figure (sample count, spread, …)."""

    def to_json(self) -> dict[str, object]:
        return {
            "label": self.label,
            "value": self.value,
            "unit": self.unit,
            "goal": self.goal,
            "ok": self.ok,
            "note": self.note,
        }


@dataclass(slots=True, kw_only=True)
class Section:
    """The results of one benchmark (one numbered item of the issue)."""

    key: str
    """Stable id, e.g. ``loop``; ``--only`` selects sections by it."""
    title: str
    method: str
    """How it was measured, in one paragraph of Markdown."""
    figures: list[Figure] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    """Findings: why a goal was missed, what a profile showed."""
    measured: bool = True
    """False when the code under test is not available yet ("not yet measured")."""
    seconds: float = 0.0
    """Wall time the benchmark took."""

    def to_json(self) -> dict[str, object]:
        return {
            "key": self.key,
            "title": self.title,
            "method": self.method,
            "measured": self.measured,
            "seconds": round(self.seconds, 2),
            "figures": [f.to_json() for f in self.figures],
            "notes": list(self.notes),
        }


def run_apart(module: str, quick: bool) -> Section:
    """Run a benchmark module's section in a fresh Python (``python -m MODULE [--quick]``, which
    prints its :meth:`Section.to_json`), so its timings do not depend on the heap and threads
    the earlier sections left in this process."""
    done = subprocess.run(
        [sys.executable, "-m", module, *(["--quick"] if quick else [])],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{module} failed ({done.returncode}):\n{done.stderr[-4000:]}")
    data = json.loads(done.stdout)
    return Section(
        key=data["key"],
        title=data["title"],
        method=data["method"],
        measured=data["measured"],
        seconds=data["seconds"],
        figures=[Figure(**f) for f in data["figures"]],
        notes=list(data["notes"]),
    )


def median(samples: Sequence[float]) -> float:
    return statistics.median(samples)


def percentile(samples: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100), nearest-rank on the sorted samples."""
    ordered = sorted(samples)
    if not ordered:
        raise ValueError("percentile of no samples")
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def _cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8")
    except OSError:
        return platform.processor() or "unknown"
    for line in text.splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def _git_revision() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO_ROOT), "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


def machine_info() -> dict[str, str]:
    """nproc, the CPU model from /proc/cpuinfo, the Python version, the OS and the revision."""
    try:
        nproc = len(os.sched_getaffinity(0))
    except AttributeError:
        nproc = os.cpu_count() or 0
    return {
        "nproc": str(nproc),
        "cpu": _cpu_model(),
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "os": f"{platform.system()} {platform.release()}",
        "revision": _git_revision(),
        "executable": os.path.relpath(sys.executable, REPO_ROOT)
        if sys.executable.startswith(str(REPO_ROOT))
        else sys.executable,
    }
