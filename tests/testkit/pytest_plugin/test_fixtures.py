"""The plugin's fixtures as a user writes tests with them: the mock in process and on loopback,
the agent factory, replay and request capture — what passes, and what a failure looks like."""

from __future__ import annotations

import pytest

from tests._support import USER_INI, user_project

pytest_plugins = ["pytester"]

INI = USER_INI


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    return user_project(pytester, monkeypatch, ini=INI)


PASSING = """
import asyncio
from pathlib import Path

import httpx
import httpx2
import openai
import pytest

from dsh_core import RequestInvariant, Session
from dsh_core.persistence import write_session
from dsh_testkit.doctor import assert_cache_friendly, assert_prefix_stable, diagnose
from dsh_testkit.golden import WireRequestsExtension
from dsh_testkit.mock import ErrorReply, Reply

OFF = {"thinking": {"type": "disabled"}}
SERVERS = []
pytestmark = pytest.mark.dsh_lenient  # several tests here live on the default replies


# ------------------------------------------------------------------------------- dsh_mock

async def test_the_agent_talks_to_the_mock_by_default(dsh_agent, dsh_mock):
    dsh_mock.push(Reply(text="scripted"))
    agent = dsh_agent()
    assert agent.provider is dsh_mock.provider
    assert (await agent.run("hi")).text == "scripted"
    [received] = dsh_mock.requests
    assert received.body["messages"][-1] == {"role": "user", "content": "hi"}


def test_the_mock_serves_the_openai_sdk_in_process(dsh_mock):
    http = httpx2.Client(transport=dsh_mock.transport("httpx2"))
    with openai.OpenAI(
        base_url=dsh_mock.base_url, api_key=dsh_mock.api_key, http_client=http, max_retries=0
    ) as client:
        answer = client.chat.completions.create(
            model="deepseek-v4-flash", messages=[{"role": "user", "content": "hi"}], extra_body=OFF
        )
    assert answer.choices[0].message.content == "Mock DeepSeek reply to: hi"
    assert len(dsh_mock.requests) == 1


def test_the_mock_is_fresh_in_each_test(dsh_mock):
    assert dsh_mock.requests == ()
    assert dsh_mock.mock.pending == ()


# ------------------------------------------------------------------------ dsh_mock_server

def test_the_server_answers_on_loopback(dsh_mock_server):
    assert dsh_mock_server.base_url.startswith("http://127.0.0.1:")
    dsh_mock_server.mock.push(Reply(text="from the server"), Reply(text="left over"))
    response = httpx.post(
        dsh_mock_server.base_url + "/chat/completions",
        headers={"authorization": "Bearer any"},
        json={"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": "hi"}], **OFF},
    )
    assert response.json()["choices"][0]["message"]["content"] == "from the server"
    SERVERS.append(dsh_mock_server)


def test_the_server_is_shared_but_its_mock_is_reset_for_each_test(dsh_mock_server):
    assert SERVERS == [dsh_mock_server]
    assert dsh_mock_server.mock.requests == ()
    assert dsh_mock_server.mock.pending == ()


# ------------------------------------------------------------------------------ dsh_agent

def test_agents_have_invariants_on_and_deterministic_defaults(dsh_agent):
    agent = dsh_agent()
    assert agent.options.invariants is True
    assert isinstance(agent.request_invariant, RequestInvariant)
    assert agent.request_invariant.checked == 0
    assert (agent.options.provider, agent.options.model) == ("deepseek", "deepseek-v4-flash")
    assert agent.session.info.id == "dsh-session"
    assert agent.session.info.created_at == 1_767_225_600_000
    assert [agent.options.id_factory() for _ in range(2)] == ["msg-1", "msg-2"]
    assert agent.options.random() == 0.5


async def test_agent_options_override_the_defaults(dsh_agent, dsh_mock):
    provider = dsh_mock.new_provider()
    agent = dsh_agent(provider, session="mine", model="deepseek-v4-pro", system="Be brief.")
    assert agent.provider is provider
    assert agent.session.info.id == "mine"
    await agent.run("hi")
    body = dsh_mock.requests[0].body
    assert body["model"] == "deepseek-v4-pro"
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}


async def test_agents_retry_without_waiting(dsh_agent, dsh_mock):
    dsh_mock.push(ErrorReply(status=429, retry_after="3600"), Reply(text="after the retry"))
    agent = dsh_agent()
    assert agent.options.sleep is not asyncio.sleep
    assert (await agent.run("hi")).text == "after the retry"
    assert len(dsh_mock.requests) == 2
    dsh_mock.assert_consumed()


async def test_agents_on_one_session_share_its_message_numbering(dsh_agent, dsh_mock):
    first = dsh_agent()
    await first.run("hi")
    assert [m.id for m in first.session.derive_messages()] == ["msg-1", "msg-2"]
    second = dsh_agent(session=first.session)
    assert second.session is first.session
    assert second.options.id_factory() == "msg-3"
    seeded = Session.create("seeded", first.session.events)
    assert dsh_agent(session=seeded).options.id_factory() == "msg-3"


def test_an_unknown_agent_option_names_the_known_ones(dsh_agent):
    with pytest.raises(TypeError) as caught:
        dsh_agent(modle="deepseek-v4-pro")
    assert str(caught.value).startswith(
        "dsh_agent got unknown AgentOptions field(s) modle; known: id_factory, invariants,"
    )


# ----------------------------------------------------------------------------- dsh_replay

async def record(dsh_agent, dsh_mock, *prompts):
    dsh_mock.push(*(Reply(text=f"answer {i}") for i, _ in enumerate(prompts)))
    agent = dsh_agent(session="recorded", system="Be terse.")
    for prompt in prompts:
        await agent.run(prompt)
    return agent.session


async def test_replay_serves_a_recorded_session(dsh_agent, dsh_mock, dsh_replay):
    recorded = await record(dsh_agent, dsh_mock, "first", "second")
    replay = dsh_replay(recorded)
    agent = dsh_agent(replay, session="live", system="Be terse.")
    assert (await agent.run("first")).text == "answer 0"
    assert (await agent.run("second")).text == "answer 1"
    assert len(dsh_mock.requests) == 2  # the replay never reached the mock


async def test_replay_reads_a_log_relative_to_the_test_module(dsh_agent, dsh_mock, dsh_replay):
    recorded = await record(dsh_agent, dsh_mock, "first")
    path = Path(__file__).parent / "logs" / "session.jsonl"
    path.parent.mkdir(exist_ok=True)
    write_session(path, recorded, overwrite=True).close()
    agent = dsh_agent(dsh_replay("logs/session.jsonl"), session="live", system="Be terse.")
    assert (await agent.run("first")).text == "answer 0"


async def test_replay_without_strict_serves_a_changed_request(dsh_agent, dsh_mock, dsh_replay):
    recorded = await record(dsh_agent, dsh_mock, "first")
    agent = dsh_agent(dsh_replay(recorded, strict=False), system="Something else entirely.")
    assert (await agent.run("first")).text == "answer 0"


async def test_replay_consumption_check_can_be_turned_off(dsh_agent, dsh_mock, dsh_replay):
    recorded = await record(dsh_agent, dsh_mock, "first", "second")
    agent = dsh_agent(dsh_replay(recorded, check_consumed=False), system="Be terse.")
    await agent.run("first")


# ---------------------------------------------------------------------------- dsh_capture

def chat(client, system):
    messages = [{"role": "system", "content": system}, {"role": "user", "content": "hi"}]
    for _ in range(2):
        answer = client.chat.completions.create(
            model="deepseek-v4-flash", messages=messages, extra_body=OFF
        )
        messages += [
            {"role": "assistant", "content": answer.choices[0].message.content},
            {"role": "user", "content": "more"},
        ]


def test_the_fixtures_themselves_go_to_the_doctor_and_the_golden(dsh_mock, dsh_mock_server):
    http = httpx2.Client(transport=dsh_mock.transport("httpx2"))
    with openai.OpenAI(
        base_url=dsh_mock.base_url, api_key=dsh_mock.api_key, http_client=http, max_retries=0
    ) as client:
        chat(client, "Be terse.")
    with openai.OpenAI(base_url=dsh_mock_server.base_url, api_key="any", max_retries=0) as client:
        chat(client, "Be terse.")
    for fixture in (dsh_mock, dsh_mock_server):
        assert_cache_friendly(fixture)
        assert_prefix_stable(fixture)
        assert len(diagnose(fixture).requests) == 2
        golden = WireRequestsExtension().serialize(fixture)
        assert golden.count('"Be terse."') == 2


def test_capture_sees_a_third_party_agents_requests(dsh_mock_server, dsh_capture):
    with openai.OpenAI(base_url=dsh_mock_server.base_url, api_key="any", max_retries=0) as client:
        chat(client, "Be terse.")
    assert [r.url for r in dsh_capture.requests] == [dsh_mock_server.base_url + "/chat/completions"] * 2
    assert dict(dsh_capture.requests[0].headers)["authorization"] != "Bearer any"
    assert_prefix_stable(dsh_capture)
"""


