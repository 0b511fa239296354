"""Request capture for any httpx/httpx2 client, and the doctor's assert_prefix_stable on it."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, cast

import httpx
import httpx2
import openai
import pytest

from dsh_core import FrozenDict, GenerateOptions, ToolSchema, assistant_message, user_message
from dsh_testkit._errors import PrefixInstability, TestkitError
from dsh_testkit.capture import CapturedRequest, RequestCapture, capture_requests
from dsh_testkit.doctor import assert_prefix_stable
from dsh_testkit.prompt._wire_view import WireView
from dsh_testkit.traces import TraceError, trace_of

KEY = "sk-" + "Q1w2E3r4T5" * 4
BASE = "https://api.deepseek.com"


def completion(request: Any) -> dict[str, Any]:
    body = json.loads(request.content)
    turn = sum(1 for m in body["messages"] if m["role"] == "user")
    return {
        "id": "c",
        "object": "chat.completion",
        "created": 0,
        "model": body["model"],
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": f"answer {turn}"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }


def httpx2_handler(request: httpx2.Request) -> httpx2.Response:
    return httpx2.Response(200, json=completion(request))


TOOL = {"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}


def run_agent(
    client: openai.OpenAI,
    *,
    turns: int,
    bust: Callable[[int, list[dict[str, Any]], dict[str, Any]], None] | None = None,
) -> None:
    """A minimal chat agent over the openai SDK: keeps the history and resends it each turn."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are terse.\nBe kind."}]
    for turn in range(turns):
        messages.append({"role": "user", "content": f"question {turn}"})
        params: dict[str, Any] = {"model": "deepseek-v4-flash", "tools": [TOOL]}
        if bust is not None:
            bust(turn, messages, params)
        reply = client.chat.completions.create(messages=cast(Any, messages), **params)
        messages.append({"role": "assistant", "content": reply.choices[0].message.content})


def sdk(capture: RequestCapture) -> openai.OpenAI:
    transport = capture.transport(httpx2.MockTransport(httpx2_handler))
    return openai.OpenAI(api_key=KEY, base_url=BASE, http_client=httpx2.Client(transport=transport))


# ------------------------------------------------------------------------------- capture


def test_transport_capture_records_exact_wire_requests_with_credentials_redacted() -> None:
    capture = RequestCapture()
    run_agent(sdk(capture), turns=2)
    assert len(capture) == 2
    first = capture[0]
    assert (first.method, first.url) == ("POST", f"{BASE}/chat/completions")
    assert first.json["messages"][-1] == {"role": "user", "content": "question 0"}
    assert json.loads(first.content) == first.json == first.body and first.is_chat
    headers = dict(first.headers)
    assert headers["authorization"] == "<REDACTED>"
    assert KEY not in repr(capture.requests) and KEY not in str(first.headers)
    assert repr(first) == (
        f"CapturedRequest(POST {BASE}/chat/completions, {len(first.content)} bytes → 200)"
    )
    assert [r.json["messages"][-1]["content"] for r in capture] == ["question 0", "question 1"]
    assert capture[0:1] == [first]


async def test_transport_capture_wraps_async_transports() -> None:
    capture = RequestCapture()
    transport = capture.transport(httpx.MockTransport(lambda r: httpx.Response(200, json={})))
    async with httpx.AsyncClient(transport=transport) as client:
        await client.post(f"{BASE}/x", content=b"raw bytes")
    assert capture.requests[0].content == b"raw bytes"
    assert capture.requests[0].body is None and capture.requests[0].json is None
    assert not capture.requests[0].is_chat


def test_transport_capture_closes_the_inner_transport() -> None:
    closed = []

    class Inner(httpx.BaseTransport):
        def handle_request(self, request: httpx.Request) -> httpx.Response:
            return httpx.Response(204)

        def close(self) -> None:
            closed.append(True)

    capture = RequestCapture()
    with httpx.Client(transport=capture.transport(Inner())) as client:
        client.get(BASE)
    assert closed == [True] and len(capture) == 1


def test_event_hook_capture_on_sync_and_async_clients() -> None:
    capture = RequestCapture()
    client = capture.install(
        httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(200)))
    )
    client.post(f"{BASE}/a", json={"messages": []})
    client.close()
    sdk_client = capture.install(httpx2.Client(transport=httpx2.MockTransport(httpx2_handler)))
    openai.OpenAI(api_key=KEY, base_url=BASE, http_client=sdk_client).chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}]
    )
    assert [r.url for r in capture] == [f"{BASE}/a", f"{BASE}/chat/completions"]


