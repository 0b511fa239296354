"""Routes on the mock (answers picked by what a request holds), how they combine with the ordered
script, the control API for them, the reasoning the mock fills in for thinking mode, the named
message in a pass-back refusal, and the bound on the call-tools answer."""

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
    RouteMatch,
    Script,
    ScriptError,
    ToolCall,
)

from ._helpers import ANTHROPIC, CHAT, anthropic_body, call, chat_body, chunks, payload, user

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
SPAWN = {
    "type": "function",
    "function": {
        "name": "spawn_agent",
        "parameters": {
            "type": "object",
            "properties": {"task": {"type": "string"}},
            "required": ["task"],
        },
    },
}
OFF = {"thinking": {"type": "disabled"}}


def text_of(plan: Any) -> str:
    body = payload(plan)
    return str(body["choices"][0]["message"]["content"])


def reasoning_of(plan: Any) -> Any:
    return payload(plan)["choices"][0]["message"].get("reasoning_content")


# -- matching -------------------------------------------------------------------------------------


def test_a_route_answers_the_requests_it_matches_and_counts_them() -> None:
    mock = MockDeepSeek(on_exhausted="error")
    weather = mock.route(last_user="weather").reply(text="Sunny.")
    assert text_of(call(mock, CHAT, chat_body(user("What is the weather?"), **OFF))) == "Sunny."
    assert text_of(call(mock, CHAT, chat_body(user("And the weather now?"), **OFF))) == "Sunny."
    assert call(mock, CHAT, chat_body(user("Tell me a joke"), **OFF)).status == 410
    assert weather.call_count == 2 and weather.called
    assert [r.last_user_text for r in weather.calls] == [
        "What is the weather?",
        "And the weather now?",
    ]
    logged = mock.requests
    assert [(r.answered_by, r.route, r.scripted) for r in logged[:2]] == [("route", 1, True)] * 2
    assert logged[0].to_json()["answeredBy"] == "route" and logged[0].to_json()["route"] == 1


@pytest.mark.parametrize(
    ("matchers", "body", "why"),
    [
        ({"model": "deepseek-v4-pro"}, chat_body(), "the model is 'deepseek-v4-flash'"),
        ({"model": re.compile("pro$")}, chat_body(), "the model is 'deepseek-v4-flash'"),
        ({"last_user": re.compile(r"^\d+$")}, chat_body(), "the last user message is 'hello'"),
        ({"tools": True}, chat_body(), "no tool is offered"),
        ({"tools": False}, chat_body(tools=[WEATHER]), "tools are offered (get_weather)"),
        (
            {"tools": ["get_weather", "spawn_agent"]},
            chat_body(tools=[WEATHER]),
            "spawn_agent not offered (offered: get_weather)",
        ),
        (
            {"header": ("x-dsh-conversation", "planner")},
            chat_body(),
            "no x-dsh-conversation header",
        ),
        ({"endpoint": "anthropic"}, chat_body(), "the endpoint is chat"),
        ({"thinking": False}, chat_body(), "thinking mode is on"),
        (
            {"after_tool_result": True},
            chat_body(),
            "the conversation does not end with tool results",
        ),
        ({"when": lambda request: False}, chat_body(), "the predicate <lambda> said no"),
    ],
)
def test_each_matcher_says_why_it_did_not_match(
    matchers: dict[str, Any], body: dict[str, Any], why: str
) -> None:
    mock = MockDeepSeek(on_exhausted="error")
    route = mock.route(**matchers).reply(text="routed")
    plan = call(mock, CHAT, body)
    assert plan.status == 410
    message = payload(plan)["error"]["message"]
    assert f"{route.describe()}: {why}" in message
    assert not route.called


