"""A stateful property: whatever the loop goes through, the log explains every request it sent.

Random turns (text, parallel and exclusive tool calls, unknown tools, retries, EOF mid-stream,
empty streams, max-tokens), injects (idle, from middleware, from a tool), header changes (system,
tools, sampling), compactions, cancellations in each phase, and resumes from the JSONL file.
After every rule: the dev invariants never fired (they raise), the log is balanced, it reloads
from disk unchanged, and the reloaded reconstruction equals what was sent, byte for byte: every
dispatched request, one by one, equals ``reconstruct_request(saved, its step/start, attempt=…)``,
with the step and attempt taken from the live log when it was dispatched (not from the
reconstructor). A follow-up test runs the machine derandomized and asserts that it really
exercises header deltas, resumes and each kind of cancellation, not just by luck.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import shutil
import tempfile
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import Phase, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from dsh_core import (
    Agent,
    Compactor,
    Event,
    GenerateOptions,
    LlmCallConfig,
    ProviderError,
    RequestContext,
    RetryPolicy,
    Session,
    StreamChunk,
    ToolContext,
    TurnCancelledError,
    reconstruct_request,
    reconstruct_requests,
    tool,
)
from dsh_core._stream import BlockStart, TextDelta
from dsh_core.persistence import load_session, open_session, write_session
from dsh_core.scripted import (
    Response,
    ScriptedProvider,
    empty_response,
    error_response,
    hang_response,
    max_tokens_response,
    raise_response,
    text_response,
    tool_call,
    tool_call_response,
)

from ._loop_helpers import Clock, assert_balanced, options, read, write

THEN = st.sampled_from(["talk", "nothing"])
"""After a change or a resume: run a turn at once, or leave it to whatever rule comes next."""
STEP_KINDS = ("text", "parallel", "exclusive", "unknown", "nudge", "retry", "eof", "empty", "max")


COVERAGE: Counter[str] = Counter()
"""What the machine really did, summed over every example run in this process (the follow-up
test resets it, runs the machine itself and asserts floors)."""


@dataclasses.dataclass(frozen=True)
class Dispatched:
    """A loop request as the provider received it, located in the live log at that moment."""

    request: GenerateOptions
    step_start_seq: int
    """The last ``step/start`` logged when the request was dispatched."""
    attempt: int
    """How many ``llm/retry`` the step had logged by then (0 for the first attempt)."""


class MachineProvider:
    """Serves the turn's script to loop requests and a short summary to compaction calls."""

    def __init__(self, live_events: Callable[[], Sequence[Event]]) -> None:
        self.script: deque[Any] = deque()
        self.requests: list[GenerateOptions] = []
        self.dispatched: list[Dispatched] = []
        self.counter = 0
        self._live_events = live_events

    def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        self.requests.append(options)
        self.counter += 1
        if options.purpose is None:
            events = self._live_events()
            start = max(e.seq for e in events if e.type == "step/start")
            retries = sum(e.type == "llm/retry" for e in events[start:])
            self.dispatched.append(Dispatched(options, start, retries))
        if options.purpose == "compaction":
            entry: Any = text_response("They talked; nothing is pending.")
        elif self.script:
            entry = self.script.popleft()
        else:
            entry = text_response(f"spare answer {self.counter}")
        return ScriptedProvider(entry).stream(options)


@tool(concurrency_safe=True)
async def nudge(args: Any, ctx: ToolContext) -> str:
    assert ctx.inject is not None
    ctx.inject("a nudge from a tool")
    return "nudged"


@tool()
async def stopper(args: Any, ctx: ToolContext) -> str:
    ctx.cancel.cancel()
    return "stopping"


@tool(description="Appears and disappears.", concurrency_safe=True)
async def extra(args: Any, ctx: ToolContext) -> str:
    return "extra"


def _responses(kind: str, n: int) -> list[Response]:
    if kind == "text":
        return [text_response(f"answer {n}")]
    if kind == "parallel":
        return [
            tool_call_response(
                tool_call(f"p{n}a", "read", {"path": "a"}),
                tool_call(f"p{n}b", "read", {"path": "b"}),
            )
        ]
    if kind == "exclusive":
        return [
            tool_call_response(
                tool_call(f"x{n}", "write", {"text": "t"}), tool_call(f"r{n}", "read", {})
            )
        ]
    if kind == "unknown":
        return [tool_call_response(tool_call(f"u{n}", "nonexistent", "{bad json"))]
    if kind == "nudge":
        return [tool_call_response(tool_call(f"n{n}", "nudge"))]
    if kind == "retry":
        return [error_response("RATE_LIMIT", status=429)]
    if kind == "eof":
        partial = (BlockStart(index=0, block_type="text"), TextDelta(index=0, text="cut off"))
        return [raise_response("STREAM_CLOSED", status=None, after=partial)]
    if kind == "empty":
        return [empty_response()]
    return [
        max_tokens_response(
            "too long", partial_call=tool_call(f"m{n}", "write", {"text": "zzzzzz"})
        )
    ]


class LoopMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.tmp = Path(tempfile.mkdtemp(prefix="dsh-loop-"))
        self.path = self.tmp / "session.jsonl"
        self.clock = Clock()
        self.writer = write_session(self.path, Session.create("sm", clock=self.clock))
        self.provider = MachineProvider(lambda: self.agent.session.events)
        self.checked = 0
        self.mode = 0
        self.temperature: float | None = None
        self.with_extra = False
        self.compacting = False
        self.n = 0
        self.agent = self._agent(self.writer.session)

    def _agent(self, session: Session) -> Agent:
        agent = Agent(
            session,
            self.provider,
            options(
                system=("Stateful agent.", lambda ctx: f"Mode {self.mode}."),
                retry=RetryPolicy(max_retries=2),
            ),
            tools=[read, write, nudge, stopper],
        )
        if self.with_extra:
            agent.register_tool(extra)
        agent.add_middleware(self._sampling)
        if self.compacting:
            agent.add_pre_step(Compactor(threshold_tokens=0, keep_last=2))
        return agent

    def _sampling(self, config: LlmCallConfig, ctx: RequestContext) -> LlmCallConfig:
        return dataclasses.replace(config, temperature=self.temperature)

    def _run(self, prompt: str) -> None:
        async def go() -> None:
            # Cancellations and provider errors are expected: the log must still explain them.
            with contextlib.suppress(TurnCancelledError, ProviderError):
                await self.agent.run(prompt)

        self.loop.run_until_complete(go())

    # ------------------------------------------------------------------ rules

    @rule(
        kinds=st.lists(st.sampled_from(STEP_KINDS), min_size=1, max_size=4),
        inject=st.sampled_from(["none", "idle", "middleware"]),
    )
    def turn(self, kinds: list[str], inject: str) -> None:
        self.n += 1
        self.provider.script = deque(
            r for i, k in enumerate(kinds) for r in _responses(k, self.n * 10 + i)
        )
        remove = None
        if inject == "idle":
            self.agent.inject(f"idle note {self.n}")
        elif inject == "middleware":

            def injecting(config: LlmCallConfig, ctx: RequestContext) -> None:
                if ctx.step == 1:
                    ctx.inject("steering from middleware")

            remove = self.agent.add_middleware(injecting)
        self._run(f"prompt {self.n}")
        if remove is not None:
            remove()

    @rule()
    def cancel_in_pre_step(self) -> None:
        self._cancelled_turn("pre-step")

    @rule()
    def cancel_in_middleware(self) -> None:
        self._cancelled_turn("middleware")

    @rule()
    def cancel_in_stream(self) -> None:
        self._cancelled_turn("stream")

    @rule()
    def cancel_in_tools(self) -> None:
        self._cancelled_turn("tools")

    def _cancelled_turn(self, phase: str) -> None:
        self.n += 1
        agent = self.agent
        removers = []

        def cancel(*args: Any) -> None:
            agent.cancel()

        if phase == "pre-step":
            removers.append(agent.add_pre_step(cancel))
        elif phase == "middleware":
            removers.append(agent.add_middleware(cancel))
        elif phase == "stream":

            def hang_then_cancel(request: GenerateOptions) -> Response:
                self.loop.call_soon(agent.cancel)
                return hang_response()

            self.provider.script = deque([hang_then_cancel])
        else:
            self.provider.script = deque(
                [
                    tool_call_response(
                        tool_call(f"s{self.n}", "stopper"), tool_call(f"t{self.n}", "read", {})
                    )
                ]
            )
        self._run(f"doomed {self.n}")
        for remove in removers:
            remove()
        last = self.agent.session.events[-1]
        assert last.type == "turn/end" and last.data["reason"]["kind"] == "aborted"
        COVERAGE[f"cancel in {phase}"] += 1

    # One rule per hard case (header change, cancellation phase): hypothesis's swarm testing
    # switches whole rules off per example, so a case hidden behind a sampled argument of a
    # shared rule would be exercised by luck; as a rule of its own it keeps a steady share.

    @rule(then=THEN)
    def change_system(self, then: str) -> None:
        self._change_header("system", then)

    @rule(then=THEN)
    def change_tools(self, then: str) -> None:
        self._change_header("tools", then)

    @rule(then=THEN)
    def change_sampling(self, then: str) -> None:
        self._change_header("sampling", then)

    def _change_header(self, what: str, then: str) -> None:
        """Change the header; with ``talk`` the next request is sure to carry it as a delta (a
        fresh instance talks once first, or its anchoring snapshot would absorb the change)."""
        if then == "talk" and not self.agent.header_logged:
            self.provider.script = deque([text_response("before the change")])
            self._run("warm up")
        if what == "system":
            self.mode += 1
        elif what == "tools":
            self.with_extra = not self.with_extra
            if self.with_extra:
                self.agent.register_tool(extra)
            else:
                self.agent.unregister_tool("extra")
        else:
            self.temperature = None if self.temperature is not None else 0.25
        if then == "talk":
            self.provider.script = deque([text_response("after the change")])
            self._run(f"changed {what}")

    @initialize(compacting=st.booleans())
    def start(self, compacting: bool) -> None:
        if compacting:
            self.compacting = True
            self.agent.add_pre_step(Compactor(threshold_tokens=0, keep_last=2))

    @rule()
    def toggle_compaction(self) -> None:
        self.compacting = not self.compacting
        self.agent = self._agent(self._resume_session())

    @rule(then=THEN)
    def resume(self, then: str) -> None:
        self.agent = self._agent(self._resume_session())
        if then == "talk":
            self.provider.script = deque([text_response("resumed")])
            self._run("after the resume")

    def _resume_session(self) -> Session:
        self.agent.close()
        self.writer.close()
        self.writer = open_session(self.path, clock=self.clock)
        return self.writer.session

    # ------------------------------------------------------------------ invariants

    @invariant()
    def the_log_explains_every_request(self) -> None:
        session = self.agent.session
        assert_balanced(session)
        reloaded = load_session(self.path).events
        assert [e.to_json() for e in reloaded] == [e.to_json() for e in session.events]
        sent = [r for r in self.provider.requests if r.purpose is None]
        rebuilt = [r.request for r in reconstruct_requests(reloaded, session_id="sm")]
        assert [r.canonical_json() for r in rebuilt] == [r.canonical_json() for r in sent]
        # Each request sent since the last check, one by one, from its own step and attempt.
        for sent_one in self.provider.dispatched[self.checked :]:
            again = reconstruct_request(
                reloaded, sent_one.step_start_seq, attempt=sent_one.attempt, session_id="sm"
            )
            assert again.canonical_json() == sent_one.request.canonical_json()
            self._count(reloaded, sent_one)
        self.checked = len(self.provider.dispatched)
        # The writer never needs its safety valve for the loop's own header changes.
        assert not [e for e in reloaded if e.data.get("reason") == "fallback"]
        for kind in (
            "compact/summary",
            "compact/end",
            "llm/retry",
            "session/end-seed",
            "request/header-delta",
        ):
            if any(e.type == kind for e in reloaded):
                event(f"log has {kind}")

    @staticmethod
    def _count(events: Sequence[Event], sent: Dispatched) -> None:
        """Which hard case a checked request went through (its step's header event, a retry)."""
        COVERAGE["request"] += 1
        if sent.attempt:
            COVERAGE["retried request"] += 1
            return
        header = events[sent.step_start_seq + 1]  # the plan is logged right after step/start
        if header.type == "request/header-delta":
            for part in header.data:  # config, system, tools: one delta may carry several
                COVERAGE[f"request after a {part} delta"] += 1
        elif header.type == "request/header":
            COVERAGE[f"request after a {header.data['reason']} snapshot"] += 1
        if sent.request.messages and sent.request.messages[0].source.get("plugin") == "compact":
            COVERAGE["request over a compacted surface"] += 1

    def teardown(self) -> None:
        self.agent.close()
        self.writer.close()
        self.loop.run_until_complete(self.loop.shutdown_asyncgens())
        self.loop.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


TestLoopMachine = pytest.mark.slow(LoopMachine.TestCase)
TestLoopMachine.settings = settings(max_examples=40, stateful_step_count=12, deadline=None)


# Floors for a derandomized run of 60 examples: each hard case several times, not once by luck
# (about a third of the least seen over ten random runs of the same size).
FLOORS = {
    "request after a initial snapshot": 20,
    "request after a resume snapshot": 10,
    "request after a config delta": 5,
    "request after a system delta": 4,
    "request after a tools delta": 3,
    "retried request": 2,
    "request over a compacted surface": 10,
    "cancel in pre-step": 4,
    "cancel in middleware": 4,
    "cancel in stream": 4,
    "cancel in tools": 4,
}


@pytest.mark.slow
def test_the_machine_exercises_deltas_resumes_and_cancels_on_purpose() -> None:
    COVERAGE.clear()
    run_state_machine_as_test(
        LoopMachine,
        settings=settings(
            max_examples=60,
            stateful_step_count=12,
            deadline=None,
            derandomize=True,
            database=None,
            phases=[Phase.generate],
        ),
    )
    short = {case: COVERAGE[case] for case, floor in FLOORS.items() if COVERAGE[case] < floor}
    assert not short, (short, COVERAGE)
