"""Real traffic for the Cache Explorer's tests: an openai-SDK agent against the loopback mock.

``three_killers()`` runs a tool loop whose requests lose hits three different ways — a
timestamp in the system prompt (requests #2 and #3), a tool inserted mid-list (#5) and the
history truncated (#7 on) — and returns the mock, whose request log (with the provider-style
usage its simulator reported) is the trace.
"""

from __future__ import annotations

import openai

from dsh_testkit.mock import MockDeepSeek, MockServer, Reply, ToolCall
from tests.testkit.traces._agent import KEY, RULES, TOOLS, run_agent, tool


def replies(turns: int) -> list[Reply]:
    call = ToolCall(name="read_file", arguments='{"path": "a.txt"}')
    return [
        Reply(reasoning="Let me read it.", tool_calls=(call,)),
        Reply(text="It says hi."),
    ] * turns


CONTEXT = " ".join(f"Note {i}: the answer must quote the file exactly." for i in range(40))
"""Long user turns, so that truncating the history costs whole cache units."""


def _system(request: int) -> str:
    minute = min(request, 2)  # the clock stops moving after request #3
    return RULES + f"\nCurrent time: 2026-12-02T17:0{minute}:00Z"


def _tools(request: int) -> list[dict[str, object]]:
    return TOOLS if request < 4 else [TOOLS[0], tool("grep"), TOOLS[1]]


def three_killers() -> MockDeepSeek:
    """The mock after the agent's run (8 requests, three causes that cost hits)."""
    mock = MockDeepSeek(replies(5), passback="off")
    with MockServer(mock) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key=KEY)
        run_agent(
            client,
            [f"{ask} {CONTEXT}" for ask in ("read a.txt", "again", "once more", "last time")],
            system=_system,
            tools=_tools,
            truncate_after=6,
        )
        client.close()
    return mock
