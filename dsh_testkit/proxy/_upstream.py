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
to the pool; anything else is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Sequence
from typing import Final, cast
from urllib.parse import urlsplit

__all__ = ["Upstream", "UpstreamError", "UpstreamResponse"]

_MAX_HEAD: Final = 64 * 1024
"""The longest response head (status line and headers) accepted."""
_MAX_LINE: Final = 4096
"""The longest chunk-size or trailer line accepted."""
_HIGH_WATER: Final = 1024 * 1024
"""Reading from the upstream pauses while this much is buffered and not yet relayed."""


class UpstreamError(Exception):
    """The upstream could not be reached, answered something that is not HTTP/1.x, or closed
    the connection before the end of the answer."""


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

    async def more(self) -> None:
        """Wait for the next read (or the end); :class:`UpstreamError` when it has ended."""
        if self.eof:
            raise UpstreamError("the upstream closed the connection before the end of the answer")
        if self._paused and len(self.buffer) <= _HIGH_WATER // 2 and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    @property
    def reusable(self) -> bool:
        return not self.eof and self.transport is not None and not self.transport.is_closing()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class UpstreamResponse:
    """A response whose head is read; :meth:`body` relays the rest, one upstream read at a
    time."""

    __slots__ = ("_conn", "_done", "_pool", "bodiless", "complete", "headers", "reason", "status")

    def __init__(
        self,
        *,
        status: int,
        reason: str,
        headers: list[tuple[str, str]],
        conn: _Connection,
        pool: Upstream,
        bodiless: bool = False,
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

    def header(self, name: str) -> str | None:
        wanted = name.lower()
        return next((v for k, v in self.headers if k.lower() == wanted), None)

    async def body(self) -> AsyncIterator[bytes]:
        """The body's bytes, one piece per upstream read (transfer coding removed).

        An empty piece says "nothing more has arrived yet": it comes once, before the first
        wait for the upstream, so a caller holding back the response head knows to send it.
        Raises :class:`UpstreamError` when the upstream closes before the end.
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
                await conn.more()
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
                await conn.more()
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
                with contextlib.suppress(UpstreamError):
                    await conn.more()
        self.complete = True
        self._finish(reusable and not conn.buffer)

    def _finish(self, reusable: bool) -> None:
        self._done = True
        if reusable and self._conn.reusable:
            self._pool.release(self._conn)
        else:
            self._conn.close()

    def close(self) -> None:
        """Drop the connection unless the body was read to its end (then it is pooled)."""
        if not self._done:
            self._done = True
            self._conn.close()


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
    """Connections to one origin (``http://host:port`` or ``https://…``), kept alive."""

    def __init__(self, origin: str) -> None:
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"an upstream must be an http(s) URL, got {origin!r}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.tls = parts.scheme == "https"
        self.host_header = parts.netloc.rsplit("@", 1)[-1]
        self._idle: list[_Connection] = []

    def release(self, conn: _Connection) -> None:
        self._idle.append(conn)

    async def _connect(self) -> tuple[_Connection, bool]:
        while self._idle:
            conn = self._idle.pop()
            if conn.reusable and not conn.buffer:
                return conn, True
            conn.close()
        context = ssl.create_default_context() if self.tls else None
        loop = asyncio.get_running_loop()
        _, conn = await loop.create_connection(_Connection, self.host, self.port, ssl=context)
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
        data = ("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body
        for attempt in (0, 1):
            try:
                conn, pooled = await self._connect()
            except OSError as exc:
                raise UpstreamError(f"cannot connect to {self.host}:{self.port}: {exc}") from exc
            assert conn.transport is not None
            try:
                conn.transport.write(data)
                raw = await _read_head(conn)
            except UpstreamError as exc:
                conn.close()
                if pooled and attempt == 0 and not conn.buffer:
                    continue  # the upstream closed an idle connection: one fresh try
                raise UpstreamError(f"the upstream did not answer: {exc}") from exc
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
            )
        raise UpstreamError("unreachable")  # pragma: no cover

    def close(self) -> None:
        for conn in self._idle:
            with contextlib.suppress(Exception):
                conn.close()
        self._idle.clear()


async def _read_head(conn: _Connection) -> bytes:
    """The response head (without its blank line), consumed from the connection's buffer."""
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
        await conn.more()
