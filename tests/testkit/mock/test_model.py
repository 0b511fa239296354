"""The transport-independent model: routing, auth, scripting, the default answer, usage from the
cache simulator, fault plans, the control API, reproducibility, and the key never leaking."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from dsh_testkit.mock import (
    ErrorReply,
    MockDeepSeek,
    MockRequest,
    Reply,
    Script,
    ScriptError,
    ToolCall,
)
from dsh_testkit.mock._plan import Emit, Hangup, Pause, Stall
from dsh_testkit.mock._responder import default_reply, example_arguments
from dsh_testkit.mock._script import BEHAVIOURS
from dsh_testkit.prompt import PrefixCacheSimulator

from ._helpers import (
    ANTHROPIC,
    API_KEY,
    CHAT,
    anthropic_body,
    call,
    chat_body,
    chunks,
    events,
    payload,
    user,
)

TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer"},
                "unit": {"enum": ["c", "f"]},
            },
            "required": ["city", "days", "unit"],
        },
    },
}


def text_of(plan: Any) -> str:
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks(plan))


# -- routing and auth ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path", ["/chat/completions", "/v1/chat/completions", "/chat/completions/"]
)
def test_chat_paths(mock: MockDeepSeek, path: str) -> None:
    assert call(mock, path, chat_body()).status == 200


def test_models_lists_the_table(mock: MockDeepSeek) -> None:
    for path in ("/models", "/v1/models"):
        plan = call(mock, path, method="GET")
        ids = [m["id"] for m in payload(plan)["data"]]
        assert plan.status == 200 and "deepseek-v4-flash" in ids and "deepseek-chat" in ids


@pytest.mark.parametrize(
    ("method", "path", "status", "allow"),
    [
        ("GET", "/chat/completions", 405, "POST"),
        ("POST", "/models", 405, "GET"),
        ("GET", "/anthropic/v1/messages", 405, "POST"),
        ("POST", "/nope", 404, None),
    ],
)
def test_wrong_methods_and_paths(
    mock: MockDeepSeek, method: str, path: str, status: int, allow: str | None
) -> None:
    mock.push(Reply(text="kept"))
    plan = call(mock, path, chat_body(), method=method)
    assert plan.status == status
    assert plan.header("allow") == allow
    assert mock.pending == (Reply(text="kept"),)


@pytest.mark.parametrize(
    "headers",
    [{}, {"authorization": "Basic abc"}, {"authorization": "Bearer   "}],
    ids=["none", "not bearer", "empty bearer"],
)
def test_missing_or_malformed_auth_is_401(mock: MockDeepSeek, headers: dict[str, str]) -> None:
    mock.push(Reply(text="kept"))
    plan = call(mock, CHAT, chat_body(), key=None, headers=headers)
    assert plan.status == 401
    assert payload(plan) == {
        "error": {
            "message": "Authentication Fails (auth header format should be Bearer sk-...)",
            "type": "authentication_error",
            "param": None,
            "code": "invalid_request_error",
        }
    }
    assert len(mock.pending) == 1
    assert call(mock, "/models", method="GET", key=None).status == 401


def test_a_key_outside_the_accepted_set_is_401_without_echoing_it() -> None:
    mock = MockDeepSeek(api_keys={"sk-good"})
    plan = call(mock, CHAT, chat_body(), key="sk-wrong-secret-value")
    assert plan.status == 401
    assert payload(plan)["error"]["message"] == "Authentication Fails, Your api key is invalid"
    assert b"sk-wrong" not in plan.body_bytes and b"alue" not in plan.body_bytes
    assert call(mock, CHAT, chat_body(), key="sk-good").status == 200


def test_the_anthropic_endpoint_takes_x_api_key_or_bearer(mock: MockDeepSeek) -> None:
    assert call(mock, ANTHROPIC, anthropic_body()).status == 200
    assert (
        call(
            mock,
            ANTHROPIC,
            anthropic_body(),
            key=None,
            headers={"authorization": f"Bearer {API_KEY}"},
        ).status
        == 200
    )
    plan = call(mock, ANTHROPIC, anthropic_body(), key=None)
    assert plan.status == 401
    assert payload(plan)["error"]["type"] == "authentication_error"
    assert payload(plan)["type"] == "error"


def test_a_body_that_is_not_json_is_400(mock: MockDeepSeek) -> None:
    plan = call(mock, CHAT, b"{nope")
    assert plan.status == 400
    assert payload(plan)["error"]["message"].startswith(
        "Failed to parse the request body as JSON: "
    )


def test_the_key_never_reaches_the_request_log(mock: MockDeepSeek) -> None:
    body = chat_body(user(f"my key is {API_KEY}"))
    call(mock, CHAT, body, headers={"x-custom": f"k={API_KEY}"})
    call(mock, ANTHROPIC, anthropic_body())
    call(mock, CHAT, b"not json " + API_KEY.encode())
    logged = json.dumps([r.to_json() for r in mock.requests])
    assert API_KEY not in logged
    assert ["authorization", "Bearer <REDACTED>"] in mock.requests[0].to_json()["headers"]
    assert ["x-api-key", "<REDACTED>"] in mock.requests[1].to_json()["headers"]
    assert mock.requests[0].body["messages"][0]["content"] == "my key is <REDACTED>"


def test_the_key_is_removed_from_the_log_in_every_spelling(mock: MockDeepSeek) -> None:
    """The request log keeps no spelling of the key: percent-encoded in the URL, escaped in a
    JSON string (a key with a quote, as a client may send a pasted secret), or behind a Basic
    credential's user name."""
    from base64 import b64encode
    from urllib.parse import quote

    odd = 'sk-"quoted"/secret+1'
    body = chat_body(user(f"pasted {odd}"))
    call(mock, f"{CHAT}?key={quote(odd, safe='')}", body, key=odd)
    basic = b64encode(b"user:hunter2-password").decode()
    call(
        mock,
        CHAT,
        chat_body(user("mine is hunter2-password")),
        key=None,
        headers={"authorization": f"Basic {basic}"},
    )
    logged = json.dumps([r.to_json() for r in mock.requests], ensure_ascii=False)
    for spelling in (odd, quote(odd, safe=""), json.dumps(odd)[1:-1], "hunter2-password"):
        assert spelling not in logged
    assert mock.requests[0].body["messages"][0]["content"] == "pasted <REDACTED>"
    assert mock.requests[1].body["messages"][0]["content"] == "mine is <REDACTED>"


