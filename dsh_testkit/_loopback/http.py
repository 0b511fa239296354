"""HTTP/1.1 on one loopback connection: requests read with h11, answers written as raw bytes.

h11 (sans-IO) reads each request: the request line, the headers and the body framing
(``Content-Length``, chunked bodies, trailers, ``Expect: 100-continue``), with its checks
against malformed and ambiguous messages. (A ``Content-Length`` body, once h11 has checked the
header, is just that many bytes: they are read as they are, without h11's two more turns.)
Answers are written by the server itself, byte for byte, on the socket it keeps: the faults
the mock plays (a reset before the status line, a hang-up inside a chunked body, a
``Content-Length`` the body never reaches, a stall) and the proxy's relay of an upstream's answer as it arrives are answers h11 would refuse to send, so
only the reading goes through it. One h11 connection reads one request; the bytes after it
(a pipelined request) start the next one.

What is refused, and how (:class:`BadRequest`, answered by :func:`refuse` and the connection
closed): a malformed request line or header (400), a version other than HTTP/1.0 or 1.1 (505), a
target that is not an absolute path or an absolute URL (400), a missing or repeated ``Host`` in
HTTP/1.1 (400), obsolete line folding (400), both ``Transfer-Encoding`` and ``Content-Length``
(400), a coding other than chunked (501), a head over :data:`MAX_HEAD_BYTES` (431), a body over
:data:`MAX_BODY_BYTES` (413), a head or a body that does not arrive in time (408) or ends early
(400).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import socket
import struct
from dataclasses import dataclass
from email.utils import formatdate
from http import HTTPStatus
from typing import Final

import h11

__all__ = [
    "BODY_TIMEOUT",
    "HEAD_TIMEOUT",
    "IDLE_TIMEOUT",
    "MAX_BODY_BYTES",
    "MAX_HEAD_BYTES",
    "OWN_ANSWER_HEADERS",
    "BadRequest",
    "Head",
    "RequestReader",
    "Timeouts",
    "error_body",
    "parse_head",
    "reason",
    "refuse",
    "reset",
    "send_answer",
    "wait_for_close",
]

MAX_HEAD_BYTES: Final = 64 * 1024
"""Request line plus headers; larger → 431."""
MAX_BODY_BYTES: Final = 64 * 1024 * 1024
"""A request body; larger → 413 (Anthropic's Messages limit is 32 MB)."""
HEAD_TIMEOUT: Final = 10.0
"""Default seconds a client may take to send a request head once its first byte arrived;
slower → 408 and the connection closed."""
BODY_TIMEOUT: Final = 30.0
"""Default seconds a client may take to send a request body after its head; a half-sent body
→ 408 and the connection closed (as a real front end answers)."""
IDLE_TIMEOUT: Final = 75.0
"""Default seconds a kept-alive connection may sit idle before the server closes it."""

_READ: Final = 65536
"""Bytes asked of the socket per read."""

OWN_ANSWER_HEADERS: Final = (
    ("x-content-type-options", "nosniff"),
    ("cross-origin-resource-policy", "same-origin"),
)
"""On every answer a server makes itself (refusals, live pages, the mock's control API): no
content sniffing, and no page of another origin may even load it (an ``<img>``, a no-cors
fetch). Relayed answers and the mock's model answers carry the API's own headers instead."""


class BadRequest(Exception):
    """The request cannot be read as HTTP/1.1; answered with ``status`` and the connection
    closed. ``reason`` never quotes the request (it may hold a credential)."""

    def __init__(self, status: int, reason: str, *, code: str = "invalid_request_error") -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.code = code
        """The error body's ``code``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Timeouts:
    """How long a client may take (seconds, each positive)."""

    head: float = HEAD_TIMEOUT
    """To send a request head once its first byte arrived (then 408)."""
    body: float = BODY_TIMEOUT
    """To send a request body after its head (then 408)."""
    idle: float = IDLE_TIMEOUT
    """A kept-alive connection's wait for its next request (then it is closed, silently)."""

    def check(self) -> None:
        """Raise ``ValueError`` naming the first option that is not positive."""
        for name in ("head", "body", "idle"):
            value = getattr(self, name)
            if not value > 0:
                raise ValueError(f"{name}_timeout must be positive, got {value!r}")


@dataclass(frozen=True, slots=True, kw_only=True)
class Head:
    """One request's line and headers, as read."""

    method: str
    target: str
    """The origin-form target (path and query), also for an absolute-form request line."""
    version: tuple[int, int]
    headers: tuple[tuple[str, str], ...]
    """Header pairs in the order and spelling received (duplicated ``Content-Length`` fields
    of one value are kept once)."""
    keep_alive: bool
    """Whether the connection may carry another request after this one's answer."""
    authority: str | None = None
    """The authority of an absolute-form target (``GET http://a:1/p``), else ``None``."""

    def values(self, name: str) -> list[str]:
        """Every value of header ``name`` (case-insensitive), in order."""
        wanted = name.lower()
        return [value for key, value in self.headers if key.lower() == wanted]

    def value(self, name: str) -> str | None:
        """The first value of header ``name`` (case-insensitive), or ``None``."""
        wanted = name.lower()
        for key, value in self.headers:
            if key.lower() == wanted:
                return value
        return None

    @property
    def path(self) -> str:
        """The target without its query."""
        return self.target.partition("?")[0]

    @property
    def query(self) -> str:
        return self.target.partition("?")[2]


_H11_REASONS: Final = (
    ("illegal request line", "malformed request line"),
    ("illegal header line", "malformed header line"),
    ("Missing mandatory Host", "an HTTP/1.1 request needs a Host header"),
    ("Found multiple Host", "more than one Host header"),
    ("conflicting Content-Length", "invalid Content-Length"),
    ("bad Content-Length", "invalid Content-Length"),
    ("Transfer-Encoding", "only the chunked transfer coding is supported"),
    ("Receive buffer too long", "request head too large"),
    ("illegal chunk header", "malformed chunked body: malformed chunk size line"),
    ("malformed chunk footer", "chunk data not followed by CRLF"),
)
"""h11's refusals in this server's words (h11's own quote the offending bytes)."""


_CONTROL: Final = re.compile(rb"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
"""A control character other than tab, CR and LF."""


def _bad(error: h11.RemoteProtocolError, *, in_body: bool, received: bytes = b"") -> BadRequest:
    text = str(error)
    if in_body and "Receive buffer too long" in text:
        return BadRequest(400, "malformed chunked body: a chunk-size line over 64 KiB")
    if "illegal header line" in text and _CONTROL.search(received):
        return BadRequest(400, "control character in a header value")
    words = next(
        (words for prefix, words in _H11_REASONS if prefix in text),
        "malformed chunked body" if in_body else "malformed request",
    )
    code = "invalid_host" if "Host" in words else "invalid_request_error"
    return BadRequest(error.error_status_hint, words, code=code)


def _target(raw: bytes) -> tuple[str, str | None]:
    """The origin-form target and, for an absolute-form one, its authority."""
    if raw.startswith(b"/"):
        return raw.decode("ascii"), None
    lowered = raw[:8].lower()
    if lowered.startswith((b"http://", b"https://")):
        rest = raw.split(b"//", 1)[1]
        authority, slash, path = rest.partition(b"/")
        if b"?" in authority:
            authority, _, query = authority.partition(b"?")
            return "/?" + query.decode("ascii"), authority.decode("ascii")
        return "/" + path.decode("ascii") if slash else "/", authority.decode("ascii")
    raise BadRequest(400, "the request target must be an absolute path")


def _head_of(event: h11.Request) -> Head:
    version = event.http_version
    if version == b"1.1":
        parsed = (1, 1)
    elif version == b"1.0":
        parsed = (1, 0)
    else:
        raise BadRequest(505, "only HTTP/1.0 and HTTP/1.1 are supported")
    headers = tuple(
        (name.decode("ascii"), value.decode("latin-1")) for name, value in event.headers.raw_items()
    )
    tokens: set[bytes] = set()
    has_length = has_coding = False
    for name, value in event.headers:  # h11 lowers the names
        if name == b"connection":
            tokens.update(t.strip().lower() for t in value.split(b","))
        elif name == b"content-length":
            has_length = True
        elif name == b"transfer-encoding":
            has_coding = True
    if has_length and has_coding:
        raise BadRequest(400, "both Transfer-Encoding and Content-Length")
    target, authority = _target(event.target)
    keep_alive = b"close" not in tokens if parsed >= (1, 1) else b"keep-alive" in tokens
    return Head(
        method=event.method.decode("ascii"),
        target=target,
        version=parsed,
        headers=headers,
        keep_alive=keep_alive,
        authority=authority,
    )


def _check_head(received: bytes, connection: h11.Connection) -> None:
    """What h11 lets through that these servers refuse, in the head it just read: more than
    :data:`MAX_HEAD_BYTES` (h11 bounds only a head still incomplete), obsolete line folding (a
    line starting with a space or tab, which h11 would join), and control characters in a
    header value (h11 refuses only NUL; the proxy would relay the rest to another parser)."""
    size = len(received) - len(connection.trailing_data[0])
    if size > MAX_HEAD_BYTES:
        raise BadRequest(431, "request head too large")
    head = received[:size]
    if b"\n " in head or b"\n\t" in head:
        raise BadRequest(400, "malformed header line (obsolete line folding is refused)")
    if _CONTROL.search(head):
        raise BadRequest(400, "control character in a header value")


def parse_head(data: bytes) -> Head:
    """The head of the request that ``data`` starts with (raises :class:`BadRequest`, or
    ``BadRequest(400, "incomplete request head")`` when ``data`` holds no whole head)."""
    connection = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
    connection.receive_data(data.lstrip(b"\r\n"))
    try:
        event = connection.next_event()
    except h11.RemoteProtocolError as error:
        raise _bad(error, in_body=False, received=data) from None
    if not isinstance(event, h11.Request):
        raise BadRequest(400, "incomplete request head")
    _check_head(data.lstrip(b"\r\n"), connection)
    return _head_of(event)


class RequestReader:
    """Reads the requests of one connection, one after another (no pipelining: a request is
    read only once the previous one is answered)."""

    __slots__ = ("_body_read", "_connection", "_leftover", "_reader", "_timeouts", "_writer")

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, timeouts: Timeouts
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._timeouts = timeouts
        self._leftover = b""
        self._connection: h11.Connection | None = None
        self._body_read = True

    @property
    def body_read(self) -> bool:
        """Whether the last request's body was read whole (else the connection cannot carry
        another request)."""
        return self._body_read

    async def head(self) -> Head | None:
        """The next request's head; ``None`` when the client closed the connection, or left it
        idle, between requests. Raises :class:`BadRequest`."""
        data = self._leftover.lstrip(b"\r\n")  # empty lines before a request line are ignored
        self._leftover = b""
        reader = self._reader
        while not data:
            try:
                async with asyncio.timeout(self._timeouts.idle):
                    data = await reader.read(_READ)
            except TimeoutError:
                return None
            if not data:
                return None  # closed between requests: nothing to answer
            data = data.lstrip(b"\r\n")
        connection = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_BYTES)
        self._connection = connection
        self._body_read = False
        connection.receive_data(data)
        received = data
        try:
            async with asyncio.timeout(self._timeouts.head):
                while True:
                    try:
                        event = connection.next_event()
                    except h11.RemoteProtocolError as error:
                        raise _bad(error, in_body=False, received=received) from None
                    if isinstance(event, h11.Request):
                        break
                    more = await reader.read(_READ)
                    if not more:
                        if received.strip():
                            raise BadRequest(400, "incomplete request head")
                        return None
                    connection.receive_data(more)
                    received += more
        except TimeoutError:
            raise BadRequest(408, "the request head was not received in time") from None
        _check_head(received, connection)
        return _head_of(event)

    async def body(self, head: Head) -> bytes:
        """The body of the request whose head :meth:`head` just returned (transfer coding
        removed). Raises :class:`BadRequest` (413, 408, 400)."""
        connection = self._connection
        assert connection is not None, "head() first"
        length = head.value("content-length")
        if length is not None and int(length) > MAX_BODY_BYTES:
            raise BadRequest(413, "request body too large")
        if connection.they_are_waiting_for_100_continue:
            self._writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            await self._writer.drain()
        if head.value("transfer-encoding") is None:
            # No coding to undo: a Content-Length body is that many bytes (h11 checked the
            # header: one value, digits), and a request with neither header has none.
            body = await self._counted(connection, int(length or 0))
        else:
            body = await self._chunked(connection)
        self._connection = None
        self._body_read = True
        return body

    async def _counted(self, connection: h11.Connection, wanted: int) -> bytes:
        buffered = connection.trailing_data[0]
        if len(buffered) >= wanted:
            self._leftover = buffered[wanted:]
            return buffered[:wanted]
        self._leftover = b""
        try:
            async with asyncio.timeout(self._timeouts.body):
                rest = await self._reader.readexactly(wanted - len(buffered))
        except TimeoutError:
            raise BadRequest(408, "the request body was not received in time") from None
        except (asyncio.IncompleteReadError, ConnectionError):
            raise BadRequest(400, "the request body ended early") from None
        return buffered + rest

    async def _chunked(self, connection: h11.Connection) -> bytes:
        pieces: list[bytes] = []
        size = 0
        reader = self._reader
        try:
            async with asyncio.timeout(self._timeouts.body):
                while True:
                    try:
                        event = connection.next_event()
                    except h11.RemoteProtocolError as error:
                        raise _bad(error, in_body=True) from None
                    if isinstance(event, h11.Data):
                        size += len(event.data)
                        if size > MAX_BODY_BYTES:
                            raise BadRequest(413, "request body too large")
                        pieces.append(bytes(event.data))
                    elif isinstance(event, h11.EndOfMessage):
                        break
                    elif event is h11.NEED_DATA:
                        more = await reader.read(_READ)
                        if not more:
                            raise BadRequest(400, "the request body ended early")
                        connection.receive_data(more)
                    else:  # pragma: no cover - h11 yields nothing else for a request body
                        raise BadRequest(400, "malformed request body")
        except TimeoutError:
            raise BadRequest(408, "the request body was not received in time") from None
        except ConnectionError:
            raise BadRequest(400, "the request body ended early") from None
        self._leftover = connection.trailing_data[0]
        return pieces[0] if len(pieces) == 1 else b"".join(pieces)


_REASONS: Final = {status.value: status.phrase for status in HTTPStatus}


def reason(status: int) -> str:
    """The reason phrase of ``status`` (``Unknown`` for a status HTTP does not name)."""
    return _REASONS.get(status, "Unknown")


def error_body(message: str, *, code: str = "invalid_request_error") -> bytes:
    """An error in the chat-completions shape (what an SDK reads from any of the servers)."""
    body = {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": None,
            "code": code,
        }
    }
    return json.dumps(body).encode("utf-8")


