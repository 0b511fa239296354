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

from ._request import MockRequest
from ._script import Reply, ToolCall

__all__ = ["default_reply", "example_arguments"]

_SNIPPET = 120


def _example(schema: Mapping[str, Any], depth: int = 0) -> Any:
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
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
        return []
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
