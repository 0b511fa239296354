"""The default answer: deterministic, derived from the request, no setup needed.

With an empty script the mock still behaves like the API: it answers the last user message, thinks
first in thinking mode, and calls a tool when ``tool_choice`` demands one (``required``, a named
function, Anthropic's ``any``/``tool``), with arguments that satisfy the tool's schema. The same
request always gets the same content (ids and timestamps come from the mock's seeded state).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from dsh_core.providers.deepseek import ChatRequest

from ._request import MockRequest
from ._script import Reply, ToolCall

__all__ = ["call_each_tool_once", "default_reply", "example_arguments", "generated_reasoning"]

_SNIPPET = 120


def _example(schema: Mapping[str, Any], depth: int = 0) -> Any:
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    for combinator in ("anyOf", "oneOf", "allOf"):
        options = schema.get(combinator)
        if isinstance(options, list) and options and isinstance(options[0], Mapping):
            if depth > 8:
                return None
            return _example(options[0], depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "string":
        return "mock"
    if kind == "integer":
        return 1
    if kind == "number":
        return 1.5
    if kind == "boolean":
        return True
    if kind == "array":
        items = schema.get("items")
        count = schema.get("minItems")
        if depth > 8 or not isinstance(count, int) or count < 1:
            return []
        item_schema = items if isinstance(items, Mapping) else {}
        return [_example(item_schema, depth + 1) for _ in range(min(count, 8))]
    if kind == "null":
        return None
    if kind == "object" or "properties" in schema:
        if depth > 8:
            return {}
        properties = schema.get("properties")
        required = schema.get("required")
        if not isinstance(properties, Mapping) or not isinstance(required, list):
            return {}
        return {
            name: _example(
                properties[name] if isinstance(properties.get(name), Mapping) else {}, depth + 1
            )
            for name in required
            if isinstance(name, str)
        }
    return "mock"


def example_arguments(schema: Mapping[str, Any]) -> str:
    """Compact JSON arguments that satisfy ``schema``: every required property, by type (first
    ``enum`` value, ``const``, ``"mock"``, ``1``, ``1.5``, ``true``, ``[]``, nested objects)."""
    value = _example(schema)
    if not isinstance(value, dict):
        value = {}
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def default_reply(request: MockRequest) -> Reply:
    """The mock's answer when no script entry applies."""
    snippet = " ".join(request.last_user_text.split())
    if len(snippet) > _SNIPPET:
        snippet = snippet[: _SNIPPET - 1] + "…"
    reasoning: str | None = None
    if request.thinking:
        reasoning = (
            "The tool result is in; I will summarize it."
            if request.after_tool_result
            else f"The user wrote {len(request.last_user_text)} characters; I will answer directly."
        )
    forced = request.tools.forced
    if forced is not None:
        schema = dict(request.tools.schemas).get(forced, {})
        return Reply(
            reasoning=reasoning,
            tool_calls=(ToolCall(name=forced, arguments=example_arguments(schema)),),
        )
    if request.after_tool_result:
        text = "Mock DeepSeek: the tool returned its result."
    elif snippet:
        text = f"Mock DeepSeek reply to: {snippet}"
    else:
        text = "Mock DeepSeek reply."
    return Reply(reasoning=reasoning, text=text)


def _calls_and_results(request: MockRequest) -> tuple[list[str], dict[str, str]]:
    """Names of the tools the conversation already called (in order), and each called tool's
    latest result text."""
    called: list[str] = []
    names_by_id: dict[str, str] = {}
    results: dict[str, str] = {}
    parsed = request.parsed
    if isinstance(parsed, ChatRequest):
        for message in parsed.messages:
            for call in message.tool_calls or ():
                called.append(call.name)
                names_by_id[call.id] = call.name
            if message.role == "tool" and message.tool_call_id in names_by_id:
                results[names_by_id[message.tool_call_id]] = message.text
        return called, results
    for anthropic_message in parsed.messages:
        for block in anthropic_message.blocks:
            if block["type"] == "tool_use":
                called.append(str(block["name"]))
                names_by_id[str(block["id"])] = str(block["name"])
            elif block["type"] == "tool_result" and block["tool_use_id"] in names_by_id:
                content = block.get("content")
                text = (
                    content
                    if isinstance(content, str)
                    else "".join(
                        str(b.get("text", "")) for b in content or () if b.get("type") == "text"
                    )
                )
                results[names_by_id[str(block["tool_use_id"])]] = text
    return called, results


def _tools_refused(request: MockRequest) -> bool:
    choice = request.parsed.tool_choice
    if isinstance(choice, str):
        return choice == "none"
    return choice is not None and choice.get("type") == "none"


def generated_reasoning(entry: Reply, request: MockRequest) -> str:
    """The short reasoning the mock sends in thinking mode for a reply scripted without any.

    Derived from the reply and the request only (the same request gets the same text), so
    cassettes and goldens recorded from the mock stay byte-stable."""
    if entry.tool_calls:
        names = list(dict.fromkeys(call.name for call in entry.tool_calls))
        return f"I need {', '.join(names)} for this; I will call {'it' if len(names) == 1 else 'them'}."
    if request.after_tool_result:
        return "The tool results are in; I can answer now."
    return "I can answer this directly."


def call_each_tool_once(request: MockRequest, *, call: bool = True) -> Reply:
    """A tool round trip without scripting (pydantic-ai's ``TestModel``, for the DeepSeek wire).

    While some offered tool has not been called in the conversation, the answer calls every
    such tool at once (parallel calls), with arguments generated from its JSON schema
    (:func:`example_arguments`). Once all were called, it answers with a JSON object of each
    tool's latest result text (``{"search": "3 hits"}``). Without tools, or with
    ``tool_choice`` none, it is :func:`default_reply`. In thinking mode each answer carries
    reasoning, so a client that passes it back stays valid. ``call=False`` gives the answer
    without new calls at once (the mock's bound on call-tools answers uses it).

    Its limits: each tool is called once per *conversation* (what the request's messages show),
    so a later user turn of the same conversation gets no tool call; and every new conversation
    calls every tool again, so an agent whose tool starts a sub-agent offered the same tools
    would fan out without end. ``onExhausted: "call-tools"`` (and a route's ``"call-tools"``
    answer) bound that: after ``call_tools_limit`` answers that call tools (16 by default) the
    mock answers without tools. A responder of your own is yours to bound.

    Use it as a responder (``MockDeepSeek(call_each_tool_once)``) or with
    ``onExhausted: "call-tools"`` in a script / ``dsh-testkit serve --on-exhausted call-tools``.
    """
    offered = [name for name, _ in request.tools.schemas]
    if not offered or _tools_refused(request):
        return default_reply(request)
    called, results = _calls_and_results(request)
    schemas = dict(request.tools.schemas)
    uncalled = [name for name in offered if name not in called] if call else []
    reasoning = None
    if uncalled:
        if request.thinking:
            reasoning = f"I will call {', '.join(uncalled)} once each."
        return Reply(
            reasoning=reasoning,
            tool_calls=tuple(
                ToolCall(name=name, arguments=example_arguments(schemas.get(name, {})))
                for name in uncalled
            ),
        )
    answered = [name for name in offered if name in called]
    if request.thinking:
        reasoning = (
            "Every tool has answered; I will report their results."
            if len(answered) == len(offered)
            else "I will answer without calling more tools."
        )
    text = json.dumps(
        {name: results.get(name, "") for name in answered}, ensure_ascii=False, sort_keys=False
    )
    return Reply(reasoning=reasoning, text=text)
