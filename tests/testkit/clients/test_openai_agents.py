"""The OpenAI Agents SDK (``openai-agents``) as a client of the loopback mock: a tool round trip
and a streamed run over real HTTP, checked on what the mock received."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import agents
import pytest
from openai import AsyncOpenAI

from dsh_testkit.mock import MockServer, Reply, ToolCall

API_KEY = "sk-agents-test"


@pytest.fixture
def server() -> Iterator[MockServer]:
    with MockServer() as running:
        yield running


@pytest.fixture
async def client(server: MockServer) -> AsyncIterator[AsyncOpenAI]:
    async with AsyncOpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=0) as opened:
        yield opened


def _agent(client: AsyncOpenAI, *, thinking: bool, tools: list[Any] | None = None) -> Any:
    model = agents.OpenAIChatCompletionsModel(
        model="deepseek-flash" if thinking else "deepseek-chat",
        openai_client=client,
        # DeepSeek's thinking mode wants reasoning_content passed back on tool turns.
        should_replay_reasoning_content=(lambda _context: True) if thinking else None,
    )
    return agents.Agent(
        name="weather",
        instructions="You answer weather questions with the tool.",
        model=model,
        tools=tools or [],
    )


def _run_config() -> Any:
    # Tracing would export spans to OpenAI's servers: tests stay offline.
    return agents.RunConfig(tracing_disabled=True)


def _weather_tool(calls: list[str]) -> Any:
    @agents.function_tool
    def get_weather(city: str) -> str:
        """The weather in a city."""
        calls.append(city)
        return f"sunny in {city}"

    return get_weather


def _chat_bodies(server: MockServer) -> list[dict[str, Any]]:
    return [r.body for r in server.mock.requests if r.endpoint == "chat"]


@pytest.mark.parametrize("thinking", [False, True], ids=["deepseek-chat", "thinking"])
async def test_tool_round_trip(server: MockServer, client: AsyncOpenAI, thinking: bool) -> None:
    server.mock.push(
        Reply(
            reasoning="The user wants Paris." if thinking else None,
            tool_calls=(ToolCall(name="get_weather", arguments='{"city":"Paris"}', id="call_w1"),),
        ),
        Reply(text="It is sunny in Paris."),
    )
    calls: list[str] = []
    result = await agents.Runner.run(
        _agent(client, thinking=thinking, tools=[_weather_tool(calls)]),
        "Weather in Paris?",
        run_config=_run_config(),
    )

    assert result.final_output == "It is sunny in Paris."
    assert calls == ["Paris"]
    assert [r.status for r in server.mock.requests] == [200, 200]
    first, second = _chat_bodies(server)
    assert [t["function"]["name"] for t in first["tools"]] == ["get_weather"]
    # The second request extends the first: same prefix, then the call and its answer.
    assert second["messages"][: len(first["messages"])] == first["messages"]
    call_turn, answer = second["messages"][len(first["messages"]) :]
    assert call_turn["role"] == "assistant"
    assert [c["id"] for c in call_turn["tool_calls"]] == ["call_w1"]
    assert json.loads(call_turn["tool_calls"][0]["function"]["arguments"]) == {"city": "Paris"}
    if thinking:
        assert call_turn["reasoning_content"] == "The user wants Paris."
    assert answer == {"role": "tool", "tool_call_id": "call_w1", "content": "sunny in Paris"}


async def test_streamed_run(server: MockServer, client: AsyncOpenAI) -> None:
    server.mock.push(Reply(text="Streaming works, one chunk at a time.", chunk_size=4))
    result = agents.Runner.run_streamed(
        _agent(client, thinking=False), "Say something.", run_config=_run_config()
    )
    deltas: list[str] = []
    async for event in result.stream_events():
        if event.type == "raw_response_event" and event.data.type == "response.output_text.delta":
            deltas.append(event.data.delta)

    assert "".join(deltas) == "Streaming works, one chunk at a time."
    assert len(deltas) > 1  # delivered as the mock's chunks, not in one piece
    assert result.final_output == "Streaming works, one chunk at a time."
    (body,) = _chat_bodies(server)
    assert body["stream"] is True
    assert body["messages"][-1] == {"role": "user", "content": "Say something."}
