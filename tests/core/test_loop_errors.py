"""Error paths of the loop: provider failures, retries, middleware errors, cancellation."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from dsh_core import (
    AgentError,
    GenerateOptions,
    LlmCallConfig,
    PreStepContext,
    ProviderError,
    RequestContext,
    RetryPolicy,
    ToolContext,
    TurnCancelledError,
    reconstruct_request,
    tool,
)
from dsh_core._stream import BlockStart, TextDelta
from dsh_core.scripted import (
    Response,
    ScriptExhaustedError,
    empty_response,
    error_response,
    hang_response,
    raise_response,
    text_response,
    tool_call,
    tool_call_response,
)

from ._loop_helpers import (
    Sleeps,
    assert_balanced,
    assert_reconstructs,
    make_agent,
    of_type,
    read,
    types,
)


def _end_reason(session: Any) -> dict[str, Any]:
    return of_type(session, "turn/end")[-1].data["reason"]


# -------------------------------------------------------------------------------- failures


async def test_a_non_retryable_error_finish_ends_the_turn_with_the_failure() -> None:
    agent, provider, session = make_agent(
        error_response("AUTH", status=401, retryable=False, message="bad key")
    )
    with pytest.raises(ProviderError, match="AUTH") as info:
        await agent.run("hi")
    assert info.value.failure.status == 401
    assert _end_reason(session) == {
        "kind": "error",
        "error": {"message": "bad key", "code": "AUTH", "status": 401},
    }
    assert not of_type(session, "assistant/message")
    assert_balanced(session)
    assert_reconstructs(session.events, provider.requests, "s1")


async def test_a_provider_raising_provider_error_logs_an_error_finish_chunk() -> None:
    agent, provider, session = make_agent(raise_response("AUTH", status=403, retryable=False))
    with pytest.raises(ProviderError):
        await agent.run("hi")
    (chunk,) = of_type(session, "assistant/chunk")
    assert chunk.data["chunk"]["reason"]["kind"] == "error"
    assert chunk.data["chunk"]["reason"]["failure"]["code"] == "AUTH"
    assert_balanced(session)
    assert_reconstructs(session.events, provider.requests, "s1")


async def test_a_provider_raising_anything_else_ends_the_turn_with_unknown() -> None:
    agent, provider, session = make_agent(Response(error=RuntimeError("socket on fire")))
    with pytest.raises(RuntimeError, match="socket on fire"):
        await agent.run("hi")
    reason = _end_reason(session)
    assert reason["error"] == {"message": "RuntimeError: socket on fire", "code": "UNKNOWN"}
    assert of_type(session, "assistant/chunk")[0].data["chunk"]["reason"]["kind"] == "error"
    assert_balanced(session)
    assert_reconstructs(session.events, provider.requests, "s1")


async def test_an_exhausted_script_is_a_clear_error_and_a_balanced_log() -> None:
    agent, provider, session = make_agent(text_response("only one"))
    await agent.run("1")
    with pytest.raises(ScriptExhaustedError, match=r"request #2 .* add one with provider.push"):
        await agent.run("2")
    assert_balanced(session)
    assert_reconstructs(session.events, provider.requests, "s1")


async def test_a_middleware_that_raises_ends_the_turn_before_any_request() -> None:
    def broken(config: LlmCallConfig, ctx: RequestContext) -> LlmCallConfig:
        raise ValueError("no config for you")

    agent, provider, session = make_agent(text_response("x"))
    agent.add_middleware(broken)
    with pytest.raises(ValueError, match="no config for you"):
        await agent.run("hi")
    assert provider.requests == []
    assert not of_type(session, "request/header")
    assert _end_reason(session)["error"]["message"] == "ValueError: no config for you"
    assert types(session)[-2:] == ["step/end", "turn/end"]
    assert_balanced(session)


async def test_a_raising_pre_step_hook_ends_the_turn_with_no_step() -> None:
    def hook(ctx: PreStepContext) -> None:
        raise KeyError("oops")

    agent, _provider, session = make_agent(text_response("x"))
    agent.add_pre_step(hook)
    with pytest.raises(KeyError):
        await agent.run("hi")
    assert types(session) == ["turn/start", "user/message", "turn/end"]


# -------------------------------------------------------------------------------- retries


async def test_a_retry_resends_the_byte_identical_request() -> None:
    wire: list[str] = []  # each attempt's request as JSON, taken when it was dispatched

    def capturing(response: Response) -> Any:
        def entry(request: GenerateOptions) -> Response:
            wire.append(request.canonical_json())
            return response

        return entry

    agent, provider, session = make_agent(
        capturing(error_response("RATE_LIMIT", status=429)),
        capturing(raise_response("SERVER", status=503)),
        capturing(text_response("finally")),
    )
    final = await agent.run("hi")
    assert final.text == "finally"
    first_json = wire[0]  # captured before the first retry was even planned
    assert '"messages":[{"id":"m1","role":"user"' in first_json
    assert wire == [first_json] * 3
    assert provider.requests[0] is provider.requests[2]  # resent as is, never rebuilt
    (step_start,) = of_type(session, "step/start")
    rebuilt = [
        reconstruct_request(session.events, step_start.seq, attempt=k, session_id="s1")
        for k in range(3)
    ]
    assert [r.canonical_json() for r in rebuilt] == wire  # the log owes all three attempts
    retries = of_type(session, "llm/retry")
    assert [e.data["retry"] for e in retries] == [1, 2]
    assert retries[0].data["failure"]["code"] == "RATE_LIMIT"
    assert agent.options.sleep.delays == [0.5, 1.0]  # type: ignore[attr-defined]
    (message,) = of_type(session, "assistant/message")
    assert message.source_event_seqs is not None
    last_attempt = [e.seq for e in of_type(session, "assistant/chunk")][
        -len(message.source_event_seqs) :
    ]
    assert list(message.source_event_seqs) == last_attempt
    assert_reconstructs(session.events, provider.requests, "s1")


async def test_retry_honors_retry_after_and_jitter() -> None:
    sleeps = Sleeps()
    agent, _, session = make_agent(
        error_response("RATE_LIMIT", status=429, retry_after_ms=1234),
        error_response("SERVER"),
        text_response("ok"),
        sleep=sleeps,
        random=lambda: 1.0,
        retry=RetryPolicy(base_delay_ms=1000, jitter=0.2),
    )
    await agent.run("hi")
    assert sleeps.delays == [1.234, 2.4]
    assert [e.data["delayMs"] for e in of_type(session, "llm/retry")] == [1234, 2400]


async def test_retries_are_bounded() -> None:
    agent, provider, session = make_agent(
        *(error_response("SERVER") for _ in range(3)), retry=RetryPolicy(max_retries=2)
    )
    with pytest.raises(ProviderError, match="SERVER"):
        await agent.run("hi")
    assert len(provider.requests) == 3
    assert len(of_type(session, "llm/retry")) == 2
    assert_balanced(session)
    assert_reconstructs(session.events, provider.requests, "s1")


async def test_an_eof_mid_stream_is_retried_and_the_partial_attempt_stays_uncited() -> None:
    partial = (BlockStart(index=0, block_type="text"), TextDelta(index=0, text="half"))
    agent, provider, session = make_agent(
        raise_response("STREAM_CLOSED", status=None, retryable=False, after=partial),
        text_response("whole"),
    )
    final = await agent.run("hi")
    assert final.text == "whole"
    chunks = of_type(session, "assistant/chunk")
    assert chunks[2].data["chunk"]["reason"]["failure"]["code"] == "STREAM_CLOSED"
    (message,) = of_type(session, "assistant/message")
    assert message.source_event_seqs is not None
    assert min(message.source_event_seqs) > chunks[2].seq
    assert_reconstructs(session.events, provider.requests, "s1")


async def test_an_empty_stream_becomes_a_retryable_empty_response() -> None:
    agent, provider, session = make_agent(empty_response(), text_response("ok"))
    await agent.run("hi")
    first = of_type(session, "assistant/chunk")[0].data["chunk"]
    assert first["reason"]["failure"]["code"] == "EMPTY_RESPONSE"
    assert len(provider.requests) == 2
    assert_reconstructs(session.events, provider.requests, "s1")


async def test_an_unexplained_aborted_finish_is_an_error_not_a_retry() -> None:
    from dsh_core import Finish, FinishReason

    agent, _provider, session = make_agent(
        Response(chunks=(Finish(reason=FinishReason(kind="aborted")),))
    )
    with pytest.raises(ProviderError, match="UNKNOWN"):
        await agent.run("hi")
    assert not of_type(session, "llm/retry")
    assert_balanced(session)


def test_retry_policy_rules() -> None:
    from dsh_core import LlmFailure

    policy = RetryPolicy(max_retries=1)
    assert policy.should_retry(LlmFailure(message="", code="HTTP_503", status=503), 0)
    # a classified code is the verdict: its status does not overrule it
    assert not policy.should_retry(LlmFailure(message="", code="X", status=503), 0)
    assert policy.should_retry(LlmFailure(message="", code="X", retryable=True), 0)
    assert not policy.should_retry(LlmFailure(message="", code="SERVER"), 1)
    assert not policy.should_retry(LlmFailure(message="", code="AUTH", status=401), 0)
    huge = LlmFailure(message="", code="RATE_LIMIT", retry_after_ms=10**9)
    assert policy.delay_ms(1, huge, lambda: 0.0) == policy.max_delay_ms
    plain = LlmFailure(message="", code="SERVER")
    assert policy.delay_ms(10, plain, lambda: 0.5) == policy.max_delay_ms
    assert policy.delay_ms(1, plain, lambda: 0.0) == 450
    with pytest.raises(AgentError, match="jitter"):
        RetryPolicy(jitter=2)
    with pytest.raises(AgentError, match="non-negative"):
        RetryPolicy(max_retries=-1)


# -------------------------------------------------------------------------------- cancellation


async def test_cancel_mid_stream_logs_the_interrupted_prefix_and_balances() -> None:
    agent, provider, session = make_agent(hang_response())
    task = asyncio.ensure_future(agent.run("hi"))
    while len(of_type(session, "assistant/chunk")) < 2:
        await asyncio.sleep(0)
    assert agent.cancel()
    with pytest.raises(TurnCancelledError) as info:
        await task
    assert info.value.turn == 1 and info.value.reason == "user"
    assert info.value.partial is not None and info.value.partial.text == "partial"
    chunks = of_type(session, "assistant/chunk")
    assert chunks[-1].data["chunk"]["reason"]["kind"] == "aborted"
    (message,) = of_type(session, "assistant/message")
    assert message.data["interrupted"] is True
    assert message.source_event_seqs is not None
    assert list(message.source_event_seqs) == [c.seq for c in chunks]
    assert _end_reason(session) == {"kind": "aborted", "reason": {"kind": "user"}}
    assert types(session)[-2:] == ["step/end", "turn/end"]
    assert_balanced(session)
    assert_reconstructs(session.events, provider.requests, "s1")
    assert not agent.cancel()  # nothing runs any more


async def test_cancel_before_the_first_chunk_logs_an_aborted_finish_and_no_message() -> None:
    agent, provider, session = make_agent(hang_response(after=()))
    task = asyncio.ensure_future(agent.run("hi"))
    while not provider.requests:
        await asyncio.sleep(0)
    agent.cancel("parent")
    with pytest.raises(TurnCancelledError, match="parent"):
        await task
    (chunk,) = of_type(session, "assistant/chunk")
    assert chunk.data["chunk"]["reason"]["kind"] == "aborted"
    assert not of_type(session, "assistant/message")
    assert _end_reason(session)["reason"] == {"kind": "parent"}
    assert_reconstructs(session.events, provider.requests, "s1")


async def test_cancel_in_middleware_stops_before_dispatch() -> None:
    def cancelling(config: LlmCallConfig, ctx: RequestContext) -> None:
        agent.cancel()  # the context cannot cancel; whoever holds the agent can

    agent, provider, session = make_agent(text_response("never"))
    agent.add_middleware(cancelling)
    with pytest.raises(TurnCancelledError):
        await agent.run("hi")
    assert provider.requests == []
    assert not of_type(session, "assistant/chunk")
    assert_balanced(session)


async def test_cancel_during_an_async_pre_step_hook_opens_no_step() -> None:
    started = asyncio.Event()

    async def slow_hook(ctx: PreStepContext) -> None:
        started.set()
        await asyncio.Event().wait()

    agent, _provider, session = make_agent(text_response("never"))
    agent.add_pre_step(slow_hook)
    task = asyncio.ensure_future(agent.run("hi"))
    await started.wait()
    agent.cancel()
    with pytest.raises(TurnCancelledError):
        await task
    assert types(session) == ["turn/start", "user/message", "turn/end"]


async def test_cancel_during_tools_commits_a_result_for_every_call() -> None:
    gate = asyncio.Event()

    @tool(concurrency_safe=True)
    async def fast(args: Any, ctx: ToolContext) -> str:
        return "fast done"

    @tool(concurrency_safe=True)
    async def stuck(args: Any, ctx: ToolContext) -> str:
        gate.set()
        await asyncio.Event().wait()
        return "never"

    @tool()
    async def later(args: Any, ctx: ToolContext) -> str:
        return "never started"

    agent, provider, session = make_agent(
        tool_call_response(
            tool_call("c1", "fast"), tool_call("c2", "stuck"), tool_call("c3", "later")
        ),
        tools=[fast, stuck, later],
    )
    task = asyncio.ensure_future(agent.run("go"))
    await gate.wait()
    await asyncio.sleep(0)
    agent.cancel()
    with pytest.raises(TurnCancelledError):
        await task
    results = {
        e.data["message"]["source"]["callId"]: e.data for e in of_type(session, "tool/result")
    }
    assert results["c1"]["message"]["content"][0]["content"][0]["text"] == "fast done"
    assert results["c2"]["error"] == {"name": "AbortError", "code": "ABORTED"}
    assert results["c3"]["error"] == {"name": "AbortError", "code": "ABORTED_BEFORE_DISPATCH"}
    assert [e.data["callId"] for e in of_type(session, "tool/call")] == ["c1", "c2", "c3"]
    assert list(results) == ["c1", "c2", "c3"]  # model order
    assert_balanced(session)
    assert_reconstructs(session.events, provider.requests, "s1")


async def test_a_tool_that_cancels_the_turn_gets_its_result_committed() -> None:
    @tool()
    async def stop(args: Any, ctx: ToolContext) -> str:
        ctx.cancel.cancel("hook")
        return "stopping"

    agent, _, session = make_agent(
        tool_call_response(tool_call("c1", "stop"), tool_call("c2", "read", {"path": "a"})),
        tools=[stop, read],
    )
    with pytest.raises(TurnCancelledError, match="hook"):
        await agent.run("go")
    results = of_type(session, "tool/result")
    assert results[0].data["message"]["content"][0]["content"][0]["text"] == "stopping"
    assert results[1].data["error"]["code"] == "ABORTED_BEFORE_DISPATCH"
    assert_balanced(session)


async def test_cancel_during_the_retry_backoff_beats_the_retry() -> None:
    waiting = asyncio.Event()

    async def forever(seconds: float) -> None:
        waiting.set()
        await asyncio.Event().wait()

    agent, provider, session = make_agent(
        error_response("SERVER"), text_response("never"), sleep=forever
    )
    task = asyncio.ensure_future(agent.run("hi"))
    await waiting.wait()
    agent.cancel()
    with pytest.raises(TurnCancelledError):
        await task
    assert len(provider.requests) == 1
    assert len(of_type(session, "llm/retry")) == 1
    assert_balanced(session)


async def test_cancelling_the_task_running_the_turn_balances_the_log() -> None:
    agent, provider, session = make_agent(hang_response())
    task = asyncio.ensure_future(agent.run("hi"))
    while len(of_type(session, "assistant/chunk")) < 2:
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert _end_reason(session) == {"kind": "aborted", "reason": {"kind": "disposed"}}
    assert of_type(session, "assistant/message")[0].data["interrupted"] is True
    assert_balanced(session)
    assert not agent.running
    assert_reconstructs(session.events, provider.requests, "s1")


async def test_queued_injections_survive_a_cancelled_turn() -> None:
    def injecting(config: LlmCallConfig, ctx: RequestContext) -> None:
        ctx.inject("keep me")
        agent.cancel()

    agent, provider, session = make_agent(text_response("never"), text_response("next"))
    remove = agent.add_middleware(injecting)
    with pytest.raises(TurnCancelledError):
        await agent.run("one")
    remove()
    kinds = types(session)
    assert kinds[-3:] == ["step/end", "user/message", "turn/end"]
    await agent.run("two")
    assert [m.text for m in provider.requests[0].messages] == ["one", "keep me", "two"]
    assert_reconstructs(session.events, provider.requests, "s1")


async def test_cancel_landing_after_a_tool_call_message_still_answers_every_call() -> None:
    agent, _provider, session = make_agent(
        tool_call_response(tool_call("c1", "read", {"path": "a"}), tool_call("c2", "read", {})),
        tools=[read],
    )

    def on_message(event: Any, _: Any) -> None:
        if event.type == "assistant/message":
            agent.cancel()

    session.add_listener(on_message)
    with pytest.raises(TurnCancelledError):
        await agent.run("go")
    results = of_type(session, "tool/result")
    assert [r.data["error"]["code"] for r in results] == ["ABORTED_BEFORE_DISPATCH"] * 2
    assert [r.data["callId"] for r in of_type(session, "tool/call")] == ["c1", "c2"]
    assert_balanced(session)


async def test_cancel_on_an_error_finish_beats_the_retry_and_logs_no_message() -> None:
    partial = (BlockStart(index=0, block_type="text"), TextDelta(index=0, text="half"))
    agent, provider, session = make_agent(
        error_response("SERVER", after=partial), text_response("never")
    )

    def on_chunk(event: Any, _: Any) -> None:
        if event.type == "assistant/chunk" and event.data["chunk"]["type"] == "finish":
            agent.cancel()

    session.add_listener(on_chunk)
    with pytest.raises(TurnCancelledError):
        await agent.run("hi")
    assert len(provider.requests) == 1
    assert not of_type(session, "llm/retry") and not of_type(session, "assistant/message")
    assert_balanced(session)


async def test_an_interrupted_message_keeps_the_usage_seen_so_far() -> None:
    from dsh_core import ReasoningDelta, TokenUsage, UsageChunk

    chunks = (
        BlockStart(index=0, block_type="reasoning"),
        ReasoningDelta(index=0, text="thinking"),
        UsageChunk(usage=TokenUsage(input_tokens=4, output_tokens=2)),
    )
    agent, provider, session = make_agent(Response(chunks=chunks, hang=True))
    task = asyncio.ensure_future(agent.run("hi"))
    while len(of_type(session, "assistant/chunk")) < 3:
        await asyncio.sleep(0)
    agent.cancel()
    with pytest.raises(TurnCancelledError) as info:
        await task
    (message,) = of_type(session, "assistant/message")
    assert message.data["usage"] == {"inputTokens": 4, "outputTokens": 2}
    assert info.value.partial is not None
    assert info.value.partial.content[0].type == "reasoning"
    assert_reconstructs(session.events, provider.requests, "s1")


async def test_a_plain_async_iterator_without_usage_or_finish_counts_as_stop() -> None:
    class Plain:
        def __init__(self, chunks: list[Any]) -> None:
            self.chunks = chunks

        def __aiter__(self) -> Plain:
            return self

        async def __anext__(self) -> Any:
            if not self.chunks:
                raise StopAsyncIteration
            return self.chunks.pop(0)

    class PlainProvider:
        def __init__(self) -> None:
            self.requests: list[Any] = []

        def stream(self, options: Any) -> Plain:
            self.requests.append(options)
            return Plain([BlockStart(index=0, block_type="text"), TextDelta(index=0, text="hey")])

    agent, _, session = make_agent()
    agent.provider = PlainProvider()
    final = await agent.run("hi")
    assert final.text == "hey"
    (message,) = of_type(session, "assistant/message")
    assert "usage" not in message.data
    assert_reconstructs(session.events, agent.provider.requests, "s1")


async def test_hooks_may_return_any_awaitable_and_a_pre_cancelled_one_is_closed() -> None:
    seen: list[int] = []

    def future_hook(ctx: PreStepContext) -> Any:
        seen.append(ctx.step)
        future = asyncio.get_running_loop().create_future()
        future.set_result(None)
        return future

    async def never() -> None:
        raise AssertionError("a cancelled turn must not run this")

    def cancelling_hook(ctx: PreStepContext) -> Any:
        ctx.cancel.cancel()
        return never()

    agent, provider, _session = make_agent(text_response("a"))
    agent.add_pre_step(future_hook)
    await agent.run("one")
    assert seen == [1]
    agent.add_pre_step(cancelling_hook)
    with pytest.raises(TurnCancelledError):
        await agent.run("two")
    assert len(provider.requests) == 1
