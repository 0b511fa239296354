"""The official openai and anthropic SDKs against the mock, over both transports: in process
(``httpx2.MockTransport``) and the loopback server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from openai import AsyncOpenAI

from dsh_testkit.mock import ErrorReply, MockDeepSeek, MockHandler, MockServer, Reply, ToolCall

from ._helpers import API_KEY

LONG = " ".join(f"Rule {i}: answer politely and cite rule {i - 1}." for i in range(250))
TOOL: Any = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
OFF = {"thinking": {"type": "disabled"}}


@dataclass
class Wire:
    """One way to reach the mock: a base URL and the httpx2 clients to get there."""

    mock: MockDeepSeek
    base_url: str
    inprocess: bool

    def client(self) -> httpx2.Client:
        if self.inprocess:
            return httpx2.Client(transport=httpx2.MockTransport(MockHandler(self.mock)))
        return httpx2.Client()

    def async_client(self) -> httpx2.AsyncClient:
        if self.inprocess:
            return httpx2.AsyncClient(transport=httpx2.MockTransport(MockHandler(self.mock)))
        return httpx2.AsyncClient()

    def openai(self, key: str = API_KEY) -> openai.OpenAI:
        return openai.OpenAI(
            base_url=self.base_url, api_key=key, http_client=self.client(), max_retries=0
        )

    def async_openai(self) -> AsyncOpenAI:
        return AsyncOpenAI(
            base_url=self.base_url, api_key=API_KEY, http_client=self.async_client(), max_retries=0
        )

    def anthropic(self, key: str = API_KEY) -> anthropic.Anthropic:
        return anthropic.Anthropic(
            base_url=self.base_url + "/anthropic",
            api_key=key,
            http_client=self.client(),
            max_retries=0,
        )


@pytest.fixture(params=["inprocess", "server"])
def wire(request: pytest.FixtureRequest) -> Iterator[Wire]:
    mock = MockDeepSeek(api_keys={API_KEY})
    if request.param == "inprocess":
        yield Wire(mock=mock, base_url="https://api.deepseek.com", inprocess=True)
    else:
        with MockServer(mock) as server:
            yield Wire(mock=mock, base_url=server.base_url, inprocess=False)


def test_openai_non_streaming_text_and_usage(wire: Wire) -> None:
    wire.mock.push(Reply(reasoning="thinking it over", text="Hello!"))
    with wire.openai() as client:
        answer = client.chat.completions.create(
            model="deepseek-v4-flash", messages=[{"role": "user", "content": "hi"}]
        )
    message = answer.choices[0].message
    assert message.content == "Hello!"
    assert message.model_extra is not None
    assert message.model_extra["reasoning_content"] == "thinking it over"
    assert answer.choices[0].finish_reason == "stop"
    assert answer.model == "deepseek-v4-flash"
    usage = answer.usage
    assert usage is not None and usage.prompt_tokens > 0
    assert (
        usage.completion_tokens_details is not None
        and (usage.completion_tokens_details.reasoning_tokens or 0) > 0
    )
    assert usage.model_extra is not None
    assert usage.model_extra["prompt_cache_miss_tokens"] == usage.prompt_tokens


async def test_openai_streaming_with_reasoning_and_usage_on_the_last_chunk(wire: Wire) -> None:
    wire.mock.push(Reply(reasoning="let me see", text="The answer is 42.", chunk_size=3))
    async with wire.async_openai() as client:
        stream = await client.chat.completions.create(
            model="deepseek-v4-flash",
            messages=[{"role": "user", "content": "meaning?"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        received = [chunk async for chunk in stream]
    text = "".join(c.choices[0].delta.content or "" for c in received)
    reasoning = "".join(
        (c.choices[0].delta.model_extra or {}).get("reasoning_content") or "" for c in received
    )
    assert (text, reasoning) == ("The answer is 42.", "let me see")
    assert all(len(c.choices) == 1 for c in received)  # no empty-choices usage chunk
    assert [c.usage is not None for c in received] == [False] * (len(received) - 1) + [True]
    assert received[-1].choices[0].finish_reason == "stop"


def test_openai_tool_calls_streamed_in_fragments_and_whole(wire: Wire) -> None:
    call = ToolCall(name="get_weather", arguments='{"city": "Paris"}', fragments=4)
    wire.mock.push(Reply(tool_calls=(call,)), Reply(tool_calls=(call,)))
    with wire.openai() as client:
        stream = client.chat.completions.create(
            model="deepseek-v4-flash",
            messages=[{"role": "user", "content": "weather in Paris?"}],
            tools=[TOOL],
            stream=True,
            extra_body=OFF,
        )
        fragments: list[str] = []
        ids: set[str] = set()
        finish = None
        for chunk in stream:
            for delta in chunk.choices[0].delta.tool_calls or []:
                if delta.id:
                    ids.add(delta.id)
                if delta.function and delta.function.arguments:
                    fragments.append(delta.function.arguments)
            finish = chunk.choices[0].finish_reason or finish
        whole = client.chat.completions.create(
            model="deepseek-v4-flash",
            messages=[{"role": "user", "content": "weather in Paris?"}],
            tools=[TOOL],
            extra_body=OFF,
        )
    assert len(fragments) == 4 and json.loads("".join(fragments)) == {"city": "Paris"}
    assert finish == "tool_calls" and len(ids) == 1
    calls = whole.choices[0].message.tool_calls
    assert calls is not None and calls[0].function.name == "get_weather"  # type: ignore[union-attr]
    assert whole.choices[0].finish_reason == "tool_calls"


def test_openai_a_second_request_extending_the_first_hits_the_cache(wire: Wire) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": LONG},
        {"role": "user", "content": "one"},
    ]
    with wire.openai() as client:
        first = client.chat.completions.create(model="deepseek-chat", messages=messages)  # type: ignore[arg-type]
        messages += [
            first.choices[0].message.model_dump(exclude_none=True),
            {"role": "user", "content": "two"},
        ]
        second = client.chat.completions.create(model="deepseek-chat", messages=messages)  # type: ignore[arg-type]
    assert first.usage is not None and second.usage is not None
    assert first.usage.prompt_tokens_details.cached_tokens == 0  # type: ignore[union-attr]
    assert second.usage.model_extra is not None
    hit = second.usage.model_extra["prompt_cache_hit_tokens"]
    assert hit > 0 and second.usage.prompt_tokens_details.cached_tokens == hit  # type: ignore[union-attr]
    assert second.usage.model_extra["prompt_cache_miss_tokens"] == second.usage.prompt_tokens - hit


def test_openai_rate_limit_is_a_rate_limit_error_with_retry_after(wire: Wire) -> None:
    wire.mock.push(ErrorReply(status=429, retry_after="2"))
    with wire.openai() as client, pytest.raises(openai.RateLimitError) as caught:
        client.chat.completions.create(
            model="deepseek-v4-flash", messages=[{"role": "user", "content": "x"}]
        )
    assert caught.value.status_code == 429
    assert caught.value.response.headers["retry-after"] == "2"
    assert caught.value.body["message"] == "Rate Limit Reached"  # type: ignore[index]


def test_openai_unknown_model_is_a_bad_request(wire: Wire) -> None:
    with wire.openai() as client, pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    assert caught.value.body == {
        "message": "Model Not Exist",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_request_error",
    }


def test_openai_wrong_key_is_an_authentication_error(wire: Wire) -> None:
    with wire.openai(key="sk-wrong") as client, pytest.raises(openai.AuthenticationError) as caught:
        client.chat.completions.create(
            model="deepseek-v4-flash", messages=[{"role": "user", "content": "x"}]
        )
    assert caught.value.status_code == 401
    assert "sk-wrong" not in str(caught.value.body)


def test_openai_server_errors_and_models(wire: Wire) -> None:
    wire.mock.push(ErrorReply(status=503))
    with wire.openai() as client:
        with pytest.raises(openai.InternalServerError) as caught:
            client.chat.completions.create(
                model="deepseek-v4-flash", messages=[{"role": "user", "content": "x"}]
            )
        assert caught.value.status_code == 503
        assert wire.mock.pending == ()
        assert "deepseek-v4-pro" in [m.id for m in client.models.list()]


def test_anthropic_messages_stream_and_not(wire: Wire) -> None:
    wire.mock.push(
        Reply(reasoning="hmm", text="Bonjour"), Reply(reasoning="hmm", text="Bonjour", chunk_size=2)
    )
    with wire.anthropic() as client:
        message = client.messages.create(
            model="deepseek-v4-flash", max_tokens=100, messages=[{"role": "user", "content": "hi"}]
        )
        with client.messages.stream(
            model="deepseek-v4-flash", max_tokens=100, messages=[{"role": "user", "content": "hi"}]
        ) as stream:
            text = "".join(stream.text_stream)
            streamed = stream.get_final_message()
    assert [b.type for b in message.content] == ["thinking", "text"]
    assert message.content[1].text == "Bonjour"  # type: ignore[union-attr]
    assert text == "Bonjour"
    assert [b.type for b in streamed.content] == ["thinking", "text"]
    assert streamed.stop_reason == "end_turn"
    assert streamed.usage.output_tokens == message.usage.output_tokens > 1


def test_anthropic_tool_use(wire: Wire) -> None:
    tool = {
        "name": "get_weather",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}},
    }
    wire.mock.push(
        Reply(tool_calls=(ToolCall(name="get_weather", arguments='{"city":"Oslo"}', fragments=3),)),
    )
    with (
        wire.anthropic() as client,
        client.messages.stream(
            model="deepseek-v4-flash",
            max_tokens=100,
            messages=[{"role": "user", "content": "weather?"}],
            tools=[tool],  # type: ignore[list-item]
            thinking={"type": "disabled"},
        ) as stream,
    ):
        final = stream.get_final_message()
    assert final.stop_reason == "tool_use"
    use = final.content[0]
    assert use.type == "tool_use" and use.input == {"city": "Oslo"}


def test_anthropic_cache_hits_are_cache_read_input_tokens(wire: Wire) -> None:
    history: list[Any] = [{"role": "user", "content": "one"}]
    with wire.anthropic() as client:
        first = client.messages.create(
            model="deepseek-chat", max_tokens=50, system=LONG, messages=history
        )
        history += [
            {"role": "assistant", "content": [b.model_dump() for b in first.content]},
            {"role": "user", "content": "two"},
        ]
        second = client.messages.create(
            model="deepseek-chat", max_tokens=50, system=LONG, messages=history
        )
    assert first.usage.cache_read_input_tokens == 0
    assert (
        second.usage.cache_read_input_tokens is not None
        and second.usage.cache_read_input_tokens > 0
    )
    assert second.usage.cache_creation_input_tokens == 0


@pytest.mark.parametrize(
    ("entry", "error", "retry_after"),
    [
        (ErrorReply(status=429, retry_after="5"), anthropic.RateLimitError, "5"),
        (ErrorReply(status=529), anthropic.InternalServerError, None),
    ],
)
def test_anthropic_errors_surface_as_sdk_exceptions(
    wire: Wire, entry: ErrorReply, error: type[anthropic.APIStatusError], retry_after: str | None
) -> None:
    wire.mock.push(entry)
    with wire.anthropic() as client, pytest.raises(error) as caught:
        client.messages.create(
            model="deepseek-v4-flash", max_tokens=10, messages=[{"role": "user", "content": "x"}]
        )
    assert caught.value.status_code == entry.status
    assert caught.value.response.headers.get("retry-after") == retry_after
    assert wire.mock.pending == ()


def test_anthropic_validation_and_auth_errors(wire: Wire) -> None:
    with wire.anthropic() as client, pytest.raises(anthropic.BadRequestError) as bad:
        client.messages.create(
            model="gpt-4o", max_tokens=10, messages=[{"role": "user", "content": "x"}]
        )
    assert isinstance(bad.value.body, dict)
    assert bad.value.body["error"] == {
        "type": "invalid_request_error",
        "message": "Model Not Exist",
    }
    with (
        wire.anthropic(key="sk-nope") as client,
        pytest.raises(anthropic.AuthenticationError) as denied,
    ):
        client.messages.create(
            model="deepseek-v4-flash", max_tokens=10, messages=[{"role": "user", "content": "x"}]
        )
    assert denied.value.status_code == 401
    assert "sk-nope" not in str(denied.value.body) and "sk-nope" not in str(denied.value)
