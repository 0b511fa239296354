"""Our own providers against the mock: every scripted fault ends in the right finish, the round
trip "our serialize → mock parse → mock render → our provider's parse" holds, the loop's retry
resends the same bytes on the wire, and the Anthropic-format provider works over loopback."""

from __future__ import annotations

import contextlib
import dataclasses
import json
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_core import (
    Agent,
    AgentOptions,
    GenerateOptions,
    Message,
    ReasoningBlock,
    Session,
    TextBlock,
    TextDelta,
    ToolCallBlock,
    ToolResultBlock,
    ToolSchema,
    assistant_message,
    freeze_json,
    tool,
    user_message,
)
from dsh_core._assembly import BlockAssembler
from dsh_core.providers import AnthropicProvider, DeepSeekProvider, anthropic, deepseek
from dsh_core.providers._sse import SseParser
from dsh_testkit.capture import RequestCapture
from dsh_testkit.mock import ErrorReply, MockDeepSeek, MockHandler, MockServer, Reply, ToolCall
from dsh_testkit.mock._plan import HttpRequest
from dsh_testkit.mock._script import BEHAVIOURS

from ._helpers import API_KEY

# behaviour → (finish kind, failure code or None)
EXPECTED: dict[str, tuple[str, str | None]] = {
    "connection_reset": ("error", "TRANSPORT"),
    "stream_disconnect": ("error", "TRANSPORT"),
    "partial_disconnect": ("error", "TRANSPORT"),
    "stall": ("error", "TIMEOUT"),
    "empty": ("error", "EMPTY_RESPONSE"),
    "empty_body": ("error", "STREAM_CLOSED"),
    "stream_eof": ("error", "STREAM_CLOSED"),
    "partial_eof": ("error", "STREAM_CLOSED"),
    "malformed_json": ("error", "MALFORMED_RESPONSE"),
    "malformed_event": ("error", "MALFORMED_RESPONSE"),
    # The providers read an SSE body whatever its content type (as the reference adapter does).
    "wrong_content_type": ("stop", None),
    "rate_limit": ("error", "RATE_LIMIT"),
    "server_error": ("error", "SERVER"),
    "service_unavailable": ("error", "SERVER"),
    "auth_error": ("error", "AUTH"),
    "invalid_request": ("error", "INVALID_REQUEST"),
    "context_overflow": ("error", "CONTEXT_WINDOW_EXCEEDED"),
    "quota_exceeded": ("error", "QUOTA"),
    "success": ("stop", None),
    "slow_success": ("stop", None),
    "reasoning_success": ("stop", None),
    "tool_call_success": ("tool-calls", None),
    "max_tokens": ("max-tokens", None),
}

OPTIONS = GenerateOptions(
    provider="deepseek",
    model="deepseek-v4-flash",
    messages=(user_message("hi"),),
    # tool_call_success calls "lookup": a strict mock answers only calls of offered tools
    tools=(ToolSchema(name="lookup", description="", parameters=freeze_json({"type": "object"})),),
)


def test_the_expectations_cover_the_whole_vocabulary() -> None:
    assert set(EXPECTED) == set(BEHAVIOURS)


async def run(provider: DeepSeekProvider | AnthropicProvider) -> BlockAssembler:
    assembler = BlockAssembler()
    async with provider:
        async for chunk in provider.stream(OPTIONS):
            assembler.feed(chunk)
    return assembler


def check(assembler: BlockAssembler, name: str) -> None:
    kind, code = EXPECTED[name]
    reason = assembler.finish_reason
    assert (reason.kind, reason.failure.code if reason.failure else None) == (kind, code)
    if name == "rate_limit":
        assert reason.failure is not None and reason.failure.retry_after_ms == 1000
    if kind == "stop":
        assert TextBlock(text="Hello from the mock DeepSeek.") in assembler.blocks()
    if name == "tool_call_success":
        # deepseek-v4-flash thinks by default: a reply scripted without reasoning gets one
        assert assembler.blocks() == (
            ReasoningBlock(text="I need lookup for this; I will call it."),
            ToolCallBlock(id="mock-call-1", name="lookup", arguments='{"query":"mock"}'),
        )


