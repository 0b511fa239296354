"""``dsh-testkit proxy``: a recording reverse proxy between any agent and a chat API.

Any client in any language points its base URL at the proxy; every request is forwarded to the
upstream (the real API with the client's own key, or the mock) and the answer relayed back as
it arrives (``_relay.py``), and every exchange is appended to the trace file the moment it ends,
with how it ended (``_recorder.py``), so a crash loses at most the exchanges in flight and the
process holds no request or answer once written. ``GET /_dsh/report`` answers the cache
doctor's report of the trace so far (``?format=json`` for JSON).

What a team running it in front of a production key can count on:

- **Loopback only** unless told otherwise: a non-loopback ``host`` is refused without
  ``allow_remote`` (``--allow-remote``), and with it a warning names what is exposed: an
  unauthenticated relay to the upstream and every recorded prompt at ``/_dsh/report``.
- **Bounded resources**: at most ``max_connections`` client connections (one more gets a 503
  with ``Retry-After: 1``; the default fits the open-file limit), at most ``pool_size`` idle
  upstream connections, upstream timeouts (:class:`ProxyLimits`), an exchange whose client left
  cancelled upstream at once. Expected socket errors (clients that left, accept failures when
  descriptors run out) are counted (:attr:`Recorder.events`), not printed per event; running
  out of descriptors is reported once, then at most every 30 s.
- **A clean stop**: exchanges in flight get ``grace`` seconds to end, then are recorded as
  ``interrupted`` (request complete, answer partial) and their clients cut.

The HTTP side reuses the mock server's request reader (HTTP/1.1, keep-alive, chunked bodies);
the upstream side is a small keep-alive HTTP/1.1 client (``_upstream.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final, Self
from urllib.parse import parse_qs, urlsplit

from .._errors import TestkitError
from .._loopback.thread import ServerThread
from ..explorer._live import LiveReport, wants_json
from ..mock._server import (
    HEAD_TIMEOUT,
    IDLE_TIMEOUT,
    MAX_HEAD_BYTES,
    _BadRequest,
    _parse_head,
    _read_body,
)
from ..scrub._scrubber import scrub_url
from ..traces import Trace
from ._recorder import Recorder, live_report
from ._relay import InFlight, Relay, plain
from ._upstream import Upstream

__all__ = ["ClientConnection", "ProxyError", "ProxyLimits", "ProxyServer", "serve_proxy"]

SHUTDOWN_GRACE: Final = 2.0
"""Default seconds a stopping proxy waits for the exchanges it is relaying to end."""
_ACCEPT_REPORT_EVERY: Final = 30.0
"""Seconds between two reports of accept() failing for want of descriptors."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxyLimits:
    """How long the proxy waits and how much it holds (``dsh-testkit proxy`` options)."""

    connect_timeout: float = 10.0
    """Seconds to connect to the upstream (TCP and TLS); then the client gets a 504."""
    first_byte_timeout: float = 600.0
    """Seconds from a request sent to the upstream's answer head; then a 504 and the exchange
    is recorded ``upstream-timeout``. Generous: an API may send its head only with a whole
    non-streamed answer (DeepSeek sends keep-alive lines meanwhile, docs/wire.md §1.8)."""
    idle_timeout: float = 300.0
    """Seconds the upstream may send nothing mid-answer; then the client's answer is cut and
    the exchange recorded ``upstream-timeout``."""
    max_connections: int | None = None
    """Concurrent client connections; ``None``: :func:`default_max_connections`."""
    pool_size: int = 32
    """Idle upstream connections kept for reuse (at most ``max_connections``)."""
    grace: float = SHUTDOWN_GRACE
    """Seconds a stopping proxy lets the exchanges in flight end before cutting them."""

    def __post_init__(self) -> None:
        for name in ("connect_timeout", "first_byte_timeout", "idle_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)!r}")
        if self.max_connections is not None and self.max_connections < 1:
            raise ValueError(f"max_connections must be at least 1, got {self.max_connections}")
        if self.pool_size < 0:
            raise ValueError(f"pool_size must be 0 or more, got {self.pool_size}")
        if not self.grace >= 0:
            raise ValueError(f"grace must be 0 or more, got {self.grace!r}")