def test_matchers_combine_and_the_first_matching_route_wins() -> None:
    mock = MockDeepSeek(on_exhausted="error")
    planner = mock.route(header={"x-dsh-conversation": "planner"}, tools="get_weather")
    planner.reply(tool_calls=[{"name": "get_weather", "arguments": {"city": "Oslo"}}])
    mock.route(header=("x-dsh-conversation", None)).reply(text="any conversation")
    headers = {"x-dsh-conversation": "planner"}
    plan = call(mock, CHAT, chat_body(tools=[WEATHER], **OFF), headers=headers)
    assert payload(plan)["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == (
        "get_weather"
    )
    other = call(mock, CHAT, chat_body(**OFF), headers={"x-dsh-conversation": "critic"})
    assert text_of(other) == "any conversation"
    assert planner.calls[0].header("X-DSH-Conversation") == "planner"


def test_routes_answer_before_the_queue_which_answers_before_the_responder() -> None:
    mock = MockDeepSeek([Reply(text="queued 1"), Reply(text="queued 2")])
    mock.respond_with(lambda request: Reply(text="responder"))
    mock.route(last_user="side").reply(text="routed")
    answers = [
        text_of(call(mock, CHAT, chat_body(user(text), **OFF)))
        for text in ("main", "side question", "main again", "main once more")
    ]
    assert answers == ["queued 1", "routed", "queued 2", "responder"]
    assert [r.answered_by for r in mock.requests] == ["script", "route", "script", "responder"]
    assert [r.seq for r in mock.unscripted_requests] == [4]


def test_a_sequence_answers_once_each_then_the_route_stops_matching() -> None:
    mock = MockDeepSeek([Reply(text="from the queue")])
    route = mock.route().respond(Reply(text="first"), ErrorReply(status=429, retry_after="1"))
    assert route.pending and not route.used_up
    assert text_of(call(mock, CHAT, chat_body(**OFF))) == "first"
    assert call(mock, CHAT, chat_body(**OFF)).status == 429
    assert route.used_up and route.pending == ()
    assert text_of(call(mock, CHAT, chat_body(**OFF))) == "from the queue"
    listed = MockDeepSeek().route().respond([Reply(text="only once")])
    assert len(listed.pending) == 1


def test_a_responder_route_sees_each_match_and_may_decline() -> None:
    seen: list[MockRequest] = []

    def echo(request: MockRequest) -> Reply | None:
        seen.append(request)
        return None if "skip" in request.last_user_text else Reply(text=request.last_user_text)

    mock = MockDeepSeek()
    route = mock.route(respond=echo)
    assert text_of(call(mock, CHAT, chat_body(user("ping"), **OFF))) == "ping"
    declined = call(mock, CHAT, chat_body(user("skip me"), **OFF))
    assert text_of(declined).startswith("Mock DeepSeek reply to: skip me")
    assert len(seen) == 2 and route.call_count == 1
    assert mock.requests[1].answered_by == "default"


def test_a_route_without_an_answer_answers_with_the_default_reply() -> None:
    mock = MockDeepSeek(on_exhausted="error")
    expected = mock.route(model="deepseek-v4-flash")
    assert text_of(call(mock, CHAT, chat_body(user("hi"), **OFF))) == "Mock DeepSeek reply to: hi"
    assert expected.called


def test_strict_leftovers_name_routes_never_matched_and_answers_never_used() -> None:
    mock = MockDeepSeek()
    mock.route(model="deepseek-v4-pro").reply(text="never")
    used = mock.route().respond(Reply(text="a"), Reply(text="b"))
    call(mock, CHAT, chat_body(**OFF))
    assert used.call_count == 1
    assert mock.unused_routes() == (
        "route 1 (model 'deepseek-v4-pro') was never matched",
        "route 2 (any request) has 1 answer never used",
    )


def test_reset_drops_the_routes() -> None:
    mock = MockDeepSeek()
    mock.route().reply(text="routed")
    mock.reset()
    assert mock.routes == ()
    assert text_of(call(mock, CHAT, chat_body(user("hi"), **OFF))) == "Mock DeepSeek reply to: hi"


