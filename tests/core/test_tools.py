"""Tools: registry order, the scheduler's parallel groups and barriers, and error results."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from dsh_core import (
    AgentError,
    FrozenDict,
    TextBlock,
    Tool,
    ToolContext,
    ToolOutput,
    ToolRegistry,
    ToolResultBlock,
    ToolSchema,
    tool,
)
from dsh_core.scripted import text_response, tool_call, tool_call_response

from ._loop_helpers import assert_balanced, assert_reconstructs, make_agent, of_type, read, write


class Activity:
    """Counts how many tool bodies run at once (no timing involved)."""

    def __init__(self) -> None:
        self.active = 0
        self.peak = 0
        self.finished: list[str] = []

    def make(self, name: str, *, safe: Any = True, spins: int = 3) -> Tool:
        async def body(args: Any, ctx: ToolContext) -> str:
            self.active += 1
            self.peak = max(self.peak, self.active)
            for _ in range(int(args.get("spins", spins))):
                await asyncio.sleep(0)
            self.active -= 1
            self.finished.append(ctx.call_id)
            return f"{name} {ctx.call_id}"

        return tool(name=name, concurrency_safe=safe)(body)


def _results(session: Any) -> list[tuple[str, str]]:
    out = []
    for event in of_type(session, "tool/result"):
        block = event.data["message"]["content"][0]
        out.append((block["toolCallId"], block["content"][0]["text"] if block["content"] else ""))
    return out


def _order(session: Any) -> list[str]:
    out = []
    for event in session.events:
        if event.type == "tool/call":
            out.append(f"call:{event.data['callId']}")
        elif event.type == "tool/result":
            out.append(f"result:{event.data['message']['source']['callId']}")
    return out


# -------------------------------------------------------------------------------- registry


def test_registry_renders_sorted_by_name_regardless_of_registration_order() -> None:
    registry = ToolRegistry([write, read])
    assert [s.name for s in registry.schemas()] == ["read", "write"]
    assert [t.name for t in registry] == ["read", "write"]
    assert "read" in registry and len(registry) == 2 and registry.get("nope") is None


def test_registry_explicit_order_then_sorted_rest() -> None:
    extra = Activity().make("alpha")
    registry = ToolRegistry([read, write, extra], order=("write", "ghost", "write"))
    assert [s.name for s in registry.schemas()] == ["write", "alpha", "read"]


def test_registry_errors() -> None:
    registry = ToolRegistry([read])
    with pytest.raises(AgentError, match="already registered; pass replace=True"):
        registry.register(read)
    registry.register(read, replace=True)
    with pytest.raises(AgentError, match="takes a Tool"):
        registry.register(read.schema)  # type: ignore[arg-type]
    with pytest.raises(AgentError, match=r"no tool named 'x' is registered \(have: \['read'\]\)"):
        registry.unregister("x")


def test_the_decorator_builds_a_schema_from_the_function() -> None:
    @tool()
    async def lookup(args: Any, ctx: Any) -> str:
        """Look a key up.

        Returns its value.
        """
        return ""

    assert lookup.schema == ToolSchema(
        name="lookup",
        description="Look a key up.\n\nReturns its value.",
        parameters={"type": "object", "properties": {}},  # type: ignore[arg-type]
    )
    assert not lookup.is_concurrency_safe({})
    with pytest.raises(AgentError, match="must be an async function"):
        tool(name="sync")(lambda args, ctx: "x")  # type: ignore[arg-type,return-value]


def test_concurrency_predicates() -> None:
    flag = Tool(schema=read.schema, run=read.run, concurrency_safe=lambda a: a.get("ro"))
    assert flag.is_concurrency_safe({"ro": True})
    assert not flag.is_concurrency_safe({"ro": 1})  # exactly True, not truthy
    boom = Tool(schema=read.schema, run=read.run, concurrency_safe=lambda a: bool(1 / 0))
    assert not boom.is_concurrency_safe({})


def test_tool_output_normalizes() -> None:
    out = ToolOutput(content=[TextBlock(text="x")], error={"name": "E", "code": "C"})  # type: ignore[arg-type]
    assert out.content == (TextBlock(text="x"),)
    with pytest.raises(TypeError):
        out.error["code"] = "D"  # type: ignore[index]


# -------------------------------------------------------------------------------- scheduling


async def test_concurrency_safe_calls_run_in_parallel() -> None:
    activity = Activity()
    agent, provider, session = make_agent(
        tool_call_response(tool_call("a", "p"), tool_call("b", "p")),
        text_response("done"),
        tools=[activity.make("p")],
    )
    await agent.run("go")
    assert activity.peak == 2
    assert _order(session) == ["call:a", "call:b", "result:a", "result:b"]
    for result in of_type(session, "tool/result"):
        assert result.source_event_seqs is not None
        (cited,) = result.source_event_seqs
        assert session.events[cited].type == "tool/call"
        assert session.events[cited].data["callId"] == result.data["message"]["source"]["callId"]
    assert_reconstructs(session.events, provider.requests, "s1")


async def test_the_parallel_cap_is_honored() -> None:
    activity = Activity()
    calls = [tool_call(f"c{i}", "p") for i in range(5)]
    agent, _, session = make_agent(
        tool_call_response(*calls),
        text_response("done"),
        tools=[activity.make("p")],
        max_parallel_tools=2,
    )
    await agent.run("go")
    assert activity.peak == 2
    assert [c for c, _ in _results(session)] == [f"c{i}" for i in range(5)]


async def test_a_cap_of_one_runs_serially() -> None:
    activity = Activity()
    agent, _, session = make_agent(
        tool_call_response(tool_call("a", "p"), tool_call("b", "p")),
        text_response("done"),
        tools=[activity.make("p")],
        max_parallel_tools=1,
    )
    await agent.run("go")
    assert activity.peak == 1
    assert _order(session) == ["call:a", "result:a", "call:b", "result:b"]


async def test_exclusive_calls_are_barriers() -> None:
    activity = Activity()
    agent, _, session = make_agent(
        tool_call_response(
            tool_call("a", "p"), tool_call("b", "p"), tool_call("x", "ex"), tool_call("c", "p")
        ),
        text_response("done"),
        tools=[activity.make("p"), activity.make("ex", safe=False)],
    )
    await agent.run("go")
    assert _order(session) == [
        "call:a",
        "call:b",
        "result:a",
        "result:b",
        "call:x",
        "result:x",
        "call:c",
        "result:c",
    ]
    assert activity.peak == 2
    assert_balanced(session)


async def test_reclassification_by_arguments() -> None:
    activity = Activity()
    maybe = activity.make("maybe", safe=lambda args: args.get("ro") is True)
    agent, _, session = make_agent(
        tool_call_response(
            tool_call("r1", "maybe", {"ro": True}),
            tool_call("w1", "maybe", {"ro": False}),
            tool_call("r2", "maybe", {"ro": True}),
            tool_call("r3", "maybe", {"ro": True}),
        ),
        text_response("done"),
        tools=[maybe],
    )
    await agent.run("go")
    assert _order(session) == [
        "call:r1",
        "result:r1",
        "call:w1",
        "result:w1",
        "call:r2",
        "call:r3",
        "result:r2",
        "result:r3",
    ]


async def test_results_are_committed_in_model_order_even_when_a_later_call_settles_first() -> None:
    activity = Activity()
    agent, provider, session = make_agent(
        tool_call_response(
            tool_call("slow", "p", {"spins": 10}), tool_call("quick", "p", {"spins": 0})
        ),
        text_response("done"),
        tools=[activity.make("p")],
    )
    await agent.run("go")
    assert activity.finished == ["quick", "slow"]
    assert [c for c, _ in _results(session)] == ["slow", "quick"]
    messages = provider.requests[1].messages
    answered: list[str] = []
    for m in messages[2:]:
        block = m.content[0]
        assert isinstance(block, ToolResultBlock)
        answered.append(block.tool_call_id)
    assert answered == ["slow", "quick"]


async def test_unknown_tools_and_bad_arguments_become_error_results() -> None:
    agent, provider, session = make_agent(
        tool_call_response(
            tool_call("u", "nope", {}),
            tool_call("j", "read", '{"path": '),
            tool_call("l", "read", "[1, 2]"),
            tool_call("e", "read", ""),
        ),
        text_response("recovered"),
        tools=[read],
    )
    assert (await agent.run("go")).text == "recovered"
    results = {
        e.data["message"]["source"]["callId"]: e.data for e in of_type(session, "tool/result")
    }
    assert results["u"]["error"] == {"name": "UnknownToolError", "code": "UNKNOWN_TOOL"}
    assert "unknown tool 'nope'; available tools: read" in str(results["u"]["message"])
    assert results["j"]["error"]["code"] == "INVALID_ARGUMENTS"
    assert "not valid JSON" in str(results["j"]["message"])
    assert "must be a JSON object, got list" in str(results["l"]["message"])
    assert results["e"]["message"]["content"][0]["content"][0]["text"] == "contents of None"
    assert results["u"]["message"]["content"][0]["isError"] is True
    assert results["e"]["message"]["content"][0]["isError"] is False
    assert_reconstructs(session.events, provider.requests, "s1")


async def test_a_raising_tool_becomes_an_error_result_not_a_crash() -> None:
    @tool()
    async def explode(args: Any, ctx: Any) -> str:
        raise OSError("disk full")

    @tool()
    async def junk(args: Any, ctx: Any) -> Any:
        return 42

    agent, _, session = make_agent(
        tool_call_response(tool_call("x", "explode"), tool_call("y", "junk")),
        text_response("ok"),
        tools=[explode, junk],
    )
    await agent.run("go")
    first, second = of_type(session, "tool/result")
    assert first.data["error"] == {"name": "OSError", "code": "TOOL_ERROR"}
    assert first.data["message"]["content"][0]["content"][0]["text"] == "Error: OSError: disk full"
    assert second.data["error"]["code"] == "INVALID_RESULT"
    assert "returned int" in second.data["message"]["content"][0]["content"][0]["text"]


async def test_a_tool_cancelling_itself_is_an_error_result_and_the_turn_goes_on() -> None:
    @tool()
    async def quits(args: Any, ctx: Any) -> str:
        raise asyncio.CancelledError

    agent, _, session = make_agent(
        tool_call_response(tool_call("q", "quits")), text_response("ok"), tools=[quits]
    )
    assert (await agent.run("go")).text == "ok"
    assert of_type(session, "tool/result")[0].data["error"]["code"] == "CANCELLED"


async def test_tool_output_error_meta_and_blocks_are_logged() -> None:
    @tool()
    async def rich(args: Any, ctx: ToolContext) -> ToolOutput:
        assert (ctx.turn, ctx.step, ctx.name, ctx.session_id) == (1, 1, "rich", "s1")
        return ToolOutput(
            content=(TextBlock(text="a"), TextBlock(text="b")),
            is_error=True,
            error=FrozenDict({"name": "Denied", "code": "DENIED"}),
            meta={"rows": 2},
        )

    @tool()
    async def blocks(args: Any, ctx: Any) -> list[TextBlock]:
        return [TextBlock(text="plain")]

    agent, provider, session = make_agent(
        tool_call_response(tool_call("r", "rich"), tool_call("b", "blocks")),
        text_response("ok"),
        tools=[rich, blocks],
    )
    await agent.run("go")
    first, second = of_type(session, "tool/result")
    assert first.data["error"] == {"name": "Denied", "code": "DENIED"}
    assert first.data["meta"] == {"rows": 2}
    assert [b["text"] for b in first.data["message"]["content"][0]["content"]] == ["a", "b"]
    assert second.data["message"]["content"][0]["content"] == [{"type": "text", "text": "plain"}]
    assert_reconstructs(session.events, provider.requests, "s1")
