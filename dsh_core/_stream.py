"""The provider-facing vocabulary: stream chunks, usage, finish reasons, failures, requests.

JSON forms use the reference harness's field names (``block-start``, ``argumentsDelta``,
``cacheReadTokens``, …) so ``assistant/chunk`` events interchange. :class:`BlockAssembler` is the
one chunk → message assembly, shared by the loop, replay and the interrupted-prefix rule.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import (
    Any,
    Final,
    Literal,
    Protocol,
    TypeAlias,
    TypeGuard,
    TypeVar,
    cast,
    runtime_checkable,
)

from ._errors import DshError, HeaderError, InvalidEventError
from ._header import EpochHeader, LlmCallConfig, ToolSchema, ToolsPlaceholder, prefix_to_json
from ._json import FrozenDict, dumps_canonical, freeze_json
from ._messages import (
    ContentBlock,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    block_from_json,
)

__all__ = [
    "BlockAssembler",
    "BlockEnd",
    "BlockStart",
    "CancelToken",
    "Finish",
    "FinishReason",
    "GenerateOptions",
    "LlmFailure",
    "Provider",
    "ProviderError",
    "ReasoningDelta",
    "StreamChunk",
    "TextDelta",
    "TokenUsage",
    "ToolCallDelta",
    "UsageChunk",
    "chunk_from_json",
]


def _is_count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenUsage:
    """Token counts of one call. Buckets are disjoint: ``input_tokens`` excludes cached input."""

    input_tokens: int
    """Uncached prompt tokens (DeepSeek's ``prompt_cache_miss_tokens``)."""
    output_tokens: int
    cache_read_tokens: int | None = None
    """Prompt tokens served from the provider's prefix cache (``prompt_cache_hit_tokens``)."""
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None
    """A subdivision of ``output_tokens``."""

    @property
    def prompt_tokens(self) -> int:
        """All prompt tokens: uncached + cache read + cache write."""
        return self.input_tokens + (self.cache_read_tokens or 0) + (self.cache_write_tokens or 0)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"inputTokens": self.input_tokens, "outputTokens": self.output_tokens}
        if self.cache_read_tokens is not None:
            out["cacheReadTokens"] = self.cache_read_tokens
        if self.cache_write_tokens is not None:
            out["cacheWriteTokens"] = self.cache_write_tokens
        if self.reasoning_tokens is not None:
            out["reasoningTokens"] = self.reasoning_tokens
        return out

    @classmethod
    def from_json(cls, obj: object) -> TokenUsage:
        if not isinstance(obj, Mapping):
            raise InvalidEventError(f"usage must be an object, got {obj!r}")

        def count(key: str, required: bool) -> int | None:
            value = obj.get(key)
            if value is None and not required:
                return None
            if not _is_count(value):
                raise InvalidEventError(
                    f"usage.{key} must be a non-negative integer, got {value!r}"
                )
            return value

        return cls(
            input_tokens=count("inputTokens", True) or 0,
            output_tokens=count("outputTokens", True) or 0,
            cache_read_tokens=count("cacheReadTokens", False),
            cache_write_tokens=count("cacheWriteTokens", False),
            reasoning_tokens=count("reasoningTokens", False),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class LlmFailure:
    """Why a call failed, as the loop and the log see it."""

    message: str
    code: str
    """A stable code: ``RATE_LIMIT``, ``SERVER``, ``AUTH``, ``STREAM_CLOSED``, ``EMPTY_RESPONSE``, …"""
    status: int | None = None
    """The HTTP status, when there was one."""
    retryable: bool = False
    """Whether a retry of the byte-identical request may succeed."""
    retry_after_ms: int | None = None
    """The provider's Retry-After, in milliseconds."""
    request_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"message": self.message, "code": self.code}
        if self.status is not None:
            out["status"] = self.status
        if self.retryable:
            out["retryable"] = True
        if self.retry_after_ms is not None:
            out["providerRetryAfterMs"] = self.retry_after_ms
        if self.request_id is not None:
            out["requestId"] = self.request_id
        return out

    @classmethod
    def from_json(cls, obj: object) -> LlmFailure:
        if not isinstance(obj, Mapping):
            raise InvalidEventError(f"failure must be an object, got {obj!r}")
        status, retryable = obj.get("status"), obj.get("retryable", False)
        retry_after, request_id = obj.get("providerRetryAfterMs"), obj.get("requestId")
        # Typed fields are checked, not coerced: bool("false") would make a failure retryable.
        if status is not None and not _is_count(status):
            raise InvalidEventError(f"failure.status must be an HTTP status code, got {status!r}")
        if not isinstance(retryable, bool):
            raise InvalidEventError(f"failure.retryable must be a boolean, got {retryable!r}")
        if retry_after is not None and not _is_count(retry_after):
            raise InvalidEventError(
                f"failure.providerRetryAfterMs must be a non-negative integer, got {retry_after!r}"
            )
        if request_id is not None and not isinstance(request_id, str):
            raise InvalidEventError(f"failure.requestId must be a string, got {request_id!r}")
        return cls(
            message=str(obj.get("message", "")),
            code=str(obj.get("code", "UNKNOWN")),
            status=status,
            retryable=retryable,
            retry_after_ms=retry_after,
            request_id=request_id,
        )