@pytest.mark.parametrize("provider_type", [DeepSeekProvider, AnthropicProvider])
@pytest.mark.parametrize("name", sorted(BEHAVIOURS))
async def test_every_fault_in_process(provider_type: type[Any], name: str) -> None:
    mock = MockDeepSeek([BEHAVIOURS[name]])
    base = "https://api.deepseek.com" + ("/anthropic" if provider_type is AnthropicProvider else "")
    provider = provider_type(
        api_key=API_KEY, base_url=base, transport=httpx.MockTransport(MockHandler(mock))
    )
    check(await run(provider), name)
    assert mock.pending == ()


@pytest.fixture(scope="module")
def shared_server() -> Any:
    with MockServer() as server:
        yield server


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BEHAVIOURS))
async def test_every_fault_over_the_loopback_server(shared_server: MockServer, name: str) -> None:
    shared_server.mock.reset()
    shared_server.mock.push(BEHAVIOURS[name])
    provider = DeepSeekProvider(api_key=API_KEY, base_url=shared_server.base_url, idle_timeout=0.3)
    check(await run(provider), name)
    assert shared_server.mock.requests[0].scripted


async def test_the_provider_multi_turn_tool_loop_passes_validation() -> None:
    """A thinking-mode tool round trip as the loop sends it: the mock's strict pass-back rule
    accepts what our serializer sends back."""
    mock = MockDeepSeek(
        [
            Reply(reasoning="need weather", tool_calls=(ToolCall(name="weather", arguments="{}"),)),
            Reply(text="Sunny."),
        ]
    )
    tools = (
        ToolSchema(name="weather", description="", parameters=freeze_json({"type": "object"})),
    )
    provider = DeepSeekProvider(api_key=API_KEY, transport=httpx.MockTransport(MockHandler(mock)))
    first = BlockAssembler()
    options = GenerateOptions(
        provider="deepseek",
        model="deepseek-v4-flash",
        messages=(user_message("weather?"),),
        tools=tools,
    )
    async with provider:
        async for chunk in provider.stream(options):
            first.feed(chunk)
        reply = assistant_message(first.blocks(), provider="deepseek", model="deepseek-v4-flash")
        call = reply.tool_calls[0]
        result = user_message(
            [ToolResultBlock(tool_call_id=call.id, content=(TextBlock(text="sunny"),))]
        )
        second = BlockAssembler()
        follow = GenerateOptions(
            provider="deepseek",
            model="deepseek-v4-flash",
            messages=(*options.messages, reply, result),
            tools=tools,
        )
        async for chunk in provider.stream(follow):
            second.feed(chunk)
    assert second.finish_reason.kind == "stop", second.finish_reason
    assert second.blocks()[-1] == TextBlock(text="Sunny.")
    assert mock.requests[1].body["messages"][1]["reasoning_content"] == "need weather"


# -- the round trip ------------------------------------------------------------------------------

texts = st.text(max_size=40)
ids = st.text(alphabet="abcdefghij0123456789_-", min_size=1, max_size=12)
names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz_-0123456789", min_size=1, max_size=12)
arguments = st.one_of(
    st.just("{}"),
    texts,
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=3).map(json.dumps),
)


@st.composite
def conversations(draw: st.DrawFn, *, always_reasoning: bool = False) -> tuple[Message, ...]:
    """user text, then (assistant turn with calls → their results)*, then user text: what the
    loop sends, and valid for the API's ordering rules. ``always_reasoning``: every assistant
    turn reasoned (as the API's thinking mode always does)."""
    messages: list[Message] = [user_message(draw(texts))]
    for turn in range(draw(st.integers(0, 2))):
        call_ids = draw(st.lists(ids, min_size=1, max_size=2, unique=True))
        blocks: list[Any] = []
        if always_reasoning or draw(st.booleans()):
            blocks.append(ReasoningBlock(text=draw(st.text(min_size=1, max_size=40))))
        if draw(st.booleans()):
            blocks.append(TextBlock(text=draw(texts)))
        blocks += [
            ToolCallBlock(id=f"t{turn}-{i}", name=draw(names), arguments=draw(arguments))
            for i in call_ids
        ]
        messages.append(assistant_message(blocks, provider="deepseek", model="deepseek-v4-flash"))
        messages.append(
            user_message(
                [
                    ToolResultBlock(
                        tool_call_id=f"t{turn}-{i}", content=(TextBlock(text=draw(texts)),)
                    )
                    for i in call_ids
                ]
            )
        )
    messages.append(user_message(draw(texts)))
    return tuple(messages)