async def test_event_hook_capture_on_an_async_client() -> None:
    capture = RequestCapture()
    client = capture.install(
        httpx.AsyncClient(transport=httpx.MockTransport(lambda r: httpx.Response(200)))
    )
    async with client:
        await client.post(f"{BASE}/a", json={"messages": []})
    assert capture.chat_requests() == capture.requests and len(capture) == 1


def test_capture_requests_sees_clients_the_agent_builds_itself() -> None:
    with capture_requests() as capture:
        client = openai.OpenAI(
            api_key=KEY,
            base_url=BASE,
            http_client=httpx2.Client(transport=httpx2.MockTransport(httpx2_handler)),
        )
        run_agent(client, turns=3)
        httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(200))).get(
            f"{BASE}/models"
        )
    assert len(capture) == 4 and len(capture.chat_requests()) == 3
    assert_prefix_stable(capture)
    capture.clear()
    assert list(capture) == []


async def test_capture_requests_sees_async_clients() -> None:
    with capture_requests() as capture:
        async with httpx.AsyncClient(
            transport=httpx.MockTransport(lambda r: httpx.Response(200))
        ) as client:
            await client.post(f"{BASE}/a", json={"messages": []})
    assert len(capture) == 1


def test_capture_requests_unpatches_on_exit() -> None:
    with capture_requests() as capture:
        pass
    httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(200))).get(BASE)
    assert len(capture) == 0


# ------------------------------------------------------------------------------- prefix stability


def test_a_stable_agent_passes() -> None:
    capture = RequestCapture()
    run_agent(sdk(capture), turns=4)
    assert_prefix_stable(capture.requests)
    assert_prefix_stable(capture)


@pytest.mark.parametrize(
    ("bust", "expected"),
    [
        (
            lambda turn, messages, params: messages.__setitem__(
                0, {"role": "system", "content": f"You are terse.\nTime: 12:0{turn}"}
            ),
            "system line 2 differs: request #1: 'Time: 12:00', request #2: 'Time: 12:01'",
        ),
        (
            lambda turn, messages, params: params.update(
                tools=[TOOL, {"type": "function", "function": {"name": "grep"}}] if turn else [TOOL]
            ),
            "tool 'grep' only in request #2",
        ),
        (
            lambda turn, messages, params: params.update(tools=[] if turn else [TOOL]),
            "tool 'read' only in request #1",
        ),
        (
            lambda turn, messages, params: params.update(
                model="deepseek-v4-pro" if turn else "deepseek-v4-flash"
            ),
            "model differs: request #1: 'deepseek-v4-flash', request #2: 'deepseek-v4-pro'",
        ),
        (
            lambda turn, messages, params: (
                turn and messages[1].update(content="question 0 (edited)")
            ),
            # the wire's index: the system message is messages[0] of the captured body
            "messages[1].content differs: request #1: 'question 0', request #2: 'question 0 (edited)'",
        ),
    ],
    ids=["timestamp-in-system", "tool-added", "tool-removed", "model-switch", "history-edited"],
)
def test_a_busting_agent_fails_naming_the_first_divergence(bust: Any, expected: str) -> None:
    capture = RequestCapture()
    run_agent(sdk(capture), turns=3, bust=bust)
    with pytest.raises(PrefixInstability) as caught:
        assert_prefix_stable(capture.requests)
    error = caught.value
    assert error.index == 1
    assert error.diff[0].startswith(expected), error.diff
    assert str(error).startswith(
        "request #2 does not extend request #1, so the provider's prefix cache cannot reuse it"
    )
    assert isinstance(error, AssertionError) and isinstance(error, TestkitError)


def test_a_truncating_agent_fails_at_the_request_that_cut_its_history() -> None:
    """The agent drops its oldest exchange before the third request: that request is compared
    with the one it cuts (not taken for a new conversation, as it resends an answer)."""
    capture = RequestCapture()

    def drop_the_oldest_exchange(turn: int, messages: list[dict[str, Any]], params: Any) -> None:
        if turn == 2:  # [system, question 0, answer 1, question 1, answer 2, question 2]
            del messages[1:3]

    run_agent(sdk(capture), turns=3, bust=drop_the_oldest_exchange)
    with pytest.raises(PrefixInstability) as caught:
        assert_prefix_stable(capture)
    assert caught.value.index == 2
    assert str(caught.value).startswith("request #3 does not extend request #2")
    assert caught.value.diff[0].startswith(
        "messages[1].content differs: request #2: 'question 0', request #3: 'question 1'"
    )


