"""The provider-facing vocabulary of a stream: chunks, usage, finish reasons, failures.

JSON forms use the reference harness's field names (``block-start``, ``argumentsDelta``,
``cacheReadTokens``, …) so ``assistant/chunk`` events interchange."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import (
    Any,
    Literal,
    TypeAlias,
    TypeGuard,
    TypeVar,
    cast,
)

from ._errors import DshError, InvalidEventError
from ._json import FrozenDict, freeze_json
from ._messages import (
    ContentBlock,
    block_from_json,
)

__all__ = [
    "BlockEnd",
    "BlockStart",
    "Finish",
    "FinishReason",
    "LlmFailure",
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


# A traceback names it where users import it from, not this private module.
ProviderError.__module__ = "dsh_core"


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
