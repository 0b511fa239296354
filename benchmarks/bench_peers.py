"""10. The loop against its peers: harness cost per step, excluding the model.

Three agent loops run the same two-step tool turn (the model asks for ``read``, the tool
answers, the model answers in text) against a zero-latency model that only returns a canned
response:

- ours: ``dsh_core.Agent`` over a ``Session`` with ``ScriptedProvider`` (the answer in one
  chunk, the closest our streaming loop gets to a non-streaming model);
- pydantic-ai: ``Agent.run`` with ``FunctionModel`` and the history as ``message_history``;
- the OpenAI Agents SDK: ``Runner.run`` with a fake ``Model`` and the history as its input
  items (tracing off).

Each loop carries a history of about 10 and about 1,000 messages in its own format: ours is
written by our loop turn by turn; a peer's is one tool turn written by the peer's own loop,
repeated with fresh call ids (running a peer 250 times over a growing history would take minutes).
Per step = (time of one two-step turn) / 2. The six cases are interleaved in rotating order,
round by round, on one event loop; figures are medians.
"""

from __future__ import annotations

import asyncio
import cProfile
import dataclasses
import gc
import io
import pstats
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from dsh_core import Agent, Session
from dsh_core.scripted import ScriptedProvider, text_response, tool_call, tool_call_response

from ._common import Figure, Section, median, percentile
from ._history import SYSTEM_PROMPT, agent_options, tools

__all__ = ["run"]

SIZES = (10, 1_000)
QUICK_SIZES = (10, 60)
FLAT_GOAL = 1.5
ANSWER = "File 3 defines two helpers; both are covered by the tests."
PROMPT = "Read src/file_3.py and summarize it."
FILE_TEXT = "contents of src/file_3.py: " + "lorem ipsum dolor sit amet " * 8

Turn = Callable[[], Awaitable[None]]
"""Runs one two-step tool turn on a loop that already holds its history."""


@dataclass(slots=True)
class _Case:
    framework: str
    size: int
    new_turn: Callable[[], Awaitable[Turn]]
    """Builds a fresh agent holding the case's history; returns its turn runner."""
    messages: int = 0
    """The history's actual message count."""


# -- ours -------------------------------------------------------------------------------------


def _push_turn(provider: ScriptedProvider, n: int) -> None:
    provider.push(
        tool_call_response(tool_call(f"call-{n}", "read", {"path": "src/file_3.py"})),
        text_response(ANSWER, chunk_size=len(ANSWER)),
    )


async def _ours(size: int) -> tuple[Callable[[], Awaitable[Turn]], int]:
    session = Session.create("bench-peers", clock=lambda: 0)
    provider = ScriptedProvider(text_response("ok", chunk_size=2))
    agent = Agent(session, provider, agent_options(), tools=tools())
    await agent.run("hi")
    n = 0
    while len(session.message_view()) < size:
        _push_turn(provider, n)
        await agent.run(PROMPT)
        n += 1
    events = list(session.events)
    count = len(session.message_view())
    agent.close()

    async def new_turn() -> Turn:
        fresh = Session.create("bench-peers", events)
        scripted = ScriptedProvider()
        loop = Agent(fresh, scripted, agent_options(), tools=tools())
        counter = iter(range(10**9))

        async def turn() -> None:
            _push_turn(scripted, next(counter))
            await loop.run(PROMPT)

        return turn

    return new_turn, count


# -- pydantic-ai --------------------------------------------------------------------------------


async def _pydantic_ai(size: int) -> tuple[Callable[[], Awaitable[Turn]], int]:
    from pydantic_ai import Agent as PydanticAgent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    calls = iter(range(10**9))

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1].parts[-1]
        if last.part_kind == "tool-return":
            return ModelResponse(parts=[TextPart(ANSWER)])
        if last.part_kind == "user-prompt" and last.content == "hi":
            return ModelResponse(parts=[TextPart("ok")])
        return ModelResponse(
            parts=[
                ToolCallPart("read", {"path": "src/file_3.py"}, tool_call_id=f"call-{next(calls)}")
            ]
        )

    def new_agent() -> Any:
        agent = PydanticAgent(FunctionModel(model), instructions=SYSTEM_PROMPT)

        @agent.tool_plain
        def read(path: str) -> str:
            """Read a file."""
            return FILE_TEXT

        @agent.tool_plain
        def grep(pattern: str) -> str:
            """Search files for a pattern."""
            return "src/a.py:1: match"

        @agent.tool_plain
        def ls(path: str) -> str:
            """List a directory."""
            return "a.py\nb.py"

        return agent

    agent = new_agent()
    history = (await agent.run("hi")).all_messages()
    start = len(history)
    history = (await agent.run(PROMPT, message_history=history)).all_messages()
    turn_messages = history[start:]  # one tool turn as pydantic-ai writes it

    def renamed(message: Any, n: int) -> Any:
        parts = [
            dataclasses.replace(p, tool_call_id=f"call-h{n}") if hasattr(p, "tool_call_id") else p
            for p in message.parts
        ]
        return dataclasses.replace(message, parts=parts)

    n = 0
    while len(history) < size:
        history += [renamed(m, n) for m in turn_messages]
        n += 1

    async def new_turn() -> Turn:
        fresh = new_agent()
        state = {"history": list(history)}

        async def turn() -> None:
            done = await fresh.run(PROMPT, message_history=state["history"])
            state["history"] = done.all_messages()

        return turn

    return new_turn, len(history)


