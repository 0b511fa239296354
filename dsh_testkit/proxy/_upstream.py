"""The proxy's upstream side: a small HTTP/1.1 client on an asyncio protocol, with a keep-alive pool.

Why not httpx: the proxy relays bytes, it does not need a client's conveniences, and per request
httpx costs about a millisecond of CPU (request and response models, header normalization, the
transport stack) — the whole budget the proxy is allowed to add. Why a protocol rather than
asyncio streams: the relay's unit is one upstream read. The protocol's ``data_received`` hands
over exactly what one socket read returned, and :meth:`UpstreamResponse.body` yields, per read,
everything of the body that read completed (for a chunked body, every whole chunk and the part
of a chunk that arrived, the transfer coding removed), so the proxy writes one client write per
upstream read: several SSE events that arrived together go on together, and an event that
arrived alone goes on alone, at once. A connection whose response was read to its end goes back
to the pool (at most ``pool_size`` idle connections are kept; one more is closed); anything else
is closed, and a response given up before its end (the client left, the proxy stopped, a timeout)
is aborted, so the upstream sees the connection drop at once and stops producing the answer.

Three timeouts bound what a silent upstream can hold: ``connect_timeout`` (TCP and TLS),
``first_byte_timeout`` (from the request sent to the answer's head read) and ``idle_timeout``
(between two reads of the body). Each raises :class:`UpstreamTimeout`, which says whether the
request had been sent (``.sent``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Sequence
from typing import Final, cast
from urllib.parse import urlsplit

__all__ = ["Upstream", "UpstreamError", "UpstreamResponse", "UpstreamTimeout"]

_MAX_HEAD: Final = 64 * 1024
"""The longest response head (status line and headers) accepted."""
_MAX_LINE: Final = 4096
"""The longest chunk-size or trailer line accepted."""
_HIGH_WATER: Final = 1024 * 1024
"""Reading from the upstream pauses while this much is buffered and not yet relayed."""


class UpstreamError(Exception):
    """The upstream could not be reached, answered something that is not HTTP/1.x, or closed
    the connection before the end of the answer. ``.sent``: whether the request had reached it
    (``False``: it was never sent, so nothing happened upstream)."""

    def __init__(self, message: str, *, sent: bool = True) -> None:
        super().__init__(message)
        self.sent = sent


class UpstreamTimeout(UpstreamError):
    """The upstream took longer than allowed: ``.phase`` is ``connect``, ``first-byte`` (no
    answer head in time) or ``idle`` (nothing more mid-answer); ``.seconds`` the limit."""

    def __init__(self, phase: str, seconds: float) -> None:
        what = {
            "connect": "could not be connected to",
            "first-byte": "sent no answer",
            "idle": "sent nothing more of its answer",
        }[phase]
        super().__init__(
            f"the upstream {what} within {seconds:g} s ({phase} timeout)", sent=phase != "connect"
        )
        self.phase = phase
        self.seconds = seconds


class _Connection(asyncio.Protocol):
    """One upstream connection: what the socket delivered and not yet consumed, and whether it
    ended."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.eof = False
        self._waiter: asyncio.Future[None] | None = None
        self._paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) > _HIGH_WATER and not self._paused and self.transport is not None:
            self._paused = True
            self.transport.pause_reading()
        self._wake()

    def eof_received(self) -> bool:
        self.eof = True
        self._wake()
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self.eof = True
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    @staticmethod
    def _expire(waiter: asyncio.Future[None]) -> None:
        if not waiter.done():
            waiter.set_exception(TimeoutError())

    async def more(self, timeout: float | None = None) -> None:
        """Wait for the next read (or the end); :class:`UpstreamError` when it has ended,
        ``TimeoutError`` when nothing came within ``timeout`` seconds."""
        if self.eof:
            raise UpstreamError("the upstream closed the connection before the end of the answer")
        if self._paused and len(self.buffer) <= _HIGH_WATER // 2 and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        loop = asyncio.get_running_loop()
        waiter = self._waiter = loop.create_future()
        # A timer rather than asyncio.timeout: one handle per read, no cancellation to untangle.
        timer = loop.call_later(timeout, self._expire, waiter) if timeout is not None else None
        try:
            await waiter
        finally:
            self._waiter = None
            if timer is not None:
                timer.cancel()

    @property
    def reusable(self) -> bool:
        return not self.eof and self.transport is not None and not self.transport.is_closing()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        """Drop the connection at once (no TLS goodbye): the upstream sees it end now."""
        if self.transport is not None:
            self.transport.abort()


