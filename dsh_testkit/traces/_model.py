"""The trace: one typed model of an agent's traffic, whatever recorded it.

A session log, a cassette, the mock's request log, a :class:`~dsh_testkit.capture.RequestCapture`,
a HAR file and the proxy's trace file all describe the same thing: requests an agent sent to a
chat API, in order, sometimes with the answer and the usage the provider reported. The cache
doctor, the wire-level audit checks and the goldens read this one model, so each input format
needs only a reader (``_readers.py``).

An :class:`Exchange` is one request and what is known of its answer; a :class:`Trace` is the
ordered exchanges of one recording; :meth:`Trace.conversations` groups them into
:class:`Conversation`\\ s — by an explicit key when the recording carries one, otherwise
automatically: a request that shares no prefix cache unit with any open conversation starts a
new one (two agents sharing one key, or a sub-agent with its own system prompt, are told apart).
"""

from __future__ import annotations

import contextlib
import gc
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias

__all__ = [
    "DEFAULT_UNIT_TOKENS",
    "Conversation",
    "Endpoint",
    "Exchange",
    "Trace",
    "TraceSource",
    "TraceUsage",
    "wire_parts",
]

Endpoint: TypeAlias = Literal["chat", "anthropic"]
"""``chat``: OpenAI-style Chat Completions (DeepSeek's native API). ``anthropic``: the Messages
API shape (DeepSeek's ``/anthropic`` endpoint)."""

TraceSource: TypeAlias = Literal[
    "session-log", "cassette", "mock-requests", "capture", "har", "proxy", "memory", "otel"
]
"""Which reader built a trace."""

DEFAULT_UNIT_TOKENS: Final = 64
"""DeepSeek's prefix cache stores and matches whole 64-token units."""

_CHARS_PER_TOKEN: Final = 4
"""The splitter's estimate: a prefix of ``4 × unit`` characters holds about one cache unit."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceUsage:
    """Token usage the provider reported for one exchange."""

    prompt_tokens: int
    """All prompt tokens (hit + miss)."""
    hit_tokens: int | None
    """Prompt tokens served from the prefix cache (DeepSeek ``prompt_cache_hit_tokens``,
    Anthropic ``cache_read_input_tokens``); ``None`` when the usage has no cache figure."""
    completion_tokens: int | None = None
    """Output tokens, reasoning included."""

    @property
    def miss_tokens(self) -> int | None:
        """Prompt tokens not served from cache; ``None`` without a cache figure."""
        return None if self.hit_tokens is None else self.prompt_tokens - self.hit_tokens

    def to_json(self) -> dict[str, Any]:
        return {
            "promptTokens": self.prompt_tokens,
            "hitTokens": self.hit_tokens,
            "completionTokens": self.completion_tokens,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TraceUsage:
        return cls(
            prompt_tokens=int(data["promptTokens"]),
            hit_tokens=None if data.get("hitTokens") is None else int(data["hitTokens"]),
            completion_tokens=(
                None if data.get("completionTokens") is None else int(data["completionTokens"])
            ),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Exchange:
    """One request of an agent, and what is known of its answer."""

    index: int
    """0-based position in the trace."""
    endpoint: Endpoint
    body: Mapping[str, Any]
    """The request body as sent on the wire (parsed JSON)."""
    url: str | None = None
    """The request URL (credentials in a query string are scrubbed by the readers)."""
    status: int | None = None
    """The HTTP status answered; ``None`` when the answer is unknown."""
    response: Mapping[str, Any] | None = None
    """The assembled assistant message in the endpoint's own shape — chat: ``{"role":
    "assistant", "content", "reasoning_content", "tool_calls"}``; anthropic: ``{"role":
    "assistant", "content": [blocks]}`` — streamed or not; ``None`` when unknown."""
    usage: TraceUsage | None = None
    """The usage the provider reported; ``None`` when the trace does not carry it."""
    started: float | None = None
    """When the request was sent, in seconds (UNIX time, or relative within one trace)."""
    finished: float | None = None
    """When its answer was complete, same clock as :attr:`started`."""
    first_byte: float | None = None
    """When the first byte of the answer arrived, same clock."""
    conversation: str | None = None
    """An explicit conversation key, when the recording carries one (a session id header)."""
    body_exact: bool = True
    """Whether :attr:`body` is the request as sent on the wire; ``False`` when rebuilt from
    telemetry (spans), where byte-level details such as JSON spacing, key order and argument
    formatting are unknown."""

    @property
    def model(self) -> str | None:
        model = self.body.get("model")
        return model if isinstance(model, str) else None

    @property
    def messages(self) -> list[Any]:
        messages = self.body.get("messages")
        return list(messages) if isinstance(messages, list) else []

    def to_json(self) -> dict[str, Any]:
        """The exchange as a trace-file record (``dsh-trace`` JSONL, see ``_file.py``)."""
        out: dict[str, Any] = {
            "index": self.index,
            "endpoint": self.endpoint,
            "url": self.url,
            "conversation": self.conversation,
            "started": self.started,
            "firstByte": self.first_byte,
            "finished": self.finished,
            "status": self.status,
            "request": self.body,
            "response": self.response,
            "usage": self.usage.to_json() if self.usage is not None else None,
        }
        if not self.body_exact:
            out["bodyExact"] = False
        return out


_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"))
"""One encoder for every part: ``json.dumps`` with options builds a new one per call."""


@contextlib.contextmanager
def paused_gc() -> Iterator[None]:
    """The cyclic garbage collector off for a bulk build of acyclic values (restored after).

    Reading a trace builds millions of small dicts and strings, none in a cycle; the collector's
    full passes over that growing heap made a 10,000-request report super-linear.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _canonical(value: Any) -> str:
    return _ENCODER.encode(value)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(part.get("text", "")) if isinstance(part, Mapping) else str(part)
            for part in content
        )
    return "" if content is None else _canonical(content)


