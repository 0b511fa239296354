"""``dsh-testkit compare`` over two folders of 1,000 traces each: seconds, and linear (t(2n) / t(n)).

Each folder holds one dsh-trace file per scenario (a test's traffic, as the pytest cache
baseline writes it): a four-request conversation with a 40-line system prompt and the
provider's usage, every scenario's texts distinct so nothing is shared across files. In the new
run one scenario in ten gained a timestamp in its system prompt (a regression to explain), one in
ten changed its last question (benign); the rest are identical. ``compare_runs`` reads both
folders, matches the scenarios, diagnoses both sides and compares them; the text report and the
JSON document are rendered too, as the command does.
"""

from __future__ import annotations

import gc
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from dsh_testkit.compare import compare_runs, comparison_text
from dsh_testkit.traces._file import TraceWriter

from ._common import Figure, Section, median, run_apart

__all__ = ["run"]

SIZES = (500, 1000)
QUICK_SIZES = (10, 20)
GOAL = 2.2
RULES = [f"Rule {i}: answer briefly, cite the file you read, keep it short." for i in range(40)]
QUESTIONS = ("What is in a.txt?", "And in b.txt?", "Compare them.", "Summarize.")


def _bodies(number: int, *, stamped: bool, reworded: bool) -> list[dict[str, Any]]:
    out = []
    history: list[dict[str, Any]] = []
    for step, question in enumerate(QUESTIONS):
        if reworded and step == len(QUESTIONS) - 1:
            question = "Summarize, briefly."
        history.append({"role": "user", "content": f"{question} (scenario {number})"})
        system = "\n".join(RULES) + f"\nProject {number}."
        if stamped:
            system = f"Now: 2026-05-04T09:00:{step:02d}Z\n{system}"
        out.append(
            {
                "model": "deepseek-v4-flash",
                "messages": [{"role": "system", "content": system}, *history],
            }
        )
        history.append({"role": "assistant", "content": f"Answer {step} for {number}."})
    return out


def _usage(step: int, *, stamped: bool) -> dict[str, int]:
    prompt = 600 + 40 * step
    hit = 0 if step == 0 or stamped else (prompt - 40) // 64 * 64
    return {"promptTokens": prompt, "hitTokens": hit, "completionTokens": 12}


def _write(path: Path, number: int, *, stamped: bool = False, reworded: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with TraceWriter(path, source="memory", scenario=f"tests/test_s.py::test_{number}") as writer:
        for step, body in enumerate(_bodies(number, stamped=stamped, reworded=reworded)):
            writer.append(
                {
                    "index": step,
                    "endpoint": "chat",
                    "url": "https://api.deepseek.com/chat/completions",
                    "conversation": None,
                    "started": None,
                    "firstByte": None,
                    "finished": None,
                    "status": 200,
                    "request": body,
                    "response": {"role": "assistant", "content": f"Answer {step} for {number}."},
                    "usage": _usage(step, stamped=stamped),
                }
            )


def _runs(root: Path, count: int) -> tuple[Path, Path]:
    base, new = root / f"base-{count}", root / f"new-{count}"
    for number in range(count):
        name = f"s{number // 100:02d}/test_{number:04d}.trace.jsonl"
        _write(base / name, number)
        _write(new / name, number, stamped=number % 10 == 3, reworded=number % 10 == 7)
    return base, new


def _once(base: Path, new: Path) -> tuple[float, float, dict[str, int]]:
    """Wall seconds, CPU seconds of this process, and the verdict counts."""
    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    result = compare_runs(base, new)
    comparison_text(result)
    json.dumps(result.to_json())
    return time.perf_counter() - start, time.process_time() - cpu, result.counts()


def run(quick: bool) -> Section:
    """The section, measured in a fresh Python (see ``_common.run_apart``)."""
    return run_apart("benchmarks.bench_compare", quick)


def _run_here(quick: bool) -> Section:
    sizes = QUICK_SIZES if quick else SIZES
    rounds = 1 if quick else 5
    root = Path(tempfile.mkdtemp(prefix="dsh-bench-compare-"))
    samples: dict[int, list[float]] = {n: [] for n in sizes}
    cpu: dict[int, list[float]] = {n: [] for n in sizes}
    counts: dict[int, dict[str, int]] = {}
    try:
        folders = {n: _runs(root, n) for n in sizes}
        _once(*folders[sizes[0]])  # warm-up: imports, the renderer's tables
        for r in range(rounds):
            for n in sizes if r % 2 == 0 else tuple(reversed(sizes)):
                seconds, cpu_seconds, counts[n] = _once(*folders[n])
                samples[n].append(seconds)
                cpu[n].append(cpu_seconds)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    small, large = sizes
    verdicts = ", ".join(f"{v} {k}" for k, v in counts[large].items() if v)
    section = Section(
        key="compare",
        title="Compare two folders of 1,000 traces",
        method=(
            f"Two folders (base and new) of {small} and of {large} dsh-trace files, one scenario "
            "each (a four-request conversation, 40-line system prompt, reported usage, texts "
            "distinct per scenario); in the new folder one scenario in ten has a timestamp in its "
            "system prompt and one in ten a reworded last question. `compare_runs(base, new)` "
            "(read, match, diagnose both sides, compare) plus the text report and the JSON "
            f"document, in a fresh Python after one warm-up; {rounds} rounds alternating the "
            f"sizes, medians. Verdicts at {large}: {verdicts}. The scaling figure is the median "
            "of per-round t(large) / t(small) in CPU time of the process (the work is "
            "single-threaded; on this shared machine wall time also carries other jobs' load), "
            "with the wall-time ratio beside it."
        ),
    )
    t_small, t_large = median(samples[small]), median(samples[large])
    section.figures.append(
        Figure(label=f"compare {large} + {large} traces", value=t_large, unit="s")
    )
    section.figures.append(
        Figure(label=f"compare {small} + {small} traces", value=t_small, unit="s")
    )
    section.figures.append(
        Figure(
            label=f"compare {large} + {large} traces, CPU time",
            value=median(cpu[large]),
            unit="s",
        )
    )
    section.figures.append(
        Figure(
            label=f"per scenario at {large}, CPU time",
            value=median(cpu[large]) / large * 1000,
            unit="ms",
        )
    )
    wall = median([b / a for a, b in zip(samples[small], samples[large], strict=True)])
    paired = median([b / a for a, b in zip(cpu[small], cpu[large], strict=True)])
    section.figures.append(
        Figure(
            label=f"t({large}) / t({small}), CPU time",
            value=paired,
            unit="×",
            goal=f"≤ {GOAL}",
            ok=paired <= GOAL,
            note=f"{large / small:.0f}× the traces; median of {rounds} paired ratios",
        )
    )
    section.figures.append(
        Figure(
            label=f"t({large}) / t({small}), wall time",
            value=wall,
            unit="×",
            note="shared machine: other jobs' load lands here",
        )
    )
    return section


if __name__ == "__main__":
    print(json.dumps(_run_here("--quick" in sys.argv).to_json()))