replies = st.builds(
    Reply,
    text=texts,
    reasoning=st.none() | texts,
    tool_calls=st.lists(
        st.builds(ToolCall, name=names, arguments=arguments, fragments=st.integers(1, 6)),
        max_size=3,
    ).map(
        lambda calls: tuple(
            ToolCall(name=c.name, arguments=c.arguments, fragments=c.fragments, id=f"id{i}")
            for i, c in enumerate(calls)
        )
    ),
    chunk_size=st.integers(1, 9),
    finish_reason=st.sampled_from([None, "length"]),
)


def expected_blocks(reply: Reply) -> tuple[Any, ...]:
    out: list[Any] = []
    if reply.reasoning:
        out.append(ReasoningBlock(text=reply.reasoning))
    if reply.text:
        out.append(TextBlock(text=reply.text))
    if reply.finish_reason != "length":
        out += [
            ToolCallBlock(
                id=c.id or "",
                name=c.name,
                arguments=c.arguments if isinstance(c.arguments, str) else json.dumps(c.arguments),
            )
            for c in reply.tool_calls
        ]
    return tuple(out)


def as_answered(mock: MockDeepSeek, reply: Reply, thinking: bool) -> Reply:
    """The reply as the mock sent it: in thinking mode, a reply scripted without reasoning (and
    with text or calls) carries a generated one, as the live API always reasons there."""
    (request,) = mock.requests
    generated = request.extras.get("generatedReasoning")
    filled = reply.reasoning is None and bool(reply.text or reply.tool_calls) and thinking
    assert (generated is not None) == filled, (generated, reply, request.body.get("thinking"))
    return dataclasses.replace(reply, reasoning=generated) if generated is not None else reply


def round_trip(mock: MockDeepSeek, path: str, body: bytes, translate: Any) -> BlockAssembler:
    plan = mock.handle(
        HttpRequest.build(
            "POST",
            path,
            headers=[("authorization", f"Bearer {API_KEY}"), ("content-type", "application/json")],
            body=body,
        )
    )
    assert plan.status == 200, plan.body_bytes
    parser = SseParser()
    events = parser.feed(plan.body_bytes) + parser.close()
    assembler = BlockAssembler()
    for chunk in translate(events):
        assembler.feed(chunk)
    return assembler


@given(conversations(), replies, st.sampled_from([None, "off", "high"]))
def test_deepseek_round_trip(
    messages: tuple[Message, ...], reply: Reply, effort: str | None
) -> None:
    options = GenerateOptions(
        provider="deepseek", model="deepseek-v4-flash", messages=messages, reasoning_effort=effort
    )
    body = deepseek.encode_request(options)
    # The codec round trip is under test, not scripting: the generated calls name no offered tool.
    mock = MockDeepSeek([reply], strict_tools=False)
    assembler = round_trip(mock, "/chat/completions", body, deepseek.translate_events)
    assert mock.requests[0].body == json.loads(body)  # the mock parsed exactly what we sent
    reply = as_answered(
        mock, reply, deepseek.parse_request(freeze_json(json.loads(body))).thinking_on
    )
    if not expected_blocks(reply) and reply.finish_reason != "length":
        assert assembler.finish_reason.failure is not None
        assert assembler.finish_reason.failure.code == "EMPTY_RESPONSE"
        return
    assert assembler.blocks() == expected_blocks(reply)
    kind = {"length": "max-tokens"}.get(
        reply.finish_reason or "", "tool-calls" if reply.tool_calls else "stop"
    )
    assert assembler.finish_reason.kind == kind
    assert assembler.usage is not None and assembler.usage.prompt_tokens > 0