@pytest.mark.parametrize(
    ("kwargs", "path"),
    [
        ({"last_user": 3}, "route.last_user"),
        ({"tools": [""]}, "route.tools"),
        ({"header": "x-dsh-conversation"}, "route.header"),
        ({"endpoint": "responses"}, "route.endpoint"),
        ({"thinking": "yes"}, "route.thinking"),
        ({"when": "always"}, "route.when"),
        ({"tools": 5}, "route.tools"),
        ({"tools": {"search": True}}, "route.tools"),
    ],
)
def test_a_bad_matcher_is_a_script_error_naming_it(kwargs: dict[str, Any], path: str) -> None:
    with pytest.raises(ScriptError) as caught:
        MockDeepSeek().route(**kwargs)
    assert caught.value.path == path


def test_a_responder_that_is_not_callable_is_refused_when_set() -> None:
    with pytest.raises(ScriptError, match="must be a callable") as caught:
        MockDeepSeek().respond_with(5)  # type: ignore[arg-type]
    assert caught.value.path == "responder"


def test_a_predicate_that_raises_is_named_in_the_internal_error() -> None:
    mock = MockDeepSeek()

    def broken(request: Any) -> bool:
        return bool(1 / 0)

    mock.route(model="deepseek-v4-flash", when=broken).reply(text="x")
    plan = call(mock, CHAT, chat_body(user("hi"), **OFF))
    assert plan.status == 500
    message = payload(plan)["error"]["message"]
    assert "route.when: the predicate of the route matching model 'deepseek-v4-flash'" in message
    assert "raised ZeroDivisionError: division by zero" in message


def test_a_bad_answer_is_a_script_error() -> None:
    route = MockDeepSeek().route()
    with pytest.raises(ScriptError, match="must be a Reply, an ErrorReply, a responder callable"):
        route.respond("hello")  # type: ignore[arg-type]
    with pytest.raises(ScriptError, match="give at least one answer"):
        route.respond()


@pytest.mark.parametrize(
    ("tool_calls", "path", "words"),
    [
        (ToolCall(name="x"), "reply.tool_calls", "a list of ToolCall or mappings"),
        (["x"], "reply.tool_calls[0]", "a ToolCall or a mapping of its fields"),
        ([{"nme": "x"}], "reply.tool_calls[0]", "unexpected keyword argument 'nme'"),
    ],
)
def test_a_routes_tool_calls_of_the_wrong_shape_are_a_script_error(
    tool_calls: Any, path: str, words: str
) -> None:
    with pytest.raises(ScriptError, match=re.escape(words)) as caught:
        MockDeepSeek().route().reply(tool_calls=tool_calls)
    assert caught.value.path == path


# -- the control API --------------------------------------------------------------------------


def control(mock: MockDeepSeek, path: str, body: Any = None, method: str = "POST") -> Any:
    plan = call(mock, path, body, method=method)
    return plan.status, payload(plan)


def test_routes_over_the_control_api() -> None:
    mock = MockDeepSeek(Script(entries=(), on_exhausted="error"))
    status, added = control(
        mock,
        "/_dsh/routes",
        {
            "match": {"lastUser": {"regex": "weather|forecast"}, "tools": ["get_weather"]},
            "replies": [
                {"toolCalls": [{"name": "get_weather", "arguments": {"city": "Oslo"}}]},
                {"text": "Sunny."},
            ],
        },
    )
    assert status == 200 and added["routes"] == 1
    assert added["route"]["match"] == {
        "lastUser": {"regex": "weather|forecast"},
        "tools": ["get_weather"],
    }
    control(
        mock,
        "/_dsh/routes",
        {"match": {"headers": {"x-dsh-conversation": "critic"}}, "reply": "default"},
    )
    plan = call(mock, CHAT, chat_body(user("weather in Oslo?"), tools=[WEATHER], **OFF))
    assert payload(plan)["choices"][0]["finish_reason"] == "tool_calls"
    critic = call(
        mock, CHAT, chat_body(user("judge"), **OFF), headers={"x-dsh-conversation": "critic"}
    )
    assert text_of(critic) == "Mock DeepSeek reply to: judge"
    status, listed = control(mock, "/_dsh/routes", method="GET")
    assert status == 200
    assert [(r["index"], r["calls"]) for r in listed["routes"]] == [(1, [1]), (2, [2])]
    assert listed["routes"][0]["replies"] == [{"kind": "reply", "text": "Sunny."}]
    assert listed["routes"][1]["reply"] == "default"
    log = control(mock, "/_dsh/requests", method="GET")[1]
    assert [(r["answeredBy"], r["route"]) for r in log["requests"][:2]] == [
        ("route", 1),
        ("route", 2),
    ]
    control(mock, "/_dsh/reset", {})
    assert control(mock, "/_dsh/routes", method="GET")[1] == {"routes": []}


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"match": {"lastuser": "x"}}, "body.match: unknown keys ['lastuser']"),
        ({"match": {"model": {"regex": "("}}}, "body.match.model: not a valid regex"),
        ({"match": {}, "reply": "sometimes"}, "body.reply: must be an entry, 'call-tools' or"),
        ({"match": {}, "replies": []}, "body.replies: must be a non-empty array"),
        ({"match": {}, "reply": {"text": 1}}, "body.reply.text: must be a string"),
        ({"reply": "default", "replies": ["default"]}, "body: give 'reply' or 'replies'"),
        ({"when": "x"}, "body: unknown keys ['when']"),
    ],
)
def test_a_bad_route_document_is_a_400_naming_the_field(document: Any, message: str) -> None:
    mock = MockDeepSeek()
    plan = call(mock, "/_dsh/routes", document)
    assert plan.status == 400
    error = payload(plan)["error"]
    assert error["code"] == "invalid_route"
    assert error["message"].startswith(message), error["message"]
    assert mock.routes == ()