def default_max_connections() -> int:
    """512, or less when the open-file limit would not allow it: each client connection may
    hold an upstream connection too and the pool keeps some, so a third of what the limit
    leaves after 32 descriptors for everything else."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):  # pragma: no cover - no resource module
        return 512
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return 512
    return max(4, min(512, (soft - 32) // 3))


class ProxyError(TestkitError):
    """The proxy could not start: a bad upstream URL or option, an address that cannot be
    bound, or a non-loopback one without ``allow_remote`` (``.host``, ``.port``)."""

    def __init__(self, message: str, *, host: str, port: int) -> None:
        self.host = host
        self.port = port
        super().__init__(f"{message} ({host}:{port})")


# A traceback names it where users import it from, not this private module.
ProxyError.__module__ = "dsh_testkit.proxy"


class ClientConnection(asyncio.StreamReaderProtocol):
    """One client connection: asyncio's stream protocol, which also notices the client leave.

    An end of file or a lost connection while an exchange is relayed cancels the exchange's
    task at once (a client that half-closes its side counts as gone, as in nginx): the relay
    records it ``abandoned`` and aborts the upstream request.
    """

    def __init__(self, proxy: _Proxy, loop: asyncio.AbstractEventLoop) -> None:
        self.proxy = proxy
        self.gone = False
        """The client closed (or half-closed) its side."""
        self.exchange: asyncio.Task[Any] | None = None
        """The task relaying an exchange for this client now, if any."""
        reader = asyncio.StreamReader(limit=MAX_HEAD_BYTES, loop=loop)
        super().__init__(reader, self._connected, loop=loop)

    def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> Any:
        return self.proxy.serve_client(self, reader, writer)

    def _left(self) -> None:
        self.gone = True
        task = self.exchange
        if task is not None and not task.done():
            task.cancel()

    def eof_received(self) -> bool | None:
        self._left()
        return super().eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self._left()
        super().connection_lost(exc)


class _SendErrorCounter(logging.Filter):
    """Counts asyncio's "socket.send() raised exception." lines logged on the proxy's thread
    (writes to a client that left) instead of letting them through."""

    def __init__(self, recorder: Recorder) -> None:
        super().__init__()
        self.recorder = recorder
        self.thread = threading.get_ident()

    def filter(self, record: logging.LogRecord) -> bool:
        if threading.get_ident() == self.thread and "socket.send() raised" in str(record.msg):
            self.recorder.events["send-failed"] += 1
            return False
        return True


class _Proxy:
    def __init__(
        self,
        relay: Relay,
        recorder: Recorder,
        limit: int,
        warn: Callable[[str], None],
    ) -> None:
        self.relay = relay
        self.recorder = recorder
        self.limit = limit
        self.warn = warn
        self.tasks: set[asyncio.Task[Any]] = set()
        self.reporting = asyncio.Lock()
        """One report at a time."""
        self.live = LiveReport(
            recorder.trace,
            lambda: (),
            build=recorder.live.report,
            version=recorder.live.version,
        )
        """The Cache Explorer at ``/_dsh/explorer`` and the JSON it polls, from the recorder's
        incremental report."""
        self._accept_reported = float("-inf")
        self._accept_unreported = 0

    def exception_handler(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """The loop's exception handler while serving: accept() failing for want of descriptors
        is counted and reported once per :data:`_ACCEPT_REPORT_EVERY`; the rest goes on."""
        if "out of system resource" in str(context.get("message", "")):
            self.recorder.events["accept-failed"] += 1
            self._accept_unreported += 1
            now = time.monotonic()
            if now - self._accept_reported >= _ACCEPT_REPORT_EVERY:
                self._accept_reported = now
                error = context.get("exception")
                self.warn(
                    f"cannot accept connections: {getattr(error, 'strerror', None) or error} "
                    f"({self._accept_unreported} time(s) since the last report; asyncio retries "
                    "each second). Lower --max-connections or raise the open-file limit "
                    "(ulimit -n)"
                )
                self._accept_unreported = 0
            return
        loop.default_exception_handler(context)

    async def serve_client(
        self, conn: ClientConnection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        try:
            if len(self.tasks) >= self.limit:
                self.recorder.events["refused"] += 1
                await self._refuse_over_cap(reader, writer)
                return
            self.tasks.add(task)
            sock = writer.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                while await self._one(conn, reader, writer):
                    pass
            except (ConnectionError, asyncio.IncompleteReadError, TimeoutError, OSError):
                pass
            finally:
                if not writer.is_closing():
                    writer.close()
                with contextlib.suppress(Exception):
                    await writer.wait_closed()
        except asyncio.CancelledError:
            # The server is stopping. Ending normally matters: asyncio (3.11) logs a spurious
            # "Exception in callback" for a client-connected task that ends cancelled.
            pass
        finally:
            self.tasks.discard(task)

    async def _refuse_over_cap(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        """A 503 with ``Retry-After: 1``, after reading the head (a quarter second at most, so
        the close is a clean FIN that does not discard the answer), then close."""
        with contextlib.suppress(Exception):
            await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 0.25)
        body = (
            b'{"error":{"message":"dsh-testkit proxy: too many connections (the limit is %d)",'
            b'"type":"proxy_error"}}' % self.limit
        )
        with contextlib.suppress(Exception):
            writer.write(
                b"HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\n"
                b"content-type: application/json\r\ncontent-length: %d\r\n"
                b"connection: close\r\n\r\n%b" % (len(body), body)
            )
            await asyncio.wait_for(writer.drain(), 0.25)
            writer.close()
            await asyncio.wait_for(writer.wait_closed(), 0.25)
        writer.transport.abort()

    async def _one(
        self, conn: ClientConnection, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> bool:
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
            await plain(writer, bad.status, str(bad).encode(), "text/plain")
            return False
        target = urlsplit(head.target)
        if target.path == "/_dsh/explorer" or (
            target.path == "/_dsh/report" and wants_json(target.query)
        ):
            # The live page and the JSON it polls (ETag, 304), made off the event loop.
            if_none_match = ", ".join(head.values("if-none-match")) or None
            async with self.reporting:
                live = await asyncio.to_thread(
                    self.live.answer, target.path, target.query, if_none_match
                )
            await plain(writer, live.status, live.body, live.content_type, live.headers)
            return head.keep_alive
        if target.path == "/_dsh/report":
            as_json = parse_qs(target.query).get("format") == ["json"]
            async with self.reporting:
                # Off the loop: reading a long trace back must not stall the streams relayed.
                text = await asyncio.to_thread(live_report, self.recorder, as_json=as_json)
            await plain(
                writer,
                200,
                text.encode("utf-8"),
                "application/json" if as_json else "text/plain; charset=utf-8",
            )
            return head.keep_alive
        exchange = InFlight(head, body)
        del body  # the exchange holds the only reference: dropped once it is recorded
        return await self.relay.forward(conn, exchange, writer) and head.keep_alive


def _is_loopback(address: str) -> bool:
    try:
        return ipaddress.ip_address(address.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


async def serve_proxy(
    upstream: str,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    out: str | None = None,
    stop: asyncio.Event,
    ready: Callable[[str], None] | None = None,
    recorder: Recorder | None = None,
    limits: ProxyLimits | None = None,
    allow_remote: bool = False,
    warn: Callable[[str], None] | None = None,
) -> Recorder:
    """Proxy to ``upstream`` on ``host:port`` until ``stop`` is set; ``ready(base_url)`` once
    listening. Returns the recorder (its trace file holds the session; its counts say how each
    exchange ended). ``warn`` gets the lines meant for the operator (default: stderr).

    Raises :class:`ProxyError` for a bad upstream URL, an address that cannot be bound, or a
    non-loopback address without ``allow_remote``.
    """
    limits = limits if limits is not None else ProxyLimits()
    say = warn if warn is not None else _stderr
    parts = urlsplit(upstream)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ProxyError(
            f"--upstream must be an http(s) URL, got {upstream!r}", host=host, port=port
        )
    limit = limits.max_connections or default_max_connections()
    try:
        client = Upstream(
            upstream,
            connect_timeout=limits.connect_timeout,
            first_byte_timeout=limits.first_byte_timeout,
            idle_timeout=limits.idle_timeout,
            pool_size=min(limits.pool_size, limit),
        )
    except ValueError as exc:
        raise ProxyError(str(exc), host=host, port=port) from None
    recorder = recorder if recorder is not None else Recorder(out, warn=say)
    relay = Relay(upstream, recorder, client, limits.grace)
    proxy = _Proxy(relay, recorder, limit, say)
    loop = asyncio.get_running_loop()
    counter = _SendErrorCounter(recorder)
    asyncio_logger = logging.getLogger("asyncio")
    previous_handler = loop.get_exception_handler()
    try:
        try:
            server = await loop.create_server(
                lambda: ClientConnection(proxy, loop), host, port, start_serving=False
            )
        except OSError as exc:
            raise ProxyError(f"cannot listen: {exc.strerror or exc}", host=host, port=port) from exc
        bound = [s.getsockname() for s in server.sockets]
        exposed = [address for address, *_ in bound if not _is_loopback(address)]
        if exposed and not allow_remote:
            server.close()
            await server.wait_closed()
            raise ProxyError(
                f"refusing to listen on {', '.join(exposed)}, which is not a loopback address: "
                "anyone who can reach it could send requests through the proxy to the upstream "
                "and read every recorded prompt and answer at /_dsh/report, with no "
                "authentication. Pass --allow-remote (allow_remote=True) to listen there anyway",
                host=host,
                port=port,
            )
        loop.set_exception_handler(proxy.exception_handler)
        asyncio_logger.addFilter(counter)
        await server.start_serving()
        first = bound[0]
        display = f"[{first[0]}]" if ":" in first[0] else first[0]
        if exposed:
            say(
                f"WARNING: listening on {', '.join(exposed)} port {first[1]}, not a loopback "
                f"address: anyone who can reach it can send requests through this proxy to "
                f"{scrub_url(upstream)} (with their own key or none; the proxy adds no key and "
                "asks for none) and read every recorded prompt and answer at "
                f"http://{display}:{first[1]}/_dsh/report. There is no authentication"
            )
        try:
            if ready is not None:
                ready(f"http://{display}:{first[1]}")
            await stop.wait()
        finally:
            server.close()
            # Exchanges in flight get a moment to end and be recorded (a client that stopped
            # reading at `data: [DONE]` may stop the proxy before the upstream's last bytes).
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(limits.grace):
                    await relay.idle.wait()
            relay.stopping = True
            for task in list(proxy.tasks):
                task.cancel()
            if proxy.tasks:
                await asyncio.gather(*proxy.tasks, return_exceptions=True)
            await server.wait_closed()
    finally:
        asyncio_logger.removeFilter(counter)
        loop.set_exception_handler(previous_handler)
        client.close()
    return recorder


def _stderr(message: str) -> None:
    print(f"dsh-testkit proxy: {message}", file=sys.stderr, flush=True)


class ProxyServer:
    """The proxy on a background thread, for tests: ``with ProxyServer(upstream) as proxy: …``.

    ``proxy.base_url`` is what a client takes as its base URL; :meth:`trace` is what it saw
    (read back from the trace file ``out``, continued when it exists, or from a temporary one).
    """

    def __init__(
        self,
        upstream: str,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        out: str | None = None,
        limits: ProxyLimits | None = None,
        allow_remote: bool = False,
    ) -> None:
        self.upstream = upstream
        self.host = host
        self.port = port
        self.out = out
        self.limits = limits
        self.allow_remote = allow_remote
        self.recorder: Recorder | None = None
        """The session's recorder (from :meth:`start` on): its counts and trace file."""
        self.base_url = ""
        self._runner = ServerThread("dsh-proxy")

    def trace(self) -> Trace:
        """The exchanges recorded so far (an empty trace before :meth:`start`)."""
        if self.recorder is None:
            return Trace(exchanges=(), source="proxy")
        return self.recorder.trace()

    def start(self) -> Self:
        """Start proxying; returns once listening (raises :class:`ProxyError`, or
        :class:`~dsh_testkit.traces.TraceError` when ``out`` cannot be continued)."""
        recorder = Recorder(self.out)
        self.recorder = recorder
        try:
            self.base_url = self._runner.start(
                lambda stop, ready: serve_proxy(
                    self.upstream,
                    host=self.host,
                    port=self.port,
                    stop=stop,
                    ready=ready,
                    recorder=recorder,
                    limits=self.limits,
                    allow_remote=self.allow_remote,
                )
            )
        except BaseException:
            recorder.close()
            raise
        return self

    def stop(self) -> None:
        if not self._runner.running:
            return
        error = self._runner.stop()
        if self.recorder is not None:
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