# -- OpenAI Agents SDK ----------------------------------------------------------------------


async def _openai_agents(size: int) -> tuple[Callable[[], Awaitable[Turn]], int]:
    from agents import Agent as SdkAgent
    from agents import ModelResponse, RunConfig, Runner, Usage, function_tool
    from agents.models.interface import Model
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    calls = iter(range(10**9))

    def message(text: str) -> ResponseOutputMessage:
        return ResponseOutputMessage(
            id="msg",
            content=[ResponseOutputText(text=text, type="output_text", annotations=[])],
            role="assistant",
            status="completed",
            type="message",
        )

    class FakeModel(Model):
        """Answers at once: a ``read`` call, then the text once the tool has answered."""

        async def get_response(
            self, system_instructions: Any, input: Any, *args: Any, **kw: Any
        ) -> Any:
            last = input[-1] if isinstance(input, list) else {"content": input}
            if last.get("type") == "function_call_output":
                output: list[Any] = [message(ANSWER)]
            elif last.get("content") == "hi":
                output = [message("ok")]
            else:
                n = next(calls)
                output = [
                    ResponseFunctionToolCall(
                        arguments='{"path": "src/file_3.py"}',
                        call_id=f"call-{n}",
                        name="read",
                        type="function_call",
                        id=f"fc-{n}",
                        status="completed",
                    )
                ]
            return ModelResponse(output=output, usage=Usage(), response_id=None)

        def stream_response(self, *args: Any, **kw: Any) -> Any:
            raise NotImplementedError("the benchmark runs non-streaming")

    @function_tool
    def read(path: str) -> str:
        """Read a file."""
        return FILE_TEXT

    @function_tool
    def grep(pattern: str) -> str:
        """Search files for a pattern."""
        return "src/a.py:1: match"

    @function_tool
    def ls(path: str) -> str:
        """List a directory."""
        return "a.py\nb.py"

    config = RunConfig(tracing_disabled=True)

    def new_agent() -> Any:
        return SdkAgent(
            name="bench",
            instructions=SYSTEM_PROMPT,
            model=FakeModel(),
            tools=[read, grep, ls],
        )

    agent = new_agent()
    history: list[Any] = (await Runner.run(agent, "hi", run_config=config)).to_input_list()
    start = len(history)
    prompt: Any = {"role": "user", "content": PROMPT}
    history = (await Runner.run(agent, [*history, prompt], run_config=config)).to_input_list()
    turn_items = history[start:]  # one tool turn as the SDK writes it

    def renamed(item: Any, n: int) -> Any:
        out = dict(item)
        if "call_id" in out:
            out["call_id"] = f"call-h{n}"
        if out.get("type") == "function_call":
            out["id"] = f"fc-h{n}"
        return out

    n = 0
    while len(history) < size:
        history += [renamed(item, n) for item in turn_items]
        n += 1

    async def new_turn() -> Turn:
        fresh = new_agent()
        state = {"history": list(history)}

        async def turn() -> None:
            prompt: Any = {"role": "user", "content": PROMPT}
            done = await Runner.run(fresh, [*state["history"], prompt], run_config=config)
            state["history"] = done.to_input_list()

        return turn

    return new_turn, len(history)


FRAMEWORKS: dict[str, Callable[[int], Awaitable[tuple[Callable[[], Awaitable[Turn]], int]]]] = {
    "dsh_core": _ours,
    "pydantic-ai": _pydantic_ai,
    "openai-agents": _openai_agents,
}


# -- measuring ------------------------------------------------------------------------------


