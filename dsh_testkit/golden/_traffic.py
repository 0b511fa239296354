"""The traffic transcript: any agent's requests and answers as a text a reviewer reads.

The session transcript (``_transcript``) tells our own loop's story from its log; this one tells
the same story from the outside, for whatever recorded the traffic — a ``RequestCapture``, the
mock, a cassette, a HAR file, OpenTelemetry spans, the proxy's trace. Per conversation (as the
cache doctor groups them), each request shows only what it adds: its system prompt, tools,
model and options when they first appear or change ("same as request 1" otherwise), the
messages after the history it shares with an earlier request, an assistant message the agent
sent back as "the answer of request N" when it is that answer unchanged; then the answer it
got (reasoning, text, tool calls with their arguments), the status and the usage. Byte-stable
as the other goldens: tool-call ids in first-seen order, stray UUIDs and the working directory
normalized, no times; versioned in its first line.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

from ..prompt._wire_view import tool_ids_renamed
from ..traces import Exchange, Trace
from ._normalize import Normalizer
from ._text import _LEGEND, _compact, _inline_raw, _quote, _value_lines

__all__ = ["TRAFFIC_FORMAT", "TRAFFIC_FORMAT_VERSION", "render_traffic_transcript"]

TRAFFIC_FORMAT: Final = "dsh-testkit traffic transcript"
TRAFFIC_FORMAT_VERSION: Final = 1
"""Bumped whenever the rendering changes."""

_SHOWN_KEYS: Final = frozenset({"model", "messages", "tools", "system"})
"""Body keys with a line of their own; the rest are the request's options."""


def _indent(lines: list[str], by: int) -> list[str]:
    return [(" " * by + line) if line else "" for line in lines]