class UpstreamResponse:
    """A response whose head is read; :meth:`body` relays the rest, one upstream read at a
    time."""

    __slots__ = (
        "_conn",
        "_done",
        "_idle",
        "_pool",
        "bodiless",
        "complete",
        "headers",
        "reason",
        "status",
    )

    def __init__(
        self,
        *,
        status: int,
        reason: str,
        headers: list[tuple[str, str]],
        conn: _Connection,
        pool: Upstream,
        bodiless: bool = False,
        idle_timeout: float | None = None,
    ) -> None:
        self.status = status
        self.bodiless = bodiless
        """An answer to ``HEAD``: no body whatever its headers say."""
        self.reason = reason
        self.headers = headers
        self.complete = False
        """Whether the body has been read to its end (set before the last piece is yielded
        when that piece's read also held the end)."""
        self._conn = conn
        self._pool = pool
        self._done = False
        self._idle = idle_timeout

    def header(self, name: str) -> str | None:
        wanted = name.lower()
        return next((v for k, v in self.headers if k.lower() == wanted), None)

    async def body(self) -> AsyncIterator[bytes]:
        """The body's bytes, one piece per upstream read (transfer coding removed).

        An empty piece says "nothing more has arrived yet": it comes once, before the first
        wait for the upstream, so a caller holding back the response head knows to send it.
        Raises :class:`UpstreamError` when the upstream closes before the end, and
        :class:`UpstreamTimeout` when it sends nothing for ``idle_timeout`` seconds.
        """
        conn = self._conn
        encoding = (self.header("transfer-encoding") or "").lower()
        length = self.header("content-length")
        reusable = (self.header("connection") or "").lower() != "close"
        told = False
        if self.bodiless or self.status in (204, 304) or 100 <= self.status < 200:
            pass
        elif "chunked" in encoding:
            decoder = _Dechunker()
            while True:
                piece = decoder.feed(conn.buffer)
                if decoder.done:
                    self.complete = True
                if piece:
                    yield piece
                if decoder.done:
                    break
                if not told:
                    told = True
                    yield b""
                await self._more()
        elif length is not None:
            try:
                remaining = int(length)
            except ValueError:
                raise UpstreamError(f"a bad Content-Length from the upstream: {length!r}") from None
            while remaining > 0:
                buffer = conn.buffer
                if buffer:
                    take = min(remaining, len(buffer))
                    piece = bytes(buffer[:take])
                    del buffer[:take]
                    remaining -= take
                    self.complete = remaining == 0
                    yield piece
                    continue
                if not told:
                    told = True
                    yield b""
                await self._more()
        else:
            reusable = False
            while True:
                buffer = conn.buffer
                if buffer:
                    piece = bytes(buffer)
                    buffer.clear()
                    yield piece
                    continue
                if conn.eof:
                    break
                if not told:
                    told = True
                    yield b""
                try:
                    await self._more()
                except UpstreamTimeout:
                    raise
                except UpstreamError:
                    pass  # the close is the end of a close-delimited body
        self.complete = True
        self._finish(reusable and not conn.buffer)

    async def _more(self) -> None:
        try:
            await self._conn.more(self._idle)
        except TimeoutError:
            assert self._idle is not None
            raise UpstreamTimeout("idle", self._idle) from None

    def _finish(self, reusable: bool) -> None:
        self._done = True
        if reusable and self._conn.reusable:
            self._pool.release(self._conn)
        else:
            self._conn.close()

    def close(self) -> None:
        """Abort the connection unless the body was read to its end (then it is pooled): an
        answer given up mid-way is cancelled upstream at once."""
        if not self._done:
            self._done = True
            self._conn.abort()


class _Dechunker:
    """The chunked transfer coding removed from a buffer, as far as the buffer goes."""

    __slots__ = ("done", "remaining", "state")

    def __init__(self) -> None:
        self.state = "size"  # size → data → crlf → size …; trailer after the last chunk
        self.remaining = 0
        self.done = False

    def feed(self, buffer: bytearray) -> bytes:
        """Consume what can be decoded from the front of ``buffer``; returns the data found."""
        out: list[bytes] = []
        at = 0
        size = len(buffer)
        while not self.done:
            if self.state == "data":
                take = min(self.remaining, size - at)
                if take:
                    out.append(bytes(buffer[at : at + take]))
                    at += take
                    self.remaining -= take
                if self.remaining:
                    break
                self.state = "crlf"
            elif self.state == "crlf":
                if size - at < 2:
                    break
                if buffer[at : at + 2] != b"\r\n":
                    raise UpstreamError("a malformed chunked body from the upstream")
                at += 2
                self.state = "size"
            else:
                end = buffer.find(b"\r\n", at)
                if end < 0:
                    if size - at > _MAX_LINE:
                        raise UpstreamError("a malformed chunked body from the upstream")
                    break
                line = bytes(buffer[at:end])
                at = end + 2
                if self.state == "trailer":
                    if not line:
                        self.done = True
                    continue
                try:
                    chunk = int(line.split(b";", 1)[0].strip() or b"0", 16)
                except ValueError:
                    raise UpstreamError("a malformed chunk size from the upstream") from None
                if chunk < 0:
                    raise UpstreamError("a malformed chunk size from the upstream")
                if chunk == 0:
                    self.state = "trailer"
                else:
                    self.state = "data"
                    self.remaining = chunk
        if at:
            del buffer[:at]
        return b"".join(out) if len(out) != 1 else out[0]