def test_the_fixtures_work_as_documented(project: pytest.Pytester) -> None:
    project.makepyfile(test_fixtures=PASSING)
    result = project.runpytest("-v")
    result.assert_outcomes(passed=16)


FAILING = """
import itertools

import openai
import pytest

from dsh_testkit.doctor import assert_prefix_stable
from dsh_testkit.mock import Reply

OFF = {"thinking": {"type": "disabled"}}


async def record(dsh_agent, dsh_mock, *prompts):
    dsh_mock.push(*(Reply(text=f"answer {i}") for i, _ in enumerate(prompts)))
    agent = dsh_agent(session="recorded", system="Be terse.")
    for prompt in prompts:
        await agent.run(prompt)
    return agent.session


async def test_replay_left_unconsumed(dsh_agent, dsh_mock, dsh_replay):
    recorded = await record(dsh_agent, dsh_mock, "first", "second")
    await dsh_agent(dsh_replay(recorded), system="Be terse.").run("first")


async def test_replay_of_a_changed_request(dsh_agent, dsh_mock, dsh_replay):
    recorded = await record(dsh_agent, dsh_mock, "first")
    await dsh_agent(dsh_replay(recorded), system="Be terse.\\nAnd kind.").run("first")


@pytest.mark.dsh_lenient  # the mock's default replies answer
def test_capture_of_an_agent_that_busts_the_cache(dsh_mock_server, dsh_capture):
    clock = itertools.count(1)
    with openai.OpenAI(base_url=dsh_mock_server.base_url, api_key="any", max_retries=0) as client:
        messages = [{"role": "user", "content": "hi"}]
        for _ in range(2):
            system = {"role": "system", "content": f"Be terse.\\nThe time is {next(clock)}."}
            answer = client.chat.completions.create(
                model="deepseek-v4-flash", messages=[system, *messages], extra_body=OFF
            )
            messages += [
                {"role": "assistant", "content": answer.choices[0].message.content},
                {"role": "user", "content": "more"},
            ]
    assert_prefix_stable(dsh_capture)
"""


