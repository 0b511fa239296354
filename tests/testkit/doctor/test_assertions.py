"""The doctor's assertions on real clients: an openai-SDK agent loop against the loopback
mock, captured with ``dsh_capture`` (which keeps the answers), judged as ``cache-report``
judges the same traffic."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from openai import OpenAI

from dsh_testkit._errors import PrefixInstability
from dsh_testkit.capture import RequestCapture
from dsh_testkit.doctor import (
    CacheUnfriendly,
    assert_cache_friendly,
    assert_prefix_stable,
    diagnose,
)
from dsh_testkit.mock import MockServer, Reply, ToolCall

SYSTEM = "You are a weather assistant. Always call get_weather before answering. " * 12
THOUGHT = "The user asks about the weather; call the tool with the city and the unit. " * 8
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {"unit": {"type": "string"}, "city": {"type": "string"}},
                "required": ["city"],
            },
        },
    }
]


def _script() -> list[Reply]:
    return [
        Reply(
            reasoning=THOUGHT,
            tool_calls=(ToolCall(name="get_weather", arguments='{"unit": "c", "city": "Paris"}'),),
        ),
        Reply(reasoning="Report it.", text="It is sunny in Paris."),
    ]


def _run(base_url: str, resend: Callable[[Any], dict[str, Any]], *, model: str) -> None:
    """A hand-rolled agent loop: ask, run the tool, send the history back via ``resend``."""
    with OpenAI(base_url=base_url, api_key="sk-not-a-real-key", max_retries=0) as client:
        _loop(client, resend, model=model)


def _loop(client: OpenAI, resend: Callable[[Any], dict[str, Any]], *, model: str) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Weather in Paris?"},
    ]
    for _ in range(2):
        try:
            reply = client.chat.completions.create(model=model, messages=messages, tools=TOOLS)
        except Exception:  # the mock refused a request: the doctor says why
            return
        message = reply.choices[0].message
        messages.append(resend(message))
        for call in message.tool_calls or ():
            messages.append({"role": "tool", "tool_call_id": call.id, "content": "sunny"})
        if not message.tool_calls:
            return


def _faithful(message: Any) -> dict[str, Any]:
    return message.model_dump(exclude_none=True)


def _sorted_arguments(message: Any) -> dict[str, Any]:
    """Re-serializes the arguments with sorted keys, as a typed model of them would."""
    out = message.model_dump(exclude_none=True)
    for call in out.get("tool_calls") or ():
        call["function"]["arguments"] = json.dumps(
            json.loads(call["function"]["arguments"]), sort_keys=True
        )
    return out


def _compact_arguments(message: Any) -> dict[str, Any]:
    out = message.model_dump(exclude_none=True)
    for call in out.get("tool_calls") or ():
        call["function"]["arguments"] = json.dumps(
            json.loads(call["function"]["arguments"]), separators=(",", ":")
        )
    return out


def _without_reasoning(message: Any) -> dict[str, Any]:
    out = message.model_dump(exclude_none=True)
    out.pop("reasoning_content", None)
    return out


@pytest.fixture
def server() -> Any:
    with MockServer() as running:
        running.mock.push(*_script())
        yield running


def test_a_faithful_agent_is_cache_friendly_and_prefix_stable(server, dsh_capture) -> None:
    _run(server.base_url, _faithful, model="deepseek-flash")
    report = assert_cache_friendly(dsh_capture)
    assert report.totals.efficiency == 1.0
    assert_prefix_stable(dsh_capture)


def test_reordered_arguments_fail_naming_tool_args_reserialized(server, dsh_capture) -> None:
    _run(server.base_url, _sorted_arguments, model="deepseek-flash")
    with pytest.raises(CacheUnfriendly) as caught:
        assert_cache_friendly(dsh_capture)
    message = str(caught.value)
    assert "tool-args-reserialized" in message
    assert 'produced: {"unit": "c", "city": "Paris"}' in message
    assert 'sent:     {"city": "Paris", "unit": "c"}' in message
    assert [f.code for f in caught.value.findings] == ["tool-args-reserialized"]
    # the capture and the mock's own log say the same
    assert diagnose(dsh_capture).counts() == diagnose(server.mock).counts()
    with pytest.raises(PrefixInstability, match="tool-args-reserialized"):
        assert_prefix_stable(dsh_capture)


def test_spacing_only_reserialization_costs_nothing_and_is_a_note(server, dsh_capture) -> None:
    _run(server.base_url, _compact_arguments, model="deepseek-flash")
    report = assert_cache_friendly(dsh_capture)
    [finding] = [f for r in report.requests for f in r.findings]
    assert finding.code == "tool-args-reserialized" and finding.severity == "note"


def test_dropped_reasoning_fails_naming_reasoning_dropped(server, dsh_capture) -> None:
    _run(server.base_url, _without_reasoning, model="deepseek-flash")
    with pytest.raises(CacheUnfriendly) as caught:
        assert_cache_friendly(dsh_capture)
    codes = {f.code for f in caught.value.findings}
    assert codes == {"reasoning-dropped", "request-refused"}
    assert "must be passed back" in str(caught.value)


def test_allow_accepts_a_known_cause(server, dsh_capture) -> None:
    _run(server.base_url, _sorted_arguments, model="deepseek-flash")
    report = assert_cache_friendly(dsh_capture, allow=["tool-args-reserialized"])
    assert report.counts() == {"tool-args-reserialized": 1}
    with pytest.raises(ValueError, match="unknown cause code"):
        assert_cache_friendly(dsh_capture, allow=["no-such-code"])


def test_a_saved_capture_keeps_the_answers(server, dsh_capture, tmp_path) -> None:
    _run(server.base_url, _sorted_arguments, model="deepseek-flash")
    path = tmp_path / "capture.jsonl"
    dsh_capture.save(path)
    loaded = RequestCapture.load(path)
    assert [r.response_text for r in loaded.requests] == [
        r.response_text for r in dsh_capture.requests
    ]
    assert (
        diagnose(path).counts() == diagnose(dsh_capture).counts() == {"tool-args-reserialized": 1}
    )
