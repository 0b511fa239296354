"""Dev-mode invariants around the loop: a deliberately broken loop is caught with a readable diff."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import pytest

from dsh_core import (
    Agent,
    Compactor,
    EpochHeader,
    GenerateOptions,
    InvariantViolation,
    LlmCallConfig,
    Message,
    RequestContext,
    ToolContext,
    ToolSchema,
    ToolsPlaceholder,
    tool,
    user_message,
)
from dsh_core._request import CancelToken
from dsh_core.scripted import ScriptedProvider, text_response, tool_call, tool_call_response

from ._loop_helpers import (
    assert_balanced,
    assert_reconstructs,
    make_agent,
    new_session,
    of_type,
    options,
    read,
)


class ExtraMessageAgent(Agent):
    """A broken loop: it adds a message the log never saw."""

    def _build_request(
        self, header: EpochHeader, messages: Sequence[Message], cancel: CancelToken
    ) -> GenerateOptions:
        request = super()._build_request(header, messages, cancel)
        sneaky = user_message("unlogged", id="sneaky")
        return dataclasses.replace(request, messages=(*request.messages, sneaky))


class RewrittenMessageAgent(Agent):
    """A broken loop: it edits a logged message on its way to the model."""

    def _build_request(
        self, header: EpochHeader, messages: Sequence[Message], cancel: CancelToken
    ) -> GenerateOptions:
        request = super()._build_request(header, messages, cancel)
        edited = user_message("edited", id=request.messages[0].id)
        return dataclasses.replace(request, messages=(edited, *request.messages[1:]))


class ExtraToolAgent(Agent):
    """A broken loop: it offers a tool the header never recorded."""

    def _build_request(
        self, header: EpochHeader, messages: Sequence[Message], cancel: CancelToken
    ) -> GenerateOptions:
        request = super()._build_request(header, messages, cancel)
        extra = ToolSchema(name="sneaky_tool", description="?", parameters={"type": "object"})  # type: ignore[arg-type]
        assert not isinstance(request.tools, ToolsPlaceholder)
        return dataclasses.replace(request, tools=(*(request.tools or ()), extra))


class TimestampedSystemAgent(Agent):
    """A broken loop: it appends a timestamp to the logged system prompt (a cache killer)."""

    def _build_request(
        self, header: EpochHeader, messages: Sequence[Message], cancel: CancelToken
    ) -> GenerateOptions:
        request = super()._build_request(header, messages, cancel)
        return dataclasses.replace(request, system=f"{request.system} 2026-12-02T17:00:01Z")


def _broken(cls: type[Agent], **overrides: Any) -> tuple[Agent, ScriptedProvider, Any]:
    session = new_session()
    provider = ScriptedProvider(text_response("never sent"))
    return cls(session, provider, options(**overrides)), provider, session


async def test_an_unlogged_extra_message_is_caught_before_dispatch() -> None:
    agent, provider, session = _broken(ExtraMessageAgent)
    with pytest.raises(InvariantViolation) as info:
        await agent.run("hi")
    assert "not a pure function of the log" in str(info.value)
    assert any(
        "messages: expected has 1, actual has 2 (first extra: messages[1] 'unlogged')" in d
        for d in info.value.diff
    )
    assert provider.requests == []
    assert of_type(session, "turn/end")[0].data["reason"]["kind"] == "error"
    assert_balanced(session)


async def test_an_edited_message_is_named_by_index_and_field() -> None:
    agent, provider, _ = _broken(RewrittenMessageAgent)
    with pytest.raises(InvariantViolation) as info:
        await agent.run("hi")
    assert info.value.diff[0] == (
        "messages[0].content[0].text differs: expected: 'hi', actual: 'edited'"
    )
    assert provider.requests == []


async def test_a_timestamp_appended_to_a_long_system_line_is_visible() -> None:
    """The differing characters at the end of a 200-character line show, with line and column."""
    line = ("Answer briefly and cite the file you read. " * 5)[:200]
    agent, provider, _ = _broken(TimestampedSystemAgent, system=line)
    with pytest.raises(InvariantViolation) as info:
        await agent.run("hi")
    (difference,) = info.value.diff
    assert difference.startswith("system line 1 differs at column 201: ")
    assert "2026-12-02T17:00:01Z" in difference
    expected, actual = difference.split(": expected: ")[1].split(", actual: ")
    assert expected != actual
    assert expected.endswith("(the text ends here)")
    assert "2026-12-02T17:00:01Z" in str(info.value)
    assert provider.requests == []


async def test_a_tool_missing_from_the_log_is_named() -> None:
    agent, provider, _ = _broken(ExtraToolAgent)
    agent.register_tool(read)
    with pytest.raises(InvariantViolation) as info:
        await agent.run("hi")
    assert "tool 'sneaky_tool' only in actual" in str(info.value)
    assert provider.requests == []


async def test_without_invariants_the_broken_loop_ships_and_reconstruction_disagrees() -> None:
    agent, provider, session = _broken(ExtraMessageAgent, invariants=False)
    await agent.run("hi")
    with pytest.raises(AssertionError, match="request 0 differs"):
        assert_reconstructs(session.events, provider.requests, "s1")


async def test_every_attempt_is_checked_and_one_shots_are_exempt() -> None:
    agent, provider, session = make_agent(
        tool_call_response(tool_call("c1", "read", {"path": "a"}), usage=(5000, 5)),
        text_response("one", usage=(5000, 5)),
        text_response("summary"),
        text_response("two"),
        tools=[read],
    )
    await agent.run("first " + "x" * 200)
    agent.add_pre_step(Compactor(threshold_tokens=100, keep_last=1))
    await agent.run("second")
    assert [r.purpose for r in provider.requests] == [None, None, "compaction", None]
    assert agent.request_invariant is not None and agent.request_invariant.checked == 3
    assert of_type(session, "compact/summary")


async def test_a_direct_append_from_middleware_lands_after_the_boundary() -> None:
    """The step-start boundary makes even a raw append in the request window harmless."""

    def raw_append(config: LlmCallConfig, ctx: RequestContext) -> None:
        if ctx.step == 1:
            session.append(  # the context gives no session: this one is the test's own
                "user/message", user_message("raw", id="raw").to_json(), surface_op="append"
            )

    agent, provider, session = make_agent(text_response("a"), text_response("b"))
    agent.add_middleware(raw_append)
    await agent.run("one")
    await agent.run("two")
    assert [m.text for m in provider.requests[0].messages] == ["one"]
    assert [m.text for m in provider.requests[1].messages] == ["one", "raw", "a", "two"]
    assert_reconstructs(session.events, provider.requests, "s1")


async def test_the_log_invariant_vetoes_an_out_of_place_append() -> None:
    session = new_session()

    @tool()
    async def vandal(args: Any, ctx: ToolContext) -> str:
        # A tool has no writable session in its context; this one reaches the log directly.
        session.append("turn/start", {"turn": 99})
        return "unreachable"

    agent, provider, session = make_agent(
        tool_call_response(tool_call("v", "vandal")),
        text_response("ok"),
        session=session,
        tools=[vandal],
    )
    await agent.run("go")
    (result,) = of_type(session, "tool/result")
    assert result.data["error"] == {"name": "InvariantViolation", "code": "TOOL_ERROR"}
    assert "turn 1 is still open" in result.data["message"]["content"][0]["content"][0]["text"]
    assert [e.data["turn"] for e in of_type(session, "turn/start")] == [1]
    assert_balanced(session)
    assert_reconstructs(session.events, provider.requests, "s1")
