"""Reading a trajectory out of recorded traffic, whatever recorded it.

Every recording the kit reads is a :class:`~dsh_testkit.traces.Trace` (a capture, the mock's
request log, a cassette, a HAR file, OpenTelemetry spans, the proxy's file, a session log), and
a trace holds all a trajectory needs: each answered request's answer (text, reasoning, tool
calls, in the Chat Completions or the Anthropic shape) is one turn, and the results of its tool
calls are in the later requests that send them back (``role: "tool"`` messages, or
``tool_result`` blocks), found by the call's id. An OpenAI-format message list (agentevals'
input) is read the same way: each assistant message is a turn.

Requests the API refused (or whose answer the recording lacks) made no turn: a retried request
appears once, as the agent saw it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..traces import Exchange, Trace, TraceError, trace_of
from ._errors import TrajectoryError
from ._model import AnswerStep, Step, ToolStep, Trajectory, Turn

__all__ = ["trajectory_of"]


def trajectory_of(source: Any, *, where: Callable[[Exchange], bool] | None = None) -> Trajectory:
    """The trajectory of ``source``: a :class:`~dsh_testkit.traces.Trace`, a path to any
    recording :func:`~dsh_testkit.traces.load_trace` reads (cassette, request log, HAR,
    OpenTelemetry, proxy trace, session log), anything with ``to_trace()`` (a
    ``RequestCapture``, a ``MockDeepSeek``, the ``dsh_mock`` fixture, the proxy), a list of
    captured or received requests, an OpenAI-format message list, a list of expected steps
    (or of groups of them, as :meth:`Trajectory.of` takes them), or a :class:`Trajectory`
    (returned as it is).

    ``where`` keeps only the exchanges it says yes to (one conversation of several, say:
    ``where=lambda e: e.conversation == "main"``).
    """
    if isinstance(source, Trajectory):
        return source
    if _is_step_list(source):
        return Trajectory.of(*source)
    if _is_message_list(source):
        return _from_messages(list(source))
    try:
        trace = trace_of(source)
    except TraceError as exc:
        raise TrajectoryError(
            f"cannot read a trajectory from {type(source).__name__}: {exc.reason} (or give an "
            "OpenAI-format message list)"
        ) from exc
    return from_trace(trace, where=where)


def _is_step_list(value: Any) -> bool:
    """Steps, or groups of steps, as :meth:`Trajectory.of` takes them (an expected one)."""
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes)) or not value:
        return False
    return all(
        isinstance(item, (ToolStep, AnswerStep))
        or (
            isinstance(item, Sequence)
            and not isinstance(item, (str, bytes))
            and all(isinstance(s, (ToolStep, AnswerStep)) for s in item)
        )
        for item in value
    )


def _is_message_list(value: Any) -> bool:
    return (
        isinstance(value, Sequence)
        and not isinstance(value, (str, bytes))
        and bool(value)
        and all(isinstance(m, Mapping) and isinstance(m.get("role"), str) for m in value)
    )


def from_trace(trace: Trace, *, where: Callable[[Exchange], bool] | None = None) -> Trajectory:
    """The trajectory of a trace's answered exchanges."""
    exchanges = [
        e
        for e in trace.exchanges
        if e.response is not None and not e.refused and (where is None or where(e))
    ]
    results: dict[str, str] = {}
    for exchange in trace.exchanges:
        for call_id, text in _results_sent(exchange):
            results.setdefault(call_id, text)
    turns = [
        _turn(exchange.response or {}, results, user=_user_prompt(exchange), index=exchange.index)
        for exchange in exchanges
    ]
    return Trajectory(turns=tuple(turns), grouped=True)


def _from_messages(messages: list[Mapping[str, Any]]) -> Trajectory:
    results: dict[str, str] = {}
    for message in messages:
        for call_id, text in _message_results(message):
            results.setdefault(call_id, text)
    turns: list[Turn] = []
    last_user: str | None = None
    for message in messages:
        role = message.get("role")
        if role == "user":
            last_user = _text(message.get("content"))
        elif role == "assistant":
            turns.append(_turn(message, results, user=last_user, index=None))
            last_user = None
        else:
            last_user = None if role == "tool" else last_user
    return Trajectory(turns=tuple(turns), grouped=True)


def _turn(
    message: Mapping[str, Any], results: Mapping[str, str], *, user: str | None, index: int | None
) -> Turn:
    steps: list[Step] = []
    content = message.get("content")
    reasoning = message.get("reasoning_content")
    if isinstance(content, list):  # the Anthropic shape: blocks
        texts = [
            b.get("text") for b in content if isinstance(b, Mapping) and b.get("type") == "text"
        ]
        text = "".join(t for t in texts if isinstance(t, str))
        thinking = [
            b.get("thinking")
            for b in content
            if isinstance(b, Mapping) and b.get("type") == "thinking"
        ]
        if thinking and reasoning is None:
            reasoning = "".join(t for t in thinking if isinstance(t, str))
        if text:
            steps.append(AnswerStep(text=text))
        for block in content:
            if isinstance(block, Mapping) and block.get("type") == "tool_use":
                call_id = block.get("id") if isinstance(block.get("id"), str) else None
                steps.append(
                    ToolStep(
                        name=str(block.get("name") or "?"),
                        args=block.get("input"),
                        result=results.get(call_id) if call_id else None,
                        id=call_id,
                    )
                )
    else:
        if isinstance(content, str) and content:
            steps.append(AnswerStep(text=content))
        for call in message.get("tool_calls") or ():
            if not isinstance(call, Mapping):
                continue
            function = call.get("function")
            function = function if isinstance(function, Mapping) else {}
            call_id = call.get("id") if isinstance(call.get("id"), str) else None
            steps.append(
                ToolStep(
                    name=str(function.get("name") or "?"),
                    args=_arguments(function.get("arguments")),
                    result=results.get(call_id) if call_id else None,
                    id=call_id,
                )
            )
    return Turn(
        steps=tuple(steps),
        user=user,
        reasoning=reasoning if isinstance(reasoning, str) else None,
        exchange=index,
    )


def _arguments(raw: Any) -> Any:
    """A call's arguments parsed (the API sends a JSON string; it does not promise valid JSON,
    so what does not parse stays the string)."""
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def _text(content: Any) -> str:
    """A message's text: the string, or its text parts/blocks joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, Mapping) and isinstance(part.get("text"), str):
                parts.append(part["text"])
        return "".join(parts)
    return "" if content is None else json.dumps(content, ensure_ascii=False)


def _message_results(message: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The tool results a message sends back, by call id (chat ``tool`` messages, Anthropic
    ``tool_result`` blocks)."""
    if message.get("role") == "tool" and isinstance(message.get("tool_call_id"), str):
        return [(message["tool_call_id"], _text(message.get("content")))]
    content = message.get("content")
    out: list[tuple[str, str]] = []
    if message.get("role") == "user" and isinstance(content, list):
        for block in content:
            if (
                isinstance(block, Mapping)
                and block.get("type") == "tool_result"
                and isinstance(block.get("tool_use_id"), str)
            ):
                out.append((block["tool_use_id"], _text(block.get("content"))))
    return out


def _results_sent(exchange: Exchange) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for message in exchange.messages:
        if isinstance(message, Mapping):
            out += _message_results(message)
    return out


def _user_prompt(exchange: Exchange) -> str | None:
    """The user message a request ends with, unless it only sends tool results back."""
    messages = exchange.messages
    if not messages or not isinstance(messages[-1], Mapping):
        return None
    last = messages[-1]
    if last.get("role") != "user" or _message_results(last):
        return None
    return _text(last.get("content"))
