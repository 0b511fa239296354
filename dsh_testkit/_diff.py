"""Structured request diffs in this project's vocabulary, for wire bodies of any chat API.

A cassette mismatch and a prefix-stability failure both have to say *what* changed between two
chat requests, the way :func:`dsh_core.diff_requests` does for logged requests: which header
part (``model``, ``config.temperature``, ``system line 3``, tool ``'grep'`` added or changed)
or which message index and field. Message indexes are the wire body's own (``messages[2]`` is
the third entry of the body's ``messages`` list, system messages counted), so an index points at
what a user sees in a cassette's YAML or a captured body. Both sides are first brought to one comparable form,
:class:`ChatView`: a DeepSeek body through the provider's own ``parse_request`` when that codec
reads it, any other OpenAI- or Anthropic-shaped body directly from its JSON.
:func:`chat_view_of_options` brings a :class:`~dsh_core.GenerateOptions` to the same form.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dsh_core import (
    GenerateOptions,
    ToolsPlaceholder,
    config_differences,
    count_difference,
    first_json_difference,
    system_difference,
    tools_differences,
)
from dsh_core.providers.deepseek import parse_request

__all__ = [
    "ChatView",
    "chat_view",
    "chat_view_of_options",
    "common_message_prefix",
    "diff_chat",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatView:
    """One chat request in comparable form: header parts and messages, all plain JSON."""

    config: dict[str, Any] = field(default_factory=dict)
    """Every request field except system, tools and messages (``model``, ``temperature``, …)."""
    system: str | None = None
    """The system prompt (leading system messages joined by newlines, or a top-level field)."""
    tools: list[dict[str, Any]] | str | list[str] | None = None
    """Tool definitions in request order (a placeholder token or tool names in normalized logs)."""
    messages: list[Any] = field(default_factory=list)
    """The conversation after the system prompt, as JSON."""
    message_offset: int = 0
    """How many entries of the body's ``messages`` precede ``messages[0]`` here: the leading
    system/developer messages folded into :attr:`system`. A diff adds it to every message index
    so the index is the wire body's."""


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [
            part.get("text", "") if isinstance(part, Mapping) else str(part) for part in content
        ]
        return "\n".join(texts)
    return json.dumps(content, ensure_ascii=False)


def _wire_view(body: Mapping[str, Any]) -> ChatView:
    messages = list(body.get("messages") or [])
    system_parts: list[str] = []
    if "system" in body:
        system_parts.append(_text_of(body["system"]))
    while (
        messages
        and isinstance(messages[0], Mapping)
        and messages[0].get("role") in ("system", "developer")
    ):
        system_parts.append(_text_of(messages.pop(0).get("content")))
    tools = body.get("tools")
    return ChatView(
        config={k: v for k, v in body.items() if k not in ("messages", "system", "tools")},
        system="\n".join(system_parts) if system_parts else None,
        tools=list(tools) if isinstance(tools, list) else None,
        messages=messages,
        message_offset=len(body.get("messages") or []) - len(messages),
    )


def chat_view_of_options(options: GenerateOptions) -> ChatView:
    """A :class:`~dsh_core.GenerateOptions` in comparable form (message ids and sources dropped).

    There is no wire body here: message indexes are those of ``options.messages``, whose system
    prompt is kept apart (``options.system``), so the offset is 0.
    """
    tools = options.tools
    messages = []
    for message in options.messages:
        as_json = dict(message.to_json())
        as_json.pop("id", None)
        as_json.pop("source", None)
        messages.append(as_json)
    return ChatView(
        config=dict(options.config.to_json()),
        system=options.system,
        tools=(
            None
            if tools is None
            else tools.to_json()
            if isinstance(tools, ToolsPlaceholder)
            else [t.to_json() for t in tools]
        ),
        messages=messages,
    )


