"""``dsh-testkit proxy``: a recording reverse proxy between any agent and a chat API.

Any client in any language points its base URL at the proxy; every request is forwarded to the
upstream (the real API with the client's own key, or the mock) and the answer relayed back as
it arrives — a streamed answer one upstream read at a time (one client write each), never
buffered. When an exchange completes it is recorded, right after the client got the
terminating chunk and before anything else runs (:meth:`Recorder.trace` from another thread
waits for it), and appended to the trace file (one flushed line, see
:class:`~dsh_testkit.traces.TraceWriter`), so a crash loses at most the exchanges in flight; a
stopping proxy gives those up to :data:`SHUTDOWN_GRACE` seconds to end. Credentials never reach
the trace or stdout: headers are not recorded, and the recorder scrubs every key-shaped string
and credential field, the client's own credential included. ``GET /_dsh/report`` answers the
cache doctor's report of the exchanges so far (``?format=json`` for JSON, with an ETag) and
``GET /_dsh/explorer`` the Cache Explorer page, which polls that JSON and shows each new
exchange as it is recorded.

The HTTP side reuses the mock server's request reader (HTTP/1.1, keep-alive, chunked bodies);
the upstream side is a small keep-alive HTTP/1.1 client (``_upstream.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Any, Final, Self
from urllib.parse import parse_qs, urlsplit

from .._errors import TestkitError
from .._secrets import Scrubber, scrub_json, scrub_url
from .._server_thread import ServerThread
from ..doctor._explorer import LiveReport, wants_json
from ..mock._server import (
    HEAD_TIMEOUT,
    IDLE_TIMEOUT,
    MAX_HEAD_BYTES,
    _BadRequest,
    _Head,
    _parse_head,
    _read_body,
    _reason,
)
from ..traces import CONVERSATION_HEADERS, Exchange, Trace, TraceUsage, TraceWriter
from ..traces._file import encode_record
from ..traces._wire import answer_of_events, answer_of_json, endpoint_of, split_events
from ._upstream import Upstream, UpstreamError, UpstreamResponse

__all__ = ["ProxyError", "ProxyServer", "serve_proxy"]

_DRAIN_ABOVE: Final = 64 * 1024
"""Bytes waiting in a client's send buffer above which the relay waits for it to drain."""

_HOP_BY_HOP: Final = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
        "accept-encoding",
    }
)
_CREDENTIAL_HEADERS: Final = ("authorization", "x-api-key", "api-key")
_REDACTED: Final = "<redacted>"
SHUTDOWN_GRACE: Final = 2.0
"""Seconds a stopping proxy waits for the requests it is forwarding to end (then cuts them)."""
_SCRUBBER: Final = Scrubber.for_rules(None)


class ProxyError(TestkitError):
    """The proxy could not start: a bad upstream URL, or the address cannot be bound
    (``.host``, ``.port``)."""

    def __init__(self, message: str, *, host: str, port: int) -> None:
        self.host = host
        self.port = port
        super().__init__(f"{message} ({host}:{port})")


def _credentials(head: _Head) -> list[str]:
    out = []
    for name in _CREDENTIAL_HEADERS:
        for value in head.values(name):
            token = value.split(" ", 1)[1] if " " in value else value
            if len(token) >= 8:
                out.append(token)
    return out


