"""Content blocks, :class:`Message`, and the per-node projection :func:`derive_event_message`.

Messages are typed, immutable views of what the log stores. ``derive_event_message`` is THE
projection from a surface event to what the model sees; the session's cache and the independent
reconstructor both fold this one function, so no two paths can disagree.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, Literal, TypeAlias, TypeVar, cast

from ._errors import InvalidEventError
from ._events import Event
from ._json import FrozenDict, freeze_json
from ._json_text import dumps_canonical

__all__ = [
    "ContentBlock",
    "Message",
    "OpaqueBlock",
    "ReasoningBlock",
    "Role",
    "TextBlock",
    "ToolCallBlock",
    "ToolResultBlock",
    "assistant_message",
    "block_from_json",
    "derive_event_message",
    "tool_result_message",
    "user_message",
]

Role: TypeAlias = Literal["system", "user", "assistant"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TextBlock:
    """Visible text."""

    text: str
    type: Literal["text"] = "text"

    def to_json(self) -> dict[str, Any]:
        return {"type": "text", "text": self.text}

    @classmethod
    def from_json(cls, obj: object) -> TextBlock:
        """Parse a ``text`` block; any other JSON raises :class:`InvalidEventError`."""
        return _typed_block(cls, "text", obj)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningBlock:
    """Thinking, kept apart from visible text (DeepSeek's ``reasoning_content``)."""

    text: str
    type: Literal["reasoning"] = "reasoning"

    def to_json(self) -> dict[str, Any]:
        return {"type": "reasoning", "text": self.text}

    @classmethod
    def from_json(cls, obj: object) -> ReasoningBlock:
        """Parse a ``reasoning`` block; any other JSON raises :class:`InvalidEventError`."""
        return _typed_block(cls, "reasoning", obj)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallBlock:
    """A tool call. ``arguments`` is the model's raw JSON string, never parsed in the log."""

    id: str
    name: str
    arguments: str
    type: Literal["tool-call"] = "tool-call"

    def to_json(self) -> dict[str, Any]:
        return {"type": "tool-call", "id": self.id, "name": self.name, "arguments": self.arguments}

    @classmethod
    def from_json(cls, obj: object) -> ToolCallBlock:
        """Parse a ``tool-call`` block; any other JSON raises :class:`InvalidEventError`."""
        return _typed_block(cls, "tool-call", obj)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolResultBlock:
    """A tool's result, answering the call ``tool_call_id``."""

    tool_call_id: str
    content: tuple[ContentBlock, ...]
    is_error: bool | None = None
    """``None`` when the producer did not say (the key is then absent in JSON)."""
    type: Literal["tool-result"] = "tool-result"

    def __post_init__(self) -> None:
        if not isinstance(self.content, tuple):
            object.__setattr__(self, "content", tuple(self.content))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "type": "tool-result",
            "toolCallId": self.tool_call_id,
            "content": [b.to_json() for b in self.content],
        }
        if self.is_error is not None:
            out["isError"] = self.is_error
        return out

    @classmethod
    def from_json(cls, obj: object) -> ToolResultBlock:
        """Parse a ``tool-result`` block; any other JSON raises :class:`InvalidEventError`."""
        return _typed_block(cls, "tool-result", obj)


@dataclass(frozen=True, slots=True, kw_only=True)
class OpaqueBlock:
    """A block this build does not model (an image, a plugin block): carried as its JSON."""

    type: str
    data: FrozenDict
    """The whole block as frozen JSON, ``type`` included."""

    def __post_init__(self) -> None:
        if type(self.data) is not FrozenDict:
            object.__setattr__(self, "data", FrozenDict(self.data))

    def to_json(self) -> dict[str, Any]:
        return self.data

    @classmethod
    def from_json(cls, obj: object) -> OpaqueBlock:
        """Carry a block of a type this build does not model.

        A modeled type (``text``, ``reasoning``, ``tool-call``, ``tool-result``) is refused: it
        has its own class, and carrying it opaque would hide it from derivation.
        """
        kind = _block_type(obj)
        if kind in _MODELED_BLOCK_TYPES:
            raise InvalidEventError(
                f"OpaqueBlock.from_json got a {kind!r} block, which this build models; "
                "parse it with block_from_json (or its own class)"
            )
        return _typed_block(cls, kind, obj)


ContentBlock: TypeAlias = (
    "TextBlock | ReasoningBlock | ToolCallBlock | ToolResultBlock | OpaqueBlock"
)