def test_an_internal_failure_is_a_500_not_a_crash(
    mock: MockDeepSeek, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(request: MockRequest) -> Reply:
        raise RuntimeError(f"boom {API_KEY}")

    mock.respond_with(broken)
    plan = call(mock, CHAT, chat_body())
    assert plan.status == 500
    error = payload(plan)["error"]
    assert error["code"] == "MOCK_INTERNAL_ERROR" and "RuntimeError: boom" in error["message"]
    assert API_KEY not in error["message"]
    trace = capsys.readouterr().err
    assert "RuntimeError: boom <REDACTED>" in trace and API_KEY not in trace
    mock.respond_with(None)
    assert call(mock, CHAT, chat_body()).status == 200
    assert repr(mock) == "MockDeepSeek(pending=0, requests=2)"


# -- scripting ------------------------------------------------------------------------------------


def test_entries_answer_in_order_then_the_default(mock: MockDeepSeek) -> None:
    mock.push(Reply(text="one"), ErrorReply(status=503), Reply(text="three"))
    assert payload(call(mock, CHAT, chat_body()))["choices"][0]["message"]["content"] == "one"
    assert call(mock, CHAT, chat_body()).status == 503
    assert payload(call(mock, CHAT, chat_body()))["choices"][0]["message"]["content"] == "three"
    answer = payload(call(mock, CHAT, chat_body(user("what now?"))))
    assert answer["choices"][0]["message"]["content"] == "Mock DeepSeek reply to: what now?"
    assert [r.scripted for r in mock.requests] == [True, True, True, False]
    mock.assert_consumed()


def test_assert_consumed_names_the_next_unused_entry(mock: MockDeepSeek) -> None:
    mock.push(Reply(text="never"))
    with pytest.raises(AssertionError) as caught:
        mock.assert_consumed()
    assert str(caught.value) == (
        '1 scripted entry was never used; the next: {"kind": "reply", "text": "never"}'
    )


def test_push_refuses_what_is_not_an_entry(mock: MockDeepSeek) -> None:
    with pytest.raises(ScriptError, match="must be a Reply or ErrorReply"):
        mock.push("hello")  # type: ignore[arg-type]


def test_a_responder_callable_sees_the_validated_request() -> None:
    seen: list[MockRequest] = []

    def responder(request: MockRequest) -> Reply | None:
        seen.append(request)
        return (
            Reply(text=f"echo {request.last_user_text}")
            if request.model == "deepseek-v4-pro"
            else None
        )

    mock = MockDeepSeek(responder)
    answer = payload(
        call(mock, CHAT, chat_body(user("ping"), model="deepseek-v4-pro", user_id="u-1"))
    )
    assert answer["choices"][0]["message"]["content"] == "echo ping"
    assert payload(call(mock, CHAT, chat_body()))["choices"][0]["message"]["content"].startswith(
        "Mock DeepSeek"
    )
    first = seen[0]
    assert (first.endpoint, first.thinking, first.user_id, first.stream, first.seq) == (
        "chat",
        True,
        "u-1",
        False,
        1,
    )
    assert first.parsed.model == "deepseek-v4-pro"


def test_a_responder_returning_garbage_is_an_internal_error() -> None:
    mock = MockDeepSeek(lambda request: "nope")  # type: ignore[arg-type,return-value]
    plan = call(mock, CHAT, chat_body())
    assert plan.status == 500
    assert (
        "a responder must return a Reply, an ErrorReply or None"
        in payload(plan)["error"]["message"]
    )


def test_exhaustion_modes() -> None:
    erroring = MockDeepSeek([Reply(text="only")], on_exhausted="error")
    assert call(erroring, CHAT, chat_body()).status == 200
    plan = call(erroring, CHAT, chat_body())
    assert plan.status == 410 and payload(plan)["error"]["code"] == "MOCK_SCRIPT_EXHAUSTED"
    message = payload(plan)["error"]["message"]
    assert message.startswith(
        "MOCK_SCRIPT_EXHAUSTED: nothing scripted answers request 2 (POST /chat/completions; "
        "model deepseek-v4-flash; last user message "
    )
    assert "the script queue is empty" in message
    repeating = MockDeepSeek(Script(entries=(ErrorReply(status=429),), on_exhausted="repeat-last"))
    assert [call(repeating, CHAT, chat_body()).status for _ in range(3)] == [429, 429, 429]


def test_the_exhausted_refusal_never_quotes_a_key_from_the_prompt() -> None:
    """The 410 quotes the last user message; a key pasted there (key-shaped, glued to a word,
    or the request's own credential in any shape) is redacted before it reaches the client."""
    shaped = "sk-FAKE" + "0a1b2c3d4e5f6a7b8c9d" + "0e1f2a3b4c5d"
    own = "own-credential-FAKE-42"
    mock = MockDeepSeek([], on_exhausted="error")
    mock.route(last_user="never").reply(text="unused")
    prompt = f"the key x{shaped} and {own}"
    plan = call(mock, CHAT, chat_body(user(prompt)), key=own)
    assert plan.status == 410
    error = payload(plan)["error"]
    for text in (error["message"], json.dumps(error)):
        assert shaped not in text and own not in text
    assert "<REDACTED>" in error["message"]
    assert "last user message 'the key x<REDACTED>" in error["message"]


def test_reset_restores_the_initial_script_and_forgets_everything() -> None:
    mock = MockDeepSeek([Reply(text="first")], seed=3)
    before = call(mock, CHAT, chat_body()).body_bytes
    call(mock, CHAT, chat_body())
    mock.reset()
    assert mock.requests == () and mock.pending == (Reply(text="first"),)
    assert call(mock, CHAT, chat_body()).body_bytes == before


def test_the_same_seed_gives_byte_identical_answers() -> None:
    script = [Reply(text="x", tool_calls=(ToolCall(name="get_weather", arguments="{}"),))]
    bodies = chat_body(tools=[TOOL], stream=True)
    one = call(MockDeepSeek(script, seed=5), CHAT, bodies).body_bytes
    two = call(MockDeepSeek(script, seed=5), CHAT, bodies).body_bytes
    other = call(MockDeepSeek(script, seed=6), CHAT, bodies).body_bytes
    assert one == two and one != other


def test_generated_tool_call_ids_have_the_v4_shape(mock: MockDeepSeek) -> None:
    mock.push(Reply(tool_calls=(ToolCall(name="a"), ToolCall(name="b", id="mine"))))
    tools = [{"type": "function", "function": {"name": name}} for name in ("a", "b")]
    calls = payload(call(mock, CHAT, chat_body(tools=tools)))["choices"][0]["message"]["tool_calls"]
    assert calls[0]["id"].startswith("call_00_") and len(calls[0]["id"]) == len("call_00_") + 24
    assert calls[1]["id"] == "mine"


# -- the default answer -----------------------------------------------------------------------------


def test_default_answer_thinks_in_thinking_mode_only(mock: MockDeepSeek) -> None:
    thinking = payload(call(mock, CHAT, chat_body(user("hi"))))["choices"][0]["message"]
    assert thinking["reasoning_content"] == "The user wrote 2 characters; I will answer directly."
    plain = payload(call(mock, CHAT, chat_body(user("hi"), model="deepseek-chat")))["choices"][0][
        "message"
    ]
    assert "reasoning_content" not in plain and plain["content"] == "Mock DeepSeek reply to: hi"


def test_default_answer_calls_the_tool_tool_choice_demands(mock: MockDeepSeek) -> None:
    off = {"thinking": {"type": "disabled"}}
    for choice in ("required", {"type": "function", "function": {"name": "get_weather"}}):
        answer = payload(call(mock, CHAT, chat_body(tools=[TOOL], tool_choice=choice, **off)))[
            "choices"
        ][0]
        assert answer["finish_reason"] == "tool_calls"
        function = answer["message"]["tool_calls"][0]["function"]
        assert function["name"] == "get_weather"
        assert json.loads(function["arguments"]) == {"city": "mock", "days": 1, "unit": "c"}
    auto = payload(call(mock, CHAT, chat_body(tools=[TOOL])))["choices"][0]
    assert auto["finish_reason"] == "stop" and "tool_calls" not in auto["message"]


def test_default_answer_after_a_tool_result(mock: MockDeepSeek) -> None:
    body = chat_body(
        user("weather?"),
        {"role": "assistant", "content": "", "reasoning_content": "r", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
        ]},
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        tools=[TOOL],
    )  # fmt: skip
    message = payload(call(mock, CHAT, body))["choices"][0]["message"]
    assert message["content"] == "Mock DeepSeek: the tool returned its result."
    assert message["reasoning_content"] == "The tool result is in; I will summarize it."