class Recorder:
    """The exchanges seen so far, in memory and (optionally) in the trace file."""

    def __init__(self, out: str | None) -> None:
        self.exchanges: list[Exchange] = []
        self.writer = TraceWriter(out, source="proxy") if out else None
        self._lock = threading.Lock()
        self._settled = threading.Condition(self._lock)
        self._ending = 0
        """Exchanges whose client has the end of the answer but which are not recorded yet."""

    def record(self, record: dict[str, Any]) -> None:
        """Keep one exchange (the caller removed the client's own credential from its texts).

        Anything key-shaped and credential query parameters are scrubbed here, once: neither the
        trace file nor the reports (stdout, ``/_dsh/report``) show them. The record is encoded
        first and the line checked as a whole: when it holds no key shape, no credential name
        and no ``\\u`` escape (:meth:`Scrubber.body_is_clean`), scrubbing would change nothing
        and the walk over every value is skipped; otherwise the record is scrubbed and encoded
        again.
        """
        record["url"] = scrub_url(record["url"])
        with self._lock:
            record["index"] = len(self.exchanges)
            line = encode_record(record)
            if not _SCRUBBER.body_is_clean(line, {}):
                record = scrub_json(record)
                line = encode_record(record)
            usage = record.get("usage")
            self.exchanges.append(
                Exchange(
                    index=record["index"],
                    endpoint=record["endpoint"],
                    body=record["request"],
                    url=record["url"],
                    status=record["status"],
                    response=record["response"],
                    usage=TraceUsage.from_json(usage) if usage else None,
                    started=record["started"],
                    first_byte=record["firstByte"],
                    finished=record["finished"],
                    conversation=record["conversation"],
                )
            )
            if self.writer is not None:
                self.writer.append_encoded(line)

    @contextlib.contextmanager
    def ending(self) -> Iterator[None]:
        """Around sending an answer's end and recording it (synchronous code, no await): a
        :meth:`trace` from another thread waits for the exchange to be in."""
        with self._lock:
            self._ending += 1
        try:
            yield
        finally:
            with self._lock:
                self._ending -= 1
                if not self._ending:
                    self._settled.notify_all()

    def trace(self) -> Trace:
        """The exchanges recorded so far, those whose client already has the whole answer
        included."""
        with self._settled:
            self._settled.wait_for(lambda: not self._ending, timeout=5.0)
            return Trace(exchanges=tuple(self.exchanges), source="proxy")

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def report_text(trace: Trace, *, as_json: bool = False) -> str:
    """The cache doctor's report of ``trace`` as plain text (or JSON)."""
    from .._console import dumps_report_json
    from ..doctor import diagnose
    from ..doctor import report_text as doctor_text

    report = diagnose(trace)
    if as_json:
        return dumps_report_json(report.to_json())
    return doctor_text(report)