def _text_of(content: Any) -> str | None:
    """A message's plain text, or ``None`` when it holds more than text (blocks of other
    kinds)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(
        isinstance(p, Mapping) and p.get("type") == "text" and isinstance(p.get("text"), str)
        for p in content
    ):
        return "".join(p["text"] for p in content)
    return None


def _content_lines(key: str, content: Any) -> list[str]:
    text = _text_of(content)
    if text is not None:
        return _value_lines(key, text)
    lines = [f"{key}:"]
    for block in content if isinstance(content, list) else [content]:
        lines += _indent(_block_lines(block), 2)
    return lines


def _block_lines(block: Any) -> list[str]:
    if not isinstance(block, Mapping):
        return [f"- {_compact(block)}"]
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return _value_lines("- text", block["text"])
    if kind == "thinking" and isinstance(block.get("thinking"), str):
        return _value_lines("- thinking", block["thinking"])
    if kind == "tool_use":
        return [f"- call {block.get('id')} {block.get('name')} {_compact(block.get('input'))}"]
    if kind == "tool_result":
        return _content_lines(f"- result {block.get('tool_use_id')}", block.get("content"))
    return [f"- {_compact(block)}"]


def _call_lines(calls: Any) -> list[str]:
    lines: list[str] = []
    for call in calls if isinstance(calls, list) else ():
        if not isinstance(call, Mapping):
            continue
        given = call.get("function")
        function: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
        arguments = function.get("arguments")
        shown = _inline_raw(arguments) if isinstance(arguments, str) else _compact(arguments)
        lines.append(f"call {call.get('id')} {function.get('name')} {shown}")
    return lines


def _message_lines(message: Any) -> list[str]:
    if not isinstance(message, Mapping):
        return [f"message: {_compact(message)}"]
    role = str(message.get("role"))
    if role == "tool":
        return _content_lines(f"tool result {message.get('tool_call_id')}", message.get("content"))
    lines: list[str] = []
    if isinstance(message.get("reasoning_content"), str):
        lines += _value_lines(f"{role} reasoning", message["reasoning_content"])
    content = message.get("content")
    if content not in (None, "") or not message.get("tool_calls"):
        lines += _content_lines(role, content)
    lines += [f"{role} {line}" for line in _call_lines(message.get("tool_calls"))]
    extra = {
        k: v
        for k, v in message.items()
        if k not in ("role", "content", "reasoning_content", "tool_calls", "tool_call_id")
    }
    if extra:
        lines.append(f"{role} also: {_compact(extra)}")
    return lines


def _tool_name(tool: Any) -> str:
    if isinstance(tool, Mapping):
        function = tool.get("function")
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            return str(function["name"])
        if isinstance(tool.get("name"), str):
            return str(tool["name"])
    return "?"


def _tools_lines(tools: Any) -> list[str]:
    listed = tools if isinstance(tools, list) else [tools]
    lines = [f"tools: {', '.join(_tool_name(t) for t in listed)}"]
    for tool in listed:
        lines.append(f"  {_tool_name(tool)}: {_compact(tool)}")
    return lines


def _answer_lines(exchange: Exchange) -> list[str]:
    status = "status unknown" if exchange.status is None else f"status {exchange.status}"
    if exchange.refused:
        message = f" · {_quote(exchange.error)}" if exchange.error else ""
        return [f"→ refused · {status}{message}"]
    response = exchange.response
    if response is None:
        return [f"→ no answer recorded · {status}"]
    lines = [f"→ answer · {status}"]
    content = response.get("content")
    body: list[str] = []
    if isinstance(content, list):  # the Anthropic shape
        for block in content:
            body += _block_lines(block)
    else:
        if isinstance(response.get("reasoning_content"), str):
            body += _value_lines("reasoning", response["reasoning_content"])
        if content not in (None, "") or not response.get("tool_calls"):
            body += _value_lines("text", content if isinstance(content, str) else "")
        body += _call_lines(response.get("tool_calls"))
    lines += _indent(body, 2)
    usage = exchange.usage
    if usage is not None:
        hit = "no cache figure" if usage.hit_tokens is None else f"cache hit {usage.hit_tokens}"
        output = "" if usage.completion_tokens is None else f" · output {usage.completion_tokens}"
        lines.append(f"  usage: prompt {usage.prompt_tokens} · {hit}{output}")
    return lines


def render_traffic_transcript(trace: Trace) -> str:
    """The traffic transcript of ``trace`` (see the module's text)."""
    from ..doctor import conversations

    normalizer = Normalizer()

    def renamed(raw: str) -> str:
        return normalizer.token("call", raw)

    groups = conversations(trace)
    lines = [f"# {TRAFFIC_FORMAT} · format {TRAFFIC_FORMAT_VERSION}", _LEGEND]
    count = len(trace.exchanges)
    lines.append(
        f"{count} request{'' if count == 1 else 's'} · "
        f"{len(groups)} conversation{'' if len(groups) == 1 else 's'}"
    )
    answers: dict[str, int] = {}  # an answer as the agent would send it back -> request
    for group in groups:
        lines += ["", f"conversation {group.key}"]
        shown: list[tuple[int, list[str]]] = []
        last: dict[str, tuple[str, int]] = {}  # key -> (value JSON, request that showed it)
        for exchange in group:
            number = exchange.index + 1
            body = normalizer.json(
                tool_ids_renamed(copy.deepcopy(dict(exchange.body)), renamed), zero_times=False
            )
            response = exchange.response
            if response is not None:
                response = normalizer.json(
                    tool_ids_renamed({"messages": [copy.deepcopy(dict(response))]}, renamed),
                    zero_times=False,
                )["messages"][0]
                exchange = _with_response(exchange, response)
            lines += ["", f"  request {number} · {exchange.endpoint}"]
            out: list[str] = []
            for key, title in (("model", "model"), ("system", "system"), ("tools", "tools")):
                if key not in body:
                    continue
                value = body[key]
                rendered = json.dumps(value, ensure_ascii=False, sort_keys=True)
                before = last.get(key)
                if before is not None and before[0] == rendered:
                    if key != "model":
                        out.append(f"{title}: same as request {before[1]}")
                    continue
                last[key] = (rendered, number)
                if key == "model":
                    out.append(f"model: {_inline_raw(str(value))}")
                elif key == "tools":
                    out += _tools_lines(value)
                else:
                    out += _content_lines("system", value)
            options = {k: v for k, v in body.items() if k not in _SHOWN_KEYS}
            rendered_options = json.dumps(options, ensure_ascii=False, sort_keys=True)
            if last.get("options", ("", 0))[0] != rendered_options:
                last["options"] = (rendered_options, number)
                out.append(f"options: {_compact(dict(sorted(options.items())))}")
            messages = body.get("messages") if isinstance(body.get("messages"), list) else []
            keys = [json.dumps(m, ensure_ascii=False, sort_keys=True) for m in messages]
            start, source = _shared_start(shown, keys)
            if start:
                out.append(
                    f"history: the first {start} message{'' if start == 1 else 's'} of request "
                    f"{source}"
                    + ("" if start == len(_shown_of(shown, source)) else " (not all of them)")
                )
            elif shown:
                out.append("history: none shared with an earlier request")
            for message in messages[start:]:
                if _answer_key(message) in answers:
                    out.append(
                        f"assistant: the answer of request {answers[_answer_key(message)]}, "
                        "sent back"
                    )
                else:
                    out += _message_lines(message)
            shown.append((number, keys))
            lines += _indent(out, 4)
            lines += _indent(_answer_lines(exchange), 4)
            if response is not None and not exchange.refused:
                answers.setdefault(_answer_key(response), number)
    return "\n".join(lines) + "\n"


def _answer_key(message: Any) -> str:
    """An assistant message as compared with an answer: a streamed answer's tool calls carry
    their delta ``index``, which a client drops when it sends the message back."""
    if isinstance(message, Mapping) and isinstance(message.get("tool_calls"), list):
        calls = [
            {k: v for k, v in c.items() if k != "index"} if isinstance(c, Mapping) else c
            for c in message["tool_calls"]
        ]
        message = {**message, "tool_calls": calls}
    return json.dumps(message, ensure_ascii=False, sort_keys=True)


def _shown_of(shown: list[tuple[int, list[str]]], request: int) -> list[str]:
    return next(keys for number, keys in shown if number == request)


def _shared_start(shown: list[tuple[int, list[str]]], keys: list[str]) -> tuple[int, int]:
    """The longest start ``keys`` shares with an earlier request (the latest on ties)."""
    best, source = 0, 0
    for number, earlier in shown:
        common = 0
        for a, b in zip(earlier, keys, strict=False):
            if a != b:
                break
            common += 1
        if common and common >= best:
            best, source = common, number
    return best, source


def _with_response(exchange: Exchange, response: Mapping[str, Any]) -> Exchange:
    return replace(exchange, response=response)