def test_a_truncated_history_names_the_missing_message() -> None:
    first = {
        "model": "m",
        "messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}],
    }
    second = {"model": "m", "messages": [{"role": "user", "content": "a"}]}
    with pytest.raises(PrefixInstability) as caught:
        assert_prefix_stable([first, second])
    assert caught.value.diff == (
        "messages: request #1 has 2, request #2 has 1 "
        '(first missing: messages[1] {"role":"assistant","content":"b"})',
    )


def test_message_indexes_are_those_of_the_captured_wire_body() -> None:
    """The index counts the system message, so it points into the body a user inspects.

    The third request starts with the first one's whole prompt, then resends that request's
    answer edited: it is compared with the first request and its answer."""
    capture = RequestCapture()

    def rewrite_the_first_answer(turn: int, messages: list[dict[str, Any]], params: Any) -> None:
        if turn == 2:  # [system, question 0, answer 1, question 1, answer 2, question 2]
            messages[2] = {"role": "assistant", "content": "answer 1 (rewritten)"}

    run_agent(sdk(capture), turns=3, bust=rewrite_the_first_answer)
    with pytest.raises(PrefixInstability) as caught:
        assert_prefix_stable(capture.requests)
    assert caught.value.index == 2
    assert str(caught.value).startswith("request #3 does not extend request #1")
    (difference,) = caught.value.diff
    assert difference.startswith(
        "history-rewritten at messages[2].content line 1 column 9: messages[2] is the model's "
        "answer resent edited"
    )
    wire = capture.requests[2].json["messages"]
    assert wire[0]["role"] == "system" and wire[2]["content"] == "answer 1 (rewritten)"


def test_message_indexes_without_a_system_message_start_at_zero() -> None:
    question = {"role": "user", "content": "q"}
    first = {"model": "m", "messages": [question, {"role": "assistant", "content": "a"}]}
    second = {"model": "m", "messages": [question, {"role": "assistant", "content": "b"}]}
    with pytest.raises(PrefixInstability) as caught:
        assert_prefix_stable([first, second])
    assert caught.value.diff == ("messages[1].content differs: request #1: 'a', request #2: 'b'",)


def test_unrelated_conversations_are_not_compared() -> None:
    # Requests that share no cache unit, no system prompt and no first message are two
    # conversations (two agents on one client): each is checked on its own.
    a1 = {
        "model": "m",
        "messages": [{"role": "system", "content": "agent A"}, {"role": "user", "content": "a"}],
    }
    b1 = {
        "model": "m",
        "messages": [{"role": "system", "content": "agent B"}, {"role": "user", "content": "b"}],
    }
    a2 = {"model": "m", "messages": [*a1["messages"], {"role": "assistant", "content": "x"}]}
    b2 = {"model": "m", "messages": [*b1["messages"], {"role": "assistant", "content": "y"}]}
    assert_prefix_stable([a1, b1, a2, b2])
    # A3 edits agent A's first question and resends its answer: a rewrite of A's history.
    a3 = {
        "model": "m",
        "messages": [
            a1["messages"][0],
            {"role": "user", "content": "edited"},
            {"role": "assistant", "content": "x"},
            {"role": "user", "content": "next"},
        ],
    }
    with pytest.raises(PrefixInstability) as caught:
        assert_prefix_stable([a1, b1, a2, b2, a3])
    assert caught.value.index == 4
    assert str(caught.value).startswith("request #5 does not extend request #3")
    assert caught.value.diff[0] == (
        "messages[1].content differs: request #3: 'a', request #5: 'edited'"
    )