class ProviderError(DshError):
    """A model call failed; ``failure`` says how (and whether a retry may help)."""

    def __init__(self, failure: LlmFailure) -> None:
        status = f" (HTTP {failure.status})" if failure.status is not None else ""
        super().__init__(f"{failure.code}{status}: {failure.message}")
        self.failure = failure


FinishKind: TypeAlias = Literal["stop", "tool-calls", "max-tokens", "error", "aborted"]


@dataclass(frozen=True, slots=True, kw_only=True)
class FinishReason:
    """How a stream ended. ``failure`` is set for ``error`` and ``aborted``."""

    kind: FinishKind
    failure: LlmFailure | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind}
        if self.failure is not None:
            out["failure"] = self.failure.to_json()
        return out

    @classmethod
    def from_json(cls, obj: object) -> FinishReason:
        if not isinstance(obj, Mapping) or obj.get("kind") not in (
            "stop",
            "tool-calls",
            "max-tokens",
            "error",
            "aborted",
        ):
            raise InvalidEventError(f"finish reason must be {{kind: …}}, got {obj!r}")
        failure = obj.get("failure") or obj.get("error")
        return cls(kind=obj["kind"], failure=LlmFailure.from_json(failure) if failure else None)


@dataclass(frozen=True, slots=True, kw_only=True)
class BlockStart:
    index: int
    block_type: str
    type: Literal["block-start"] = "block-start"

    def to_json(self) -> dict[str, Any]:
        return {"type": "block-start", "index": self.index, "blockType": self.block_type}

    @classmethod
    def from_json(cls, obj: object) -> BlockStart:
        """Parse a ``block-start`` chunk; any other JSON raises :class:`InvalidEventError`."""
        return _typed_chunk(cls, "block-start", obj)


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDelta:
    index: int
    text: str
    type: Literal["text-delta"] = "text-delta"

    def to_json(self) -> dict[str, Any]:
        return {"type": "text-delta", "index": self.index, "text": self.text}

    @classmethod
    def from_json(cls, obj: object) -> TextDelta:
        """Parse a ``text-delta`` chunk; any other JSON raises :class:`InvalidEventError`."""
        return _typed_chunk(cls, "text-delta", obj)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningDelta:
    index: int
    text: str
    type: Literal["reasoning-delta"] = "reasoning-delta"

    def to_json(self) -> dict[str, Any]:
        return {"type": "reasoning-delta", "index": self.index, "text": self.text}

    @classmethod
    def from_json(cls, obj: object) -> ReasoningDelta:
        """Parse a ``reasoning-delta`` chunk; any other JSON raises :class:`InvalidEventError`."""
        return _typed_chunk(cls, "reasoning-delta", obj)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallDelta:
    """A fragment of a tool call's raw JSON arguments; ``name`` comes with the first fragment."""

    index: int
    id: str
    arguments_delta: str
    name: str | None = None
    type: Literal["tool-call-delta"] = "tool-call-delta"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "tool-call-delta", "index": self.index, "id": self.id}
        if self.name is not None:
            out["name"] = self.name
        out["argumentsDelta"] = self.arguments_delta
        return out

    @classmethod
    def from_json(cls, obj: object) -> ToolCallDelta:
        """Parse a ``tool-call-delta`` chunk; any other JSON raises :class:`InvalidEventError`."""
        return _typed_chunk(cls, "tool-call-delta", obj)