@given(conversations(), replies, st.sampled_from([None, "off", "high"]))
def test_anthropic_round_trip(
    messages: tuple[Message, ...], reply: Reply, effort: str | None
) -> None:
    """Turns with and without reasoning, in and out of thinking mode: the mock's pass-back rule
    accepts every history our serializer sends."""
    reply = Reply(
        text=reply.text,
        reasoning=reply.reasoning,
        # the Anthropic format carries tool input as an object
        tool_calls=tuple(
            ToolCall(name=c.name, arguments='{"k": 1}', id=c.id, fragments=c.fragments)
            for c in reply.tool_calls
        ),
        chunk_size=reply.chunk_size,
        finish_reason=reply.finish_reason,
    )
    options = GenerateOptions(
        provider="deepseek", model="deepseek-v4-flash", messages=messages, reasoning_effort=effort
    )
    body = anthropic.encode_request(options)
    # The codec round trip is under test, not scripting: the generated calls name no offered tool.
    mock = MockDeepSeek([reply], strict_tools=False)
    assembler = round_trip(mock, "/anthropic/v1/messages", body, anthropic.translate_events)
    assert mock.requests[0].body == json.loads(body)  # the mock parsed exactly what we sent
    parsed = anthropic.parse_request(freeze_json(json.loads(body)))
    reply = as_answered(mock, reply, parsed.thinking_on)
    if not expected_blocks(reply) and reply.finish_reason != "length":
        assert assembler.finish_reason.kind == "error"
        return
    got = assembler.blocks()
    assert [type(b) for b in got] == [type(b) for b in expected_blocks(reply)]
    for block, want in zip(got, expected_blocks(reply), strict=True):
        if isinstance(want, ToolCallBlock):
            assert isinstance(block, ToolCallBlock)
            assert (block.id, block.name, json.loads(block.arguments)) == (
                want.id,
                want.name,
                {"k": 1},
            )
        else:
            assert block == want


# -- a retried request on the wire ---------------------------------------------------------------