def test_message_indexes_name_both_sides_when_their_system_messages_differ_in_number() -> None:
    from dsh_testkit.prompt._diff import chat_view, diff_chat

    one = chat_view(
        {
            "model": "m",
            "messages": [
                {"role": "system", "content": "s\nt"},
                {"role": "user", "content": "a"},
            ],
        }
    )
    two = chat_view(
        {
            "model": "m",
            "messages": [
                {"role": "system", "content": "s"},
                {"role": "developer", "content": "t"},
                {"role": "user", "content": "b"},
            ],
        },
        use_provider_codec=False,
    )
    assert one is not None and two is not None
    assert (one.message_offset, two.message_offset) == (1, 2)
    assert diff_chat(one, two) == (
        "messages[1].content differs: recorded: 'a', request: 'b' (in request: messages[2])",
    )
    shorter = chat_view({"model": "m", "messages": [{"role": "system", "content": "s\nt"}]})
    assert shorter is not None
    assert diff_chat(two, shorter) == (
        "messages: recorded has 3, request has 1 "
        '(first missing: messages[2] {"role":"user","content":"b"})',
    )
    assert diff_chat(shorter, two) == (
        "messages: recorded has 1, request has 3 "
        '(first extra: messages[2] {"role":"user","content":"b"})',
    )


def test_generate_options_are_checked_as_the_wire_bodies_the_provider_sends() -> None:
    """Their view indexes options.messages (the system prompt is apart); the doctor checks the
    bodies the provider serializes from them, so a failure names the wire body's index."""
    from dsh_testkit.prompt._diff import chat_view_of_options

    a = GenerateOptions(
        provider="deepseek", model="m", messages=(user_message("a", id="1"),), system="s"
    )
    # The second edits the first question and goes on: it continues the first (it resends an
    # answer), so the edit is a rewrite, not a new conversation.
    answer = assistant_message("x", provider="deepseek", model="m", id="2")
    b = GenerateOptions(
        provider="deepseek",
        model="m",
        messages=(user_message("b", id="1"), answer, user_message("c", id="3")),
        system="s",
    )
    assert chat_view_of_options(a).message_offset == 0
    with pytest.raises(PrefixInstability) as caught:
        assert_prefix_stable([a, b])
    assert caught.value.diff[0] == "messages[1].content differs: request #1: 'a', request #2: 'b'"


def test_config_changes_other_than_the_model_do_not_bust_the_prefix() -> None:
    first = {"model": "m", "temperature": 0.1, "messages": [{"role": "user", "content": "a"}]}
    second = {
        "model": "m",
        "temperature": 0.9,
        "stream": True,
        "messages": [{"role": "user", "content": "a"}],
    }
    assert_prefix_stable([first, json.dumps(second).encode()])


def test_anthropic_shaped_bodies_compare_their_top_level_system() -> None:
    question = [{"role": "user", "content": "q"}]
    first = {"model": "m", "system": [{"type": "text", "text": "one"}], "messages": question}
    # The second goes on from the first question (an answer, a new question): a continuation
    # whose system prompt changed.
    more = [{"role": "assistant", "content": "a"}, {"role": "user", "content": "r"}]
    second = {"model": "m", "system": "two", "messages": [*question, *more]}
    with pytest.raises(
        PrefixInstability, match="system line 1 differs: request #1: 'one', request #2: 'two'"
    ):
        assert_prefix_stable([first, second])


def test_non_chat_requests_are_skipped_and_indexes_are_those_of_the_model_requests() -> None:
    chat = {"model": "m", "messages": [{"role": "user", "content": "a"}]}
    with pytest.raises(PrefixInstability) as caught:
        assert_prefix_stable([chat, {"no": "messages"}, {**chat, "model": "n"}])
    # The index counts model requests only (the trace's exchanges): 1, not 2.
    assert caught.value.index == 1
    assert str(caught.value).startswith("request #2 does not extend request #1")
    assert caught.value.diff == ("model differs: request #1: 'm', request #2: 'n'",)


def test_a_capture_with_a_non_chat_request_checks_its_model_requests() -> None:
    capture = RequestCapture()
    client = sdk(capture)
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "a"}])
    listing = capture.transport(httpx2.MockTransport(lambda r: httpx2.Response(200, json={})))
    httpx2.Client(transport=listing).get(f"{BASE}/models")
    client.chat.completions.create(model="n", messages=[{"role": "user", "content": "a"}])
    assert [r.is_chat for r in capture] == [True, False, True]
    with pytest.raises(PrefixInstability) as caught:
        assert_prefix_stable(capture)
    assert trace_of(capture)[caught.value.index].model == "n"
    assert capture[2].json["model"] == "n"  # the capture's own index of that request


def test_a_mixed_list_is_refused_naming_what_it_holds() -> None:
    chat = {"model": "m", "messages": [{"role": "user", "content": "a"}]}
    models = CapturedRequest(method="GET", url=f"{BASE}/models", headers=(), content=b"")
    with pytest.raises(TraceError, match="got CapturedRequest"):
        assert_prefix_stable([chat, models])
    with pytest.raises(TraceError, match="got bytes"):
        assert_prefix_stable([chat, b"not json"])