def wire_parts(body: Mapping[str, Any]) -> tuple[str, ...]:
    """A request as the provider's cache reads it: system prompt, tools, then each message.

    Chat and Anthropic bodies come out alike (the system prompt as text, the tools and each
    message as canonical JSON), so the longest common prefix of two requests' parts is the part
    of the prompt a prefix cache could share between them. Other fields (model, thinking) are
    not in the prompt text; the doctor compares them apart.
    """
    messages = body.get("messages")
    messages = list(messages) if isinstance(messages, list) else []
    system: list[str] = []
    if "system" in body:
        system.append(_text(body["system"]))
    while (
        messages
        and isinstance(messages[0], Mapping)
        and messages[0].get("role") in ("system", "developer")
    ):
        system.append(_text(messages.pop(0).get("content")))
    tools = body.get("tools")
    return (
        "\n".join(system),
        _canonical(tools) if tools else "",
        *(_canonical(m) for m in messages),
    )


def common_prefix_length(x: str, y: str) -> int:
    """Length of the common prefix of two strings (64-character slices compared in C first)."""
    limit = min(len(x), len(y))
    n = 0
    while n + 64 <= limit and x[n : n + 64] == y[n : n + 64]:
        n += 64
    while n < limit and x[n] == y[n]:
        n += 1
    return n


def shared_chars(a: Sequence[str], b: Sequence[str]) -> int:
    """Characters of the longest common prefix of the concatenations of ``a`` and ``b``."""
    total = 0
    for x, y in zip(a, b, strict=False):
        if x == y:
            total += len(x)
            continue
        return total + common_prefix_length(x, y)
    return total


def _first_chars(parts: Sequence[str], count: int) -> str | None:
    """The first ``count`` characters of the joined parts (``None`` when shorter)."""
    taken: list[str] = []
    total = 0
    for part in parts:
        taken.append(part[: count - total])
        total += len(taken[-1])
        if total >= count:
            return "".join(taken)
    return None


def continuation_score(last: Sequence[str], parts: Sequence[str], unit_tokens: int) -> int:
    """How strongly ``parts`` continues the request ``last`` (0: not at all).

    A request continues another when their prompts share at least one cache unit (estimated at
    four characters a token), or — so that a short prompt, or a change at the very start of the
    system prompt (a timestamp first), still reads as one conversation, the case the doctor must
    explain — when both have the same (non-empty) system prompt or the same first message after
    it.
    """
    shared = shared_chars(last, parts)
    if shared >= unit_tokens * _CHARS_PER_TOKEN:
        return shared
    if len(last) > 2 and len(parts) > 2 and last[2] == parts[2]:
        return 1 + shared_chars(last[2:], parts[2:])
    if last and parts and last[0] and last[0] == parts[0]:
        return 1 + shared
    return 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Conversation:
    """Exchanges that extend one another (or were keyed together), in trace order."""

    key: str
    """The explicit key, or ``#1``, ``#2``, … in order of first request when split automatically."""
    exchanges: tuple[Exchange, ...]

    def __len__(self) -> int:
        return len(self.exchanges)

    def __iter__(self) -> Iterator[Exchange]:
        return iter(self.exchanges)


