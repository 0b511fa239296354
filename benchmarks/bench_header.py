"""6. Header codec: diff + apply time and encoded size for a one-line system prompt change.

A ``request/header-delta`` must stay small however long the system prompt is: a one-line edit
of a 10,000-line prompt encodes to about the same bytes as one of a 100-line prompt.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable

from dsh_core import (
    EpochHeader,
    LlmCallConfig,
    ToolSchema,
    apply_header_delta,
    diff_header,
    header_equals,
    plan_header_event,
)
from dsh_core._json_text import dumps_canonical

from ._common import Figure, Section, median

__all__ = ["run"]

LINES = (100, 1_000, 10_000)
QUICK_LINES = (10, 100, 1_000)
SIZE_GOAL = 1.1
"""size(longest) / size(shortest): "flat" up to the extra digits of larger line numbers."""

_CONFIG = LlmCallConfig(provider="deepseek", model="deepseek-chat")
_TOOLS = (
    ToolSchema.from_json(
        {
            "name": "read",
            "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        }
    ),
)


def _prompt(lines: int, changed: int | None = None) -> str:
    return "\n".join(
        f"Rule {i}: keep changes small and explain them{' (revised)' if i == changed else ''}."
        for i in range(lines)
    )


def _time(fn: Callable[[], object], iterations: int) -> float:
    """Median seconds of ``fn`` over ``iterations`` calls."""
    samples = []
    for _ in range(iterations):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return median(samples)


def _measure(lines: int) -> tuple[list[Figure], int]:
    """Figures for a prompt of ``lines`` lines, and the encoded delta's size in bytes."""
    old_text, new_text = _prompt(lines), _prompt(lines, lines // 2)

    def headers() -> tuple[EpochHeader, EpochHeader]:
        return (
            EpochHeader(config=_CONFIG, system=old_text, tools=_TOOLS),
            EpochHeader(config=_CONFIG, system=new_text, tools=_TOOLS),
        )

    old, new = headers()
    delta = diff_header(old, new)
    assert delta is not None
    assert header_equals(apply_header_delta(old, delta), new)
    size = len(dumps_canonical(delta.to_json()).encode("utf-8"))
    snapshot = len(dumps_canonical(new.to_json()).encode("utf-8"))
    iterations = max(50, 20_000 // lines)
    diff_pairs = iter([headers() for _ in range(iterations)])
    apply_bases = iter([headers()[0] for _ in range(iterations)])
    plan_pairs = iter([headers() for _ in range(iterations)])

    def plan() -> object:
        a, b = next(plan_pairs)
        return plan_header_event(a, b, first_of_instance=False)

    gc.collect()
    t_diff = _time(lambda: diff_header(*next(diff_pairs)), iterations)
    t_apply = _time(lambda: apply_header_delta(next(apply_bases), delta), iterations)
    t_plan = _time(plan, iterations)
    figures = [
        Figure(label=f"{lines:,} lines: diff_header", value=t_diff * 1e6, unit="µs"),
        Figure(label=f"{lines:,} lines: apply_header_delta", value=t_apply * 1e6, unit="µs"),
        Figure(label=f"{lines:,} lines: diff + apply", value=(t_diff + t_apply) * 1e6, unit="µs"),
        Figure(
            label=f"{lines:,} lines: plan_header_event (writer, verified)",
            value=t_plan * 1e6,
            unit="µs",
        ),
        Figure(
            label=f"{lines:,} lines: encoded delta",
            value=float(size),
            unit="bytes",
            note=f"full snapshot {snapshot:,} bytes",
        ),
    ]
    return figures, size


def run(quick: bool) -> Section:
    line_counts = QUICK_LINES if quick else LINES
    section = Section(
        key="header",
        title="Header codec: one-line change to the system prompt",
        method=(
            f"System prompts of {', '.join(f'{n:,}' for n in line_counts)} lines (~50 bytes "
            "each) plus one tool; the new header changes the middle line. Fresh `EpochHeader` "
            "objects per sample (their canonical text is cached per object, as in the loop, "
            "which builds a new header every step). Times are medians over repeated calls "
            "(at least 50): `diff_header`, `apply_header_delta`, and `plan_header_event` (the "
            "loop's writer: diff, JSON round trip, apply and verify). Encoded size = bytes of "
            "the delta's compact JSON, beside the full snapshot's."
        ),
    )
    sizes: dict[int, int] = {}
    for lines in line_counts:
        figures, sizes[lines] = _measure(lines)
        section.figures += figures
    first, last = line_counts[0], line_counts[-1]
    ratio = sizes[last] / sizes[first]
    section.figures.append(
        Figure(
            label=f"delta size({last:,} lines) / size({first:,} lines)",
            value=ratio,
            unit="×",
            goal=f"flat (≤ {SIZE_GOAL})",
            ok=ratio <= SIZE_GOAL,
        )
    )
    return section