_MODELED_BLOCK_TYPES: Final = frozenset({"text", "reasoning", "tool-call", "tool-result"})

_Block = TypeVar("_Block", TextBlock, ReasoningBlock, ToolCallBlock, ToolResultBlock, OpaqueBlock)


def _block_type(obj: object) -> str:
    if not isinstance(obj, Mapping) or not isinstance(obj.get("type"), str):
        raise InvalidEventError(f"block must be an object with a string type, got {obj!r}")
    kind: str = obj["type"]
    return kind


def _typed_block(cls: type[_Block], kind: str, obj: object) -> _Block:
    """``block_from_json(obj)`` when ``obj`` is a block of type ``kind``, else a clear error."""
    found = _block_type(obj)
    if found != kind:
        raise InvalidEventError(
            f"{cls.__name__}.from_json needs a block of type {kind!r}, got type {found!r}; "
            "use block_from_json to parse a block of any type"
        )
    return cast(_Block, block_from_json(obj))


def _need_str(obj: Mapping[str, Any], key: str, where: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise InvalidEventError(f"{where}.{key} must be a string, got {value!r}")
    return value


def block_from_json(obj: object, where: str = "block") -> ContentBlock:
    """Parse one content block; unknown block types become :class:`OpaqueBlock`."""
    if not isinstance(obj, Mapping) or not isinstance(obj.get("type"), str):
        raise InvalidEventError(f"{where} must be an object with a string type, got {obj!r}")
    kind = obj["type"]
    if kind == "text":
        return TextBlock(text=_need_str(obj, "text", where))
    if kind == "reasoning":
        return ReasoningBlock(text=_need_str(obj, "text", where))
    if kind == "tool-call":
        return ToolCallBlock(
            id=_need_str(obj, "id", where),
            name=_need_str(obj, "name", where),
            arguments=_need_str(obj, "arguments", where),
        )
    if kind == "tool-result":
        inner = obj.get("content")
        if not isinstance(inner, list):
            raise InvalidEventError(f"{where}.content must be an array")
        is_error = obj.get("isError")
        if is_error is not None and not isinstance(is_error, bool):
            raise InvalidEventError(f"{where}.isError must be a boolean")
        return ToolResultBlock(
            tool_call_id=_need_str(obj, "toolCallId", where),
            content=tuple(block_from_json(b, f"{where}.content[{i}]") for i, b in enumerate(inner)),
            is_error=is_error,
        )
    return OpaqueBlock(type=kind, data=freeze_json(dict(obj), path=where))


@dataclass(frozen=True, slots=True, kw_only=True)
class Message:
    """One immutable message: the shape used by the log, derivation and requests."""

    id: str
    """Non-empty; a UUID when minted here."""
    role: Role
    content: tuple[ContentBlock, ...]
    source: FrozenDict
    """Who produced it: ``{kind:'user'}``, ``{kind:'model', provider, model}``, ``{kind:'tool', callId}``,
    ``{kind:'plugin', plugin, …}``. Extensible, so kept as frozen JSON."""
    # Caches of texts computed once (messages are immutable). ``init=False``: a copy made with
    # ``dataclasses.replace`` starts with empty caches instead of sharing stale ones.
    _json_text: list[str] = field(default_factory=list, init=False, repr=False, compare=False)
    _visible_text: list[str] = field(default_factory=list, init=False, repr=False, compare=False)

    ROLES: ClassVar[frozenset[str]] = frozenset({"system", "user", "assistant"})

    def __post_init__(self) -> None:
        # A message built by hand is as immutable as a derived one.
        if not isinstance(self.content, tuple):
            object.__setattr__(self, "content", tuple(self.content))
        if type(self.source) is not FrozenDict:
            object.__setattr__(self, "source", FrozenDict(self.source))

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "role": self.role,
            "content": [b.to_json() for b in self.content],
            "source": self.source,
        }

    def canonical_json(self) -> str:
        """Compact JSON text of :meth:`to_json`, computed once (messages are immutable)."""
        if not self._json_text:
            self._json_text.append(dumps_canonical(self.to_json()))
        return self._json_text[0]

    def visible_json(self) -> dict[str, Any]:
        """What a provider sees of the message: its role and content (ids and sources never
        reach the wire)."""
        return {"role": self.role, "content": [b.to_json() for b in self.content]}

    def visible_canonical_json(self) -> str:
        """Compact JSON text of :meth:`visible_json`, computed once."""
        if not self._visible_text:
            self._visible_text.append(dumps_canonical(self.visible_json()))
        return self._visible_text[0]

    @property
    def text(self) -> str:
        """The concatenated visible text blocks."""
        return "".join(b.text for b in self.content if isinstance(b, TextBlock))

    @property
    def tool_calls(self) -> tuple[ToolCallBlock, ...]:
        return tuple(b for b in self.content if isinstance(b, ToolCallBlock))

    @classmethod
    def from_json(cls, obj: object) -> Message:
        if not isinstance(obj, Mapping):
            raise InvalidEventError(f"a message must be an object, got {type(obj).__name__}")
        msg_id = obj.get("id")
        if not isinstance(msg_id, str) or not msg_id:
            raise InvalidEventError("a message needs a non-empty string id")
        role = obj.get("role")
        if role not in cls.ROLES:
            raise InvalidEventError(
                f"message {msg_id}: role must be system|user|assistant, got {role!r}"
            )
        content = obj.get("content")
        if not isinstance(content, list):
            raise InvalidEventError(f"message {msg_id}: content must be an array")
        source = obj.get("source")
        if not isinstance(source, Mapping) or not isinstance(source.get("kind"), str):
            raise InvalidEventError(f"message {msg_id}: source must be an object with a kind")
        return cls(
            id=msg_id,
            role=role,
            content=tuple(block_from_json(b, f"content[{i}]") for i, b in enumerate(content)),
            source=freeze_json(
                dict(source) if not isinstance(source, FrozenDict) else source, path="source"
            ),
        )


