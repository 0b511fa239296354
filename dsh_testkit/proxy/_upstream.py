"""The proxy's upstream side: a small HTTP/1.1 client over asyncio streams, with a keep-alive pool.

Why not httpx: the proxy relays bytes, it does not need a client's conveniences, and per request
httpx costs about a millisecond of CPU (request and response models, header normalization, the
transport stack) — the whole budget the proxy is allowed to add. This client writes the request
head and body, reads the response head, and hands the body on as it arrives: chunked bodies
chunk by chunk, sized bodies read by read, close-delimited bodies until EOF. A connection whose
response was read to its end goes back to the pool; anything else is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import urlsplit

__all__ = ["Upstream", "UpstreamError", "UpstreamResponse"]

_READ: Final = 65536
_MAX_HEAD: Final = 64 * 1024


class UpstreamError(Exception):
    """The upstream could not be reached or answered something that is not HTTP/1.x."""


@dataclass(slots=True, kw_only=True)
class UpstreamResponse:
    """A response whose head is read; :meth:`body` relays the rest."""

    status: int
    reason: str
    headers: list[tuple[str, str]]
    _reader: asyncio.StreamReader
    _writer: asyncio.StreamWriter
    _pool: Upstream
    _done: bool = field(default=False)

    def header(self, name: str) -> str | None:
        wanted = name.lower()
        return next((v for k, v in self.headers if k.lower() == wanted), None)

    async def body(self) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive (transfer coding removed)."""
        reader = self._reader
        encoding = (self.header("transfer-encoding") or "").lower()
        length = self.header("content-length")
        reusable = (self.header("connection") or "").lower() != "close"
        if self.status in (204, 304) or 100 <= self.status < 200:
            self._finish(reusable)
            return
        if "chunked" in encoding:
            while True:
                line = await reader.readuntil(b"\r\n")
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while (await reader.readuntil(b"\r\n")) != b"\r\n":
                        pass
                    break
                yield await reader.readexactly(size)
                await reader.readexactly(2)
        elif length is not None:
            remaining = int(length)
            while remaining > 0:
                piece = await reader.read(min(remaining, _READ))
                if not piece:
                    raise UpstreamError("the upstream closed before the end of the body")
                remaining -= len(piece)
                yield piece
        else:
            reusable = False
            while piece := await reader.read(_READ):
                yield piece
        self._finish(reusable)

    def _finish(self, reusable: bool) -> None:
        self._done = True
        if reusable:
            self._pool.release(self._reader, self._writer)
        else:
            self._writer.close()

    def close(self) -> None:
        """Drop the connection unless the body was read to its end (then it is pooled)."""
        if not self._done:
            self._done = True
            self._writer.close()


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
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    def release(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._idle.append((reader, writer))

    async def _connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, bool]:
        while self._idle:
            reader, writer = self._idle.pop()
            if not writer.is_closing() and not reader.at_eof():
                return reader, writer, True
            writer.close()
        context = ssl.create_default_context() if self.tls else None
        reader, writer = await asyncio.open_connection(
            self.host, self.port, ssl=context, limit=_MAX_HEAD
        )
        return reader, writer, False

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
                reader, writer, pooled = await self._connect()
            except OSError as exc:
                raise UpstreamError(f"cannot connect to {self.host}:{self.port}: {exc}") from exc
            try:
                writer.write(data)
                await writer.drain()
                raw = await reader.readuntil(b"\r\n\r\n")
            except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
                writer.close()
                if pooled and attempt == 0:
                    continue  # the upstream closed an idle connection: one fresh try
                raise UpstreamError(f"the upstream did not answer: {exc!r}") from exc
            lines = raw[:-4].decode("latin-1").split("\r\n")
            status_line = lines[0].split(" ", 2)
            if len(status_line) < 2 or not status_line[0].startswith("HTTP/1."):
                writer.close()
                raise UpstreamError(f"not an HTTP/1.x answer: {lines[0]!r}")
            headers_out = []
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers_out.append((name.strip(), value.strip()))
            return UpstreamResponse(
                status=int(status_line[1]),
                reason=status_line[2] if len(status_line) > 2 else "",
                headers=headers_out,
                _reader=reader,
                _writer=writer,
                _pool=self,
            )
        raise UpstreamError("unreachable")  # pragma: no cover

    def close(self) -> None:
        for _, writer in self._idle:
            with contextlib.suppress(Exception):
                writer.close()
        self._idle.clear()
