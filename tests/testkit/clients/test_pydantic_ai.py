"""pydantic-ai (``pydantic-ai-slim[openai]``) as a client of the loopback mock: a tool round trip
and a streamed run over real HTTP, through pydantic-ai's own DeepSeek provider, checked on what
the mock received."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pydantic_ai
import pytest
from openai import AsyncOpenAI
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.deepseek import DeepSeekProvider

from dsh_testkit.mock import MockServer, Reply, ToolCall

API_KEY = "sk-pydantic-ai-test"


@pytest.fixture
def server() -> Iterator[MockServer]:
    with MockServer() as running:
        yield running


@pytest.fixture
async def client(server: MockServer) -> AsyncIterator[AsyncOpenAI]:
    async with AsyncOpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=0) as opened:
        yield opened


def _model(client: AsyncOpenAI, name: str) -> OpenAIChatModel:
    return OpenAIChatModel(name, provider=DeepSeekProvider(openai_client=client))


def _chat_bodies(server: MockServer) -> list[dict[str, Any]]:
    return [r.body for r in server.mock.requests if r.endpoint == "chat"]


@pytest.mark.parametrize("model", ["deepseek-chat", "deepseek-flash"])
async def test_tool_round_trip(server: MockServer, client: AsyncOpenAI, model: str) -> None:
    thinking = model == "deepseek-flash"  # thinking by default; deepseek-chat does not think
    server.mock.push(
        Reply(
            reasoning="Look the weather up." if thinking else None,
            tool_calls=(ToolCall(name="get_weather", arguments='{"city":"Oslo"}', id="call_p1"),),
        ),
        Reply(text="Oslo: light snow."),
    )
    agent = pydantic_ai.Agent(_model(client, model), instructions="Use the weather tool.")
    calls: list[str] = []

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather in a city."""
        calls.append(city)
        return f"light snow in {city}"

    result = await agent.run("Weather in Oslo?")

    assert result.output == "Oslo: light snow."
    assert calls == ["Oslo"]
    assert [r.status for r in server.mock.requests] == [200, 200]
    first, second = _chat_bodies(server)
    assert [t["function"]["name"] for t in first["tools"]] == ["get_weather"]
    assert second["messages"][: len(first["messages"])] == first["messages"]
    call_turn, answer = second["messages"][len(first["messages"]) :]
    assert [c["id"] for c in call_turn["tool_calls"]] == ["call_p1"]
    assert json.loads(call_turn["tool_calls"][0]["function"]["arguments"]) == {"city": "Oslo"}
    if thinking:
        assert call_turn["reasoning_content"] == "Look the weather up."
    assert answer["role"] == "tool" and answer["tool_call_id"] == "call_p1"
    assert answer["content"] == "light snow in Oslo"


async def test_streamed_run(server: MockServer, client: AsyncOpenAI) -> None:
    server.mock.push(Reply(text="Streamed by pydantic-ai, chunk by chunk.", chunk_size=5))
    agent = pydantic_ai.Agent(_model(client, "deepseek-chat"))
    deltas: list[str] = []
    async with agent.run_stream("Say something.") as result:
        async for delta in result.stream_text(delta=True, debounce_by=None):
            deltas.append(delta)

    assert "".join(deltas) == "Streamed by pydantic-ai, chunk by chunk."
    assert len(deltas) > 1
    (body,) = _chat_bodies(server)
    assert body["stream"] is True
    assert body["messages"][-1] == {"role": "user", "content": "Say something."}