def test_default_answer_on_the_anthropic_endpoint_uses_tool_choice_any(mock: MockDeepSeek) -> None:
    tool = {
        "name": "lookup",
        "input_schema": {
            "type": "object",
            "properties": {"q": {"type": "string"}},
            "required": ["q"],
        },
    }
    body = anthropic_body(tools=[tool], tool_choice={"type": "any"}, thinking={"type": "disabled"})
    message = payload(call(mock, ANTHROPIC, body))
    assert message["stop_reason"] == "tool_use"
    assert message["content"] == [
        {
            "type": "tool_use",
            "id": message["content"][0]["id"],
            "name": "lookup",
            "input": {"q": "mock"},
        }
    ]
    assert message["content"][0]["id"].startswith("toolu_")


@pytest.mark.parametrize(
    ("schema", "arguments"),
    [
        ({}, {}),
        (
            {
                "type": "object",
                "properties": {"a": {"type": ["null", "number"]}},
                "required": ["a"],
            },
            {"a": 1.5},
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"const": 7}, "b": {"type": "boolean"}},
                "required": ["a", "b"],
            },
            {"a": 7, "b": True},
        ),
        (
            {
                "type": "object",
                "properties": {"a": {"type": "array"}, "n": {"type": "null"}},
                "required": ["a", "n", 3],
            },
            {"a": [], "n": None},
        ),
        (
            {
                "type": "object",
                "properties": {
                    "o": {
                        "type": "object",
                        "properties": {"x": {"type": "string"}},
                        "required": ["x"],
                    }
                },
                "required": ["o"],
            },
            {"o": {"x": "mock"}},
        ),
        (
            {"type": "object", "properties": {"z": {}}, "required": ["z", "missing"]},
            {"z": "mock", "missing": "mock"},
        ),
        ({"type": "object", "required": ["a"]}, {}),
    ],
)
def test_example_arguments_satisfy_the_schema(
    schema: dict[str, Any], arguments: dict[str, Any]
) -> None:
    assert json.loads(example_arguments(schema)) == arguments


