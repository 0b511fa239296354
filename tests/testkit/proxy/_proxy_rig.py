"""A rig for the proxy under faults: a scriptable loopback upstream, the proxy in the same loop,
and raw HTTP clients that can give up at any point.

The upstream reads each request whole and hands it to a handler coroutine, which writes what it
likes (or nothing) and may hang; the rig notes when each upstream connection ends, so a test can
tell that the proxy cancelled an exchange upstream.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from dsh_testkit.proxy import ProxyLimits, Recorder
from dsh_testkit.proxy._server import serve_proxy
from dsh_testkit.traces._file import read_trace_lines

KEY = "sk-" + "Rig0Key1Rig2Key3Rig4Key5"

Handler = Callable[[bytes, bytes, asyncio.StreamWriter], Awaitable[None]]
"""``handler(head, body, writer)``: answers one request (the connection ends when it raises)."""

SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
)


def chat_body(content: str = "hi", **extra: Any) -> bytes:
    body = {
        "model": "deepseek-chat",
        "stream": True,
        "messages": [{"role": "user", "content": content}],
    }
    return json.dumps({**body, **extra}).encode()


def event(text: str) -> bytes:
    data = json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]}).encode()
    return b"data: " + data + b"\n\n"


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(data), data)


async def stream(writer: asyncio.StreamWriter, texts: list[str], pause: float = 0.0) -> None:
    """A whole SSE answer, one chunk per event, ``pause`` seconds apart."""
    writer.write(SSE_HEAD)
    for text in texts:
        if pause:
            await asyncio.sleep(pause)
        writer.write(chunk(event(text)))
        await writer.drain()
    writer.write(chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
    await writer.drain()


async def hang(writer: asyncio.StreamWriter) -> None:
    await asyncio.sleep(3600)


@dataclass
class Upstream:
    handler: Handler
    connections: int = 0
    """Connections open now."""
    opened: int = 0
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    """Set whenever an upstream connection ends (cleared by the test that waits on it)."""
    server: Any = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.opened += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.decode("latin-1").split("\r\n"):
                    if line.lower().startswith("content-length:"):
                        length = int(line.split(":", 1)[1])
                body = await reader.readexactly(length)
                # The handler runs while the connection is watched: an end of file (the proxy
                # gave up) ends it at once, as a real server stops producing an answer.
                work = asyncio.ensure_future(self.handler(head, body, writer))
                gone = asyncio.ensure_future(reader.read())
                done, _ = await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
                if gone in done:
                    with contextlib.suppress(BaseException):
                        gone.result()  # retrieved: a reset is an end like any other
                if work not in done:
                    work.cancel()
                    with contextlib.suppress(BaseException):
                        await work
                    return
                gone.cancel()
                with contextlib.suppress(BaseException):
                    await gone
                work.result()
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            self.connections -= 1
            self.ended.set()
            writer.close()

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


@dataclass
class Rig:
    upstream: Upstream
    recorder: Recorder
    port: int
    stop: asyncio.Event
    task: asyncio.Task[Any]
    clients: list[asyncio.StreamWriter] = field(default_factory=list)

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        self.clients.append(writer)
        return reader, writer

    async def send(
        self,
        body: bytes | None = None,
        *,
        path: str = "/chat/completions",
        headers: dict[str, str] | None = None,
        connection: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None,
    ) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        reader, writer = connection or await self.connect()
        body = chat_body() if body is None else body
        lines = [f"POST {path} HTTP/1.1", "host: localhost", f"authorization: Bearer {KEY}"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        lines.append(f"content-length: {len(body)}")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
        await writer.drain()
        return reader, writer

    async def exchange(self, body: bytes | None = None, **kwargs: Any) -> tuple[int, bytes, bool]:
        """One whole exchange: the status, the body (de-chunked) and whether it ended."""
        reader, _ = await self.send(body, **kwargs)
        return await read_answer(reader)

    async def stopped(self) -> Recorder:
        for writer in self.clients:
            writer.close()
        self.stop.set()
        await self.task
        self.upstream.close()
        return self.recorder

    def records(self) -> list[dict[str, Any]]:
        return records(self.recorder)


async def read_answer(reader: asyncio.StreamReader) -> tuple[int, bytes, bool]:
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    lowered = head.lower()
    if b"transfer-encoding: chunked" not in lowered:
        length = 0
        for line in lowered.split(b"\r\n"):
            if line.startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
        return status, await reader.readexactly(length), True
    body = bytearray()
    try:
        while True:
            size = int((await reader.readuntil(b"\r\n"))[:-2], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                return status, bytes(body), True
            body += await reader.readexactly(size)
            await reader.readexactly(2)
    except (asyncio.IncompleteReadError, ConnectionError):
        return status, bytes(body), False


async def start(
    handler: Handler,
    *,
    out: str | None = None,
    limits: ProxyLimits | None = None,
    recorder: Recorder | None = None,
) -> Rig:
    upstream = Upstream(handler)
    url = await upstream.start()
    recorder = recorder if recorder is not None else Recorder(out)
    stop = asyncio.Event()
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(
        serve_proxy(url, stop=stop, ready=ready.set_result, recorder=recorder, limits=limits)
    )
    base = await asyncio.wait_for(ready, 10)
    return Rig(upstream, recorder, int(base.rsplit(":", 1)[1]), stop, task)


def records(recorder: Recorder) -> list[dict[str, Any]]:
    """The exchange records of the recorder's trace file, as written."""
    _, lines, _ = read_trace_lines(recorder.writer.read_back())
    return [dict(record) for _, record in lines]


def run(main: Callable[[], Awaitable[Any]], timeout: float = 30.0) -> Any:
    async def bounded() -> Any:
        return await asyncio.wait_for(main(), timeout)

    return asyncio.run(bounded())