def test_what_a_user_sees_when_replay_or_capture_fails(project: pytest.Pytester) -> None:
    project.makepyfile(test_failing=FAILING)
    result = project.runpytest("-rf")
    result.assert_outcomes(failed=3)
    result.stdout.fnmatch_lines(
        [
            "*_ test_replay_left_unconsumed _*",
            "E   *ReplayNotConsumed: replay fixture not fully consumed: the code drove fewer model "
            "calls than were recorded:",
            "E   *  recorded session 'recorded' served 1 of 2 call(s)",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*_ test_replay_of_a_changed_request _*",
            "E   *ReplayMismatch: strict replay: the live request for session 'recorded' model "
            "call #1 differs from the request the recorded log rebuilds for it *",
            "E   *  system line 2 only in live: * (recorded has 1 line, live has 2)",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*_ test_capture_of_an_agent_that_busts_the_cache _*",
            "E   *PrefixInstability: request #2 does not extend request #1, so the provider's "
            "prefix cache cannot reuse it (volatile-system-text at system line 2 column 13: *); "
            "the first divergence:",
            "E   *  system line 2 differs: request #1: 'The time is 1.', request #2: 'The time is 2.'",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "FAILED test_failing.py::test_replay_left_unconsumed - *ReplayNotConsumed: *",
            "FAILED test_failing.py::test_replay_of_a_changed_request - *ReplayMismatch: *",
            "FAILED test_failing.py::test_capture_of_an_agent_that_busts_the_cache - "
            "*PrefixInstability: *",
        ]
    )