class _Proxy:
    def __init__(self, upstream: str, recorder: Recorder, client: Upstream) -> None:
        parts = urlsplit(upstream)
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.base_path = parts.path.rstrip("/")
        self.recorder = recorder
        self.client = client
        self.live = LiveReport(recorder.trace, lambda: recorder.exchanges)
        """The report and the Cache Explorer at ``/_dsh/explorer``, live."""
        self.busy = 0
        """Requests being forwarded now."""
        self.idle = asyncio.Event()
        """Set while no request is being forwarded."""
        self.idle.set()

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError, OSError):
            pass
        finally:
            if not writer.is_closing():
                writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _plain(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        body: bytes,
        content_type: str,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> None:
        extra = "".join(f"{name}: {value}\r\n" for name, value in headers)
        writer.write(
            f"HTTP/1.1 {status} {_reason(status)}\r\ncontent-type: {content_type}\r\n"
            f"{extra}content-length: {len(body)}\r\n\r\n".encode("latin-1")
            + body
        )
        await writer.drain()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        try:
            # asyncio.timeout, not wait_for: wait_for (3.11) wraps the read in a new task.
            async with asyncio.timeout(IDLE_TIMEOUT):
                raw = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            return False
        try:
            head = _parse_head(raw)
            async with asyncio.timeout(HEAD_TIMEOUT):
                body = await _read_body(reader, writer, head)
        except _BadRequest as bad:
            await self._plain(writer, bad.status, str(bad).encode(), "text/plain")
            return False
        target = urlsplit(head.target)
        if target.path == "/_dsh/explorer" or (
            target.path == "/_dsh/report" and wants_json(target.query)
        ):
            # The live page and the JSON it polls (ETag, 304), diagnosed off the event loop.
            if_none_match = ", ".join(head.values("if-none-match")) or None
            live = await asyncio.to_thread(self.live.answer, target.path, "", if_none_match)
            await self._plain(writer, live.status, live.body, live.content_type, live.headers)
            return head.keep_alive
        if target.path == "/_dsh/report":
            as_json = parse_qs(target.query).get("format") == ["json"]
            text = report_text(self.recorder.trace(), as_json=as_json)
            await self._plain(
                writer,
                200,
                text.encode("utf-8"),
                "application/json" if as_json else "text/plain; charset=utf-8",
            )
            return head.keep_alive
        self.busy += 1
        self.idle.clear()
        try:
            return await self._forward(head, body, writer) and head.keep_alive
        finally:
            self.busy -= 1
            if not self.busy:
                self.idle.set()

    async def _forward(self, head: _Head, body: bytes, writer: asyncio.StreamWriter) -> bool:
        """Relay one request and its answer; ``False`` when the client connection is done for
        (the upstream broke off mid-answer: the client sees its body cut short)."""
        started = time.time()
        target = self.base_path + head.target
        headers = [(k, v) for k, v in head.headers if k.lower() not in _HOP_BY_HOP]
        headers.append(("accept-encoding", "identity"))
        try:
            response = await self.client.request(head.method, target, headers, body)
        except UpstreamError as exc:
            message = json.dumps(
                {"error": {"message": f"dsh-testkit proxy: {exc}", "type": "proxy_error"}}
            )
            await self._plain(writer, 502, message.encode(), "application/json")
            return True
        first_byte: float | None = None
        received = bytearray()
        try:
            lines = [f"HTTP/1.1 {response.status} {response.reason or _reason(response.status)}"]
            lines += [f"{k}: {v}" for k, v in response.headers if k.lower() not in _HOP_BY_HOP]
            # No body may follow an answer to HEAD, a 204 or a 304: no chunked framing then.
            ended = response.bodiless or response.status in (204, 304)
            lines.append("\r\n" if ended else "transfer-encoding: chunked\r\n\r\n")
            # The head goes out with the first body bytes when they came with it, else alone
            # at once (an empty piece: the upstream has sent nothing more yet).
            pending = "\r\n".join(lines).encode("latin-1")
            try:
                async for piece in response.body():
                    if not piece:
                        if pending:
                            writer.write(pending)
                            pending = b""
                            await writer.drain()
                        continue
                    if first_byte is None:
                        first_byte = time.time()
                    received += piece
                    # One client write per upstream read; the transport sends it at once when the
                    # socket takes it (almost always): drain only when a slow client lets bytes
                    # pile up, not once per event (a coroutine and a check per read).
                    writer.write(b"%b%x\r\n%b\r\n" % (pending, len(piece), piece))
                    pending = b""
                    if writer.transport.get_write_buffer_size() > _DRAIN_ABOVE:
                        await writer.drain()
            except UpstreamError:
                if pending:
                    writer.write(pending)
                writer.close()  # no terminating chunk: the client knows the body is cut
                return False
            finished = time.time()
            # The end goes out first, then the exchange is recorded before this task yields
            # again: a report request on this loop finds it in, and a test reading
            # ProxyServer.trace() from its own thread waits for it (Recorder.ending).
            with self.recorder.ending():
                writer.write(pending if ended else pending + b"0\r\n\r\n")
                self._record(
                    head,
                    body,
                    self.origin + target,
                    response,
                    bytes(received),
                    started,
                    first_byte,
                    finished,
                )
            await writer.drain()
        finally:
            response.close()
        return True

    def _record(
        self,
        head: _Head,
        body: bytes,
        url: str,
        response: UpstreamResponse,
        received: bytes,
        started: float,
        first_byte: float | None,
        finished: float,
    ) -> None:
        secrets = _credentials(head)
        text = received.decode("utf-8", "replace")
        conversation = next((v for name in CONVERSATION_HEADERS for v in head.values(name)), None)
        # The client's credential out of every text before parsing: a C-level replace, not a
        # walk over the parsed values (the replacement keeps JSON valid).
        for secret in secrets:
            body = body.replace(secret.encode("utf-8"), _REDACTED.encode("ascii"))
            text = text.replace(secret, _REDACTED)
            url = url.replace(secret, _REDACTED)
            if conversation is not None:
                conversation = conversation.replace(secret, _REDACTED)
        try:
            parsed = json.loads(body) if body else None
        except ValueError:
            return
        endpoint = endpoint_of(head.target, parsed)
        if endpoint is None:
            return
        if "event-stream" in (response.header("content-type") or ""):
            answer, usage = answer_of_events(split_events(text), endpoint)
        else:
            try:
                answer, usage = answer_of_json(json.loads(text), endpoint)
            except ValueError:
                answer, usage = None, None
        self.recorder.record(
            {
                "index": 0,
                "endpoint": endpoint,
                "url": url,
                "conversation": conversation,
                "started": round(started, 6),
                "firstByte": None if first_byte is None else round(first_byte, 6),
                "finished": round(finished, 6),
                "status": response.status,
                "request": parsed,
                "response": answer,
                "usage": usage.to_json() if usage is not None else None,
            }
        )


async def serve_proxy(
    upstream: str,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    out: str | None = None,
    stop: asyncio.Event,
    ready: Callable[[str], None] | None = None,
    recorder: Recorder | None = None,
) -> Recorder:
    """Proxy to ``upstream`` on ``host:port`` until ``stop`` is set; ``ready(base_url)`` once
    listening. Returns the recorder (its exchanges make the trace of the session).
    """
    parts = urlsplit(upstream)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ProxyError(
            f"--upstream must be an http(s) URL, got {upstream!r}", host=host, port=port
        )
    recorder = recorder if recorder is not None else Recorder(out)
    tasks: set[asyncio.Task[None]] = set()
    try:
        client = Upstream(upstream)
    except ValueError as exc:
        raise ProxyError(str(exc), host=host, port=port) from None
    try:
        proxy = _Proxy(upstream, recorder, client)

        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.current_task()
            assert task is not None
            tasks.add(task)
            try:
                await proxy(reader, writer)
            except asyncio.CancelledError:
                pass
            finally:
                tasks.discard(task)

        try:
            server = await asyncio.start_server(on_connect, host, port, limit=MAX_HEAD_BYTES)
        except OSError as exc:
            raise ProxyError(f"cannot listen: {exc.strerror or exc}", host=host, port=port) from exc
        bound = server.sockets[0].getsockname()
        display = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
        try:
            if ready is not None:
                ready(f"http://{display}:{bound[1]}")
            await stop.wait()
        finally:
            server.close()
            # Answers in flight get a moment to end and be recorded (a client that stopped
            # reading at `data: [DONE]` may stop the proxy before the upstream's last bytes).
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(SHUTDOWN_GRACE):
                    await proxy.idle.wait()
            for task in list(tasks):
                task.cancel()
            if tasks:
                await asyncio.gather(*tasks, return_exceptions=True)
            await server.wait_closed()
    finally:
        client.close()
    return recorder


class ProxyServer:
    """The proxy on a background thread, for tests: ``with ProxyServer(upstream) as proxy: …``.

    ``proxy.base_url`` is what a client takes as its base URL; :meth:`trace` is what it saw.
    """

    def __init__(
        self, upstream: str, *, host: str = "127.0.0.1", port: int = 0, out: str | None = None
    ) -> None:
        self.upstream = upstream
        self.host = host
        self.port = port
        self.recorder = Recorder(out)
        self.base_url = ""
        self._runner = ServerThread("dsh-proxy")

    def trace(self) -> Trace:
        """The exchanges completed so far."""
        return self.recorder.trace()

    def start(self) -> Self:
        self.base_url = self._runner.start(
            lambda stop, ready: serve_proxy(
                self.upstream,
                host=self.host,
                port=self.port,
                stop=stop,
                ready=ready,
                recorder=self.recorder,
            )
        )
        return self

    def stop(self) -> None:
        if not self._runner.running:
            return
        error = self._runner.stop()
        self.recorder.close()
        if error is not None:
            raise error

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