def test_default_reply_is_a_pure_function_of_the_request(mock: MockDeepSeek) -> None:
    captured: list[MockRequest] = []
    mock.respond_with(lambda r: captured.append(r))
    long_text = "word " * 100
    call(mock, CHAT, chat_body(user(long_text)))
    reply = default_reply(captured[0])
    assert reply == default_reply(captured[0])
    assert reply.text.endswith("…") and len(reply.text) < 160


# -- usage and the cache ------------------------------------------------------------------------------

LONG = " ".join(f"fact {i} is that the number {i} follows {i - 1}." for i in range(300))


def usage_of(plan: Any) -> dict[str, Any]:
    return payload(plan)["usage"]


def test_a_request_extending_the_previous_one_hits_the_cache(mock: MockDeepSeek) -> None:
    first = chat_body({"role": "system", "content": LONG}, user("one"), model="deepseek-chat")
    u1 = usage_of(call(mock, CHAT, first))
    assert u1["prompt_cache_hit_tokens"] == 0
    reply = payload(call(MockDeepSeek(), CHAT, first))["choices"][0]["message"]
    second = chat_body(*first["messages"], reply, user("two"), model="deepseek-chat")
    u2 = usage_of(call(mock, CHAT, second))
    assert u2["prompt_cache_hit_tokens"] > 0
    assert u2["prompt_cache_hit_tokens"] % 64 == 0
    assert u2["prompt_tokens"] == u2["prompt_cache_hit_tokens"] + u2["prompt_cache_miss_tokens"]
    assert u2["prompt_tokens_details"]["cached_tokens"] == u2["prompt_cache_hit_tokens"]
    assert mock.requests[-1].extras["cacheHitTokens"] == u2["prompt_cache_hit_tokens"]


