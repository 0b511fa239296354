"""Routes through the pytest fixtures as a respx user writes them, strictness at the call (the
client sees the refusal, the test fails naming it), what a failing test's report says about the
requests the mock refused, and the run's warnings for replies the live API could not send."""

from __future__ import annotations

import pytest

# Imported here, not first inside a pytester run: pytester drops the modules a run imported,
# and PyYAML's C extension does not survive being imported a second time.
import yaml  # noqa: F401

from tests._support import USER_INI, user_project

pytest_plugins = ["pytester"]

INI = USER_INI


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    return user_project(pytester, monkeypatch, ini=INI)


ROUTES = """
import json
import re

import httpx2
import openai
import pytest
from dsh_testkit.mock import Reply, ToolCall

WEATHER = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def client_of(dsh_mock):
    return openai.OpenAI(base_url=dsh_mock.base_url, api_key=dsh_mock.api_key, max_retries=0,
                         http_client=httpx2.Client(transport=dsh_mock.transport("httpx2")))


def ask(client, text, **kwargs):
    messages = [{"role": "user", "content": text}]
    return client.chat.completions.create(model="deepseek-v4-flash", messages=messages, **kwargs)


def test_routes_pick_answers_by_what_the_request_holds(dsh_mock):
    weather = dsh_mock.route(last_user="weather", tools="get_weather").reply(
        tool_calls=[{"name": "get_weather", "arguments": {"city": "Oslo"}}]
    )
    dsh_mock.route(last_user=re.compile(r"^title:")).reply(text="A short title")
    client = client_of(dsh_mock)
    title = ask(client, "title: the weather chat").choices[0].message
    assert title.content == "A short title"
    assert title.reasoning_content  # thinking mode: the mock reasons, as the live API does
    call = ask(client, "What is the weather?", tools=WEATHER).choices[0].message.tool_calls[0]
    assert json.loads(call.function.arguments) == {"city": "Oslo"}
    assert weather.call_count == 1 and weather.calls[0].last_user_text == "What is the weather?"


def test_routes_answer_before_the_ordered_script(dsh_mock):
    dsh_mock.push(Reply(text="first in order"), Reply(text="second in order"))
    dsh_mock.route(header=("x-dsh-conversation", "critic")).respond(
        Reply(text="critique 1"), Reply(text="critique 2")
    )
    client = client_of(dsh_mock)
    critic = {"extra_headers": {"x-dsh-conversation": "critic"}}
    answers = [
        ask(client, "main").choices[0].message.content,
        ask(client, "judge", **critic).choices[0].message.content,
        ask(client, "judge again", **critic).choices[0].message.content,
        ask(client, "main again").choices[0].message.content,
    ]
    assert answers == ["first in order", "critique 1", "critique 2", "second in order"]


def test_an_unscripted_request_fails_at_the_call(dsh_mock):
    dsh_mock.route(last_user="weather").reply(text="Sunny")
    with pytest.raises(openai.APIStatusError) as refused:
        ask(client_of(dsh_mock), "Tell me a joke")
    assert refused.value.status_code == 410
    message = refused.value.body["message"]
    assert message.startswith("MOCK_SCRIPT_EXHAUSTED: nothing scripted answers request 1 (POST "
                              "/chat/completions; model deepseek-v4-flash; last user message "
                              "'Tell me a joke')")
    assert "route 1 (last user message contains 'weather'): the last user message is " in message
    dsh_mock.lenient()  # the test caught it on purpose; the route stays unused


def test_a_swallowed_refusal_still_fails_the_test(dsh_mock):
    try:
        ask(client_of(dsh_mock), "nobody scripted this")
    except openai.APIStatusError:
        pass  # an agent that turns errors into an error result


def test_a_route_never_matched_fails_the_test(dsh_mock):
    dsh_mock.route(model="deepseek-v4-pro").reply(text="never")
    dsh_mock.push(Reply(text="hi"))
    ask(client_of(dsh_mock), "hi")


def test_lenient_answers_with_the_default_reply(dsh_mock):
    dsh_mock.lenient()
    reply = ask(client_of(dsh_mock), "hi").choices[0].message.content
    assert reply == "Mock DeepSeek reply to: hi"


def test_the_server_refuses_at_the_call_too(dsh_mock_server):
    dsh_mock_server.mock.route(last_user="ping").reply(text="pong")
    with openai.OpenAI(base_url=dsh_mock_server.base_url, api_key="sk-test", max_retries=0) as client:
        assert ask(client, "ping").choices[0].message.content == "pong"
        with pytest.raises(openai.APIStatusError, match="nothing scripted answers request 2"):
            ask(client, "pong?")
    dsh_mock_server.mock.reset()  # the refusal was expected: forget it before the strict check
"""