@dataclass(frozen=True, slots=True, kw_only=True)
class BlockEnd:
    """Closes a block with its authoritative assembled form."""

    index: int
    block: ContentBlock
    type: Literal["block-end"] = "block-end"

    def to_json(self) -> dict[str, Any]:
        return {"type": "block-end", "index": self.index, "block": self.block.to_json()}

    @classmethod
    def from_json(cls, obj: object) -> BlockEnd:
        """Parse a ``block-end`` chunk; any other JSON raises :class:`InvalidEventError`."""
        return _typed_chunk(cls, "block-end", obj)


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageChunk:
    usage: TokenUsage
    type: Literal["usage"] = "usage"

    def to_json(self) -> dict[str, Any]:
        return {"type": "usage", "usage": self.usage.to_json()}

    @classmethod
    def from_json(cls, obj: object) -> UsageChunk:
        """Parse a ``usage`` chunk; any other JSON raises :class:`InvalidEventError`."""
        return _typed_chunk(cls, "usage", obj)


@dataclass(frozen=True, slots=True, kw_only=True)
class Finish:
    """The terminal chunk. ``replay_state`` is adapter-private data, carried opaquely."""

    reason: FinishReason
    replay_state: FrozenDict | None = None
    type: Literal["finish"] = "finish"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "finish", "reason": self.reason.to_json()}
        if self.replay_state is not None:
            out["replayState"] = self.replay_state
        return out

    @classmethod
    def from_json(cls, obj: object) -> Finish:
        """Parse a ``finish`` chunk; any other JSON raises :class:`InvalidEventError`."""
        return _typed_chunk(cls, "finish", obj)


StreamChunk: TypeAlias = (
    "BlockStart | TextDelta | ReasoningDelta | ToolCallDelta | BlockEnd | UsageChunk | Finish"
)

_Chunk = TypeVar(
    "_Chunk", BlockStart, TextDelta, ReasoningDelta, ToolCallDelta, BlockEnd, UsageChunk, Finish
)


def _typed_chunk(cls: type[_Chunk], kind: str, obj: object) -> _Chunk:
    """``chunk_from_json(obj)`` when ``obj`` is a chunk of type ``kind``, else a clear error."""
    if not isinstance(obj, Mapping):
        raise InvalidEventError(
            f"{cls.__name__}.from_json needs a {kind!r} chunk object, got {type(obj).__name__}"
        )
    if obj.get("type") != kind:
        raise InvalidEventError(
            f"{cls.__name__}.from_json needs a chunk of type {kind!r}, got type "
            f"{obj.get('type')!r}; use chunk_from_json to parse a chunk of any type"
        )
    return cast(_Chunk, chunk_from_json(obj))


def _int(obj: Mapping[str, Any], key: str) -> int:
    value = obj.get(key)
    if not _is_count(value):
        raise InvalidEventError(f"chunk {obj.get('type')}: {key} must be a non-negative integer")
    return value


def _str(obj: Mapping[str, Any], key: str) -> str:
    value = obj.get(key)
    if not isinstance(value, str):
        raise InvalidEventError(f"chunk {obj.get('type')}: {key} must be a string")
    return value


def _replay_state(state: object) -> FrozenDict | None:
    if state is None:
        return None
    if not isinstance(state, Mapping):
        raise InvalidEventError(f"chunk finish: replayState must be an object, got {state!r}")
    frozen: FrozenDict = freeze_json(
        state if isinstance(state, dict) else dict(state), path="replayState"
    )
    return frozen


