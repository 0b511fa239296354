"""The trace: one typed model of an agent's traffic, whatever recorded it.

A session log, a cassette, the mock's request log, a capture, a HAR file, OpenTelemetry spans
and the proxy's trace file all describe the same thing: requests an agent sent to a chat API,
in order, with what is known of each answer and the usage the provider reported. The cache
doctor (``dsh_testkit.doctor``), the prefix assertions and the goldens read this one model, so
each input format needs only a reader (``_readers/``, one module per format).

An :class:`Exchange` is one request and what is known of its answer; a :class:`Trace` is the
ordered exchanges of one recording. Which requests form a conversation, and which earlier
request each one extends, is the doctor's to decide (``dsh_testkit.doctor.conversations``).
Every exchange has one shape whatever recorded it: :attr:`Exchange.body` is the request's
parsed JSON (also :attr:`Exchange.json`) and :attr:`Exchange.content` its bytes when the
recording kept them — as on a captured request and on the mock's request record.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias

from dsh_core.providers._models import Endpoint

__all__ = [
    "SIDE_CALL_HEADERS",
    "Endpoint",
    "Exchange",
    "LogEvent",
    "Outcome",
    "Trace",
    "TraceSource",
    "TraceUsage",
    "paused_gc",
]


TraceSource: TypeAlias = Literal[
    "session-log", "cassette", "mock-requests", "capture", "har", "proxy", "otel", "memory"
]
"""Which reader built a trace."""

Outcome: TypeAlias = Literal["delivered", "abandoned", "interrupted", "upstream-timeout"]
"""How a recorded exchange ended (the proxy records it): the answer reached the client whole;
the client went away first; the recording stopped first; the upstream stopped answering."""

SIDE_CALL_HEADERS: Final = ("x-dsh-side-call", "x-deepseek-harness-compact")
"""Request headers that mark a side call (a compaction, a title): the cache doctor makes it a
branch of the request it extends. Recorders keep these (and only these) request headers."""


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
    origin: str | None = field(default=None, compare=False)
    """Where a telemetry reader found the figures, when it had a choice or had to infer one
    (``gen_ai.usage.raw: the provider's own usage``, ``cache read not written: logfire.openai
    writes it only when it is not 0``); ``None`` for a recording of the wire's own usage."""

    @property
    def miss_tokens(self) -> int | None:
        """Prompt tokens not served from cache; ``None`` without a cache figure."""
        return None if self.hit_tokens is None else self.prompt_tokens - self.hit_tokens

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "promptTokens": self.prompt_tokens,
            "hitTokens": self.hit_tokens,
            "completionTokens": self.completion_tokens,
        }
        if self.origin is not None:
            out["origin"] = self.origin
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TraceUsage:
        return cls(
            prompt_tokens=int(data["promptTokens"]),
            hit_tokens=None if data.get("hitTokens") is None else int(data["hitTokens"]),
            completion_tokens=(
                None if data.get("completionTokens") is None else int(data["completionTokens"])
            ),
            origin=data["origin"] if isinstance(data.get("origin"), str) else None,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class LogEvent:
    """What a session log says happened before a request (session-log traces only): the
    evidence the doctor puts beside its findings."""

    seq: int
    """The event's sequence number in the log."""
    kind: Literal["header", "compaction", "prune", "rewrite", "resume", "reset"]
    """``header``: a header snapshot or delta (system prompt, tools, config); ``compaction``
    and ``prune``: a surface replace the log prices; ``rewrite``: a replace nothing in the log
    explains; ``resume``: the session was resumed (a resume snapshot); ``reset``: the
    provider's cache was reset before this request (the recording proxy saw ``POST
    /_dsh/reset`` reach the mock): the cache is cold from here."""
    detail: str
    """What it changed, in the project's wording (``request/header-delta at seq 12: system
    line 3 changed``)."""

    def to_json(self) -> dict[str, Any]:
        return {"seq": self.seq, "kind": self.kind, "detail": self.detail}


@dataclass(frozen=True, slots=True, kw_only=True)
class Exchange:
    """One request of an agent, and what is known of its answer."""

    index: int
    """0-based position in the trace."""
    endpoint: Endpoint
    body: Mapping[str, Any]
    """The request body as sent on the wire, parsed (also :attr:`json`)."""
    content: bytes | None = None
    """The request body's bytes exactly as sent, when the recording kept them."""
    url: str | None = None
    """The request URL (credentials in a query string are scrubbed by the readers)."""
    method: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    """Request header pairs when the recording kept them (credentials redacted)."""
    status: int | None = None
    """The HTTP status answered; ``None`` when the answer is unknown."""
    error: str | None = None
    """For a refused request (status 400 or more): the error message the API answered."""
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
    """An explicit conversation key, when the recording carries one (a session id header, an
    OpenTelemetry conversation id, a session log's id)."""
    outcome: Outcome | None = None
    """How the exchange ended, when the recorder knows (``None``: delivered or unknown)."""
    body_exact: bool = True
    """Whether :attr:`body` is the request as sent on the wire; ``False`` when rebuilt from
    telemetry (spans), where byte-level details such as JSON spacing, key order and argument
    formatting are unknown."""
    log_events: tuple[LogEvent, ...] = ()
    """What the recording says happened between the previous request and this one: a session
    log's header changes, compactions, prunes, rewrites and resumes; a proxy's ``reset`` of
    the upstream's cache."""

    @property
    def json(self) -> Mapping[str, Any]:
        """The request body, parsed: the same as :attr:`body` (as on every exchange shape)."""
        return self.body

    @property
    def model(self) -> str | None:
        model = self.body.get("model")
        return model if isinstance(model, str) else None

    @property
    def messages(self) -> list[Any]:
        messages = self.body.get("messages")
        return list(messages) if isinstance(messages, list) else []

    @property
    def refused(self) -> bool:
        """Whether the API refused the request (status 400 or more): nothing was cached."""
        return self.status is not None and self.status >= 400

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
        if self.error is not None:
            out["error"] = self.error
        if self.outcome is not None:
            out["outcome"] = self.outcome
        if not self.body_exact:
            out["bodyExact"] = False
        marks = [[k, v] for k, v in self.headers if k.lower() in SIDE_CALL_HEADERS]
        if marks:
            out["headers"] = marks  # the side-call marks only: never a credential
        if self.log_events:
            out["logEvents"] = [e.to_json() for e in self.log_events]
        return out


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
    time_resolution: float | None = None
    """How finely the recording timed its exchanges, in seconds (``1.0`` for HTTP ``Date``
    headers and whole-second HAR times, ``1e-6`` for the proxy); ``None`` when it has no times.
    The doctor draws no timing conclusion finer than this."""

    def __len__(self) -> int:
        return len(self.exchanges)

    def __iter__(self) -> Iterator[Exchange]:
        return iter(self.exchanges)

    def __getitem__(self, index: int) -> Exchange:
        return self.exchanges[index]

    @property
    def has_usage(self) -> bool:
        """Whether any exchange carries a cache figure from the provider."""
        return any(e.usage is not None and e.usage.hit_tokens is not None for e in self.exchanges)
