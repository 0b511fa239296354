"""That each planted killer really is on the wire, checked on the captured bodies alone.

The labels of the generated cases come from construction (the scenario says which request
carries the killer); this module checks the construction against the requests as sent and the
answers as received — without the doctor — so a driver that failed to plant its killer, or
planted it somewhere else, fails here rather than turn into a false label.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from dsh_testkit.capture import CapturedRequest
from dsh_testkit.traces._wire import answer_of_text

from ._scenarios import MODEL, SWITCHED_MODEL, TOOLS, TOOLS_WITH_DELETE, Outcome

__all__ = ["assert_planted_on_the_wire"]


def _system(body: Mapping[str, Any]) -> str:
    first = body["messages"][0]
    assert first["role"] == "system", "the scenarios send their instructions as a system message"
    return str(first["content"])


def _tool_names(body: Mapping[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools") or ()]


def _answer(request: CapturedRequest) -> Mapping[str, Any]:
    assert request.response_text is not None, "the capture keeps every answer"
    message, _ = answer_of_text(request.response_text, "chat")
    assert message is not None
    return message


def _resent(body: Mapping[str, Any], answer: Mapping[str, Any]) -> Mapping[str, Any]:
    """The assistant message of ``body`` that resends ``answer`` (matched by tool-call ids)."""
    ids = [c["id"] for c in answer.get("tool_calls") or ()]
    for message in body["messages"]:
        calls = message.get("tool_calls") or () if message.get("role") == "assistant" else ()
        if ids and [c.get("id") for c in calls] == ids:
            return dict(message)
    raise AssertionError(f"no assistant message resends the tool calls {ids}")


def _arguments(message: Mapping[str, Any]) -> list[str]:
    return [c["function"]["arguments"] for c in message.get("tool_calls") or ()]


def _parsed(text: str) -> Any:
    return json.loads(text) if text.strip() else {}


def _check_plant(name: str, requests: Sequence[CapturedRequest], index: int) -> None:
    before, now = requests[index - 1].body, requests[index].body
    if name == "volatile-system-text":
        old_lines, new_lines = _system(before).split("\n"), _system(now).split("\n")
        assert old_lines[0] != new_lines[0], "the first line (the time) changes"
        assert old_lines[1:] == new_lines[1:], "only the first line changes"
        assert old_lines[0].startswith("Current date and time: ")
    elif name == "system-changed":
        changed = set(_system(before).split("\n")) ^ set(_system(now).split("\n"))
        assert changed and not any(ch.isdigit() for line in changed for ch in line[8:])
    elif name == "tools-changed":
        assert (_tool_names(before), _tool_names(now)) == (list(TOOLS), list(TOOLS_WITH_DELETE))
    elif name == "history-rewritten":
        old, new = before["messages"][1:], now["messages"][1:]
        assert new[: len(old)] != old and len(new) < len(old), "the history was cut"
    elif name == "params-changed":
        assert (before["model"], now["model"]) == (MODEL, SWITCHED_MODEL)
    elif name.startswith("reasoning-dropped"):
        produced = [_answer(r) for r in requests[:index] if _answer(r).get("tool_calls")][-1]
        assert produced.get("reasoning_content"), "the model thought before its tool calls"
        resent = _resent(now, produced)
        assert not resent.get("reasoning_content"), "its reasoning was not sent back"
    elif name in ("tool-args-reserialized", "tool-args-respaced"):
        produced = _answer(requests[index - 1])
        sent = _arguments(_resent(now, produced))
        made = _arguments(produced)
        assert sent != made and [_parsed(s) for s in sent] == [_parsed(m) for m in made]
        if name == "tool-args-respaced":
            keys = [list(_parsed(s)) for s in sent]
            assert keys == [list(_parsed(m)) for m in made], "only the spacing differs"
    else:  # pragma: no cover - every killer has a check
        raise AssertionError(f"no wire check for {name}")


def assert_planted_on_the_wire(outcome: Outcome) -> None:
    """The killer is where the scenario says, and nowhere else that the doctor could blame."""
    requests = outcome.capture.chat_requests()
    name = outcome.killer.name
    for plant in outcome.plants:
        _check_plant(name, requests, plant.index)
    refused = [i for i, r in enumerate(requests) if (r.status or 0) >= 400]
    expected = [p.index for p in outcome.plants if p.severity == "refusal"]
    assert refused == expected, f"refused requests {refused}, planted refusals {expected}"