def test_the_cache_is_isolated_per_key_and_user_id(mock: MockDeepSeek) -> None:
    body = chat_body({"role": "system", "content": LONG}, user("one"), model="deepseek-chat")
    call(mock, CHAT, body)
    assert usage_of(call(mock, CHAT, body))["prompt_cache_hit_tokens"] > 0
    assert usage_of(call(mock, CHAT, body, key="sk-other"))["prompt_cache_hit_tokens"] == 0
    assert usage_of(call(mock, CHAT, {**body, "user_id": "alice"}))["prompt_cache_hit_tokens"] == 0
    keys = {r.extras["isolationKey"] for r in mock.requests}
    assert len(keys) == 3 and all(API_KEY not in k for k in keys)


def test_the_anthropic_endpoint_reports_the_same_hits_as_cache_read() -> None:
    chat = chat_body({"role": "system", "content": LONG}, user("one"), model="deepseek-chat")
    same = anthropic_body(user("one"), model="deepseek-chat", system=LONG)
    via_chat = MockDeepSeek()
    call(via_chat, CHAT, chat)
    hit = usage_of(call(via_chat, CHAT, chat))["prompt_cache_hit_tokens"]
    via_anthropic = MockDeepSeek()
    call(via_anthropic, ANTHROPIC, same)
    usage = payload(call(via_anthropic, ANTHROPIC, same))["usage"]
    assert usage["cache_read_input_tokens"] == hit > 0
    assert usage["cache_creation_input_tokens"] == 0
    prompt = via_anthropic.requests[-1].extras["promptTokens"]
    assert usage["input_tokens"] + usage["cache_read_input_tokens"] == prompt
    mixed = MockDeepSeek()  # one cache behind both endpoints
    call(mixed, CHAT, chat)
    assert payload(call(mixed, ANTHROPIC, same))["usage"]["cache_read_input_tokens"] == hit


def test_a_custom_cache_simulator_is_used() -> None:
    cache = PrefixCacheSimulator(rules="2024", granularity=128)
    mock = MockDeepSeek(cache=cache)
    body = chat_body({"role": "system", "content": LONG}, user("one"))
    call(mock, CHAT, body)
    assert usage_of(call(mock, CHAT, body))["prompt_cache_hit_tokens"] % 128 == 0
    assert mock.cache is cache and cache.units(next(iter(cache._keys)))


def test_reasoning_tokens_are_reported_in_thinking_mode_only(mock: MockDeepSeek) -> None:
    mock.push(Reply(reasoning="a b c d", text="x"), Reply(text="x"))
    thinking = usage_of(call(mock, CHAT, chat_body()))
    assert thinking["completion_tokens_details"]["reasoning_tokens"] > 0
    assert thinking["completion_tokens"] > thinking["completion_tokens_details"]["reasoning_tokens"]
    assert "completion_tokens_details" not in usage_of(
        call(mock, CHAT, chat_body(model="deepseek-chat"))
    )


# -- fault plans ----------------------------------------------------------------------------------------


def stream_plan(mock: MockDeepSeek, entry: Reply, **fields: Any) -> Any:
    mock.push(entry)
    return call(mock, CHAT, chat_body(stream=True, **fields))


def test_a_stream_is_chunked_sse_ending_in_done(mock: MockDeepSeek) -> None:
    plan = stream_plan(mock, Reply(text="hello world", chunk_size=4))
    assert plan.framing == "chunked"
    assert plan.header("content-type") == "text/event-stream; charset=utf-8"
    assert re.fullmatch(r"[0-9a-f]{32}", plan.header("x-ds-trace-id") or "")
    assert all(isinstance(a, Emit) for a in plan.body)
    assert events(plan)[-1].data == "[DONE]"
    assert text_of(plan) == "hello world"


def test_keep_alives_and_pacing(mock: MockDeepSeek) -> None:
    plan = stream_plan(mock, Reply(text="hi", keep_alives=2, pace_ms=5))
    assert plan.body[:4] == (Pause(seconds=0.005), Emit(data=b": keep-alive\n\n")) * 2
    assert all(isinstance(a, Pause) for a in plan.body[::2])
    mock.push(Reply(text="hi", keep_alives=3))
    blocking = call(mock, CHAT, chat_body())
    assert blocking.body_bytes.startswith(b"\n\n\n{")
    assert json.loads(blocking.body_bytes)["choices"][0]["message"]["content"] == "hi"


@pytest.mark.parametrize(
    ("fault", "after", "tail"),
    [("disconnect", 2, Hangup()), ("stall", 1, Stall()), ("eof", 3, None)],
)
def test_stream_cuts(mock: MockDeepSeek, fault: Any, after: int, tail: Any) -> None:
    plan = stream_plan(
        mock, Reply(text="abcdefghijklmnop", chunk_size=2, fault=fault, fault_after=after)
    )
    emitted = [a for a in plan.body if isinstance(a, Emit)]
    assert len(emitted) == after
    if tail is None:  # eof: the body ends cleanly after the last whole chunk
        assert plan.body[-1] == emitted[-1]
        assert not any(isinstance(a, (Hangup, Stall)) for a in plan.body)
        assert plan.body_bytes.endswith(b"\n\n") and plan.abort is None
    else:
        assert plan.body[-1] == tail
    assert b"[DONE]" not in plan.body_bytes


