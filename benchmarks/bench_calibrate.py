"""Calibrate over a directory of 100 session logs: seconds, and linear (t(100) / t(50)).

The logs are copies of the reference logs that carry live cache figures, each copy made distinct
(every user text gets the copy's number), so the renderer's segment memo helps within a log, as
it does on real traffic, but never across copies. ``dsh_testkit.calibration.calibrate`` runs
over a folder of 50 and one of 100 such logs, with the real V4 tokenizer (the command's default)
and with the heuristic one.
"""

from __future__ import annotations

import gc
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dsh_testkit.calibration import CalibrationSettings, calibrate

from ._common import REPO_ROOT, Figure, Section, median, run_apart

__all__ = ["run"]

SIZES = (50, 100)
QUICK_SIZES = (4, 8)
GOAL = 2.2
REFERENCE_LOGS = REPO_ROOT.parent / "shared" / "fixtures" / "reference-logs"


def _sources() -> list[Path]:
    return sorted(
        p
        for p in REFERENCE_LOGS.glob("*/session*.jsonl")
        if '"cacheReadTokens"' in p.read_text(encoding="utf-8")
    )


def _tagged(value: Any, tag: str) -> Any:
    """``value`` with every text block's text suffixed by ``tag``."""
    if isinstance(value, dict):
        out = {k: _tagged(v, tag) for k, v in value.items()}
        if out.get("type") == "text" and isinstance(out.get("text"), str):
            out["text"] = out["text"] + tag
        return out
    if isinstance(value, list):
        return [_tagged(v, tag) for v in value]
    return value


def _copy(source: Path, target: Path, number: int) -> None:
    lines = source.read_text(encoding="utf-8").splitlines()
    out = [lines[0]]
    for line in lines[1:]:
        record = json.loads(line)
        if record.get("type") == "user/message":
            record = _tagged(record, f" (copy {number})")
        out.append(json.dumps(record, ensure_ascii=False))
    target.write_text("\n".join(out) + "\n", encoding="utf-8")


def _folder(root: Path, count: int, sources: list[Path]) -> Path:
    folder = root / f"logs-{count}"
    for number in range(count):
        source = sources[number % len(sources)]
        target = folder / f"{number:03d}-{source.parent.name}" / source.name
        target.parent.mkdir(parents=True)
        _copy(source, target, number)
    return folder


def _timed(fn: Callable[[], object]) -> float:
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def run(quick: bool) -> Section:
    """The section, measured in a fresh Python (:func:`run_apart`): a scaling ratio must not
    depend on the heap the earlier sections leave in the benchmark process (in it, t(100) /
    t(50) came out 2.04× in one run and 2.22× in another for the same code)."""
    return run_apart("benchmarks.bench_calibrate", quick)


def _run_here(quick: bool) -> Section:
    sources = _sources()
    section = Section(
        key="calibrate",
        title="Calibrate over a directory of logs",
        method="",
    )
    if not sources:
        section.measured = False
        section.notes.append(f"the reference logs are absent ({REFERENCE_LOGS})")
        return section
    sizes = QUICK_SIZES if quick else SIZES
    rounds = 1 if quick else 5
    root = Path(tempfile.mkdtemp(prefix="dsh-bench-calibrate-"))
    try:
        folders = {n: _folder(root, n, sources) for n in sizes}
        tokenizers = ("deepseek", "heuristic")
        samples: dict[tuple[str, int], list[float]] = {
            (t, n): [] for t in tokenizers for n in sizes
        }
        requests: dict[int, int] = {}
        for tokenizer in tokenizers:  # warm-up: the V4 vocabulary loads once per process
            calibrate([folders[sizes[0]]], settings=CalibrationSettings(tokenizer=tokenizer))  # type: ignore[arg-type]
        for r in range(rounds):
            order = sizes if r % 2 == 0 else tuple(reversed(sizes))
            for tokenizer in tokenizers:
                settings = CalibrationSettings(tokenizer=tokenizer)  # type: ignore[arg-type]
                for n in order:

                    def once(n: int = n, settings: CalibrationSettings = settings) -> None:
                        report = calibrate([folders[n]], settings=settings)
                        requests[n] = report.summary.requests

                    samples[(tokenizer, n)].append(_timed(once))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    small, large = sizes
    section.method = (
        f"Folders of {small} and {large} session logs, copies of the {len(sources)} reference "
        f"logs with live cache figures ({requests[small]} and {requests[large]} compared "
        "requests), each copy's user texts suffixed with its number so no tokenization is "
        "shared across copies. `calibrate()` over the folder (load, rebuild, render to the "
        "wire, tokenize, simulate, compare), one fresh renderer per call as the command uses, "
        "after one warm-up call per tokenizer (the V4 vocabulary loads once per process); "
        f"{rounds} rounds alternating the sizes, medians. The scaling figure is the median of "
        "per-round t(large) / t(small)."
    )
    for tokenizer in tokenizers:
        t_small = median(samples[(tokenizer, small)])
        t_large = median(samples[(tokenizer, large)])
        section.figures.append(
            Figure(label=f"calibrate {large} logs ({tokenizer} tokenizer)", value=t_large, unit="s")
        )
        section.figures.append(
            Figure(label=f"calibrate {small} logs ({tokenizer} tokenizer)", value=t_small, unit="s")
        )
        paired = median(
            [
                b / a
                for a, b in zip(
                    samples[(tokenizer, small)], samples[(tokenizer, large)], strict=True
                )
            ]
        )
        section.figures.append(
            Figure(
                label=f"t({large}) / t({small}) ({tokenizer} tokenizer)",
                value=paired,
                unit="×",
                goal=f"≤ {GOAL}",
                ok=paired <= GOAL,
                note=f"{large / small:.0f}× the logs; median of {rounds} paired ratios",
            )
        )
    return section


if __name__ == "__main__":
    print(json.dumps(_run_here("--quick" in sys.argv).to_json()))
