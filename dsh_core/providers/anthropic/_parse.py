"""Messages API parsing: a wire body → :class:`AnthropicRequest`, structure only (a
:class:`~dsh_core.providers.WireFormatError` names the JSON path and a stable code)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..._json import FrozenDict, FrozenList
from ..._json_text import dumps_canonical
from .. import _wire as w
from .._models import resolve_model, thinking_enabled

__all__ = ["AnthropicMessage", "AnthropicRequest", "parse_request"]

_USER_BLOCKS = ("text", "image", "document", "search_result", "tool_result")
_ASSISTANT_BLOCKS = (
    "text",
    "thinking",
    "redacted_thinking",
    "tool_use",
    "server_tool_use",
    "web_search_tool_result",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class AnthropicMessage:
    """One parsed wire message; ``content`` is a string or an array of checked (frozen) blocks."""

    role: str
    """``user`` or ``assistant``."""
    content: str | FrozenList
    extra: FrozenDict = field(default_factory=FrozenDict)

    @property
    def blocks(self) -> tuple[FrozenDict, ...]:
        """The content as blocks (a string is one text block)."""
        if isinstance(self.content, str):
            return (FrozenDict({"type": "text", "text": self.content}),)
        return tuple(self.content)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": self.role, "content": self.content}
        out.update(self.extra)
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class AnthropicRequest:
    """A parsed Messages API body (docs/wire.md §3, §4). ``None``: absent or null."""

    model: str
    max_tokens: int
    messages: tuple[AnthropicMessage, ...]
    system: str | FrozenList | None = None
    tools: tuple[FrozenDict, ...] | None = None
    tool_choice: FrozenDict | None = None
    thinking: FrozenDict | None = None
    output_config: FrozenDict | None = None
    reasoning: FrozenDict | None = None
    """``{"effort": …}``: one copy of the V4.1 docs shows this toggle; accepted as well."""
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    stop_sequences: tuple[str, ...] | None = None
    metadata: FrozenDict | None = None
    stream: bool | None = None
    extra: FrozenDict = field(default_factory=FrozenDict)

    @property
    def thinking_type(self) -> str | None:
        """``enabled``, ``disabled``, ``adaptive``, or ``None`` when the request does not say."""
        return None if self.thinking is None else str(self.thinking["type"])

    @property
    def thinking_on(self) -> bool:
        """Whether this request runs in thinking mode: :func:`~dsh_core.providers.thinking_enabled`
        for the model serving it on this endpoint (Claude names mapped), ``thinking.type`` and
        ``reasoning.effort``."""
        effort = None if self.reasoning is None else self.reasoning.get("effort")
        return thinking_enabled(
            resolve_model(self.model, endpoint="anthropic"),
            thinking_type=self.thinking_type,
            effort=effort if isinstance(effort, str) else None,
        )

    def to_json(self) -> dict[str, Any]:
        """The body again; for a body made by :func:`serialize_request`, the same body."""
        out: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens}
        if self.system is not None:
            out["system"] = self.system
        out["messages"] = [m.to_json() for m in self.messages]
        tail: dict[str, Any] = {
            "tools": None if self.tools is None else list(self.tools),
            "tool_choice": self.tool_choice,
            "thinking": self.thinking,
            "output_config": self.output_config,
            "reasoning": self.reasoning,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "stop_sequences": None if self.stop_sequences is None else list(self.stop_sequences),
            "metadata": self.metadata,
            "stream": self.stream,
        }
        out.update((k, v) for k, v in tail.items() if v is not None)
        out.update(self.extra)
        return out

    def encode(self) -> bytes:
        return dumps_canonical(self.to_json()).encode("utf-8")


def _block(value: object, param: str, allowed: tuple[str, ...]) -> None:
    obj = w.need_object(value, param)
    kind = w.need_variant(w.required(obj, "type", param), w.child(param, "type"), allowed)

    def string(key: str) -> None:
        w.need_str(w.required(obj, key, param), w.child(param, key))

    if kind == "text":
        string("text")
    elif kind == "thinking":
        string("thinking")
        signature = obj.get("signature")
        if signature is not None:
            w.need_str(signature, w.child(param, "signature"))
    elif kind == "redacted_thinking":
        string("data")
    elif kind in ("tool_use", "server_tool_use"):
        string("id")
        string("name")
        w.need_object(w.required(obj, "input", param), w.child(param, "input"))
    elif kind == "tool_result":
        string("tool_use_id")
        content = obj.get("content")
        if content is not None and not isinstance(content, str):
            where = w.child(param, "content")
            for i, inner in enumerate(w.need_list(content, where)):
                _block(inner, w.child(where, i), ("text", "image", "document", "search_result"))
        is_error = obj.get("is_error")
        if is_error is not None:
            w.need_bool(is_error, w.child(param, "is_error"))
    elif kind in ("image", "document"):
        w.need_object(w.required(obj, "source", param), w.child(param, "source"))
    elif kind == "web_search_tool_result":
        string("tool_use_id")


def _message(value: object, param: str) -> AnthropicMessage:
    obj = w.need_object(value, param)
    role = w.need_variant(
        w.required(obj, "role", param), w.child(param, "role"), ("user", "assistant")
    )
    raw = w.required(obj, "content", param)
    where = w.child(param, "content")
    content: str | FrozenList
    if isinstance(raw, str):
        content = raw
    else:
        allowed = _USER_BLOCKS if role == "user" else _ASSISTANT_BLOCKS
        for i, block in enumerate(w.need_list(raw, where)):
            _block(block, w.child(where, i), allowed)
        content = w.frozen(raw, where)
    return AnthropicMessage(
        role=role, content=content, extra=w.extras(obj, ("role", "content"), param)
    )


def _tools(value: object, param: str) -> tuple[FrozenDict, ...]:
    """Tools: the name rules apply to custom tools (a server tool's name is DeepSeek's own)."""
    tools: list[FrozenDict] = []
    items = w.need_list(value, param)
    w.check_tool_count(len(items), param)
    custom: list[tuple[str, str]] = []
    for i, item in enumerate(items):
        where = w.child(param, i)
        obj = w.need_object(item, where)
        name_where = w.child(where, "name")
        name = w.need_str(w.required(obj, "name", where), name_where)
        if obj.get("type") in (None, "custom"):
            custom.append((name, name_where))
    w.check_tool_names(custom)
    seen: set[str] = set()
    for i, item in enumerate(items):
        where = w.child(param, i)
        obj = item
        name_where = w.child(where, "name")
        name = obj["name"]
        kind = obj.get("type")
        if kind is None or kind == "custom":
            description = obj.get("description")
            if description is not None:
                w.need_str(description, w.child(where, "description"))
            w.need_object(w.required(obj, "input_schema", where), w.child(where, "input_schema"))
        else:
            w.need_str(kind, w.child(where, "type"))  # a server tool, e.g. web_search_20250305
        if name in seen:
            w.fail(name_where, f"duplicate tool name {name!r}", code="duplicate_name", value=name)
        seen.add(name)
        tools.append(w.frozen(obj, where))
    return tuple(tools)


def _object_with(obj: Mapping[str, Any], key: str, strings: tuple[str, ...]) -> FrozenDict | None:
    """An optional object field whose listed members, when present, must be strings."""
    value = obj.get(key)
    if value is None:
        return None
    inner = w.need_object(value, key)
    for member in strings:
        if inner.get(member) is not None:
            w.need_str(inner[member], w.child(key, member))
    result: FrozenDict = w.frozen(inner, key)
    return result


_REQUEST_FIELDS = (
    "model",
    "max_tokens",
    "messages",
    "system",
    "tools",
    "tool_choice",
    "thinking",
    "output_config",
    "reasoning",
    "temperature",
    "top_p",
    "top_k",
    "stop_sequences",
    "metadata",
    "stream",
)


def parse_request(body: Mapping[str, Any] | bytes | str) -> AnthropicRequest:
    """Check a Messages API body's structure and return it as an :class:`AnthropicRequest`.

    Raises :class:`WireFormatError` naming the JSON path of the first offending field. Fields
    the endpoint ignores (``container``, ``service_tier``, …) are kept in ``extra``.
    """
    obj = w.decode_body(body)
    model = w.need_str(w.required(obj, "model", ""), "model")
    max_tokens = w.need_int(w.required(obj, "max_tokens", ""), "max_tokens", minimum=1)
    raw_messages = w.need_list(w.required(obj, "messages", ""), "messages")
    if not raw_messages:
        w.fail("messages", "must contain at least one message", code="empty")
    messages = tuple(_message(m, w.child("messages", i)) for i, m in enumerate(raw_messages))
    system = obj.get("system")
    if system is not None and not isinstance(system, str):
        for i, block in enumerate(w.need_list(system, "system")):
            _block(block, w.child("system", i), ("text",))
        system = w.frozen(system, "system")
    tool_choice = obj.get("tool_choice")
    if tool_choice is not None:
        choice = w.need_object(tool_choice, "tool_choice")
        kind = w.need_variant(
            w.required(choice, "type", "tool_choice"),
            "tool_choice.type",
            ("auto", "any", "tool", "none"),
        )
        if kind == "tool":
            w.need_str(w.required(choice, "name", "tool_choice"), "tool_choice.name")
        tool_choice = w.frozen(choice, "tool_choice")
    thinking = obj.get("thinking")
    if thinking is not None:
        thinking_obj = w.need_object(thinking, "thinking")
        w.need_variant(
            w.required(thinking_obj, "type", "thinking"),
            "thinking.type",
            ("enabled", "disabled", "adaptive"),
        )
        budget = thinking_obj.get("budget_tokens")
        if budget is not None:
            w.need_int(budget, "thinking.budget_tokens", minimum=0)
        thinking = w.frozen(thinking_obj, "thinking")
    stop = obj.get("stop_sequences")
    stop_sequences = (
        None
        if stop is None
        else tuple(
            w.need_str(s, w.child("stop_sequences", i))
            for i, s in enumerate(w.need_list(stop, "stop_sequences"))
        )
    )

    def number(key: str, low: float, high: float) -> float | None:
        value = obj.get(key)
        return None if value is None else w.need_number(value, key, low=low, high=high)

    top_k = obj.get("top_k")
    stream = obj.get("stream")
    return AnthropicRequest(
        model=model,
        max_tokens=max_tokens,
        messages=messages,
        system=system,
        tools=None if obj.get("tools") is None else _tools(obj["tools"], "tools"),
        tool_choice=tool_choice,
        thinking=thinking,
        output_config=_object_with(obj, "output_config", ("effort",)),
        reasoning=_object_with(obj, "reasoning", ("effort",)),
        temperature=number("temperature", 0, 2),
        top_p=number("top_p", 0, 1),
        top_k=None if top_k is None else w.need_int(top_k, "top_k", minimum=0),
        stop_sequences=stop_sequences,
        metadata=_object_with(obj, "metadata", ("user_id",)),
        stream=None if stream is None else w.need_bool(stream, "stream"),
        extra=w.extras(obj, _REQUEST_FIELDS, ""),
    )