def test_route_matchers_round_trip_through_json() -> None:
    match = RouteMatch(
        last_user=re.compile("a+"),
        model="deepseek-v4-pro",
        tools=("x",),
        headers=(("X-Session-Id", None),),
        endpoint="chat",
        thinking=True,
        after_tool_result=False,
    )
    again = RouteMatch.from_json(json.loads(json.dumps(match.to_json())))
    assert again.to_json() == match.to_json()
    assert again.describe() == match.describe()


# -- reasoning in thinking mode -----------------------------------------------------------------


def test_thinking_mode_replies_always_carry_reasoning_generated_when_scripted_without() -> None:
    def run() -> list[Any]:
        mock = MockDeepSeek(
            [
                Reply(text="Hi."),
                Reply(tool_calls=(ToolCall(name="get_weather", id="c1"),)),
                Reply(text="Done."),
            ]
        )
        first = call(mock, CHAT, chat_body())
        second = call(mock, CHAT, chat_body(tools=[WEATHER]))
        asked = {
            "role": "assistant",
            "content": "",
            "reasoning_content": reasoning_of(second),
            "tool_calls": payload(second)["choices"][0]["message"]["tool_calls"],
        }
        third = call(
            mock,
            CHAT,
            chat_body(
                user(),
                asked,
                {"role": "tool", "tool_call_id": "c1", "content": "ok"},
                tools=[WEATHER],
            ),
        )
        return [reasoning_of(first), reasoning_of(second), reasoning_of(third), mock.requests]

    first, second, third, log = run()
    assert first == "I can answer this directly."
    assert second == "I need get_weather for this; I will call it."
    assert third == "The tool results are in; I can answer now."
    assert log[0].entry == {"kind": "reply", "text": "Hi."}  # the log keeps what was scripted
    assert log[0].extras["generatedReasoning"] == first
    assert run()[:3] == [first, second, third]  # the same requests get the same text
    off = MockDeepSeek([Reply(text="Hi.")])
    assert reasoning_of(call(off, CHAT, chat_body(**OFF))) is None


def test_the_generated_reasoning_streams_and_reaches_the_anthropic_format() -> None:
    mock = MockDeepSeek([Reply(text="Hi."), Reply(text="Hi.")])
    streamed = chunks(call(mock, CHAT, chat_body(stream=True)))
    text = "".join(
        c["choices"][0]["delta"].get("reasoning_content") or "" for c in streamed if c["choices"]
    )
    assert text == "I can answer this directly."
    message = payload(call(mock, ANTHROPIC, anthropic_body()))
    assert message["content"][0] == {
        "type": "thinking",
        "thinking": "I can answer this directly.",
        "signature": message["content"][0]["signature"],
    }