class FakeSleep:
    """Records the loop's retry waits and returns at once."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


@tool(description="Look a word up.")
async def lookup(args: Any, ctx: Any) -> str:
    return f"{args['q']} means mock"


@pytest.mark.parametrize("over", ["in-process", "loopback"])
async def test_a_retried_request_is_byte_identical_on_the_wire(over: str) -> None:
    """The loop resends the frozen request after a 429: the same bytes and headers reach the
    server, whatever the conversation before it (here a tool round trip with reasoning)."""
    mock = MockDeepSeek(
        [
            Reply(
                reasoning="I should look it up.",
                tool_calls=(ToolCall(name="lookup", arguments='{"q": "cache"}'),),
            ),
            ErrorReply(status=429, retry_after="2"),
            Reply(text="It means mock."),
        ],
        api_keys={API_KEY},  # a request without the key would be refused before the script
    )
    capture = RequestCapture()
    sleep = FakeSleep()
    inner: Any
    with contextlib.ExitStack() as stack:
        if over == "in-process":
            base_url, inner = "https://api.deepseek.com", httpx.MockTransport(MockHandler(mock))
        else:
            server = stack.enter_context(MockServer(mock))
            base_url, inner = server.base_url, httpx.AsyncHTTPTransport()
        provider = DeepSeekProvider(
            api_key=API_KEY, base_url=base_url, transport=capture.transport(inner)
        )
        agent = Agent(
            Session.create("retry-on-the-wire"),
            provider,
            AgentOptions(
                provider="deepseek",
                model="deepseek-v4-flash",
                system="You are terse.",
                sleep=sleep,
                random=lambda: 0.5,
            ),
            tools=[lookup],
        )
        async with provider:
            final = await agent.run("What does 'cache' mean?")
    assert final.text == "It means mock."
    assert sleep.delays == [2.0]  # the Retry-After, waited through the fake
    assert [r.status for r in mock.requests] == [200, 429, 200]
    first, failed, retried = capture.requests
    assert failed.content == retried.content  # byte for byte, not merely the same JSON
    assert failed.content != first.content
    sent = json.loads(retried.content)
    assert sent == retried.body
    assert [m["role"] for m in sent["messages"]] == ["system", "user", "assistant", "tool"]
    assert sent["messages"][2]["reasoning_content"] == "I should look it up."
    # Every header, in wire order: our provider sends nothing volatile (no retry counter, no
    # idempotency key), so the whole list must match; the key is redacted in the capture.
    assert failed.headers == retried.headers
    assert (failed.method, failed.url) == (retried.method, retried.url)
    headers = dict(retried.headers)
    assert headers["content-type"] == "application/json"
    assert headers["accept"] == "text/event-stream"
    assert headers["authorization"] == "<REDACTED>"
    assert headers["content-length"] == str(len(retried.content))
    assert [e.type for e in agent.session.events].count("llm/retry") == 1


# -- the Anthropic-format provider over the loopback server ------------------------------------

LONG_SYSTEM = " ".join(f"Rule {i}: answer politely and cite rule {i - 1}." for i in range(120))


def anthropic_options(*messages: Message, tools: tuple[ToolSchema, ...] = ()) -> GenerateOptions:
    return GenerateOptions(
        provider="deepseek",
        model="deepseek-v4-flash",
        system=LONG_SYSTEM,
        messages=messages,
        tools=tools or None,
    )


async def collect(
    provider: AnthropicProvider, options: GenerateOptions, seen: list[Any] | None = None
) -> BlockAssembler:
    assembler = BlockAssembler()
    async for chunk in provider.stream(options):
        assembler.feed(chunk)
        if seen is not None:
            seen.append(chunk)
    return assembler


async def test_the_anthropic_provider_over_the_loopback_server(server: MockServer) -> None:
    server.mock.push(
        Reply(text="Hello over a real socket.", chunk_size=3),
        Reply(tool_calls=(ToolCall(name="lookup", arguments='{"q": "cache"}', id="toolu_1"),)),
        ErrorReply(status=500, message="boom", request_id="req-500"),
    )
    question = user_message("hi")
    tools = (lookup.schema,)
    chunks: list[Any] = []
    async with AnthropicProvider(api_key=API_KEY, base_url=server.anthropic_base_url) as provider:
        first = await collect(provider, anthropic_options(question, tools=tools), chunks)
        reply = assistant_message(first.blocks(), provider="deepseek", model="deepseek-v4-flash")
        follow_up = (question, reply, user_message("look 'cache' up"))
        second = await collect(provider, anthropic_options(*follow_up, tools=tools))
        failed = await collect(provider, anthropic_options(question, tools=tools))

    assert [r.path for r in server.mock.requests] == ["/anthropic/v1/messages"] * 3
    # streaming text, arriving in several deltas
    assert first.finish_reason.kind == "stop"
    assert [c.text for c in chunks if isinstance(c, TextDelta)][:3] == ["Hel", "lo ", "ove"]
    assert TextBlock(text="Hello over a real socket.") in first.blocks()
    assert first.usage is not None and first.usage.cache_read_tokens == 0
    # a tool call, its input object read back as the arguments string
    assert second.finish_reason.kind == "tool-calls"
    (call,) = [b for b in second.blocks() if isinstance(b, ToolCallBlock)]
    assert (call.id, call.name, json.loads(call.arguments)) == ("toolu_1", "lookup", {"q": "cache"})
    # the second request extends the first: its prefix is read from the cache
    assert second.usage is not None and second.usage.cache_read_tokens is not None
    hit = second.usage.cache_read_tokens
    assert hit > 0 and hit % 64 == 0
    assert hit == server.mock.requests[1].extras["cacheHitTokens"]
    assert second.usage.prompt_tokens == server.mock.requests[1].extras["promptTokens"]
    assert second.usage.input_tokens == second.usage.prompt_tokens - hit
    # an HTTP error ends the stream with an error finish carrying the status
    reason = failed.finish_reason
    assert reason.kind == "error" and reason.failure is not None
    assert (reason.failure.code, reason.failure.status) == ("SERVER", 500)
    assert reason.failure.request_id == "req-500"
    assert failed.blocks() == ()


async def test_the_anthropic_provider_reads_its_key_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    mock = MockDeepSeek([Reply(text="keyed")], api_keys={API_KEY})
    monkeypatch.setenv("DEEPSEEK_API_KEY", API_KEY)
    with MockServer(mock) as server:
        async with AnthropicProvider(base_url=server.anthropic_base_url) as provider:
            assert API_KEY not in repr(provider)
            answered = await collect(provider, anthropic_options(user_message("hi")))
            monkeypatch.setenv("DEEPSEEK_API_KEY", "sk-some-other-key")
            refused = await collect(provider, anthropic_options(user_message("hi")))
            monkeypatch.delenv("DEEPSEEK_API_KEY")
            missing = await collect(provider, anthropic_options(user_message("hi")))
    assert answered.finish_reason.kind == "stop"
    assert TextBlock(text="keyed") in answered.blocks()
    # read at each call: a changed variable is the key the next request sends
    assert refused.finish_reason.failure is not None
    assert refused.finish_reason.failure.code == "AUTH"
    assert [r.status for r in mock.requests] == [200, 401]
    assert missing.finish_reason.failure is not None
    assert missing.finish_reason.failure.code == "MISSING_CREDENTIAL"
    assert "DEEPSEEK_API_KEY" in missing.finish_reason.failure.message
    assert len(mock.requests) == 2  # no request without a key