def test_reset_and_hang_abort_before_any_byte(mock: MockDeepSeek) -> None:
    assert stream_plan(mock, Reply(text="x", fault="reset")).abort == "reset"
    assert stream_plan(mock, Reply(text="x", fault="hang")).abort == "hang"
    mock.push(Reply(fault="reset"))
    assert call(mock, CHAT, chat_body()).abort == "reset"


def test_malformed_chunks_are_inserted_and_the_rest_follows(mock: MockDeepSeek) -> None:
    plan = stream_plan(mock, Reply(text="hi", fault="malformed-json", fault_after=1))
    datas = [e.data for e in events(plan)]
    assert datas[1] == "{not-json" and datas[-1] == "[DONE]"
    plan = stream_plan(mock, Reply(text="hi", fault="malformed-event", fault_after=0))
    assert json.loads(events(plan)[0].data)["choices"] == [None]


def test_empty_body_and_wrong_content_type(mock: MockDeepSeek) -> None:
    empty = stream_plan(mock, Reply(text="x", fault="empty-body"))
    assert empty.status == 200 and empty.body_bytes == b""
    wrong = stream_plan(mock, Reply(text="x", fault="wrong-content-type"))
    assert wrong.header("content-type") == "application/json" and b"[DONE]" in wrong.body_bytes


@pytest.mark.parametrize(
    ("fault", "check"),
    [
        (
            "disconnect",
            lambda p: isinstance(p.body[-1], Hangup) and p.declared_length > len(p.body_bytes),
        ),
        (
            "stall",
            lambda p: isinstance(p.body[-1], Stall) and p.declared_length > len(p.body_bytes),
        ),
        ("eof", lambda p: p.declared_length == len(p.body_bytes) > 0),
        ("malformed-json", lambda p: p.body_bytes == b"{not-json"),
        ("malformed-event", lambda p: json.loads(p.body_bytes)["choices"] == [None]),
        ("empty-body", lambda p: p.body_bytes == b"" and p.declared_length == 0),
        ("wrong-content-type", lambda p: p.header("content-type").startswith("text/html")),
    ],
)
def test_faults_of_a_json_answer(mock: MockDeepSeek, fault: str, check: Any) -> None:
    mock.push(Reply(text="some answer text", fault=fault))  # type: ignore[arg-type]
    plan = call(mock, CHAT, chat_body())
    assert plan.framing == "length"
    assert check(plan)


def test_anthropic_stream_faults_use_named_events(mock: MockDeepSeek) -> None:
    mock.push(
        Reply(text="hi", fault="malformed-event", fault_after=1),
        Reply(text="hi", fault="eof", fault_after=2),
    )
    names = [e.event for e in events(call(mock, ANTHROPIC, anthropic_body(stream=True)))]
    assert names[:2] == ["message_start", "content_block_delta"] and names[-1] == "message_stop"
    cut = call(mock, ANTHROPIC, anthropic_body(stream=True))
    assert [e.event for e in events(cut)] == ["message_start", "content_block_start"]


def test_http_error_entries(mock: MockDeepSeek) -> None:
    mock.push(
        ErrorReply(status=429, retry_after="3", request_id="req-1", headers=(("x-extra", "1"),)),
        ErrorReply(status=502, body="<html>bad gateway</html>"),
        ErrorReply(status=400, body={"custom": True}),
        BEHAVIOURS["context_overflow"],
    )
    limited = call(mock, CHAT, chat_body())
    assert limited.status == 429
    assert (
        limited.header("retry-after"),
        limited.header("x-ds-trace-id"),
        limited.header("x-extra"),
    ) == ("3", "req-1", "1")
    assert limited.header("x-request-id") is None  # DeepSeek never sends one
    assert payload(limited)["error"] == {
        "message": "Rate Limit Reached",
        "type": "rate_limit_error",
        "param": None,
        "code": "rate_limit_reached",
    }
    gateway = call(mock, CHAT, chat_body())
    assert (gateway.status, gateway.body_bytes) == (502, b"<html>bad gateway</html>")
    assert gateway.header("content-type") == "text/plain; charset=utf-8"
    assert payload(call(mock, CHAT, chat_body())) == {"custom": True}
    overflow = payload(call(mock, CHAT, chat_body()))["error"]
    assert overflow["code"] == "invalid_request_error"  # DeepSeek's, not OpenAI's
    assert overflow["message"].startswith("This model's maximum context length is 1048576 tokens")


