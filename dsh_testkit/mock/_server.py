"""The loopback transport: a small asyncio HTTP/1.1 server in front of :class:`MockDeepSeek`.

Any client in any language can use it. It keeps connections alive, sends JSON with
``Content-Length`` and SSE with chunked transfer encoding — one chunk per event, flushed at
once, so a client sees the first chunk before the last is produced — and serves many clients
concurrently. Malformed HTTP gets a 400 (or 413/431/501) and a closed connection; nothing a
client sends can stop the server.

Why hand-written rather than h11 or an ASGI server: the faults the mock plays (a reset before the
status line, a hang-up inside a chunked body, a stall with the socket open) need direct control of
the socket that a framework hides, and the HTTP subset a test server needs is small. It is not a
general-purpose server: no TLS, no HTTP/2, no pipelining (requests on one connection are answered
in order, one at a time).

:class:`MockServer` runs the server on its own event loop in a background thread (for tests,
including sync ones); :func:`serve` runs it in the caller's loop until a stop event is set (the
``dsh-testkit serve`` command).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import socket
import struct
import time
from collections.abc import Callable
from email.utils import formatdate
from http import HTTPStatus
from types import TracebackType
from typing import TYPE_CHECKING, Any, Final, Self

from .._loopback.thread import ServerThread
from ._errors import MockServerError
from ._model import MockDeepSeek
from ._plan import Emit, Hangup, HttpRequest, Pause, ResponsePlan

if TYPE_CHECKING:
    from ..traces import Trace

__all__ = ["MockServer", "serve"]

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
MAX_CONNECTIONS: Final = 512
"""Default cap on concurrent connections (lowered to fit the process's open-file limit). A
connection over the cap gets a 503 with ``Retry-After: 1`` and is closed at once."""


def default_max_connections() -> int:
    """:data:`MAX_CONNECTIONS`, or less when the open-file limit would not allow it (a third of
    the soft limit: each connection is one descriptor, and the client side may be in the same
    process)."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        return MAX_CONNECTIONS
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return MAX_CONNECTIONS
    return max(8, min(MAX_CONNECTIONS, soft // 3))


_TOKEN: Final = re.compile(rb"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
_REQUEST_LINE: Final = re.compile(rb"^([!#$%&'*+\-.^_`|~0-9A-Za-z]+) (\S+) HTTP/(\d)\.(\d)$")
_CONTROL: Final = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
"""A control character other than tab (refused in a header value)."""
_SERVER_NAME: Final = "dsh-testkit-mock"


class _BadRequest(Exception):
    """The request cannot be read as HTTP/1.1; answered with ``status`` and the connection closed."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class _Head:
    __slots__ = ("headers", "keep_alive", "method", "target", "version")

    def __init__(
        self,
        method: str,
        target: str,
        version: tuple[int, int],
        headers: list[tuple[str, str]],
    ) -> None:
        self.method = method
        self.target = target
        self.version = version
        self.headers = headers
        connection = {
            t.strip().lower()
            for name, value in headers
            if name.lower() == "connection"
            for t in value.split(",")
        }
        if version >= (1, 1):
            self.keep_alive = "close" not in connection
        else:
            self.keep_alive = "keep-alive" in connection

    def values(self, name: str) -> list[str]:
        wanted = name.lower()
        return [value for key, value in self.headers if key.lower() == wanted]


def _parse_head(raw: bytes) -> _Head:
    lines = raw[:-4].split(b"\r\n")
    match = _REQUEST_LINE.match(lines[0])
    if match is None:
        raise _BadRequest(400, "malformed request line")
    method, target, major, minor = match.groups()
    if (int(major), int(minor)) not in ((1, 0), (1, 1)):
        raise _BadRequest(505, "only HTTP/1.0 and HTTP/1.1 are supported")
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        if not line or line[:1] in (b" ", b"\t"):
            raise _BadRequest(400, "malformed header line (obsolete line folding is refused)")
        name, colon, value = line.partition(b":")
        if not colon or not _TOKEN.match(name):
            raise _BadRequest(400, "malformed header line")
        text = value.strip(b" \t").decode("latin-1")
        if _CONTROL.search(text):
            raise _BadRequest(400, "control character in a header value")
        headers.append((name.decode("ascii"), text))
    if not target.startswith(b"/"):
        if target.startswith((b"http://", b"https://")):
            target = b"/" + target.split(b"/", 3)[3] if target.count(b"/") >= 3 else b"/"
        else:
            raise _BadRequest(400, "the request target must be an absolute path")
    return _Head(
        method.decode("ascii"),
        target.decode("latin-1"),
        (int(major), int(minor)),
        headers,
    )


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    body = bytearray()
    while True:
        line = await reader.readuntil(b"\r\n")
        size_text = line[:-2].split(b";", 1)[0].strip()
        if not size_text or not re.fullmatch(rb"[0-9A-Fa-f]{1,16}", size_text):
            raise _BadRequest(400, "malformed chunk size")
        size = int(size_text, 16)
        if len(body) + size > MAX_BODY_BYTES:
            raise _BadRequest(413, "request body too large")
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":
                pass  # trailer fields are read and ignored
            return bytes(body)
        body += await reader.readexactly(size)
        if await reader.readexactly(2) != b"\r\n":
            raise _BadRequest(400, "chunk data not followed by CRLF")


async def _read_body(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, head: _Head
) -> bytes:
    encodings = [t.strip().lower() for v in head.values("transfer-encoding") for t in v.split(",")]
    lengths = {v.strip() for v in head.values("content-length")}
    if encodings and lengths:
        raise _BadRequest(400, "both Transfer-Encoding and Content-Length")
    if any(v.lower() == "100-continue" for v in head.values("expect")):
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        await writer.drain()
    if encodings:
        if encodings != ["chunked"]:
            raise _BadRequest(501, "only the chunked transfer coding is supported")
        return await _read_chunked(reader)
    if not lengths:
        return b""
    if len(lengths) > 1 or not all(c.isdigit() for c in next(iter(lengths))):
        raise _BadRequest(400, "invalid Content-Length")
    length = int(next(iter(lengths)))
    if length > MAX_BODY_BYTES:
        raise _BadRequest(413, "request body too large")
    return await reader.readexactly(length)


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


def _error_body(message: str) -> bytes:
    body = {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_request_error",
        }
    }
    return json.dumps(body).encode("utf-8")


class _AcceptErrorThrottle(logging.Filter):
    """Lets one asyncio "out of system resource" accept error through per ``every`` seconds.

    When the process runs out of descriptors, asyncio logs every failed ``accept()`` with a
    traceback; a flood of clients turns that into thousands of lines a second. The server keeps
    running (asyncio retries the accept a moment later); one line every few seconds says so.
    """

    def __init__(self, every: float = 5.0) -> None:
        super().__init__()
        self.every = every
        self.last = float("-inf")
        self.suppressed = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if "out of system resource" not in str(record.msg):
            return True
        now = time.monotonic()
        if now - self.last < self.every:
            self.suppressed += 1
            return False
        self.last = now
        if self.suppressed:
            record.msg = f"{record.msg} ({self.suppressed} more since the last report)"
            self.suppressed = 0
        return True


class _Connections:
    """The live connection tasks, so a stop can end stalled and idle ones."""

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[None]] = set()
        self.refused = 0
        """Connections refused over the cap."""


async def _wait_for_close(reader: asyncio.StreamReader) -> None:
    """Hold a stalled or hanging connection until the client goes away (or the server stops)."""
    with contextlib.suppress(ConnectionError, OSError):
        while await reader.read(65536):
            pass


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP reset (SO_LINGER 0): the client sees ``connection reset by peer``."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def _refuse_over_cap(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, limit: int
) -> None:
    """Answer a connection over the cap with a 503 and close it. The request head is read first
    and the rest drained (a quarter second each at most, so a flood of refusals holds few
    descriptors), so the close is a clean FIN, not a reset that could discard the answer before
    the client reads it."""
    with contextlib.suppress(Exception):
        await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 0.25)
    await _Protocol._refuse(
        writer, _BadRequest(503, f"too many connections (the limit is {limit})")
    )
    with contextlib.suppress(Exception):
        await asyncio.wait_for(_wait_for_close(reader), 0.25)
    with contextlib.suppress(Exception):
        writer.close()
        await writer.wait_closed()


class _Protocol:
    """Serves one connection: request after request, until either side closes."""

    def __init__(
        self,
        mock: MockDeepSeek,
        *,
        head_timeout: float = HEAD_TIMEOUT,
        body_timeout: float = BODY_TIMEOUT,
        idle_timeout: float = IDLE_TIMEOUT,
    ) -> None:
        self.mock = mock
        self.head_timeout = head_timeout
        self.body_timeout = body_timeout
        self.idle_timeout = idle_timeout

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while await self._one(reader, writer):
                pass
        except (ConnectionError, asyncio.IncompleteReadError, TimeoutError, OSError):
            pass  # the client went away or stopped talking: nothing to answer
        finally:
            if not writer.is_closing():
                writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Serve one request; ``False`` when the connection should close."""
        try:
            first = await asyncio.wait_for(reader.readexactly(1), self.idle_timeout)
        except (asyncio.IncompleteReadError, TimeoutError):
            return False  # closed or idle between requests: nothing to answer
        try:
            raw = first + await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.head_timeout)
        except asyncio.IncompleteReadError as exc:
            if (first + exc.partial).strip():
                await self._refuse(writer, _BadRequest(400, "incomplete request head"))
            return False
        except asyncio.LimitOverrunError:
            await self._refuse(writer, _BadRequest(431, "request head too large"))
            return False
        except TimeoutError:
            await self._refuse(
                writer, _BadRequest(408, "the request head was not received in time")
            )
            return False
        while raw.startswith(b"\r\n"):  # empty lines before a request line are ignored
            raw = raw[2:]
        if not raw:
            return True
        try:
            head = _parse_head(raw)
            body = await asyncio.wait_for(_read_body(reader, writer, head), self.body_timeout)
        except TimeoutError:
            await self._refuse(
                writer, _BadRequest(408, "the request body was not received in time")
            )
            return False
        except asyncio.IncompleteReadError:
            # the client stopped sending mid-body (it may still read): say so, then close
            await self._refuse(writer, _BadRequest(400, "the request body ended early"))
            return False
        except _BadRequest as bad:
            await self._refuse(writer, bad)
            return False
        except asyncio.LimitOverrunError:
            await self._refuse(writer, _BadRequest(400, "malformed chunked body"))
            return False
        request = HttpRequest.build(
            head.method, head.target, headers=head.headers, body=body, received=time.time()
        )
        plan = self.mock.handle(request)
        try:
            return await self._send(reader, writer, head, plan)
        finally:
            plan.complete()  # the record's end time (and its line in the request log file)

    @staticmethod
    async def _refuse(writer: asyncio.StreamWriter, bad: _BadRequest) -> None:
        body = _error_body(f"{_reason(bad.status)}: {bad.reason}")
        extra = "retry-after: 1\r\n" if bad.status == 503 else ""
        head = (
            f"HTTP/1.1 {bad.status} {_reason(bad.status)}\r\n{extra}"
            f"content-type: application/json\r\ncontent-length: {len(body)}\r\n"
            f"connection: close\r\ndate: {formatdate(usegmt=True)}\r\nserver: {_SERVER_NAME}\r\n\r\n"
        )
        with contextlib.suppress(ConnectionError, OSError):
            writer.write(head.encode("latin-1") + body)
            await writer.drain()

    async def _send(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        head: _Head,
        plan: ResponsePlan,
    ) -> bool:
        if plan.abort == "reset":
            _reset(writer)
            return False
        if plan.abort == "hang":
            await _wait_for_close(reader)
            return False
        chunked = plan.framing == "chunked" and head.version >= (1, 1)
        # An HTTP/1.0 client cannot read chunks: it gets the stream delimited by the close.
        keep_alive = head.keep_alive and (chunked or plan.framing == "length")
        lines = [f"HTTP/1.1 {plan.status} {_reason(plan.status)}"]
        lines.extend(f"{name}: {value}" for name, value in plan.headers)
        if chunked:
            lines.append("transfer-encoding: chunked")
        elif plan.framing == "length":
            lines.append(f"content-length: {plan.declared_length}")
        lines.append(f"connection: {'keep-alive' if keep_alive else 'close'}")
        lines.append(f"date: {formatdate(usegmt=True)}")
        lines.append(f"server: {_SERVER_NAME}")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        await writer.drain()
        if head.method == "HEAD":
            return keep_alive
        for action in plan.body:
            if isinstance(action, Emit):
                if not action.data:
                    continue
                if chunked:
                    writer.write(b"%x\r\n%b\r\n" % (len(action.data), action.data))
                else:
                    writer.write(action.data)
                await writer.drain()
            elif isinstance(action, Pause):
                await asyncio.sleep(action.seconds)
            elif isinstance(action, Hangup):
                # A plain close without the terminating chunk (or short of Content-Length): the
                # bytes already sent still reach the client, then the body is cut.
                writer.close()
                return False
            else:
                await _wait_for_close(reader)
                return False
        if chunked:
            writer.write(b"0\r\n\r\n")
            await writer.drain()
        return keep_alive


async def serve(
    mock: MockDeepSeek,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    stop: asyncio.Event,
    ready: Callable[[str], None] | None = None,
    max_connections: int | None = None,
    head_timeout: float = HEAD_TIMEOUT,
    body_timeout: float = BODY_TIMEOUT,
    idle_timeout: float = IDLE_TIMEOUT,
) -> None:
    """Serve ``mock`` on ``host:port`` until ``stop`` is set; ``ready(base_url)`` once listening.

    ``max_connections`` caps concurrent connections (default :func:`default_max_connections`);
    one more is answered 503 and closed. ``head_timeout`` / ``body_timeout`` bound how long a
    client may take to send a request head / body (then 408); ``idle_timeout`` how long a
    kept-alive connection may wait for its next request. Raises :class:`MockServerError` when
    the address cannot be bound or an option is out of range.
    """
    limit = default_max_connections() if max_connections is None else max_connections
    for name, value in (
        ("head_timeout", head_timeout),
        ("body_timeout", body_timeout),
        ("idle_timeout", idle_timeout),
    ):
        if not value > 0:
            raise MockServerError(f"{name} must be positive, got {value!r}", host=host, port=port)
    if limit < 1:
        raise MockServerError(f"max_connections must be ≥ 1, got {limit}", host=host, port=port)
    connections = _Connections()
    protocol = _Protocol(
        mock, head_timeout=head_timeout, body_timeout=body_timeout, idle_timeout=idle_timeout
    )

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        if len(connections.tasks) >= limit:
            connections.refused += 1
            await _refuse_over_cap(reader, writer, limit)
            return
        connections.tasks.add(task)
        try:
            await protocol(reader, writer)
        except asyncio.CancelledError:
            # The server is stopping. Ending normally matters: asyncio (3.11) logs a spurious
            # "Exception in callback" for a client-connected task that ends cancelled.
            pass
        finally:
            connections.tasks.discard(task)

    throttle = _AcceptErrorThrottle()
    asyncio_logger = logging.getLogger("asyncio")
    asyncio_logger.addFilter(throttle)
    try:
        server = await asyncio.start_server(
            on_connect, host, port, limit=MAX_HEAD_BYTES, reuse_address=True
        )
    except OSError as exc:
        asyncio_logger.removeFilter(throttle)
        raise MockServerError(
            f"cannot listen: {exc.strerror or exc}", host=host, port=port
        ) from exc
    bound = server.sockets[0].getsockname()
    display_host = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
    base_url = f"http://{display_host}:{bound[1]}"
    try:
        if ready is not None:
            ready(base_url)
        await stop.wait()
    finally:
        server.close()
        for task in list(connections.tasks):
            task.cancel()
        if connections.tasks:
            await asyncio.gather(*connections.tasks, return_exceptions=True)
        await server.wait_closed()
        asyncio_logger.removeFilter(throttle)


class MockServer:
    """The loopback server on a background thread: ``with MockServer() as server: …``.

    ``server.base_url`` (``http://127.0.0.1:<port>``) is the DeepSeek base URL (``/v1`` is
    accepted too); the Anthropic-format base is ``server.base_url + "/anthropic"``. ``port=0``
    (the default) picks a free port. ``server.mock`` is the model: push script entries and read
    ``server.mock.requests`` from the test's own thread. The connection cap and timeouts are
    :func:`serve`'s.
    """

    def __init__(
        self,
        mock: MockDeepSeek | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        max_connections: int | None = None,
        head_timeout: float = HEAD_TIMEOUT,
        body_timeout: float = BODY_TIMEOUT,
        idle_timeout: float = IDLE_TIMEOUT,
    ) -> None:
        self.mock = mock if mock is not None else MockDeepSeek()
        self.host = host
        self._options: dict[str, Any] = {
            "max_connections": max_connections,
            "head_timeout": head_timeout,
            "body_timeout": body_timeout,
            "idle_timeout": idle_timeout,
        }
        self._requested_port = port
        self._runner = ServerThread("dsh-mock-server")

    def __repr__(self) -> str:
        return f"MockServer(base_url={self._runner.base_url!r})"

    def to_trace(self) -> Trace:
        """The requests the server's mock received, as a :class:`~dsh_testkit.traces.Trace`
        (``server.mock.to_trace()``): the server itself goes to the cache doctor, the prefix
        assertions and the wire goldens."""
        return self.mock.to_trace()

    @property
    def base_url(self) -> str:
        """``http://host:port`` of the running server."""
        if self._runner.base_url is None:
            raise MockServerError(
                "not started; use it as a context manager or call start()",
                host=self.host,
                port=self._requested_port,
            )
        return self._runner.base_url

    @property
    def port(self) -> int:
        return int(self.base_url.rsplit(":", 1)[1])

    @property
    def anthropic_base_url(self) -> str:
        """The base URL the Anthropic SDK takes (it appends ``/v1/messages``)."""
        return self.base_url + "/anthropic"

    def start(self) -> Self:
        """Start serving; returns once the port is bound (raises :class:`MockServerError`)."""
        if self._runner.running:
            raise MockServerError("already started", host=self.host, port=self._requested_port)
        self._runner.start(
            lambda stop, ready: serve(
                self.mock,
                host=self.host,
                port=self._requested_port,
                stop=stop,
                ready=ready,
                **self._options,
            )
        )
        return self

    def stop(self) -> None:
        """Stop serving: open connections (streams, stalls) are closed; waits for the thread."""
        error = self._runner.stop()
        if error is not None:
            raise MockServerError(
                f"the server failed: {error!r}", host=self.host, port=self._requested_port
            ) from error

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
