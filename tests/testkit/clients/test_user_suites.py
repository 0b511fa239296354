"""A new user's suites, written from the README and the docs alone: a pydantic-ai agent and an
OpenAI Agents SDK agent, scripted with routes, recorded once through the loopback mock server,
replayed on every run after (on another port, with ``CI=true``), and never recorded in CI.

Each suite is a small project run as its own pytest process, with the real clients."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

pytest_plugins = ["pytester"]

INI = """
[pytest]
addopts = --strict-markers -p no:cacheprovider
filterwarnings = error
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
"""

PYDANTIC_AI = '''
import pydantic_ai
import pytest
from openai import AsyncOpenAI
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.deepseek import DeepSeekProvider

from dsh_testkit.mock import ToolCall

calls = []


def weather_agent(client):
    model = OpenAIChatModel("deepseek-flash", provider=DeepSeekProvider(openai_client=client))
    agent = pydantic_ai.Agent(model, instructions="Use the weather tool.")

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather in a city."""
        calls.append(city)
        return f"light snow in {city}"

    return agent


@pytest.mark.dsh_cassette
async def test_two_turns_with_a_tool(dsh_mock_server, dsh_cassette):
    mock = dsh_mock_server.mock
    if dsh_cassette.recording:
        # no reasoning scripted: in thinking mode the mock sends some, as the live API does,
        # so pydantic-ai passes it back and the second turn (tools on) is not refused
        mock.route(last_user="weather", after_tool_result=False).reply(
            tool_calls=[ToolCall(name="get_weather", arguments={"city": "Oslo"})]
        )
        mock.route(after_tool_result=True).reply(text="Oslo: light snow.")
        mock.route(last_user="Thanks").reply(text="You are welcome.")
    async with AsyncOpenAI(base_url=dsh_mock_server.base_url, api_key="sk-test", max_retries=0) as client:
        agent = weather_agent(client)
        first = await agent.run("What is the weather in Oslo?")
        second = await agent.run("Thanks!", message_history=first.all_messages())
    assert first.output == "Oslo: light snow."
    assert second.output == "You are welcome."
    assert calls == ["Oslo"]
'''

AGENTS_SDK = '''
import agents
import pytest
from openai import AsyncOpenAI

from dsh_testkit.mock import Reply, ToolCall


@agents.function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@pytest.mark.dsh_cassette
async def test_the_agent_uses_its_tool(dsh_mock_server, dsh_cassette):
    mock = dsh_mock_server.mock
    if dsh_cassette.recording:
        asked = mock.route(tools="get_weather", after_tool_result=False).respond(
            Reply(tool_calls=[ToolCall(name="get_weather", arguments={"city": "Paris"})])
        )
        mock.route(after_tool_result=True).reply(text="Sunny in Paris.")
    async with AsyncOpenAI(base_url=dsh_mock_server.base_url, api_key="sk-test", max_retries=0) as client:
        model = agents.OpenAIChatCompletionsModel(
            model="deepseek-flash",
            openai_client=client,
            should_replay_reasoning_content=lambda _context: True,
        )
        agent = agents.Agent(name="weather", instructions="Use the tool.", model=model, tools=[get_weather])
        result = await agents.Runner.run(
            agent, "Weather in Paris?", run_config=agents.RunConfig(tracing_disabled=True)
        )
    assert result.final_output == "Sunny in Paris."
    if dsh_cassette.recording:
        assert asked.call_count == 1
        second = mock.requests[1].body
        assert second["messages"][-2]["reasoning_content"]  # the generated reasoning went back
'''


@pytest.mark.slow
@pytest.mark.parametrize(
    ("name", "code", "cassette"),
    [
        ("test_pydantic_ai", PYDANTIC_AI, "test_two_turns_with_a_tool.yaml"),
        ("test_agents_sdk", AGENTS_SDK, "test_the_agent_uses_its_tool.yaml"),
    ],
)
def test_a_new_users_suite_records_through_the_mock_replays_and_never_records_in_ci(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, name: str, code: str, cassette: str
) -> None:
    for variable in ("CI", "DEEPSEEK_API_KEY", "DEEPSEEK_BASE_URL"):
        monkeypatch.delenv(variable, raising=False)
    pytester.makefile(".ini", pytest=INI)
    pytester.makepyfile(**{name: code})
    path = pytester.path / "cassettes" / name / cassette

    # CI first: nothing recorded yet, and CI may not record it
    monkeypatch.setenv("CI", "true")
    missing = pytester.runpytest_subprocess()
    missing.assert_outcomes(errors=1)
    missing.stdout.fnmatch_lines(["CassetteNotFound: cassette */" + cassette + " does not exist*"])
    refused = pytester.runpytest_subprocess("--dsh-record-mode=once")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    assert not path.exists()

    # on the developer's machine: recorded once through the loopback mock
    monkeypatch.delenv("CI")
    pytester.runpytest_subprocess("--dsh-record-mode=once").assert_outcomes(passed=1)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    uris = {i["request"]["uri"] for i in data["interactions"]}
    assert uris == {"http://127.0.0.1/chat/completions"}
    assert "dsh_mock_server" in data["metadata"]["recordedAgainst"]
    recorded = path.read_bytes()

    # CI again: replayed (the server listens on another port), nothing written
    monkeypatch.setenv("CI", "true")
    replay = pytester.runpytest_subprocess()
    replay.assert_outcomes(passed=1)
    replay.stdout.fnmatch_lines(
        ["*record mode none (replay only) [[]CI=true: recording refused[]]*"]
    )
    assert path.read_bytes() == recorded


def test_the_suites_use_what_the_docs_teach() -> None:
    """Routes, the cassette marker and the loopback server: each is taught in the docs."""
    root = Path(__file__).resolve().parents[3]
    taught = "\n".join(
        (root / page).read_text(encoding="utf-8")
        for page in ("README.md", "docs/guides/record-replay.md", "docs/guides/frameworks.md")
    )
    for phrase in (
        ".route(",
        "@pytest.mark.dsh_cassette",
        "dsh_mock_server.base_url",
        "should_replay_reasoning_content",
        "if dsh_cassette.recording",
    ):
        assert phrase in taught, phrase