def chunk_from_json(obj: object) -> StreamChunk:
    """Parse one stream chunk as logged in ``assistant/chunk`` data."""
    if not isinstance(obj, Mapping):
        raise InvalidEventError(f"a chunk must be an object, got {obj!r}")
    kind = obj.get("type")
    if kind == "block-start":
        return BlockStart(index=_int(obj, "index"), block_type=_str(obj, "blockType"))
    if kind == "text-delta":
        return TextDelta(index=_int(obj, "index"), text=_str(obj, "text"))
    if kind == "reasoning-delta":
        return ReasoningDelta(index=_int(obj, "index"), text=_str(obj, "text"))
    if kind == "tool-call-delta":
        name = obj.get("name")
        if name is not None and not isinstance(name, str):
            raise InvalidEventError(f"chunk tool-call-delta: name must be a string, got {name!r}")
        return ToolCallDelta(
            index=_int(obj, "index"),
            id=_str(obj, "id"),
            arguments_delta=_str(obj, "argumentsDelta"),
            name=name,
        )
    if kind == "block-end":
        return BlockEnd(index=_int(obj, "index"), block=block_from_json(obj.get("block")))
    if kind == "usage":
        return UsageChunk(usage=TokenUsage.from_json(obj.get("usage")))
    if kind == "finish":
        return Finish(
            reason=FinishReason.from_json(obj.get("reason")),
            replay_state=_replay_state(obj.get("replayState")),
        )
    raise InvalidEventError(f"unknown chunk type {kind!r}")


class CancelToken:
    """The one live control channel of a request: cancellation (never frozen, never compared)."""

    __slots__ = ("_event", "reason")

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self.reason: str | None = None

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def cancel(self, reason: str = "user") -> None:
        if not self._event.is_set():
            self.reason = reason
            self._event.set()

    async def wait(self) -> None:
        await self._event.wait()


_CONFIG_KEYS: Final = ("provider", "model", "reasoningEffort", "temperature", "maxTokens", "stop")
_REQUEST_KEYS: Final = frozenset(
    {*_CONFIG_KEYS, "messages", "system", "tools", "messagePrefix", "sessionId", "purpose"}
)