def test_generate_options_are_accepted() -> None:
    tools = (
        ToolSchema(name="read", description="Read a file", parameters=FrozenDict(type="object")),
    )
    base = GenerateOptions(
        provider="deepseek",
        model="m",
        messages=(user_message("a", id="1"),),
        system="s",
        tools=tools,
    )
    answer = assistant_message("x", provider="deepseek", model="m", id="2")
    longer = GenerateOptions(
        provider="deepseek",
        model="m",
        messages=(user_message("a", id="1"), answer, user_message("b", id="3")),
        system="s",
        tools=tools,
    )
    assert_prefix_stable([base, longer])
    with pytest.raises(PrefixInstability, match="tool 'read' only in request #1"):
        assert_prefix_stable(
            [
                longer,
                GenerateOptions(
                    provider="deepseek", model="m", messages=longer.messages, system="s"
                ),
            ]
        )


def test_capture_refuses_objects_of_other_http_libraries() -> None:
    with pytest.raises(
        TypeError, match="expected an httpx or httpx2 client or transport, got object"
    ):
        RequestCapture().transport(object())


def test_unsupported_items_are_refused() -> None:
    with pytest.raises(
        TraceError, match="a trace is made of wire bodies, captured or received requests; got int"
    ):
        assert_prefix_stable([42])
    with pytest.raises(TraceError, match="got object"):
        assert_prefix_stable(object())


def test_zero_or_one_request_is_trivially_stable() -> None:
    assert_prefix_stable([])
    assert_prefix_stable([{"model": "m", "messages": []}])


# ------------------------------------------------------------------------------- the diff vocabulary


def test_diff_names_changed_tools_reordered_tools_and_config_on_either_side() -> None:
    from dsh_testkit.prompt._diff import chat_view, diff_chat

    grep = {"type": "function", "function": {"name": "grep", "parameters": {"type": "object"}}}
    before = chat_view(
        {"model": "m", "stop": ["x"], "tools": [TOOL, grep], "messages": []},
        use_provider_codec=False,
    )
    changed = {**grep, "function": {"name": "grep", "parameters": {"type": "array"}}}
    after = chat_view(
        {"model": "m", "seed": 1, "tools": [TOOL, changed], "messages": []},
        use_provider_codec=False,
    )
    assert before is not None and after is not None
    assert diff_chat(before, after) == (
        'stop: only in recorded (["x"])',
        "seed: only in request (1)",
        "tool 'grep'.function.parameters.type differs: recorded: 'object', request: 'array'",
    )
    reordered = chat_view(
        {"model": "m", "stop": ["x"], "tools": [grep, TOOL], "messages": []},
        use_provider_codec=False,
    )
    assert reordered is not None
    assert diff_chat(before, reordered) == (
        "tools: order differs: recorded: ['read', 'grep'], request: ['grep', 'read']",
    )


def test_diff_names_message_fields_on_one_side_and_shorter_systems() -> None:
    from dsh_testkit.prompt._diff import diff_chat

    a = WireView(system=("one\ntwo",), messages=({"role": "user", "content": "x", "name": "n"},))
    b = WireView(system=("one",), messages=({"role": "user", "content": "x", "extra": [1, 2]},))
    assert diff_chat(a, b) == (
        "system line 2 only in recorded: 'two' (recorded has 2 lines, request has 1)",
        "messages[0].name: only in recorded ('n')",
    )
    long = WireView(messages=({"content": "y" * 100},))
    assert diff_chat(WireView(), long)[0].endswith("…)")


def test_diff_of_opaque_or_unnamed_tools() -> None:
    from dsh_testkit.prompt._diff import diff_chat

    assert diff_chat(WireView(tools="{{tools}}"), WireView(tools=({"x": 1},))) == (
        "tools differ: recorded: the placeholder '{{tools}}', request: ['{\"x\":1}']",
    )
    assert diff_chat(WireView(tools=({"name": "a"},)), WireView(tools=({"x": 1},))) == (
        "tool '{\"x\":1}' only in request",
        "tool 'a' only in recorded",
    )