def _new_id() -> str:
    return str(uuid.uuid4())


IdFactory: TypeAlias = Callable[[], str]


def _blocks(content: str | Sequence[ContentBlock]) -> tuple[ContentBlock, ...]:
    if isinstance(content, str):
        return (TextBlock(text=content),)
    return tuple(content)


def user_message(
    content: str | Sequence[ContentBlock],
    *,
    id: str | None = None,
    source: Mapping[str, Any] | None = None,
) -> Message:
    """A user message (``source`` defaults to ``{kind:'user'}``)."""
    return Message(
        id=id or _new_id(),
        role="user",
        content=_blocks(content),
        source=freeze_json(dict(source or {"kind": "user"}), path="source"),
    )


def assistant_message(
    content: str | Sequence[ContentBlock], *, provider: str, model: str, id: str | None = None
) -> Message:
    """An assistant message with source ``{kind:'model', provider, model}``."""
    return Message(
        id=id or _new_id(),
        role="assistant",
        content=_blocks(content),
        source=freeze_json({"kind": "model", "provider": provider, "model": model}, path="source"),
    )


def tool_result_message(
    call_id: str,
    content: str | Sequence[ContentBlock],
    *,
    is_error: bool = False,
    id: str | None = None,
) -> Message:
    """A tool-result message: role user, exactly one tool-result block answering ``call_id``."""
    block = ToolResultBlock(tool_call_id=call_id, content=_blocks(content), is_error=is_error)
    return Message(
        id=id or _new_id(),
        role="user",
        content=(block,),
        source=freeze_json({"kind": "tool", "callId": call_id}, path="source"),
    )


def derive_event_message(event: Event) -> Message | None:
    """The model-visible projection of one event (docs/design.md §4).

    ``user/message`` → its data; ``assistant/message`` and ``tool/result`` → ``data.message``,
    except an assistant message with empty content, which projects to nothing (a max-tokens step
    whose tool calls were dropped exists only to carry usage). Every other type → ``None``.
    """
    return parse_event_message(event)


def parse_event_message(event: Event) -> Message | None:
    """The body of :func:`derive_event_message`, for internal checks that must not count as a
    projection (the session's append-time check that a surface event's message parses)."""
    if event.type == "user/message":
        obj = event.data
    elif event.type in ("assistant/message", "tool/result"):
        obj = event.data.get("message") if isinstance(event.data, Mapping) else None
    else:
        return None
    try:
        message = Message.from_json(obj)
    except InvalidEventError as exc:
        raise InvalidEventError(
            f"{event.type} at seq {event.seq}: {exc}", seq=event.seq, event_type=event.type
        ) from exc
    if event.type == "assistant/message" and not message.content:
        return None
    return message