def test_http_errors_on_the_anthropic_endpoint_have_its_shape(mock: MockDeepSeek) -> None:
    mock.push(ErrorReply(status=529, message="Overloaded"), ErrorReply(status=418))
    overloaded = payload(call(mock, ANTHROPIC, anthropic_body()))
    assert overloaded["error"] == {"type": "overloaded_error", "message": "Overloaded"}
    teapot = payload(call(mock, ANTHROPIC, anthropic_body()))
    assert teapot["error"] == {"type": "invalid_request_error", "message": "HTTP 418"}


# -- the control API ----------------------------------------------------------------------------------


def test_control_api_pushes_lists_and_resets(mock: MockDeepSeek) -> None:
    added = call(mock, "/_dsh/script", [{"text": "a"}, {"behaviour": "rate_limit"}], key=None)
    assert payload(added) == {"queued": 2, "added": 2}
    assert (
        payload(call(mock, "/_dsh/script", {"kind": "reply", "text": "c"}, key=None))["queued"] == 3
    )
    listed = payload(call(mock, "/_dsh/script", method="GET", key=None))
    assert [e.get("text") for e in listed["entries"]] == ["a", None, "c"]
    call(mock, CHAT, chat_body())
    log = payload(call(mock, "/_dsh/requests", method="GET", key=None))["requests"]
    assert [r["status"] for r in log] == [200] and log[0]["entry"] == {"kind": "reply", "text": "a"}
    assert log[0]["headers"][1] == ["authorization", "Bearer <REDACTED>"]
    assert payload(call(mock, "/_dsh/reset", key=None)) == {"reset": True}
    assert mock.pending == () and mock.requests == ()


def test_control_api_takes_a_script_document(mock: MockDeepSeek) -> None:
    document = {"version": 1, "onExhausted": "error", "entries": [{"text": "x"}]}
    assert payload(call(mock, "/_dsh/script", document, key=None))["added"] == 1
    assert mock.on_exhausted == "error"


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"{nope", "body: not valid JSON"),
        ({"kind": "nope"}, "body.kind: unknown entry kind"),
        ([{"text": 1}], "body[0].text"),
    ],
)
def test_control_api_refuses_bad_scripts(mock: MockDeepSeek, body: Any, words: str) -> None:
    plan = call(mock, "/_dsh/script", body, key=None)
    assert plan.status == 400
    assert words in payload(plan)["error"]["message"]
    assert payload(plan)["error"]["code"] == "invalid_script"
    assert mock.pending == ()


def test_control_api_wrong_method_and_path(mock: MockDeepSeek) -> None:
    plan = call(mock, "/_dsh/reset", method="GET", key=None)
    assert (plan.status, plan.header("allow")) == (405, "POST")
    assert call(mock, "/_dsh/nope", method="GET", key=None).status == 404


def test_default_answer_without_any_user_text(mock: MockDeepSeek) -> None:
    body = chat_body({"role": "system", "content": "be brief"}, model="deepseek-chat")
    assert (
        payload(call(mock, CHAT, body))["choices"][0]["message"]["content"]
        == "Mock DeepSeek reply."
    )


def test_default_answer_for_a_named_anthropic_tool(mock: MockDeepSeek) -> None:
    tools = [
        {"name": "a", "input_schema": {"type": "object"}},
        {"name": "b", "input_schema": {"type": "object"}},
    ]
    body = anthropic_body(
        tools=tools, tool_choice={"type": "tool", "name": "b"}, thinking={"type": "disabled"}
    )
    content = payload(call(mock, ANTHROPIC, body))["content"]
    assert [(b["type"], b["name"]) for b in content] == [("tool_use", "b")]


def test_default_answer_after_an_anthropic_tool_result(mock: MockDeepSeek) -> None:
    use = {"type": "tool_use", "id": "toolu_1", "name": "a", "input": {}}
    body = anthropic_body(
        user("go"),
        {"role": "assistant", "content": [use]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "done"}],
        },
        tools=[{"name": "a", "input_schema": {"type": "object"}}],
        thinking={"type": "disabled"},
    )
    content = payload(call(mock, ANTHROPIC, body))["content"]
    assert content == [{"type": "text", "text": "Mock DeepSeek: the tool returned its result."}]


def test_example_arguments_stop_at_a_depth_limit() -> None:
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(12):
        schema = {"type": "object", "properties": {"n": schema}, "required": ["n"]}
    depth, value = 0, json.loads(example_arguments(schema))
    while value:
        value, depth = value["n"], depth + 1
    assert depth == 9


def test_api_errors_leave_out_an_absent_code() -> None:
    from dsh_testkit.mock._api_errors import ApiError

    assert ApiError(status=400, message="m", code=None).to_json() == {
        "status": 400,
        "message": "m",
        "type": "invalid_request_error",
    }
    assert ApiError(status=400, message="m", param="p").to_json()["param"] == "p"