def chat_view(body: Any, *, use_provider_codec: bool = True) -> ChatView | None:
    """A wire body (bytes, text or parsed JSON) as a :class:`ChatView`; ``None`` if not a chat.

    A DeepSeek Chat Completions body is first read back through the provider codec's
    ``parse_request`` (absent and ``null`` fields alike, messages in the codec's shape), so two
    bodies that mean the same request compare equal; a body the codec refuses (another API, a
    malformed request) is compared as the JSON it is.
    """
    parsed = body
    if isinstance(body, (bytes, str)):
        try:
            parsed = json.loads(body)
        except ValueError:
            return None
    if not isinstance(parsed, Mapping) or not isinstance(parsed.get("messages"), list):
        return None
    if use_provider_codec:
        with contextlib.suppress(Exception):
            parsed = parse_request(parsed).to_json()
    return _wire_view(parsed)


def _tool_name(tool: Any) -> str:
    if isinstance(tool, Mapping):
        function = tool.get("function")
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            return str(function["name"])
        if isinstance(tool.get("name"), str):
            return str(tool["name"])
    return json.dumps(tool, ensure_ascii=False, sort_keys=True)


def _tool_pairs(tools: Any) -> list[tuple[str, Any]] | str | None:
    if isinstance(tools, str):
        return tools
    return [(_tool_name(t), t) for t in tools or ()]


def _common_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def diff_chat(
    expected: ChatView,
    actual: ChatView,
    *,
    names: tuple[str, str] = ("recorded", "request"),
    prefix: bool = False,
) -> tuple[str, ...]:
    """Where ``actual`` differs from ``expected``, header parts first; ``()`` if equal.

    ``names`` label the two sides in the text. With ``prefix=True`` only what a prefix cache
    sees is compared: ``model``, system, tools, and the expected messages, which the actual
    request may extend but not change.
    """
    out = config_differences(
        expected.config,
        actual.config,
        names,
        label=lambda key: key if key == "model" else f"config.{key}",
        keys=("model",) if prefix else None,
    )
    system = system_difference(expected.system, actual.system, names)
    if system is not None:
        out.append(system)
    if (expected.tools or None) != (actual.tools or None):
        out.extend(tools_differences(_tool_pairs(expected.tools), _tool_pairs(actual.tools), names))
    out.extend(_messages_diff(expected, actual, names, prefix=prefix))
    return tuple(out)


def _messages_diff(
    expected: ChatView, actual: ChatView, names: tuple[str, str], *, prefix: bool
) -> list[str]:
    """The first message difference, indexed as in each wire body (system messages counted).

    When both bodies put the same number of system messages first (the usual case) one index
    names the message in both; otherwise the right side's own index follows in parentheses.
    """
    right = names[1]
    a_msgs, b_msgs = expected.messages, actual.messages
    a_at, b_at = expected.message_offset, actual.message_offset

    def where(i: int) -> str:
        return f"messages[{i + a_at}]"

    def also(i: int) -> str:
        return "" if a_at == b_at else f" (in {right}: messages[{i + b_at}])"

    same = _common_prefix(a_msgs, b_msgs)
    if same < min(len(a_msgs), len(b_msgs)):
        found = first_json_difference(where(same), a_msgs[same], b_msgs[same], names)
        return [(found or f"{where(same)} differs") + also(same)]
    if len(b_msgs) < len(a_msgs) or (len(b_msgs) > len(a_msgs) and not prefix):
        shorter = min(len(a_msgs), len(b_msgs))
        extra = len(b_msgs) > len(a_msgs)
        return [
            count_difference(
                "messages",
                len(a_msgs) + a_at,
                len(b_msgs) + b_at,
                names,
                at=f"messages[{shorter + (b_at if extra else a_at)}]",
                item=(b_msgs if extra else a_msgs)[shorter],
            )
        ]
    return []


def common_message_prefix(expected: ChatView, actual: ChatView) -> int:
    """How many leading messages two views share (a closeness measure)."""
    return _common_prefix(expected.messages, actual.messages)
