"""The transport-independent boundary: an HTTP request in, a response plan out.

:class:`~dsh_testkit.mock.MockDeepSeek` turns an :class:`HttpRequest` into a :class:`ResponsePlan`
without any I/O. A plan is a status line, headers and a sequence of body actions — bytes to send,
pauses, an abrupt hang-up, a stall — that each transport (the in-process httpx handler, the
loopback server) carries out in its own way. Faults are therefore decided once, in the model, and
behave the same over both transports.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

__all__ = [
    "BodyAction",
    "Emit",
    "Hangup",
    "HttpRequest",
    "Pause",
    "ResponsePlan",
    "Stall",
    "json_plan",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class HttpRequest:
    """One HTTP request as the model sees it, whatever carried it."""

    method: str
    path: str
    """The path without the query string, e.g. ``/v1/chat/completions``."""
    headers: tuple[tuple[str, str], ...] = ()
    """Header pairs as received; names are matched case-insensitively."""
    body: bytes = b""
    query: str = ""
    received: float | None = None
    """When the transport had the whole request (UNIX seconds); ``None``: the model stamps it."""

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), or ``None``."""
        wanted = name.lower()
        for key, value in self.headers:
            if key.lower() == wanted:
                return value
        return None

    @classmethod
    def build(
        cls,
        method: str,
        path: str,
        *,
        headers: Iterable[tuple[str, str]] = (),
        body: bytes = b"",
        received: float | None = None,
    ) -> HttpRequest:
        """Split ``path`` at ``?`` into path and query."""
        bare, _, query = path.partition("?")
        return cls(
            method=method.upper(),
            path=bare,
            headers=tuple(headers),
            body=body,
            query=query,
            received=received,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Emit:
    """Send these body bytes (one write; in a chunked body, one chunk)."""

    data: bytes
    kind: Literal["emit"] = "emit"


@dataclass(frozen=True, slots=True, kw_only=True)
class Pause:
    """Wait before the next action."""

    seconds: float
    kind: Literal["pause"] = "pause"


@dataclass(frozen=True, slots=True, kw_only=True)
class Hangup:
    """Close the connection abruptly: the body is left incomplete."""

    kind: Literal["hangup"] = "hangup"


@dataclass(frozen=True, slots=True, kw_only=True)
class Stall:
    """Send nothing more and keep the connection open until the client gives up."""

    kind: Literal["stall"] = "stall"


BodyAction: TypeAlias = Emit | Pause | Hangup | Stall
"""One step of a response body. A body that ends without :class:`Hangup` or :class:`Stall` ends
cleanly."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ResponsePlan:
    """What to answer: a status, headers and body actions, or no response at all."""

    status: int
    headers: tuple[tuple[str, str], ...] = ()
    body: tuple[BodyAction, ...] = ()
    framing: Literal["length", "chunked"] = "length"
    """``length``: a ``Content-Length`` body (JSON answers); ``chunked``: chunked transfer
    encoding, one chunk per :class:`Emit` (SSE streams)."""
    content_length: int | None = None
    """The ``Content-Length`` to declare; ``None``: the emitted bytes' length. A larger value
    with a :class:`Hangup` or :class:`Stall` makes a truncated JSON body detectable."""
    abort: Literal["reset", "hang"] | None = None
    """``reset``: close the connection before any byte; ``hang``: never answer (stay open)."""
    on_complete: Callable[[], None] | None = field(default=None, compare=False, repr=False)
    """Set by the model on a request it logged: a transport calls :meth:`complete` as the
    answer is carried out (just before its last write, see :attr:`last_write`; or when the
    connection is given up), so the request's record gets its end time (and reaches the request
    log file) before the client can have read the whole answer."""

    def complete(self) -> None:
        """Tell the model the answer is done (see :attr:`on_complete`); idempotent enough:
        the model ignores a second call."""
        if self.on_complete is not None:
            self.on_complete()

    @property
    def last_write(self) -> int | None:
        """The index in :attr:`body` of the last :class:`Emit` with bytes of a body that ends
        cleanly (``None``: no such write, or the body ends in a fault). A transport calls
        :meth:`complete` just before carrying it out, so a client that has read the answer's
        last byte finds its record already written (the request log file, ``/_dsh/requests``);
        a faulted or abandoned answer is completed when the transport gives it up."""
        last = None
        for index, action in enumerate(self.body):
            if isinstance(action, (Hangup, Stall)):
                return None
            if isinstance(action, Emit) and action.data:
                last = index
        return last

    @property
    def body_bytes(self) -> bytes:
        """All emitted bytes, concatenated."""
        return b"".join(a.data for a in self.body if isinstance(a, Emit))

    @property
    def declared_length(self) -> int:
        """The ``Content-Length`` a ``length``-framed plan declares."""
        return len(self.body_bytes) if self.content_length is None else self.content_length

    def header(self, name: str) -> str | None:
        wanted = name.lower()
        for key, value in self.headers:
            if key.lower() == wanted:
                return value
        return None


def json_plan(status: int, payload: Any, headers: tuple[tuple[str, str], ...] = ()) -> ResponsePlan:
    """A complete JSON answer: ``payload`` as UTF-8 JSON with ``content-type`` and ``headers``."""
    data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
    return ResponsePlan(
        status=status,
        headers=(("content-type", "application/json"), *headers),
        body=(Emit(data=data),),
    )