async def _sample(case: _Case, turns: int) -> list[float]:
    """A fresh agent with the case's history, one untimed warm-up turn, then ``turns`` timed
    turns; per step = turn / 2."""
    turn = await case.new_turn()
    await turn()
    out: list[float] = []
    for _ in range(turns):
        start = time.perf_counter()
        await turn()
        out.append((time.perf_counter() - start) / 2)
    return out


async def _measure(
    cases: list[_Case], rounds: int, turns: int
) -> dict[tuple[str, int], list[float]]:
    samples: dict[tuple[str, int], list[float]] = {(c.framework, c.size): [] for c in cases}
    for r in range(rounds):
        shift = r % len(cases)
        for case in cases[shift:] + cases[:shift]:
            gc.collect()
            samples[(case.framework, case.size)] += await _sample(case, turns)
    return samples


async def _profile(case: _Case, turns: int) -> str:
    """Where our loop's step time goes: the top functions by own time over ``turns`` turns."""
    turn = await case.new_turn()
    await turn()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(turns):
        await turn()
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("tottime").print_stats(8)
    return out.getvalue()


async def _build(sizes: tuple[int, ...]) -> list[_Case]:
    cases: list[_Case] = []
    for size in sizes:
        for name, build in FRAMEWORKS.items():
            new_turn, count = await build(size)
            cases.append(_Case(framework=name, size=size, new_turn=new_turn, messages=count))
    return cases


def run(quick: bool) -> Section:
    sizes = QUICK_SIZES if quick else SIZES
    rounds, turns = (2, 2) if quick else (6, 3)

    async def main() -> tuple[list[_Case], dict[tuple[str, int], list[float]]]:
        cases = await _build(sizes)
        return cases, await _measure(cases, rounds, turns)

    cases, samples = asyncio.run(main())
    med = {key: median(values) for key, values in samples.items()}
    counts = {(c.framework, c.size): c.messages for c in cases}
    section = Section(
        key="peers",
        title="The loop against its peers",
        method=(
            "The same two-step tool turn (a `read` call, the tool's answer, a text answer) on "
            "three loops with a zero-latency model: ours (`Agent` + `ScriptedProvider`, the answer "
            "in one chunk), pydantic-ai (`Agent.run` + `FunctionModel`, history as "
            "`message_history`) and the OpenAI Agents SDK (`Runner.run` + a fake `Model`, history "
            "as input items, tracing off); three tools each. Histories of about "
            f"{' and '.join(f'{s:,}' for s in sizes)} messages in each loop's own format: ours "
            "written turn by turn by our loop, a peer's as one tool turn written by that peer's "
            "loop, repeated with fresh call ids. A sample builds a "
            f"fresh agent holding that history, runs one untimed warm-up turn, then times {turns} "
            f"turns with `perf_counter`; per step = turn / 2. {rounds} rounds, the six cases "
            f"interleaved in rotating order; figures are medians over {rounds * turns} samples."
        ),
    )
    small, large = sizes
    for size in sizes:
        for name in FRAMEWORKS:
            values = samples[(name, size)]
            section.figures.append(
                Figure(
                    label=f"{name}: step, {counts[(name, size)]:,}-message history",
                    value=med[(name, size)] * 1000,
                    unit="ms",
                    note=f"p90 {percentile(values, 90) * 1000:.3f} ms",
                )
            )
    slower: list[str] = []
    for size in sizes:
        for peer in ("pydantic-ai", "openai-agents"):
            ratio = med[("dsh_core", size)] / med[(peer, size)]
            if ratio >= 1:
                slower.append(f"{peer} at {size:,}")
            section.figures.append(
                Figure(
                    label=f"ours / {peer}, ~{size:,} messages",
                    value=ratio,
                    unit="×",
                    goal="< 1 (ours lowest)",
                    ok=ratio < 1,
                )
            )
    for name in FRAMEWORKS:
        ratio = med[(name, large)] / med[(name, small)]
        mine = name == "dsh_core"
        section.figures.append(
            Figure(
                label=f"{name}: step(~{large:,}) / step(~{small:,} messages)",
                value=ratio,
                unit="×",
                goal=f"≤ {FLAT_GOAL} (flat)" if mine else None,
                ok=ratio <= FLAT_GOAL if mine else None,
            )
        )
    if slower and not quick:
        ours = next(c for c in cases if c.framework == "dsh_core" and c.size == large)
        profile = asyncio.run(_profile(ours, 20))
        section.notes.append(
            f"A peer was faster ({', '.join(slower)}): our step at ~{large:,} messages, profiled "
            "(cProfile, top functions by own time):\n\n```\n" + profile.strip() + "\n```"
        )
    return section