def test_chat_view_reads_deepseek_bodies_through_the_provider_codec() -> None:
    from dsh_testkit.prompt._diff import chat_view

    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "temperature": None}
    through_codec = chat_view(json.dumps(body))
    plain = chat_view(body, use_provider_codec=False)
    assert through_codec is not None and plain is not None
    assert "temperature" not in through_codec.params and plain.params["temperature"] is None
    assert chat_view(b"not json") is None and chat_view({"no": "messages"}) is None
    refused = chat_view(
        {
            "model": "m",
            "messages": [{"role": "developer", "content": "x"}, {"role": "user", "content": "y"}],
        }
    )
    assert refused is not None and refused.system == ("x",)  # the codec refuses it: plain JSON


def test_capture_over_real_http_against_the_loopback_mock() -> None:
    from dsh_testkit.mock import MockDeepSeek, MockServer

    capture = RequestCapture()
    # This minimal agent drops reasoning_content from its history; a real one must keep it.
    with MockServer(MockDeepSeek(passback="tool-calls")) as server:
        transport = capture.transport(httpx2.HTTPTransport())
        client = openai.OpenAI(
            api_key=KEY, base_url=server.base_url, http_client=httpx2.Client(transport=transport)
        )
        run_agent(client, turns=3)
        client.close()
    assert len(capture.chat_requests()) == 3
    assert_prefix_stable(capture.requests)
    assert KEY not in repr(capture.requests[0].headers)


# ------------------------------------------------------------------------------- visible differences

LONG_LINE = ("Answer briefly and cite the file you read. " * 5)[:200]
STAMP = " 2026-12-02T17:00:01Z"


def test_a_timestamp_appended_to_a_long_system_line_shows_in_prefix_instability() -> None:
    """A real httpx client against the in-process mock: the failure shows the appended stamp."""
    from dsh_testkit.mock import MockDeepSeek, mock_transport

    mock = MockDeepSeek()
    capture = RequestCapture()
    history: list[dict[str, Any]] = [{"role": "user", "content": "question 0"}]
    transport = capture.transport(mock_transport(mock))
    with httpx.Client(transport=transport, base_url=BASE) as client:
        for stamp in ("", STAMP):
            system = {"role": "system", "content": LONG_LINE + stamp}
            response = client.post(
                "/chat/completions",
                json={"model": "deepseek-v4-flash", "messages": [system, *history]},
                headers={"Authorization": f"Bearer {KEY}"},
            )
            assert response.status_code == 200, response.text
            answer = response.json()["choices"][0]["message"]["content"]
            history += [
                {"role": "assistant", "content": answer},
                {"role": "user", "content": "question 1"},
            ]
    assert len(mock.requests) == 2
    with pytest.raises(PrefixInstability) as caught:
        assert_prefix_stable(capture)
    (difference,) = caught.value.diff
    assert difference == (
        "system line 1 differs at column 201: "
        f"request #1: …{LONG_LINE[-32:]!r} (the text ends here), "
        f"request #2: …{LONG_LINE[-32:] + STAMP!r}"
    )
    assert STAMP in str(caught.value)
    assert KEY not in str(caught.value)


def test_tool_call_ids_are_renamed_in_both_formats_and_nothing_else_changes() -> None:
    from dsh_testkit.prompt._wire_view import tool_ids_renamed

    chat: dict[str, Any] = {
        "model": "deepseek-v4-flash",
        "messages": [
            {"role": "user", "content": "Read it."},
            {"role": "assistant", "tool_calls": [{"id": "call_a", "type": "function"}]},
            {"role": "tool", "tool_call_id": "call_a", "content": "ok"},
        ],
    }
    anthropic: dict[str, Any] = {
        "messages": [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_b", "name": "r"}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_b"}]},
        ]
    }
    seen: list[str] = []

    def rename(value: str) -> str:
        seen.append(value)
        return value.upper()

    renamed = tool_ids_renamed(chat, rename)
    assert renamed["messages"][1]["tool_calls"][0]["id"] == "CALL_A"
    assert renamed["messages"][2]["tool_call_id"] == "CALL_A"
    assert chat["messages"][2]["tool_call_id"] == "call_a"  # the input is not changed
    renamed = tool_ids_renamed(anthropic, rename)
    assert renamed["messages"][0]["content"][0]["id"] == "TOOLU_B"
    assert renamed["messages"][1]["content"][0]["tool_use_id"] == "TOOLU_B"
    assert seen == ["call_a", "call_a", "toolu_b", "toolu_b"]
    assert tool_ids_renamed({"prompt": "x"}, rename) == {"prompt": "x"}
