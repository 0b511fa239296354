"""Structured request diffs in this project's vocabulary, for wire bodies of any chat API.

A cassette mismatch and a prefix-stability failure both have to say *what* changed between two
chat requests, the way :func:`dsh_core.diff_requests` does for logged requests: which header
part (``model``, ``config.temperature``, ``system line 3``, tool ``'grep'`` added or changed)
or which message index and field. Message indexes are the wire body's own (``messages[2]`` is
the third entry of the body's ``messages`` list, system messages counted), so an index points at
what a user sees in a cassette's YAML or a captured body. Both sides are first brought to one comparable form,
:class:`ChatView`: a DeepSeek body through the provider's own ``parse_request`` when that codec
is installed, any other OpenAI- or Anthropic-shaped body directly from its JSON.
:func:`chat_view_of_options` brings a :class:`~dsh_core.GenerateOptions` to the same form.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dsh_core import GenerateOptions, ToolsPlaceholder

__all__ = [
    "ChatView",
    "chat_view",
    "chat_view_of_options",
    "common_message_prefix",
    "diff_chat",
    "first_json_difference",
    "short",
    "short_repr",
]

_LIMIT = 60


def short_repr(text: str, limit: int) -> str:
    """``repr(text)``, cut to ``limit`` characters with ``…`` when longer, in O(limit).

    Exactly ``repr(text)[: limit - 1] + "…"`` for a long text, without escaping all of it (a
    request body can be megabytes). ``repr`` escapes each character on its own once it has
    picked the quote for the whole text (``'`` unless the text holds ``'`` and no ``"``), so
    the repr of the first ``limit`` characters plus one probe character that forces the same
    pick starts with the same ``limit - 1`` characters.
    """
    if len(text) <= limit or limit < 1:
        whole = repr(text)
        return whole if len(whole) <= limit else whole[: limit - 1] + "…"
    probe = "'" if "'" in text and '"' not in text else '"'
    return repr(text[:limit] + probe)[: limit - 1] + "…"


def short(value: Any, limit: int = _LIMIT) -> str:
    """A one-line rendering of a JSON value, cut at ``limit`` characters."""
    if isinstance(value, str):
        return short_repr(value, limit)
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def first_json_difference(where: str, a: Any, b: Any, names: tuple[str, str]) -> str | None:
    """The first path at which two JSON values differ, with both values (``None`` if equal)."""
    left, right = names
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for key in a:
            if key not in b:
                return f"{where}.{key}: only in {left} ({short(a[key])})"
            found = first_json_difference(f"{where}.{key}", a[key], b[key], names)
            if found:
                return found
        for key in b:
            if key not in a:
                return f"{where}.{key}: only in {right} ({short(b[key])})"
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            found = first_json_difference(f"{where}[{i}]", x, y, names)
            if found:
                return found
        if len(a) != len(b):
            return f"{where}: {left} has {len(a)} item(s), {right} has {len(b)}"
        return None
    if type(a) is not type(b) or a != b:
        return f"{where} differs: {left}: {short(a)}, {right}: {short(b)}"
    return None


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


def _deepseek_parser() -> Callable[[Any], Mapping[str, Any]] | None:
    """The DeepSeek codec (``parse_request(body).to_json()``) when ``dsh_core.providers`` has it."""
    try:
        from dsh_core.providers import deepseek
    except ImportError:  # pragma: no cover - the providers package ships with dsh_core
        return None
    parse = getattr(deepseek, "parse_request", None)
    if not callable(parse):  # pragma: no cover
        return None

    def normalized(body: Any) -> Mapping[str, Any]:
        as_json: Mapping[str, Any] = parse(body).to_json()
        return as_json

    return normalized


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
        parser = _deepseek_parser()
        if parser is not None:
            with contextlib.suppress(Exception):
                parsed = parser(parsed)
    return _wire_view(parsed)


def _tool_name(tool: Any) -> str:
    if isinstance(tool, Mapping):
        function = tool.get("function")
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            return str(function["name"])
        if isinstance(tool.get("name"), str):
            return str(tool["name"])
    return json.dumps(tool, ensure_ascii=False, sort_keys=True)


def _system_diff(a: str | None, b: str | None, names: tuple[str, str]) -> str:
    left, right = names
    la = a.split("\n") if a else []
    lb = b.split("\n") if b else []
    for i, (x, y) in enumerate(zip(la, lb, strict=False)):
        if x != y:
            return f"system line {i + 1} differs: {left}: {short(x)}, {right}: {short(y)}"
    return f"system: {left} has {len(la)} line(s), {right} has {len(lb)}" + (
        f" (first extra: {short(lb[len(la)])})" if len(lb) > len(la) else ""
    )


def _tools_diff(a: Any, b: Any, names: tuple[str, str]) -> list[str]:
    left, right = names
    if not isinstance(a, list) or not isinstance(b, list):
        return [f"tools differ: {left}: {short(a)}, {right}: {short(b)}"]
    by_a = {_tool_name(t): t for t in a}
    by_b = {_tool_name(t): t for t in b}
    out = [f"tool {name!r} added in {right}" for name in by_b if name not in by_a]
    out += [f"tool {name!r} removed (only in {left})" for name in by_a if name not in by_b]
    for name, tool in by_a.items():
        if name in by_b:
            detail = first_json_difference("", tool, by_b[name], names)
            if detail:
                out.append(f"tool {name!r} changed: {detail.lstrip('.')}")
    if not out and list(by_a) != list(by_b):
        out.append(f"tools: order changed: {left}: {list(by_a)}, {right}: {list(by_b)}")
    return out


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
    left, right = names
    out: list[str] = []
    a_config, b_config = expected.config, actual.config
    keys = ("model",) if prefix else tuple(dict.fromkeys([*a_config, *b_config]))
    for key in keys:
        label = key if key == "model" else f"config.{key}"
        if key not in b_config and key in a_config:
            out.append(f"{label}: only in {left} ({short(a_config[key])})")
        elif key not in a_config and key in b_config:
            out.append(f"{label}: only in {right} ({short(b_config[key])})")
        elif key in a_config and a_config[key] != b_config[key]:
            out.append(
                f"{label} differs: {left}: {short(a_config[key])}, {right}: {short(b_config[key])}"
            )
    if (expected.system or None) != (actual.system or None):
        out.append(_system_diff(expected.system, actual.system, names))
    if (expected.tools or None) != (actual.tools or None):
        out.extend(_tools_diff(expected.tools or [], actual.tools or [], names))
    out.extend(_messages_diff(expected, actual, names, prefix=prefix))
    return tuple(out)


def _messages_diff(
    expected: ChatView, actual: ChatView, names: tuple[str, str], *, prefix: bool
) -> list[str]:
    """The first message difference, indexed as in each wire body (system messages counted).

    When both bodies put the same number of system messages first (the usual case) one index
    names the message in both; otherwise the right side's own index follows in parentheses.
    """
    left, right = names
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
    if len(b_msgs) < len(a_msgs):
        return [
            f"messages: {left} has {len(a_msgs) + a_at}, {right} only {len(b_msgs) + b_at} "
            f"(first missing: {where(len(b_msgs))} {short(a_msgs[len(b_msgs)])})"
        ]
    if len(b_msgs) > len(a_msgs) and not prefix:
        first_extra = f"messages[{len(a_msgs) + b_at}]"
        return [
            f"messages: {left} has {len(a_msgs) + a_at}, {right} has {len(b_msgs) + b_at} "
            f"(first extra: {first_extra} {short(b_msgs[len(a_msgs)])})"
        ]
    return []


def common_message_prefix(expected: ChatView, actual: ChatView) -> int:
    """How many leading messages two views share (a closeness measure)."""
    return _common_prefix(expected.messages, actual.messages)
