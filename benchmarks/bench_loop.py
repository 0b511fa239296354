"""1. Loop overhead per step at history lengths of 10, 1,000 and 10,000 events.

Append, derive, the header check and the freeze must not re-walk history, so the marginal cost
of one more step should not depend on how long the log already is (goal: step(10k) / step(10)
≤ 1.5). The dev-mode invariants (request == reconstruction, log well-formed) are measured on and
off at each length.
"""

from __future__ import annotations

import asyncio
import gc
import time
from dataclasses import dataclass

from dsh_core import Agent, Event, Session
from dsh_core.scripted import ScriptedProvider

from ._common import Figure, Section, median, percentile
from ._history import agent_options, build_log, cut_at_turn, push_tool_turn, tools

__all__ = ["run"]

TARGETS = (10, 1_000, 10_000)
QUICK_TARGETS = (10, 200, 400)
GOAL = 1.5


@dataclass(frozen=True, slots=True)
class _Case:
    target: int
    events: list[Event]
    invariants: bool


async def _sample(case: _Case, turns: int) -> list[float]:
    """Seed a fresh session with the case's log, warm up one turn, then time ``turns`` turns.

    Each timed turn is a two-step tool turn (tool call, then the answer): the figure is its time
    divided by two. The warm-up turn pays the one-off costs of a resumed session (the first
    message derivation over the seed, the ``resume`` header snapshot, the invariants' first fold).
    """
    session = Session.create("bench-loop", case.events)
    provider = ScriptedProvider()
    agent = Agent(session, provider, agent_options(invariants=case.invariants), tools=tools())
    push_tool_turn(provider, -1)
    await agent.run("warm up")
    out: list[float] = []
    for n in range(turns):
        push_tool_turn(provider, n)
        start = time.perf_counter()
        await agent.run(f"Read src/file_{n}.py and summarize it.")
        out.append((time.perf_counter() - start) / 2)
    agent.close()
    return out


async def _measure(
    cases: list[_Case], rounds: int, turns: int
) -> dict[tuple[int, bool], list[float]]:
    samples: dict[tuple[int, bool], list[float]] = {(c.target, c.invariants): [] for c in cases}
    for r in range(rounds):
        # Rotate the order every round so no case always runs right after the same neighbour.
        shift = r % len(cases)
        for case in cases[shift:] + cases[:shift]:
            gc.collect()
            samples[(case.target, case.invariants)] += await _sample(case, turns)
    return samples


def run(quick: bool) -> Section:
    targets = QUICK_TARGETS if quick else TARGETS
    rounds, turns = (3, 2) if quick else (20, 4)
    log = build_log(max(targets))
    bases = {t: cut_at_turn(log, t) for t in targets}
    cases = [_Case(t, bases[t], inv) for t in targets for inv in (False, True)]
    samples = asyncio.run(_measure(cases, rounds, turns))
    med = {key: median(values) for key, values in samples.items()}
    section = Section(
        key="loop",
        title="Loop overhead per step",
        method=(
            "Histories are written by the real loop (`Agent` + `ScriptedProvider`, zero latency: "
            "the provider only yields between chunks) and cut at turn boundaries near "
            f"{', '.join(f'{t:,}' for t in targets)} events. Each sample seeds a fresh "
            "`Session` with that log, runs one untimed warm-up turn (the one-off resume costs), "
            f"then times {turns} two-step tool turns (a `read` call, then a streamed answer; "
            "about 33 events each) with `perf_counter`; per step = turn / 2. "
            f"{rounds} rounds, the cases interleaved in rotating order; figures are medians over "
            f"{rounds * turns} samples per case."
        ),
    )
    short, long_ = targets[0], targets[-1]
    for inv in (False, True):
        mode = "invariants on" if inv else "invariants off"
        for t in targets:
            values = samples[(t, inv)]
            section.figures.append(
                Figure(
                    label=f"step, {len(bases[t]):,}-event history ({mode})",
                    value=med[(t, inv)] * 1000,
                    unit="ms",
                    note=f"p90 {percentile(values, 90) * 1000:.3f} ms",
                )
            )
        ratio = med[(long_, inv)] / med[(short, inv)]
        section.figures.append(
            Figure(
                label=f"step({len(bases[long_]):,}) / step({len(bases[short]):,}), {mode}",
                value=ratio,
                unit="×",
                goal=None if inv else f"≤ {GOAL}",
                ok=None if inv else ratio <= GOAL,
            )
        )
    for t in targets:
        section.figures.append(
            Figure(
                label=f"invariants on / off, {len(bases[t]):,}-event history",
                value=med[(t, True)] / med[(t, False)],
                unit="×",
            )
        )
    return section