@dataclass(frozen=True, slots=True, kw_only=True)
class Trace:
    """An agent's traffic: exchanges in the order they were sent."""

    exchanges: tuple[Exchange, ...]
    source: TraceSource
    """Which reader built it."""
    path: str | None = None
    """The file it was read from, if any."""
    notes: tuple[str, ...] = ()
    """What the reader skipped or could not tell (non-chat requests, an unfinished last line)."""
    _parts: dict[int, tuple[str, ...]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def __len__(self) -> int:
        return len(self.exchanges)

    def __iter__(self) -> Iterator[Exchange]:
        return iter(self.exchanges)

    @property
    def has_usage(self) -> bool:
        """Whether any exchange carries a cache figure from the provider."""
        return any(e.usage is not None and e.usage.hit_tokens is not None for e in self.exchanges)

    def parts(self, exchange: Exchange) -> tuple[str, ...]:
        """:func:`wire_parts` of an exchange of this trace (memoized)."""
        found = self._parts.get(exchange.index)
        if found is None:
            found = self._parts[exchange.index] = wire_parts(exchange.body)
        return found

    def conversations(
        self,
        *,
        key: Callable[[Exchange], str | None] | None = None,
        unit_tokens: int = DEFAULT_UNIT_TOKENS,
    ) -> tuple[Conversation, ...]:
        """The exchanges grouped into conversations.

        ``key`` names an exchange's conversation (default: :attr:`Exchange.conversation`).
        Exchanges without a key are split automatically: each joins the open conversation
        whose latest request shares the longest prefix with it, provided that prefix holds at
        least one cache unit (``unit_tokens``, estimated at four characters a token) or the two
        requests start with the same first message after the system prompt (see
        :func:`continuation_score`); otherwise it starts a new conversation. Keyed and unkeyed
        exchanges never mix.
        """
        keyed: dict[str, list[Exchange]] = {}
        order: list[str] = []
        open_auto: list[list[Exchange]] = []
        # Only candidates are scored, found by dictionary lookups, so splitting stays linear in
        # the trace: conversations that had this system prompt, this first message, or the
        # same first unit of prompt text (two prompts that share a unit share exactly that).
        threshold = unit_tokens * _CHARS_PER_TOKEN
        by_head: dict[tuple[int, str], set[int]] = {}
        for exchange in self.exchanges:
            name = key(exchange) if key is not None else exchange.conversation
            if name is not None:
                if name not in keyed:
                    keyed[name] = []
                    order.append(name)
                keyed[name].append(exchange)
                continue
            parts = self.parts(exchange)
            heads = [(0, parts[0])] if parts and parts[0] else []
            if len(parts) > 2:
                heads.append((2, parts[2]))
            unit = _first_chars(parts, threshold)
            if unit is not None:
                heads.append((1, unit))
            candidates = set().union(*(by_head.get(h, set()) for h in heads))
            best = self._best(open_auto, sorted(candidates), parts, unit_tokens)
            if best is None:
                best = len(open_auto)
                open_auto.append([])
                keyed[f"#{best + 1}"] = open_auto[best]
                order.append(f"#{best + 1}")
            open_auto[best].append(exchange)
            for head in heads:
                by_head.setdefault(head, set()).add(best)
        return tuple(Conversation(key=k, exchanges=tuple(keyed[k])) for k in order)

    def _best(
        self,
        conversations: list[list[Exchange]],
        slots: Iterable[int],
        parts: tuple[str, ...],
        unit_tokens: int,
    ) -> int | None:
        best: int | None = None
        best_score = 0
        for slot in slots:
            score = continuation_score(self.parts(conversations[slot][-1]), parts, unit_tokens)
            if score > best_score:
                best, best_score = slot, score
        return best

    def conversation(self, key: str) -> Conversation:
        """The conversation named ``key`` (see :meth:`conversations`); ``KeyError`` names the keys."""
        found = {c.key: c for c in self.conversations()}
        if key not in found:
            raise KeyError(
                f"no conversation {key!r} in this trace; it has: {', '.join(found) or 'none'}"
            )
        return found[key]
