"""The agent loop: step order, header events, middleware, inject, finish reasons, resume, fork."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import pytest

from dsh_core import (
    Agent,
    AgentError,
    AgentOptions,
    ForkError,
    HeaderError,
    LlmCallConfig,
    MessageView,
    PreStepContext,
    RequestContext,
    Session,
    TextBlock,
    ToolContext,
    ToolRegistry,
    ToolResultBlock,
    fork,
    reconstruct_requests,
    tool,
    user_message,
)
from dsh_core.scripted import (
    ScriptedProvider,
    max_tokens_response,
    reasoning_response,
    text_response,
    tool_call,
    tool_call_response,
)

from ._loop_helpers import (
    assert_balanced,
    assert_reconstructs,
    make_agent,
    new_session,
    of_type,
    options,
    read,
    tool_names,
    types,
    write,
)


async def test_one_text_turn_logs_the_canonical_order() -> None:
    agent, provider, session = make_agent(text_response("hello"), system="You help.")
    message = await agent.run("hi")
    assert message.text == "hello" and message.role == "assistant"
    kinds = types(session)
    assert kinds[:4] == ["turn/start", "user/message", "step/start", "request/header"]
    assert kinds[-3:] == ["assistant/message", "step/end", "turn/end"]
    assert set(kinds[4:-3]) == {"assistant/chunk"}
    (end,) = of_type(session, "turn/end")
    assert end.data == {"turn": 1, "reason": {"kind": "completed"}}
    (header,) = of_type(session, "request/header")
    assert header.data["reason"] == "initial"
    assert header.data["header"] == {
        "config": {"provider": "scripted", "model": "m1"},
        "system": "You help.",
    }
    (request,) = provider.requests
    assert request.session_id == "s1" and request.purpose is None
    assert [m.text for m in request.messages] == ["hi"]
    assert_reconstructs(session.events, provider.requests, "s1")


async def test_assistant_message_cites_its_chunks_and_carries_usage() -> None:
    agent, _, session = make_agent(reasoning_response("think", "answer", usage=(7, 3)))
    message = await agent.run("q")
    assert [b.type for b in message.content] == ["reasoning", "text"]
    (event,) = of_type(session, "assistant/message")
    chunks = [e.seq for e in of_type(session, "assistant/chunk")]
    assert event.source_event_seqs is not None and list(event.source_event_seqs) == chunks
    assert event.data["usage"] == {"inputTokens": 7, "outputTokens": 3}
    assert event.data["message"]["source"] == {
        "kind": "model",
        "provider": "scripted",
        "model": "m1",
    }


async def test_a_tool_turn_runs_two_steps_and_messages_extend() -> None:
    agent, provider, session = make_agent(
        tool_call_response(tool_call("c1", "read", {"path": "a"}), text="let me look"),
        text_response("it says hi"),
        tools=[read],
    )
    final = await agent.run("what is in a?")
    assert final.text == "it says hi"
    first, second = provider.requests
    assert list(second.messages[: len(first.messages)]) == list(first.messages)
    assert [m.role for m in second.messages] == ["user", "assistant", "user"]
    result = second.messages[2].content[0]
    assert isinstance(result, ToolResultBlock) and isinstance(result.content[0], TextBlock)
    assert result.content[0].text == "contents of a"
    assert len(of_type(session, "request/header")) == 1  # nothing changed in step 2
    assert_balanced(session)
    assert_reconstructs(session.events, provider.requests, "s1")


async def test_requests_are_deep_immutable_and_share_the_snapshot() -> None:
    agent, provider, _ = make_agent(text_response("x"), tools=[read])
    await agent.run("hi")
    (request,) = provider.requests
    assert isinstance(request.messages, MessageView)
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.model = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        request.messages[0].source["kind"] = "x"
    with pytest.raises(TypeError):
        request.tools[0].parameters["type"] = "x"  # type: ignore[index]
    assert not hasattr(request.messages, "append")


async def test_the_snapshot_does_not_grow_with_later_appends() -> None:
    agent, provider, _ = make_agent(text_response("one"), text_response("two"))
    await agent.run("a")
    await agent.run("b")
    first, second = provider.requests
    assert len(first.messages) == 1  # the view taken at step 1 never saw later messages
    assert [m.text for m in second.messages] == ["a", "one", "b"]


async def test_system_sections_render_every_step_and_a_change_is_logged() -> None:
    calls: list[tuple[int, int]] = []

    def clock_section(ctx: Any) -> str:
        calls.append((ctx.turn, ctx.step))
        return f"Turn {ctx.turn}."

    agent, provider, session = make_agent(
        tool_call_response(tool_call("c1", "read", {"path": "a"})),
        text_response("done"),
        text_response("again"),
        system=("Static part.", clock_section, lambda ctx: None, ""),
        tools=[read],
    )
    await agent.run("one")
    await agent.run("two")
    assert calls == [(1, 1), (1, 2), (2, 1)]
    headers = [e for e in session.events if e.type.startswith("request/header")]
    assert [e.type for e in headers] == ["request/header", "request/header-delta"]
    assert provider.requests[0].system == "Static part.\n\nTurn 1."
    assert provider.requests[2].system == "Static part.\n\nTurn 2."
    assert_reconstructs(session.events, provider.requests, "s1")


async def test_identical_rerender_logs_nothing() -> None:
    agent, _, session = make_agent(
        text_response("a"), text_response("b"), text_response("c"), system=lambda ctx: "same"
    )
    for prompt in ("1", "2", "3"):
        await agent.run(prompt)
    assert len([e for e in session.events if e.type.startswith("request/header")]) == 1


async def test_snapshots_only_writes_change_snapshots() -> None:
    agent, _, session = make_agent(
        text_response("a"),
        text_response("b"),
        system=lambda ctx: f"turn {ctx.turn}",
        snapshots_only=True,
    )
    await agent.run("1")
    await agent.run("2")
    reasons = [e.data["reason"] for e in of_type(session, "request/header")]
    assert reasons == ["initial", "change"]
    assert not of_type(session, "request/header-delta")


async def test_a_system_section_must_render_a_string() -> None:
    agent, provider, session = make_agent(text_response("x"), system=lambda ctx: 42)
    with pytest.raises(AgentError, match="must render to a str or None"):
        await agent.run("hi")
    assert provider.requests == []
    assert types(session) == ["turn/start", "user/message", "turn/end"]
    assert of_type(session, "turn/end")[0].data["reason"]["kind"] == "error"


async def test_tool_added_mid_list_is_a_logged_header_change() -> None:
    @tool(description="Beta.")
    async def beta(args: Any, ctx: Any) -> str:
        return "b"

    agent, provider, session = make_agent(
        text_response("a"), text_response("b"), tools=[read, write]
    )
    await agent.run("1")
    agent.register_tool(beta)
    await agent.run("2")
    assert tool_names(provider.requests[0]) == ["read", "write"]
    assert tool_names(provider.requests[1]) == ["beta", "read", "write"]
    (delta,) = of_type(session, "request/header-delta")
    assert delta.data["tools"]["added"][0]["index"] == 0
    assert_reconstructs(session.events, provider.requests, "s1")


async def test_tool_order_option_puts_listed_tools_first() -> None:
    agent, provider, _ = make_agent(
        text_response("a"), tools=[read, write], tool_order=("write", "missing")
    )
    await agent.run("1")
    assert tool_names(provider.requests[0]) == ["write", "read"]


async def test_middleware_changes_sampling_and_the_header_records_it() -> None:
    seen: list[LlmCallConfig] = []

    def sampling(config: LlmCallConfig, ctx: RequestContext) -> LlmCallConfig:
        seen.append(config)
        if ctx.turn == 2:
            return dataclasses.replace(config, temperature=0.5, max_tokens=99, stop=("<END>",))
        return config

    agent, provider, session = make_agent(text_response("a"), text_response("b"))
    agent.add_middleware(sampling)
    await agent.run("1")
    await agent.run("2")
    assert provider.requests[1].temperature == 0.5
    assert provider.requests[1].max_tokens == 99
    assert provider.requests[1].stop == ("<END>",)
    assert provider.requests[0].temperature is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        seen[0].model = "x"  # type: ignore[misc]
    assert of_type(session, "request/header-delta")[0].data["config"]["temperature"] == 0.5
    assert_reconstructs(session.events, provider.requests, "s1")


async def test_middleware_may_be_async_and_return_none_and_runs_in_order() -> None:
    order: list[str] = []

    async def first(config: LlmCallConfig, ctx: RequestContext) -> None:
        order.append("first")
        await asyncio.sleep(0)

    def second(config: LlmCallConfig, ctx: RequestContext) -> LlmCallConfig:
        order.append("second")
        return dataclasses.replace(config, model="m2")

    agent, provider, _ = make_agent(text_response("a"))
    agent.add_middleware(first)
    remove = agent.add_middleware(second)
    await agent.run("1")
    assert order == ["first", "second"] and provider.requests[0].model == "m2"
    remove()
    provider.push(text_response("b"))
    await agent.run("2")
    assert provider.requests[1].model == "m2"  # the folded header carries it forward


async def test_a_middleware_context_gives_turn_step_config_and_inject_only() -> None:
    """Nothing but the returned config can shape the request: the context reaches no agent,
    session, provider, tools or options (dsh issue 3, "given nothing else")."""
    seen: list[tuple[LlmCallConfig, RequestContext]] = []

    def warmer(config: LlmCallConfig, ctx: RequestContext) -> LlmCallConfig:
        seen.append((config, ctx))
        return dataclasses.replace(config, temperature=0.3)

    def observer(config: LlmCallConfig, ctx: RequestContext) -> None:
        seen.append((config, ctx))
        if ctx.step == 1:
            assert ctx.inject("from the context").text == "from the context"

    agent, provider, session = make_agent(text_response("a"), text_response("b"))
    agent.add_middleware(warmer)
    agent.add_middleware(observer)
    await agent.run("q")
    assert [f.name for f in dataclasses.fields(RequestContext)] == [
        "turn",
        "step",
        "config",
        "inject",
    ]
    forbidden = (Agent, Session, ScriptedProvider, AgentOptions, ToolRegistry)
    for config, ctx in seen:
        assert ctx.config is config  # the config as this middleware receives it
        public = [name for name in dir(ctx) if not name.startswith("_")]
        assert sorted(public) == ["config", "inject", "step", "turn"]
        assert not any(isinstance(getattr(ctx, name), forbidden) for name in public)
        assert not hasattr(ctx.inject, "__self__")  # a plain function, not the agent's method
        assert not hasattr(ctx, "__dict__")  # slotted: nothing can be attached on the way
        with pytest.raises(dataclasses.FrozenInstanceError):
            ctx.turn = 9  # type: ignore[misc]
    assert [(ctx.turn, ctx.step) for _, ctx in seen] == [(1, 1), (1, 1), (1, 2), (1, 2)]
    assert seen[1][1].config.temperature == 0.3  # the second middleware sees the first's result
    # The injected message joined the NEXT request, and kept the turn going for it.
    assert [m.text for m in provider.requests[0].messages] == ["q"]
    assert [m.text for m in provider.requests[1].messages] == ["q", "a", "from the context"]
    assert_reconstructs(session.events, provider.requests, "s1")


async def test_middleware_returning_junk_ends_the_turn_with_an_error() -> None:
    agent, provider, session = make_agent(text_response("a"))
    agent.add_middleware(lambda config, ctx: {"model": "x"})  # type: ignore[arg-type,return-value]
    with pytest.raises(AgentError, match="return an LlmCallConfig"):
        await agent.run("1")
    assert provider.requests == []
    assert_balanced(session)
    assert of_type(session, "turn/end")[0].data["reason"]["error"]["code"] == "UNKNOWN"


async def test_inject_from_middleware_joins_the_next_request_not_this_one() -> None:
    agent, provider, session = make_agent(
        tool_call_response(tool_call("c1", "read", {"path": "a"})),
        text_response("b"),
        tools=[read],
    )

    def injecting(config: LlmCallConfig, ctx: RequestContext) -> None:
        if ctx.step == 1:
            ctx.inject("steer: be brief")

    agent.add_middleware(injecting)
    await agent.run("q")
    first, second = provider.requests
    assert "steer: be brief" not in [m.text for m in first.messages]
    assert second.messages[-1].text == "steer: be brief"
    assert_reconstructs(session.events, provider.requests, "s1")


async def test_inject_from_a_tool_lands_after_all_results() -> None:
    @tool(concurrency_safe=True)
    async def nudge(args: Any, ctx: ToolContext) -> str:
        assert ctx.inject is not None
        ctx.inject("from the tool")
        return "ok"

    agent, provider, session = make_agent(
        tool_call_response(tool_call("c1", "nudge"), tool_call("c2", "read", {"path": "x"})),
        text_response("b"),
        tools=[nudge, read],
    )
    await agent.run("q")
    roles = [(m.role, m.text) for m in provider.requests[1].messages]
    assert roles[-1] == ("user", "from the tool")
    kinds = types(session)
    assert kinds.index("user/message", 2) > max(
        i for i, k in enumerate(kinds) if k == "tool/result"
    )
    assert_reconstructs(session.events, provider.requests, "s1")


async def test_pending_inject_keeps_the_turn_going_one_more_step() -> None:
    agent, provider, session = make_agent(text_response("first"), text_response("second"))

    def injecting(config: LlmCallConfig, ctx: RequestContext) -> None:
        if ctx.step == 1:
            ctx.inject("one more thing")

    agent.add_middleware(injecting)
    final = await agent.run("q")
    assert final.text == "second"
    assert [e.data["step"] for e in of_type(session, "step/start")] == [1, 2]
    assert provider.requests[1].messages[-1].text == "one more thing"
    assert_reconstructs(session.events, provider.requests, "s1")


async def test_inject_while_idle_is_appended_at_once() -> None:
    agent, provider, session = make_agent(text_response("a"))
    injected = agent.inject("context first")
    assert session.events[-1].type == "user/message"
    assert session.events[-1].data["id"] == injected.id
    await agent.run("then the prompt")
    assert [m.text for m in provider.requests[0].messages] == ["context first", "then the prompt"]
    assert_reconstructs(session.events, provider.requests, "s1")


async def test_inject_from_another_task_during_a_hang_free_stream() -> None:
    gate = asyncio.Event()

    def respond(request: Any) -> Any:
        gate.set()
        return text_response("streamed")

    agent, provider, session = make_agent(respond, text_response("next"))

    async def other() -> None:
        await gate.wait()
        agent.inject("late news")

    task = asyncio.ensure_future(other())
    await agent.run("q")
    await task
    assert [m.text for m in provider.requests[0].messages] == ["q"]
    assert provider.requests[1].messages[-1].text == "late news"
    assert_reconstructs(session.events, provider.requests, "s1")


async def test_inject_refuses_non_user_messages() -> None:
    agent, _, _ = make_agent()
    from dsh_core import assistant_message

    with pytest.raises(AgentError, match="user message"):
        agent.inject(assistant_message("x", provider="p", model="m"))
    with pytest.raises(AgentError, match="non-empty"):
        agent.inject("")


async def test_pre_step_hooks_see_the_assembly_and_may_append_for_this_request() -> None:
    seen: list[PreStepContext] = []

    async def hook(ctx: PreStepContext) -> None:
        seen.append(ctx)
        if ctx.step == 1:
            ctx.session.append(
                "user/message",
                user_message("pre-step context", id="ctx1").to_json(),
                surface_op="append",
            )

    agent, provider, session = make_agent(text_response("a"), tools=[read], system="S")
    agent.add_pre_step(hook)
    await agent.run("q")
    (ctx,) = seen
    assert (ctx.turn, ctx.step, ctx.system) == (1, 1, "S")
    assert tool_names(ctx) == ["read"]
    kinds = types(session)
    assert kinds.index("user/message", 2) < kinds.index("step/start")  # before the boundary
    assert [m.text for m in provider.requests[0].messages] == ["q", "pre-step context"]
    assert_reconstructs(session.events, provider.requests, "s1")


async def test_max_tokens_drops_tool_calls_and_ends_the_turn() -> None:
    agent, _provider, session = make_agent(
        max_tokens_response("Starting", partial_call=tool_call("cut", "write", {"text": "x" * 20})),
        tools=[write],
    )
    final = await agent.run("write it")
    assert final.text == "Starting" and final.tool_calls == ()
    assert not of_type(session, "tool/call")
    assert of_type(session, "turn/end")[0].data["reason"] == {"kind": "max-tokens"}


async def test_max_tokens_is_sticky_for_the_turn() -> None:
    agent, provider, session = make_agent(max_tokens_response("cut"), text_response("fine"))

    def injecting(config: LlmCallConfig, ctx: RequestContext) -> None:
        if ctx.step == 1:
            ctx.inject("continue")

    agent.add_middleware(injecting)
    final = await agent.run("q")
    assert final.text == "fine"
    assert of_type(session, "turn/end")[0].data["reason"] == {"kind": "max-tokens"}
    assert_reconstructs(session.events, provider.requests, "s1")


async def test_an_empty_max_tokens_message_is_logged_but_not_model_visible() -> None:
    agent, provider, session = make_agent(
        max_tokens_response(partial_call=tool_call("cut", "write", {"text": "abcdefgh"})),
        text_response("next"),
        tools=[write],
    )
    final = await agent.run("q")
    assert final.content == ()
    (event,) = of_type(session, "assistant/message")
    assert event.data["usage"]["outputTokens"] == 12
    await agent.run("again")
    assert [m.text for m in provider.requests[1].messages] == ["q", "again"]


async def test_a_second_run_while_one_is_running_is_refused() -> None:
    gate = asyncio.Event()

    async def slow(args: Any, ctx: Any) -> str:
        await gate.wait()
        return "ok"

    slow_tool = tool(name="slow")(slow)
    agent, _, session = make_agent(
        tool_call_response(tool_call("c1", "slow")), text_response("done"), tools=[slow_tool]
    )
    task = asyncio.ensure_future(agent.run("one"))
    while not of_type(session, "tool/call"):
        await asyncio.sleep(0)
    assert agent.running
    with pytest.raises(AgentError, match="turn 1 is still running"):
        await agent.run("two")
    gate.set()
    assert (await task).text == "done"
    assert not agent.running


async def test_prompt_validation() -> None:
    agent, _, _ = make_agent()
    with pytest.raises(AgentError, match="non-empty string"):
        await agent.run("")
    with pytest.raises(AgentError, match="user message"):
        from dsh_core import assistant_message

        await agent.run(assistant_message("x", provider="p", model="m"))


async def test_a_message_prompt_keeps_its_id() -> None:
    agent, _, session = make_agent(text_response("a"))
    await agent.run(user_message("hello", id="prompt-1"))
    assert of_type(session, "user/message")[0].data["id"] == "prompt-1"


async def test_no_provider_or_model_is_a_clear_error() -> None:
    session = new_session()
    agent = Agent(session, ScriptedProvider(text_response("x")), AgentOptions())
    with pytest.raises(AgentError, match="no provider/model"):
        await agent.run("hi")
    assert_balanced(session)


def test_options_validation() -> None:
    with pytest.raises(AgentError, match="max_parallel_tools"):
        AgentOptions(max_parallel_tools=0)
    with pytest.raises(AgentError, match="not one string"):
        AgentOptions(stop="END")  # type: ignore[arg-type]
    opts = AgentOptions(stop=["a"], system=["x", "y"], tool_order=["b"])  # type: ignore[arg-type]
    assert opts.stop == ("a",) and opts.system == ("x", "y") and opts.tool_order == ("b",)


async def test_a_session_ending_inside_an_open_turn_is_refused() -> None:
    session = new_session()
    session.append("turn/start", {"turn": 1})
    agent = Agent(session, ScriptedProvider(), options())
    with pytest.raises(AgentError, match="open turn 1"):
        await agent.run("hi")


async def test_resume_continues_numbering_and_logs_a_resume_snapshot() -> None:
    agent, provider, session = make_agent(text_response("a"), system="S")
    await agent.run("1")
    resumed = Session.create("s1", session.events)
    agent2, provider2, _ = make_agent(text_response("b"), session=resumed, system="S")
    assert agent2.turn == 1 and not agent2.header_logged
    await agent2.run("2")
    assert [e.data["turn"] for e in of_type(resumed, "turn/start")] == [1, 2]
    reasons = [e.data["reason"] for e in of_type(resumed, "request/header")]
    assert reasons == ["initial", "resume"]
    old, new = provider.requests[0], provider2.requests[0]
    assert list(new.messages[: len(old.messages)]) == list(old.messages)
    assert new.system == old.system
    assert_reconstructs(resumed.events, [*provider.requests, *provider2.requests], "s1")


async def test_first_request_explicit_options_beat_the_logged_baseline() -> None:
    agent, _, session = make_agent(text_response("a"), temperature=0.3, max_tokens=50)
    await agent.run("1")
    resumed = Session.create("s1", session.events)
    # Same route, nothing explicit: the logged sampling carries over.
    keep, provider_keep, _ = make_agent(
        text_response("b"), session=resumed, provider=None, model=None
    )
    await keep.run("2")
    assert (provider_keep.requests[0].model, provider_keep.requests[0].temperature) == ("m1", 0.3)
    # An explicit option wins; another model drops the old route's sampling.
    again = Session.create("s1", resumed.events)
    switch, provider_switch, _ = make_agent(
        text_response("c"), session=again, model="m9", max_tokens=7
    )
    await switch.run("3")
    request = provider_switch.requests[0]
    assert (request.model, request.temperature, request.max_tokens) == ("m9", None, 7)


async def test_fork_at_a_turn_boundary_continues_with_the_loop() -> None:
    agent, provider, session = make_agent(text_response("a"), text_response("b"))
    await agent.run("1")
    boundary = of_type(session, "turn/end")[0].seq
    await agent.run("2")
    child = fork(session, boundary, child_id="child")
    agent_c, provider_c, _ = make_agent(text_response("forked"), session=child)
    await agent_c.run("alt 2")
    assert [m.text for m in provider_c.requests[0].messages] == ["1", "a", "alt 2"]
    assert of_type(child, "request/header")[-1].data["reason"] == "resume"
    assert of_type(child, "turn/start")[-1].data["turn"] == 2
    rebuilt = [r.request for r in reconstruct_requests(child.events, session_id="child")]
    assert len(rebuilt) == 2  # the inherited parent request and the child's own
    assert rebuilt[1].canonical_json() == provider_c.requests[0].canonical_json()
    inherited = dataclasses.replace(rebuilt[0], session_id="s1")
    assert inherited.canonical_json() == provider.requests[0].canonical_json()


async def test_fork_inside_an_open_turn_is_a_clear_error() -> None:
    agent, _, session = make_agent(text_response("a"))
    await agent.run("1")
    inside = of_type(session, "step/start")[0].seq
    with pytest.raises(ForkError, match="open turn 1"):
        fork(session, inside, child_id="c")


async def test_invariants_are_off_by_default() -> None:
    agent, _, session = make_agent(text_response("a"), invariants=False)
    assert agent.request_invariant is None
    await agent.run("x")
    session.append("turn/end", {"turn": 7, "reason": {"kind": "completed"}})  # no validator


async def test_close_detaches_the_log_invariant() -> None:
    agent, _, session = make_agent()
    from dsh_core import InvariantViolation

    with pytest.raises(InvariantViolation):
        session.append("step/start", {"turn": 1, "step": 1})
    agent.close()
    agent.close()
    session.append("step/start", {"turn": 1, "step": 1})


def test_tool_registration_through_the_agent() -> None:
    agent, _, _ = make_agent(tools=[read])
    with pytest.raises(AgentError, match="already registered"):
        agent.register_tool(read)
    assert agent.unregister_tool("read") is read
    with pytest.raises(AgentError, match="no tool named 'read'"):
        agent.unregister_tool("read")


async def test_duplicate_tool_names_cannot_reach_a_header() -> None:
    with pytest.raises(HeaderError, match="duplicate tool name"):
        from dsh_core import EpochHeader

        EpochHeader(config=LlmCallConfig(provider="p", model="m"), tools=(read.schema, read.schema))