def _date() -> str:
    return formatdate(usegmt=True)


async def send_answer(
    writer: asyncio.StreamWriter,
    status: int,
    body: bytes,
    content_type: str,
    headers: tuple[tuple[str, str], ...] = (),
    *,
    close: bool = False,
    server: str | None = None,
    head_only: bool = False,
) -> None:
    """A whole answer with a ``Content-Length`` (and ``headers``), sent and drained;
    ``close`` adds ``Connection: close``; ``head_only`` (a HEAD request) sends no body."""
    lines = [f"HTTP/1.1 {status} {reason(status)}", f"content-type: {content_type}"]
    lines += [f"{name}: {value}" for name, value in headers]
    lines.append(f"content-length: {len(body)}")
    if close:
        lines.append("connection: close")
    if server is not None:
        lines += [f"date: {_date()}", f"server: {server}"]
    data = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    writer.write(data if head_only else data + body)
    await writer.drain()


async def refuse(
    writer: asyncio.StreamWriter,
    status: int,
    message: str,
    *,
    server: str | None = None,
    headers: tuple[tuple[str, str], ...] = (),
    code: str = "invalid_request_error",
) -> None:
    """Answer a request the server will not serve (JSON error, ``Connection: close``); a
    client that already left is no error."""
    body = error_body(f"{reason(status)}: {message}", code=code)
    extra = (("retry-after", "1"),) if status == 503 else ()
    with contextlib.suppress(ConnectionError, OSError):
        await send_answer(
            writer,
            status,
            body,
            "application/json",
            (*extra, *headers),
            close=True,
            server=server,
        )


async def wait_for_close(reader: asyncio.StreamReader) -> None:
    """Hold a stalled or hanging connection until the client goes away (or the server stops)."""
    with contextlib.suppress(ConnectionError, OSError):
        while await reader.read(_READ):
            pass


def reset(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP reset (SO_LINGER 0): the client sees ``connection reset by peer``."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()
