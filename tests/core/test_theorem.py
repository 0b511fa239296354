"""THE theorem: every request the loop sent equals its reconstruction from the saved file alone.

Three turns across two "processes" sharing one JSONL file: tool calls (one parallel pair), a
system-prompt change, a sampling change by middleware, a tool added mid-list, a retry, a
compaction, and a resume from the file. Every dispatched request must equal
``reconstruct_requests`` over the file, byte for byte; with an unchanged header (and no surface
replace in between) each request's messages extend the previous request's.
"""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path
from typing import Any

from dsh_core import (
    Agent,
    Compactor,
    LlmCallConfig,
    RequestContext,
    Session,
    SurfaceReplace,
    ToolContext,
    reconstruct_requests,
    tool,
)
from dsh_core.persistence import load_session, open_session, write_session
from dsh_core.scripted import (
    ScriptedProvider,
    error_response,
    text_response,
    tool_call,
    tool_call_response,
)

from ._loop_helpers import Clock, options, tool_names


def _tool(name: str) -> Any:
    async def run(args: Any, ctx: ToolContext) -> str:
        return f"{name}({args.get('q', '')})"

    return tool(
        name=name,
        description=f"The {name} tool.",
        parameters={"type": "object", "properties": {"q": {"type": "string"}}},
        concurrency_safe=True,
    )(run)


ALPHA, BETA, GAMMA = _tool("alpha"), _tool("beta"), _tool("gamma")


def _sampling(config: LlmCallConfig, ctx: RequestContext) -> LlmCallConfig | None:
    if ctx.turn >= 2:
        return dataclasses.replace(config, temperature=0.5, max_tokens=99, stop=("<END>",))
    return None


def _agent(session: Session, provider: ScriptedProvider, mode: dict[str, str]) -> Agent:
    agent = Agent(
        session,
        provider,
        options(system=("You are the theorem agent.", lambda ctx: f"Mode: {mode['value']}.")),
    )
    agent.add_middleware(_sampling)
    return agent


async def test_every_request_is_reconstructed_from_the_saved_file(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    mode = {"value": "quick"}

    # Process 1: turns 1 and 2, written as they happen (chunk runs packed into rows).
    session = Session.create("theorem", clock=Clock())
    writer = write_session(path, session, pack_chunks=True)
    first = ScriptedProvider(
        tool_call_response(
            tool_call("t1-a", "alpha", {"q": "one"}),
            tool_call("t1-g", "gamma", {"q": "two"}),
            text="Looking both up.",
        ),
        text_response("Alpha says one, gamma says two."),
        error_response("SERVER", status=503),
        tool_call_response(tool_call("t2-b", "beta", {"q": "three"})),
        text_response("Beta says three."),
    )
    agent = _agent(session, first, mode)
    agent.register_tool(GAMMA)
    agent.register_tool(ALPHA)
    await agent.run("Ask alpha and gamma.")
    mode["value"] = "careful"  # a system-prompt change
    agent.register_tool(BETA)  # lands mid-list: alpha, beta, gamma
    await agent.run("Now ask beta.")
    writer.close()
    assert tool_names(first.requests[-1]) == ["alpha", "beta", "gamma"]

    # Process 2: resume from the file, compact, answer.
    writer = open_session(path, pack_chunks=True, clock=Clock())
    resumed = writer.session
    second = ScriptedProvider(
        text_response("Alpha one, gamma two, beta three."),  # the compaction summary
        text_response("All three answered."),
    )
    agent = _agent(resumed, second, mode)
    for item in (ALPHA, BETA, GAMMA):
        agent.register_tool(item)
    agent.add_pre_step(Compactor(threshold_tokens=0, keep_last=2))
    await agent.run("Summarize what they said.")
    writer.close()
    assert [r.purpose for r in second.requests] == ["compaction", None]

    # The file alone (chunk runs stored as packed rows, expanded by the reader).
    assert '"type":"text-chunks"' in path.read_text(encoding="utf-8")
    loaded = load_session(path)
    events = loaded.events
    rebuilt = list(reconstruct_requests(events, session_id="theorem"))
    sent = [*first.requests, *second.loop_requests]
    assert len(rebuilt) == len(sent) == 6
    for i, (want, got) in enumerate(zip(rebuilt, sent, strict=True)):
        assert want.request.canonical_json() == got.canonical_json(), f"request {i}"
    assert [(r.turn, r.step, r.attempt) for r in rebuilt] == [
        (1, 1, 0),
        (1, 2, 0),
        (2, 1, 0),
        (2, 1, 1),
        (2, 2, 0),
        (3, 1, 0),
    ]

    # What the log recorded along the way.
    headers = [e for e in events if e.type.startswith("request/header")]
    assert [(e.type, e.data.get("reason")) for e in headers] == [
        ("request/header", "initial"),
        ("request/header-delta", None),  # system + tools + sampling, one delta
        ("request/header", "resume"),
    ]
    delta = headers[1].data
    assert delta["tools"]["added"][0]["index"] == 1
    assert delta["config"]["temperature"] == 0.5
    assert sent[2].system == "You are the theorem agent.\n\nMode: careful."
    assert [e.data["turn"] for e in events if e.type == "turn/start"] == [1, 2, 3]

    # Prefix stability: an unchanged header and no surface replace → an append-only extension.
    extensions = 0
    for prev, cur in itertools.pairwise(rebuilt):
        replaced = any(
            isinstance(e.surface_op, SurfaceReplace)
            for e in events[prev.boundary_seq : cur.boundary_seq]
        )
        if prev.header_seq == cur.header_seq and not replaced:
            n = len(prev.request.messages)
            assert list(cur.request.messages[:n]) == list(prev.request.messages)
            extensions += 1
        elif replaced:
            assert cur.request.messages[0].source["plugin"] == "compact"
    assert extensions == 3