def test_routes_through_the_fixtures(project: pytest.Pytester) -> None:
    project.makepyfile(test_routes=ROUTES)
    result = project.runpytest("-rf")
    result.assert_outcomes(passed=5, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*_ test_a_swallowed_refusal_still_fails_the_test _*",
            "E   *MockNotSatisfied: the mock DeepSeek was not used as scripted *",
            "*  1 request was not scripted (nothing answered; the client got a 410 *",
            "*    request 1: POST /chat/completions (model deepseek-v4-flash; last message "
            "(user): nobody scripted this)",
            "*      why nothing answered: the script queue is empty",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*_ test_a_route_never_matched_fails_the_test _*",
            "*  1 route not used up:",
            "*    route 1 (model 'deepseek-v4-pro') was never matched",
        ]
    )


REFUSED = """
import openai
import pytest
from dsh_testkit.mock import Reply, ToolCall

TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


def test_the_client_dropped_the_reasoning(dsh_mock_server):
    dsh_mock_server.mock.push(
        Reply(tool_calls=[ToolCall(name="lookup", id="c1")]), Reply(text="done")
    )
    with openai.OpenAI(base_url=dsh_mock_server.base_url, api_key="sk-test", max_retries=0) as client:
        messages = [{"role": "user", "content": "look it up"}]
        first = client.chat.completions.create(model="deepseek-v4-flash", messages=messages,
                                               tools=TOOLS).choices[0].message
        # a client that keeps the call but not its reasoning_content
        messages.append({"role": "assistant", "content": "", "tool_calls": [
            c.model_dump() for c in first.tool_calls]})
        messages.append({"role": "tool", "tool_call_id": "c1", "content": "found"})
        client.chat.completions.create(model="deepseek-v4-flash", messages=messages, tools=TOOLS)


def test_empty_reasoning_on_purpose(dsh_mock):
    import httpx

    dsh_mock.push(Reply(text="hi", reasoning=""))
    client = httpx.Client(transport=dsh_mock.transport())
    body = {"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": "hi"}]}
    answer = client.post("https://api.deepseek.com/chat/completions", json=body,
                         headers={"authorization": "Bearer k"}).json()
    assert answer["choices"][0]["message"]["reasoning_content"] == ""
"""


def test_a_failing_test_shows_which_message_lost_its_reasoning(project: pytest.Pytester) -> None:
    project.makepyfile(test_refused=REFUSED)
    result = project.runpytest("-rf")
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    # the client's error is the API's own body, naming no message ...
    assert "The `reasoning_content` in the thinking mode must be passed back to the API." in out
    # ... and the report adds what the mock's log knows
    result.stdout.fnmatch_lines(
        [
            "*- Captured dsh-testkit: requests the mock DeepSeek refused call -*",
            "dsh_mock_server: request 2: POST /chat/completions (model deepseek-v4-flash; last "
            "message (tool): found) → 400 The `reasoning_content` in the thinking mode must be "
            "passed back to the API.",
            "    messages[1] (assistant) has no reasoning_content, which thinking mode needs "
            "passed back because it made tool calls; the client dropped the reasoning the answer "
            "carried (an empty reasoning_content is often dropped)",
        ]
    )
    # a reply scripted with empty reasoning is kept, and the run says so without failing
    result.stdout.fnmatch_lines(
        [
            "*dsh-testkit: mock warnings*",
            "The mock answered as scripted, but the live API would not have (see each line):",
            "  test_refused.py::test_empty_reasoning_on_purpose (dsh_mock) request 1: a reply "
            "with empty reasoning in thinking mode: the live API always sends reasoning here*",
        ]
    )