class Upstream:
    """Connections to one origin (``http://host:port`` or ``https://…``), kept alive: at most
    ``pool_size`` idle ones; the timeouts are the module's (``None``: no limit)."""

    def __init__(
        self,
        origin: str,
        *,
        connect_timeout: float | None = None,
        first_byte_timeout: float | None = None,
        idle_timeout: float | None = None,
        pool_size: int = 32,
    ) -> None:
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"an upstream must be an http(s) URL, got {origin!r}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.tls = parts.scheme == "https"
        self.host_header = parts.netloc.rsplit("@", 1)[-1]
        self.connect_timeout = connect_timeout
        self.first_byte_timeout = first_byte_timeout
        self.idle_timeout = idle_timeout
        self.pool_size = pool_size
        self._idle: list[_Connection] = []
        self._context: ssl.SSLContext | None = None

    @property
    def idle_connections(self) -> int:
        """Idle connections kept for reuse now (at most ``pool_size``)."""
        return len(self._idle)

    def release(self, conn: _Connection) -> None:
        if len(self._idle) >= self.pool_size:
            conn.close()
            return
        self._idle.append(conn)

    async def _connect(self) -> tuple[_Connection, bool]:
        while self._idle:
            conn = self._idle.pop()
            if conn.reusable and not conn.buffer:
                return conn, True
            conn.close()
        if self.tls and self._context is None:
            self._context = ssl.create_default_context()
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(self.connect_timeout):
                _, conn = await loop.create_connection(
                    _Connection, self.host, self.port, ssl=self._context if self.tls else None
                )
        except TimeoutError:
            assert self.connect_timeout is not None
            raise UpstreamTimeout("connect", self.connect_timeout) from None
        except OSError as exc:
            raise UpstreamError(
                f"cannot connect to {self.host}:{self.port}: {exc}", sent=False
            ) from exc
        return conn, False

    async def request(
        self, method: str, target: str, headers: Sequence[tuple[str, str]], body: bytes
    ) -> UpstreamResponse:
        """Send a request; returns once the response head is read. Retries once on a stale
        pooled connection."""
        head = [f"{method} {target} HTTP/1.1", f"host: {self.host_header}"]
        head += [f"{name}: {value}" for name, value in headers]
        if body or method in ("POST", "PUT", "PATCH"):
            head.append(f"content-length: {len(body)}")
        data = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1")
        for attempt in (0, 1):
            conn, pooled = await self._connect()
            assert conn.transport is not None
            try:
                conn.transport.write(data)
                if body:
                    conn.transport.write(body)  # not joined to the head: no copy of a large body
                raw = await _read_head(conn, self.first_byte_timeout)
            except UpstreamTimeout:
                conn.abort()
                raise
            except UpstreamError as exc:
                conn.close()
                if pooled and attempt == 0 and not conn.buffer:
                    continue  # the upstream closed an idle connection: one fresh try
                raise UpstreamError(f"the upstream did not answer: {exc}") from exc
            except BaseException:  # cancelled (the client left, the proxy stops): drop it now
                conn.abort()
                raise
            lines = raw.decode("latin-1").split("\r\n")
            status_line = lines[0].split(" ", 2)
            if len(status_line) < 2 or not status_line[0].startswith("HTTP/1."):
                conn.close()
                raise UpstreamError(f"not an HTTP/1.x answer: {lines[0]!r}")
            try:
                status = int(status_line[1])
            except ValueError:
                conn.close()
                raise UpstreamError(f"not an HTTP/1.x answer: {lines[0]!r}") from None
            headers_out = []
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers_out.append((name.strip(), value.strip()))
            return UpstreamResponse(
                status=status,
                reason=status_line[2] if len(status_line) > 2 else "",
                headers=headers_out,
                conn=conn,
                pool=self,
                bodiless=method == "HEAD",
                idle_timeout=self.idle_timeout,
            )
        raise UpstreamError("unreachable")  # pragma: no cover

    def close(self) -> None:
        for conn in self._idle:
            with contextlib.suppress(Exception):
                conn.close()
        self._idle.clear()


async def _read_head(conn: _Connection, timeout: float | None) -> bytes:
    """The response head (without its blank line), consumed from the connection's buffer;
    :class:`UpstreamTimeout` when it is not complete within ``timeout`` seconds."""
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    searched = 0
    while True:
        buffer = conn.buffer
        end = buffer.find(b"\r\n\r\n", max(0, searched - 3))
        if end >= 0:
            raw = bytes(buffer[:end])
            del buffer[: end + 4]
            return raw
        if len(buffer) > _MAX_HEAD:
            raise UpstreamError("the response head is too large")
        searched = len(buffer)
        try:
            await conn.more(None if deadline is None else max(0.0, deadline - loop.time()))
        except TimeoutError:
            assert timeout is not None
            raise UpstreamTimeout("first-byte", timeout) from None