def test_explicit_empty_reasoning_is_kept_with_a_warning_in_the_log() -> None:
    mock = MockDeepSeek([Reply(text="Hi.", reasoning="")])
    plan = call(mock, CHAT, chat_body())
    assert reasoning_of(plan) == ""
    (record,) = mock.requests
    assert "generatedReasoning" not in record.extras
    (warning,) = record.extras["warnings"]
    assert warning.startswith("a reply with empty reasoning in thinking mode")
    assert record.to_json()["warnings"] == [warning]


def test_the_empty_behaviour_stays_the_degenerate_empty_completion() -> None:
    mock = MockDeepSeek([Reply()])
    assert reasoning_of(call(mock, CHAT, chat_body())) == ""
    assert "generatedReasoning" not in mock.requests[0].extras


# -- the pass-back refusal names the message ----------------------------------------------------


def test_a_passback_refusal_keeps_the_api_body_and_logs_which_message_lost_it() -> None:
    mock = MockDeepSeek()
    dropped = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}
        ],
    }
    plan = call(
        mock,
        CHAT,
        chat_body(
            user(),
            dropped,
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
            tools=[WEATHER],
        ),
    )
    assert plan.status == 400
    assert payload(plan) == {
        "error": {
            "message": "The `reasoning_content` in the thinking mode must be passed back to the API.",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_request_error",
        }
    }
    (record,) = mock.requests
    assert record.error["detail"].startswith(
        "messages[1] (assistant) has no reasoning_content, which thinking mode needs passed back "
        "because it made tool calls"
    )


def test_an_anthropic_passback_refusal_names_the_message_in_the_log() -> None:
    mock = MockDeepSeek()
    turn = {
        "role": "assistant",
        "content": [{"type": "tool_use", "id": "t1", "name": "get_weather", "input": {}}],
    }
    result = {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
    }
    tools = [{"name": "get_weather", "input_schema": {"type": "object"}}]
    plan = call(mock, ANTHROPIC, anthropic_body(user(), turn, result, tools=tools))
    assert plan.status == 400 and "detail" not in json.dumps(payload(plan))
    assert (
        mock.requests[0].error["detail"].startswith("messages[1] (assistant) has tool_use blocks")
    )


# -- call-tools and its bound -------------------------------------------------------------------


def test_call_tools_is_bounded_so_agents_that_spawn_agents_stop() -> None:
    mock = MockDeepSeek(on_exhausted="call-tools", call_tools_limit=3)
    answers = []
    for n in range(5):  # five fresh conversations: each a sub-agent offered the same tool
        plan = call(mock, CHAT, chat_body(user(f"task {n}"), tools=[SPAWN], **OFF))
        message = payload(plan)["choices"][0]["message"]
        answers.append("calls" if message.get("tool_calls") else message["content"])
    assert answers == ["calls", "calls", "calls", "{}", "{}"]
    assert [r.answered_by for r in mock.requests] == ["call-tools"] * 5
    mock.reset()
    plan = call(mock, CHAT, chat_body(tools=[SPAWN], **OFF))
    assert payload(plan)["choices"][0]["message"].get("tool_calls")  # the count restarts


def test_call_tools_is_an_answer_a_route_can_give() -> None:
    mock = MockDeepSeek(on_exhausted="error")
    mock.route(tools="get_weather").respond("call-tools")
    plan = call(mock, CHAT, chat_body(tools=[WEATHER], **OFF))
    (called,) = payload(plan)["choices"][0]["message"]["tool_calls"]
    assert json.loads(called["function"]["arguments"]) == {"city": "mock"}


def test_call_tools_limit_must_be_a_count() -> None:
    with pytest.raises(ValueError, match="call_tools_limit must be an integer ≥ 0"):
        MockDeepSeek(call_tools_limit=-1)


def test_on_exhausted_refuses_an_unknown_value() -> None:
    mock = MockDeepSeek()
    with pytest.raises(ScriptError, match="onExhausted: must be one of"):
        mock.on_exhausted = "sometimes"  # type: ignore[assignment]