@dataclass(frozen=True, slots=True, kw_only=True)
class GenerateOptions:
    """One request, deep-immutable. A loop-built one is a pure function of the log."""

    provider: str
    model: str
    messages: Sequence[Message]
    """Immutable: a tuple or a :class:`MessageView` (never a list)."""
    reasoning_effort: str | None = None
    system: str | None = None
    tools: tuple[ToolSchema, ...] | ToolsPlaceholder | None = None
    """Schemas in the order the model sees them (a placeholder only in normalized logs)."""
    message_prefix: tuple[Message | str, ...] = ()
    """The header's request-only messages, sent right after the system prompt and before
    ``messages`` (strings are placeholders of a normalized log: such a request cannot be sent)."""
    temperature: float | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] | None = None
    session_id: str | None = None
    purpose: str | None = None
    """Unset on conversation requests; ``compaction`` for the one-shot summary call."""
    cancel: CancelToken | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        # Deep immutability: a mutable list of messages (stop words, tools) becomes a tuple.
        if isinstance(self.messages, list):
            object.__setattr__(self, "messages", tuple(self.messages))
        if isinstance(self.stop, list):
            object.__setattr__(self, "stop", tuple(self.stop))
        if isinstance(self.tools, list):
            object.__setattr__(self, "tools", tuple(self.tools))
        if isinstance(self.tools, str):
            object.__setattr__(self, "tools", ToolsPlaceholder(token=self.tools))
        if isinstance(self.message_prefix, list):
            object.__setattr__(self, "message_prefix", tuple(self.message_prefix))

    @classmethod
    def from_header(
        cls,
        header: EpochHeader,
        messages: Sequence[Message],
        *,
        session_id: str | None = None,
        cancel: CancelToken | None = None,
    ) -> GenerateOptions:
        """A conversation request: the header's config, system and tools, then the messages.

        The loop and the reconstructor both build requests here, so they cannot disagree on
        how a header and a message snapshot become a request.
        """
        config = header.config
        return cls(
            provider=config.provider,
            model=config.model,
            reasoning_effort=config.reasoning_effort,
            messages=messages,
            system=header.system,
            tools=header.tools,
            message_prefix=header.message_prefix,
            temperature=config.temperature,
            max_tokens=config.max_tokens,
            stop=config.stop,
            session_id=session_id,
            cancel=cancel,
        )

    @property
    def config(self) -> LlmCallConfig:
        """The call-config fields of this request."""
        return LlmCallConfig(
            provider=self.provider,
            model=self.model,
            reasoning_effort=self.reasoning_effort,
            temperature=self.temperature,
            max_tokens=self.max_tokens,
            stop=self.stop,
        )

    def to_json(self) -> dict[str, Any]:
        """The request as JSON (the cancellation token is not part of it)."""
        out: dict[str, Any] = dict(self.config.to_json())
        out["messages"] = [m.to_json() for m in self.messages]
        if self.system is not None:
            out["system"] = self.system
        if self.tools is not None:
            out["tools"] = (
                self.tools.to_json()
                if isinstance(self.tools, ToolsPlaceholder)
                else [t.to_json() for t in self.tools]
            )
        if self.message_prefix:
            out["messagePrefix"] = prefix_to_json(self.message_prefix)
        if self.session_id is not None:
            out["sessionId"] = self.session_id
        if self.purpose is not None:
            out["purpose"] = self.purpose
        return out

    def canonical_json(self) -> str:
        return dumps_canonical(self.to_json())

    @classmethod
    def from_json(cls, obj: object) -> GenerateOptions:
        """The inverse of :meth:`to_json` (the cancellation token is not part of the JSON).

        Messages parse with :meth:`Message.from_json`; the config, system and tools are checked
        as a header is (tool schemas, unique names, a placeholder string such as
        ``"{{tools}}"``). Anything else raises :class:`InvalidEventError` naming the field.
        """
        if not isinstance(obj, Mapping):
            raise InvalidEventError(f"a request must be an object, got {type(obj).__name__}")
        unknown = set(obj) - _REQUEST_KEYS
        if unknown:
            raise InvalidEventError(
                f"request has unknown keys {sorted(unknown)}; expected some of "
                f"{sorted(_REQUEST_KEYS)}"
            )
        header_json: dict[str, Any] = {
            "config": {key: obj[key] for key in _CONFIG_KEYS if key in obj},
            **{key: obj[key] for key in ("system", "tools", "messagePrefix") if key in obj},
        }
        try:
            header = EpochHeader.from_json(header_json)
        except HeaderError as exc:
            raise InvalidEventError(f"request: {exc}") from exc
        raw_messages = obj.get("messages")
        if not isinstance(raw_messages, list):
            raise InvalidEventError(
                f"request.messages must be an array, got {type(raw_messages).__name__}"
            )
        messages: list[Message] = []
        for i, raw in enumerate(raw_messages):
            try:
                messages.append(Message.from_json(raw))
            except InvalidEventError as exc:
                raise InvalidEventError(f"request.messages[{i}]: {exc}") from exc
        session_id, purpose = obj.get("sessionId"), obj.get("purpose")
        for key, value in (("sessionId", session_id), ("purpose", purpose)):
            if value is not None and not isinstance(value, str):
                raise InvalidEventError(f"request.{key} must be a string, got {value!r}")
        request = cls.from_header(header, messages, session_id=session_id)
        return request if purpose is None else replace(request, purpose=purpose)


@runtime_checkable
class Provider(Protocol):
    """A model provider: streams the chunks of one call.

    A failure may be reported either as a terminal ``Finish`` with kind ``error`` (preferred:
    it is logged like any chunk) or by raising :class:`ProviderError`.
    """

    def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]: ...


