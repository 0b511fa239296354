"""Trajectories as data: read from real clients' traffic (the openai and anthropic SDKs against
the mock on loopback, a capture, a committed cassette, a request log file, a message list), and
matched exactly, in order, unordered, as a subset or superset, with failures that show both
side by side."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import httpx2
import openai
import pytest

from dsh_testkit.capture import RequestCapture
from dsh_testkit.mock import MockDeepSeek, MockServer, Reply, ToolCall
from dsh_testkit.trajectory import (
    AnswerStep,
    ToolStep,
    Trajectory,
    TrajectoryError,
    TrajectoryMismatch,
    answer,
    assert_trajectory,
    match_trajectory,
    tool,
    trajectory_of,
)

ROOT = Path(__file__).resolve().parents[3]
TOOLS: Any = [
    {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
    for name in ("get_weather", "get_time")
]
RESULTS = {"get_weather": "light snow", "get_time": "14:05"}
SCRIPT = (
    Reply(
        text=None,
        tool_calls=[
            ToolCall(name="get_weather", arguments={"city": "Oslo"}),
            ToolCall(name="get_time", arguments={"tz": "Europe/Oslo"}),
        ],
    ),
    Reply(tool_calls=[ToolCall(name="get_weather", arguments={"city": "Bergen"})]),
    Reply(text="Oslo: light snow, 14:05."),
)
EXPECTED = Trajectory.of(
    [tool("get_weather", city="Oslo", result="light snow"), tool("get_time", tz="Europe/Oslo")],
    [tool("get_weather", city="Bergen")],
    [answer("Oslo: light snow, 14:05.")],
)


def run_openai_agent(client: openai.OpenAI, *, stream: bool = False) -> list[dict[str, Any]]:
    """A plain openai-SDK tool loop, as users write one."""
    messages: Any = [{"role": "user", "content": "Weather and time in Oslo?"}]
    message: Any
    while True:
        if stream:
            with client.chat.completions.stream(
                model="deepseek-v4-flash", messages=messages, tools=TOOLS
            ) as events:
                message = events.get_final_completion().choices[0].message
        else:
            response = client.chat.completions.create(
                model="deepseek-v4-flash", messages=messages, tools=TOOLS
            )
            message = response.choices[0].message
        messages.append(message.model_dump(exclude_none=True))
        if not message.tool_calls:
            return messages
        for call in message.tool_calls:
            name = call.function.name
            messages.append({"role": "tool", "tool_call_id": call.id, "content": RESULTS[name]})


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_the_openai_sdk_on_loopback_read_from_the_mock_a_capture_and_the_messages(
    stream: bool,
) -> None:
    mock = MockDeepSeek(list(SCRIPT))
    capture = RequestCapture()
    with MockServer(mock) as server:
        client = openai.OpenAI(
            base_url=server.base_url,
            api_key="sk-test",
            http_client=httpx2.Client(transport=capture.transport(httpx2.HTTPTransport())),
        )
        with client:
            messages = run_openai_agent(client, stream=stream)
    from_mock = trajectory_of(mock)
    assert from_mock.tool_names == ("get_weather", "get_time", "get_weather")
    assert from_mock.final_answer == "Oslo: light snow, 14:05."
    assert [t.user for t in from_mock.turns] == ["Weather and time in Oslo?", None, None]
    assert [s.result for s in from_mock.tool_calls] == ["light snow", "14:05", "light snow"]
    assert all(t.reasoning for t in from_mock.turns)  # thinking mode: the mock reasons
    assert_trajectory(from_mock, EXPECTED)
    # every recording of the same run is the same trajectory
    for other in (trajectory_of(capture), trajectory_of(messages)):
        assert other.steps == from_mock.steps
        assert [len(t.steps) for t in other.turns] == [2, 1, 1]


def test_an_anthropic_sdk_run_reads_the_same() -> None:
    anthropic = pytest.importorskip("anthropic", reason="the anthropic SDK is a dev dependency")
    mock = MockDeepSeek(list(SCRIPT[1:]))
    with MockServer(mock) as server:
        client = anthropic.Anthropic(base_url=server.anthropic_base_url, api_key="sk-test")
        tools = [{"name": "get_weather", "input_schema": {"type": "object"}}]
        messages: list[dict[str, Any]] = [{"role": "user", "content": "Weather in Bergen?"}]
        while True:
            reply = client.messages.create(
                model="deepseek-v4-flash", max_tokens=1024, messages=messages, tools=tools
            )
            messages.append(
                {"role": "assistant", "content": [b.model_dump() for b in reply.content]}
            )
            uses = [b for b in reply.content if b.type == "tool_use"]
            if not uses:
                break
            messages.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": b.id, "content": "rain"}
                        for b in uses
                    ],
                }
            )
        client.close()
    run = trajectory_of(mock)
    assert_trajectory(
        run,
        [
            tool("get_weather", {"city": "Bergen"}, result="rain"),
            answer("Oslo: light snow, 14:05."),
        ],
    )
    assert run.turns[0].user == "Weather in Bergen?"
    assert run.turns[1].user is None  # the request ended with tool results, not a user's turn


def test_a_committed_cassette_and_a_request_log_file(tmp_path: Path) -> None:
    run = trajectory_of(ROOT / "cassettes" / "parallel-tool-calls.yaml")
    assert_trajectory(
        run,
        [
            [tool("read_file", path="a.txt", result="alpha"), tool("read_file", path="b.txt")],
            [answer(re.compile(r"alpha.*beta"))],
        ],
    )
    mock = MockDeepSeek(list(SCRIPT))
    log = tmp_path / "requests.jsonl"
    mock.log_requests_to(log)
    with (
        MockServer(mock) as server,
        openai.OpenAI(base_url=server.base_url, api_key="sk-test") as client,
    ):
        run_openai_agent(client)
    mock.close_request_log()
    assert trajectory_of(log).steps == trajectory_of(mock).steps
    # a retried request (a 429, then the answer) is one turn, as the agent saw it
    retried = trajectory_of(ROOT / "cassettes" / "rate-limit-retry.yaml")
    assert retried.answers == ("Hello after the retry.",)


# -- matching ---------------------------------------------------------------------------------

RUN = Trajectory.of(
    [tool("search", {"q": "oslo", "n": 3}, result="r1"), tool("fetch", {"url": "u"})],
    [answer("done")],
)


def test_each_mode_on_one_run() -> None:
    reordered = [tool("fetch"), tool("search"), answer()]
    assert not match_trajectory(RUN, reordered)
    assert match_trajectory(RUN, reordered, mode="unordered")
    assert match_trajectory(RUN, [tool("fetch")], mode="in_order")
    assert not match_trajectory(RUN, [tool("fetch"), tool("search")], mode="in_order")
    assert match_trajectory(RUN, [tool("fetch")], mode="superset")
    assert not match_trajectory(RUN, [tool("fetch")], mode="subset")
    assert match_trajectory(RUN, [*reordered, tool("extra")], mode="subset")
    assert not match_trajectory(RUN, [*reordered, tool("extra")], mode="superset")


def test_arguments_results_and_answers_under_their_options() -> None:
    assert not match_trajectory(RUN, [tool("search", q="oslo"), tool("fetch")], mode="in_order")
    assert match_trajectory(RUN, [tool("search", q="oslo")], mode="in_order", args="superset")
    assert match_trajectory(
        RUN, [tool("search", q="oslo", n=3, lang="no")], mode="in_order", args="subset"
    )
    assert match_trajectory(RUN, [tool("search", q="x")], mode="in_order", args="ignore")
    assert match_trajectory(
        RUN,
        [tool("search", q="x"), tool("fetch", url="v")],
        args_by_tool={"search": "ignore", "fetch": lambda actual, expected: actual["url"] == "u"},
    )
    assert (
        match_trajectory(RUN, [tool("search", q=ANY, n=ANY), tool("fetch", {})], args="exact")
        is not None
    )
    assert match_trajectory(RUN, [tool("search", {"q": ANY, "n": ANY})], mode="in_order")
    assert not match_trajectory(RUN, [tool("search", result="r2")], mode="in_order")
    assert match_trajectory(RUN, [tool("search", result=re.compile("^r"))], mode="in_order")
    # answers take part when the expected trajectory has any, or when asked
    assert match_trajectory(RUN, [tool("search"), tool("fetch")])
    assert not match_trajectory(RUN, [tool("search"), tool("fetch")], answers=True)
    assert not match_trajectory(RUN, [tool("search"), tool("fetch"), answer("other")])


def test_turn_boundaries_count_only_when_written() -> None:
    flat = [tool("search"), tool("fetch"), answer()]
    assert match_trajectory(RUN, flat)
    split = [[tool("search")], [tool("fetch")], [answer()]]
    result = match_trajectory(RUN, split)
    assert not result
    assert result.difference == (
        "turns: expected step 2 (fetch(…)) in a turn after step 1, the run put them in one turn"
    )


def test_a_failure_shows_both_trajectories_side_by_side() -> None:
    with pytest.raises(TrajectoryMismatch) as caught:
        assert_trajectory(
            RUN, [tool("search", q="oslo", n=4), tool("fetch", url="u"), answer("done")]
        )
    assert isinstance(caught.value, AssertionError)
    assert str(caught.value) == "\n".join(
        [
            "trajectory does not match (exact): step 1: search: argument 'n' is 3, expected 4",
            "     expected                      actual",
            '  1  search({"n":4,"q":"oslo"}) != search({"n":3,"q":"oslo"}) → "r1"',
            '  2  fetch({"url":"u"})         == fetch({"url":"u"})',
            '  3  answer "done"              == answer "done"',
        ]
    )
    assert caught.value.result.to_evaluator_result() == {
        "key": "trajectory_exact_match",
        "score": False,
        "comment": "step 1: search: argument 'n' is 3, expected 4",
    }
    with pytest.raises(TrajectoryMismatch) as caught:
        assert_trajectory(RUN, [tool("fetch"), tool("search"), tool("lookup")], mode="in_order")
    assert (
        "step 2 (search(…)) not found in order; after the steps matched before it the run did: nothing"
        in str(caught.value)
    )
    with pytest.raises(TrajectoryMismatch, match=r"\(unordered\): missing lookup\(…\)\n"):
        assert_trajectory(RUN, [tool("fetch"), tool("search"), tool("lookup")], mode="unordered")
    with pytest.raises(TrajectoryMismatch, match=r"\(subset\): not expected: fetch"):
        assert_trajectory(RUN, [tool("search")], mode="subset")


def test_bad_input_is_a_typed_error() -> None:
    with pytest.raises(TrajectoryError, match="mode: expected one of"):
        match_trajectory(RUN, RUN, mode="strict")  # type: ignore[arg-type]
    with pytest.raises(TrajectoryError, match=r"args_by_tool\['f'\]: expected one of"):
        match_trajectory(RUN, RUN, args_by_tool={"f": "loose"})  # type: ignore[dict-item]
    with pytest.raises(TrajectoryError, match="cannot read a trajectory from int"):
        trajectory_of(3)
    with pytest.raises(TrajectoryError, match=r"items \[1\] are single steps"):
        Trajectory.of([tool("a")], tool("b"))
    with pytest.raises(TrajectoryError, match="give the arguments as a mapping or as keywords"):
        tool("a", {"x": 1}, y=2)
    with pytest.raises(TrajectoryError, match=r"version: this kit reads version 1, got 2"):
        Trajectory.from_json({"format": "dsh-trajectory", "version": 2, "turns": []})
    with pytest.raises(TrajectoryError, match=r"turns\[0\]\.steps\[0\]\.kind: expected"):
        Trajectory.from_json(
            {"format": "dsh-trajectory", "version": 1, "turns": [{"steps": [{"kind": "x"}]}]}
        )
    assert ToolStep(name="f").describe() == "f(…)"
    assert AnswerStep().describe() == "answer …"