def test_a_reset_leaves_the_cache_untouched_and_a_cut_answer_persists_its_input() -> None:
    body = chat_body({"role": "system", "content": LONG}, user("one"), model="deepseek-chat")
    reset = MockDeepSeek([Reply(text="x", fault="reset")])
    call(reset, CHAT, body)
    assert usage_of(call(reset, CHAT, body))["prompt_cache_hit_tokens"] == 0
    cut = MockDeepSeek([Reply(text="x", fault="eof")])
    call(cut, CHAT, body)
    assert usage_of(call(cut, CHAT, body))["prompt_cache_hit_tokens"] > 0


# -- the end-of-output unit on tool turns -------------------------------------------------------

ANTHROPIC_TOOL = {
    "name": "get_weather",
    "description": "Weather for a city.",
    "input_schema": TOOL["function"]["parameters"],
}


def _one_token_cache() -> PrefixCacheSimulator:
    # granularity 1: a hit is the matched unit's exact length, so the assertions are exact
    return PrefixCacheSimulator(granularity=1, interval_tokens=None)


@pytest.mark.parametrize("thinking", ["enabled", "disabled"])
@pytest.mark.parametrize(
    "arguments",
    [
        '{"city":"Paris","days":2,"unit":"c"}',  # compact: not json.dumps's spacing
        '{ "city" : "Paris" }',
        "not json",  # the mock answers input {} and the client sends {} back
        "[1, 2]",  # not an object: likewise {}
    ],
)
def test_an_anthropic_tool_turn_sent_back_hits_the_end_of_output_unit(
    thinking: str, arguments: str
) -> None:
    mock = MockDeepSeek(
        [
            Reply(
                reasoning="look it up",
                tool_calls=(ToolCall(name="get_weather", arguments=arguments),),
            ),
            Reply(text="Sunny."),
        ],
        cache=_one_token_cache(),
    )
    fields = {"tools": [ANTHROPIC_TOOL], "thinking": {"type": thinking}, "system": LONG}
    first = anthropic_body(user("weather in Paris?"), **fields)
    answer = payload(call(mock, ANTHROPIC, first))
    use = next(b for b in answer["content"] if b["type"] == "tool_use")
    result = {"type": "tool_result", "tool_use_id": use["id"], "content": "sunny"}
    second = anthropic_body(
        *first["messages"],
        {"role": "assistant", "content": answer["content"]},
        {"role": "user", "content": [result]},
        **fields,
    )
    usage = payload(call(mock, ANTHROPIC, second))["usage"]
    first_prompt = mock.requests[0].extras["promptTokens"]
    # the hit covers the whole first prompt and the whole first answer
    assert usage["cache_read_input_tokens"] == first_prompt + answer["usage"]["output_tokens"]


def test_a_chat_tool_turn_sent_back_hits_the_end_of_output_unit() -> None:
    mock = MockDeepSeek(
        [
            Reply(tool_calls=(ToolCall(name="get_weather", arguments='{"city":"Paris"}'),)),
            Reply(text="Sunny."),
        ],
        cache=_one_token_cache(),
    )
    first = chat_body(user("weather in Paris?"), tools=[TOOL], thinking={"type": "disabled"})
    answer = payload(call(mock, CHAT, first))
    message = answer["choices"][0]["message"]
    result = {"role": "tool", "tool_call_id": message["tool_calls"][0]["id"], "content": "sunny"}
    second = chat_body(
        *first["messages"], message, result, tools=[TOOL], thinking={"type": "disabled"}
    )
    usage = usage_of(call(mock, CHAT, second))
    expected = answer["usage"]["prompt_tokens"] + answer["usage"]["completion_tokens"]
    assert usage["prompt_cache_hit_tokens"] == expected


@pytest.mark.parametrize("path", [CHAT, ANTHROPIC])
def test_the_prompt_renderer_reads_the_frozen_body_as_it_is(
    monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """The model hands the validated request's frozen body to the renderer without copying
    it, and rendering the frozen body equals rendering the plain one."""
    from dsh_core import FrozenDict
    from dsh_testkit.prompt import PromptRenderer

    seen: list[Any] = []
    for name in ("render_chat", "render_anthropic"):
        original = getattr(PromptRenderer, name)

        def spy(self: Any, body: Any, *, thinking: bool | None = None, _o: Any = original) -> Any:
            seen.append(body)
            return _o(self, body, thinking=thinking)

        monkeypatch.setattr(PromptRenderer, name, spy)
    mock = MockDeepSeek()
    body = (
        chat_body(user("one"), tools=[TOOL])
        if path == CHAT
        else anthropic_body(user("one"), tools=[ANTHROPIC_TOOL])
    )
    call(mock, path, body)
    (given,) = seen
    assert isinstance(given, FrozenDict) and given == body
    monkeypatch.undo()
    renderer = PromptRenderer()
    render = renderer.render_chat if path == CHAT else renderer.render_anthropic
    assert render(given, thinking=True) == render(body, thinking=True)