@dataclass(slots=True)
class _OpenBlock:
    kind: str
    text: list[str] = field(default_factory=list)
    call_id: str | None = None
    name: str | None = None


class BlockAssembler:
    """Assembles chunks into content blocks (docs/design.md §6.4).

    Blocks in first-seen index order; a ``block-end`` is authoritative (first close wins, later
    deltas for a closed index are ignored); an open block is assembled from its deltas (a tool call
    without id becomes ``call-<index>``); on a ``max-tokens`` finish tool calls are dropped; a
    missing finish counts as ``stop``; the last usage wins.
    """

    def __init__(self) -> None:
        self._order: list[int] = []
        self._open: dict[int, _OpenBlock] = {}
        self._closed: dict[int, ContentBlock] = {}
        self.usage: TokenUsage | None = None
        self.finish: Finish | None = None

    def _touch(self, index: int, kind: str) -> _OpenBlock | None:
        if index in self._closed:
            return None
        block = self._open.get(index)
        if block is None:
            block = self._open[index] = _OpenBlock(kind)
            self._order.append(index)
        return block

    def feed(self, chunk: StreamChunk) -> None:
        if isinstance(chunk, BlockStart):
            self._touch(chunk.index, chunk.block_type)
        elif isinstance(chunk, (TextDelta, ReasoningDelta)):
            block = self._touch(
                chunk.index, "text" if isinstance(chunk, TextDelta) else "reasoning"
            )
            if block is not None:
                block.text.append(chunk.text)
        elif isinstance(chunk, ToolCallDelta):
            block = self._touch(chunk.index, "tool-call")
            if block is not None:
                block.call_id = block.call_id or chunk.id or None
                if chunk.name is not None and block.name is None:
                    block.name = chunk.name
                block.text.append(chunk.arguments_delta)
        elif isinstance(chunk, BlockEnd):
            if chunk.index not in self._closed:
                if chunk.index not in self._open:
                    self._order.append(chunk.index)
                self._open.pop(chunk.index, None)
                self._closed[chunk.index] = chunk.block
        elif isinstance(chunk, UsageChunk):
            self.usage = chunk.usage
        elif isinstance(chunk, Finish):
            self.finish = chunk
        else:
            raise TypeError(f"not a stream chunk: {chunk!r}")

    @property
    def finish_reason(self) -> FinishReason:
        return self.finish.reason if self.finish is not None else FinishReason(kind="stop")

    def _assemble_open(self, index: int, block: _OpenBlock) -> ContentBlock:
        text = "".join(block.text)
        if block.kind == "reasoning":
            return ReasoningBlock(text=text)
        if block.kind == "tool-call":
            return ToolCallBlock(
                id=block.call_id or f"call-{index}", name=block.name or "", arguments=text
            )
        return TextBlock(text=text)

    def blocks(self) -> tuple[ContentBlock, ...]:
        """The assembled blocks; tool calls are dropped on a ``max-tokens`` finish."""
        out: list[ContentBlock] = []
        drop_calls = self.finish_reason.kind == "max-tokens"
        for index in self._order:
            block = self._closed.get(index)
            if block is None:
                block = self._assemble_open(index, self._open[index])
            if drop_calls and isinstance(block, ToolCallBlock):
                continue
            out.append(block)
        return tuple(out)

    def interrupted_blocks(self) -> tuple[ContentBlock, ...]:
        """What survives a cancellation: non-blank text and reasoning only, closed or open."""
        out: list[ContentBlock] = []
        for index in self._order:
            block = self._closed.get(index)
            if block is None:
                block = self._assemble_open(index, self._open[index])
            if isinstance(block, (TextBlock, ReasoningBlock)) and block.text.strip():
                out.append(block)
        return tuple(out)


def message_from_blocks(
    blocks: tuple[ContentBlock, ...], *, provider: str, model: str, id: str
) -> Message:
    """An assistant message over assembled blocks."""
    return Message(
        id=id,
        role="assistant",
        content=blocks,
        source=freeze_json({"kind": "model", "provider": provider, "model": model}, path="source"),
    )
