"""One request to a model (:class:`GenerateOptions`), the :class:`Provider` protocol that streams
its chunks, and the :class:`CancelToken` that is its one live control channel."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import (
    Any,
    Final,
    Protocol,
    runtime_checkable,
)

from ._errors import HeaderError, InvalidEventError
from ._header import EpochHeader, LlmCallConfig, ToolSchema, ToolsPlaceholder, prefix_to_json
from ._json_text import dumps_canonical
from ._messages import (
    Message,
)
from ._stream import StreamChunk

__all__ = [
    "CancelToken",
    "GenerateOptions",
    "Provider",
]


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
