"""One asyncio HTTP/1.1 server on loopback, shared by the mock server and the recording proxy.

It owns what both servers do the same way: listening (and refusing a non-loopback address
unless allowed), the connection cap fitted to the open-file limit (one connection more gets a
503 with ``Retry-After: 1``), reading requests one after another on each kept-alive connection
(:class:`~dsh_testkit._loopback.http.RequestReader`, h11), refusing malformed ones, the live
pages handed to it (:mod:`~dsh_testkit._loopback.pages`), accept errors when descriptors run out
(counted, reported at most every 30 s), and a clean stop (open connections, stalled ones
included, are cancelled and closed). What a request means is the server's own: it hands each
request head to a :data:`Respond` coroutine, which reads the body if it wants it and writes the
answer on the connection it is given.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import socket
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Final

from .guard import Guard, Refusal
from .hosts import is_loopback
from .http import (
    OWN_ANSWER_HEADERS,
    BadRequest,
    Head,
    RequestReader,
    Timeouts,
    refuse,
    send_answer,
    wait_for_close,
)
from .pages import PAGE_PATHS, Pages

__all__ = [
    "MAX_CONNECTIONS",
    "ClientConnection",
    "ListenError",
    "LoopbackServer",
    "Respond",
    "default_max_connections",
]

MAX_CONNECTIONS: Final = 512
"""Default cap on concurrent connections (lowered to fit the process's open-file limit)."""
_RESERVED_DESCRIPTORS: Final = 32
"""Descriptors left for everything but client connections (files, the upstream pool, …)."""
_ACCEPT_REPORT_EVERY: Final = 30.0
"""Seconds between two reports of accept() failing for want of descriptors."""
_REFUSAL_WAIT: Final = 0.25
"""Seconds a connection over the cap is given to send its head, then to read the 503."""
_REFUSALS_NAMED: Final = 20
"""Distinct refused Hosts and Origins the operator is told about (each once); then only counts."""


def default_max_connections() -> int:
    """:data:`MAX_CONNECTIONS`, or less when the open-file limit would not allow it: each client
    connection is one descriptor and may hold one more (the proxy's upstream connection, or the
    client's own end in the same process), so a third of what the soft limit leaves after a few
    descriptors for everything else (8 at least)."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):  # pragma: no cover - no resource module
        return MAX_CONNECTIONS
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return MAX_CONNECTIONS
    return max(8, min(MAX_CONNECTIONS, (soft - _RESERVED_DESCRIPTORS) // 3))


class ListenError(Exception):
    """The server could not listen (the address cannot be bound, or is not loopback and remote
    listening was not allowed); each server raises its own public error from it."""


class ClientConnection(asyncio.StreamReaderProtocol):
    """One client connection: asyncio's stream protocol, which also notices the client leave.

    An end of file or a lost connection while an exchange runs cancels the exchange's task at
    once (a client that half-closes its side counts as gone, as in nginx): the proxy records
    it ``abandoned`` and aborts the upstream request.
    """

    def __init__(self, server: LoopbackServer, loop: asyncio.AbstractEventLoop) -> None:
        self.server = server
        self.gone = False
        """The client closed (or half-closed) its side."""
        self.exchange: asyncio.Task[Any] | None = None
        """The task serving an exchange for this client now, if any (cancelled if it leaves)."""
        self.reader: asyncio.StreamReader = asyncio.StreamReader(limit=65536, loop=loop)
        self.writer: asyncio.StreamWriter | None = None
        self.requests: RequestReader | None = None
        super().__init__(self.reader, self._connected, loop=loop)

    def _connected(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> Any:
        self.writer = writer
        return self.server.serve_client(self)

    async def body(self, head: Head) -> bytes:
        """The body of the request ``head`` (raises :class:`~dsh_testkit._loopback.http.
        BadRequest`, which the server answers)."""
        assert self.requests is not None
        return await self.requests.body(head)

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


Respond = Callable[[Head, ClientConnection], Awaitable[bool]]
"""``respond(head, client)``: answer one request on ``client.writer`` (reading its body with
``await client.body(head)`` if wanted); returns whether the connection may carry another
request. A :class:`~dsh_testkit._loopback.http.BadRequest` it raises is answered for it."""


class _SendErrorCounter(logging.Filter):
    """Counts asyncio's "socket.send() raised exception." lines logged on the server's thread
    (writes to a client that left) instead of letting them through."""

    def __init__(self, events: collections.Counter[str]) -> None:
        super().__init__()
        self.events = events
        self.thread = threading.get_ident()

    def filter(self, record: logging.LogRecord) -> bool:
        if threading.get_ident() == self.thread and "socket.send() raised" in str(record.msg):
            self.events["send-failed"] += 1
            return False
        return True


class LoopbackServer:
    """Serves ``respond`` on one address until stopped (:meth:`serve`).

    ``name`` names the server in refusals and reports (``dsh-testkit proxy``), ``label`` in the
    Host and Origin refusals (``proxy``, ``mock server``); ``server_header`` is the ``Server``
    header of the answers it makes itself; ``events`` counts what is counted rather than printed
    (``refused`` over the cap, ``accept-failed``, ``send-failed``, and the requests the
    :class:`~dsh_testkit._loopback.guard.Guard` refused: ``host``, ``origin``, ``fetch-site``);
    ``warn`` gets the lines meant for the operator; ``pages`` answers :data:`PAGE_PATHS`;
    ``allow_hosts`` are the names accepted in ``Host`` besides loopback ones (``--allow-host``).
    Every request passes the Host and Origin rules before anything else sees it.
    """

    def __init__(
        self,
        respond: Respond,
        *,
        name: str,
        server_header: str | None = None,
        max_connections: int | None = None,
        timeouts: Timeouts | None = None,
        events: collections.Counter[str] | None = None,
        warn: Callable[[str], None] | None = None,
        pages: Pages | None = None,
        label: str = "server",
        allow_hosts: Iterable[str] = (),
    ) -> None:
        self.respond = respond
        self.name = name
        self.guard = Guard(allow_hosts=allow_hosts, server=label)
        self.server_header = server_header
        self.limit = default_max_connections() if max_connections is None else max_connections
        if self.limit < 1:
            raise ValueError(f"max_connections must be ≥ 1, got {self.limit}")
        self.timeouts = timeouts if timeouts is not None else Timeouts()
        self.timeouts.check()
        self.events: collections.Counter[str] = (
            events if events is not None else collections.Counter()
        )
        self.warn = warn if warn is not None else self._stderr
        self.pages = pages
        self.tasks: set[asyncio.Task[Any]] = set()
        """The connections being served now."""
        self._reporting: asyncio.Lock | None = None
        self._accept_reported = float("-inf")
        self._accept_unreported = 0
        self._previous_handler: Any = None
        self._exposed = False
        """Listening beyond loopback: the address a client reached is a name it may use."""
        self._named: set[str] = set()
        """The refused Hosts and Origins the operator was told about."""

    def _stderr(self, message: str) -> None:
        print(f"{self.name}: {message}", file=sys.stderr, flush=True)

    # -- life cycle ---------------------------------------------------------------------------

    async def serve(
        self,
        host: str,
        port: int,
        *,
        stop: asyncio.Event,
        ready: Callable[[str], None] | None = None,
        on_bound: Callable[[list[str], str], None] | None = None,
        stopping: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        """Listen on ``host:port`` and serve until ``stop`` is set; ``ready(base_url)`` once
        listening. ``on_bound(exposed, base_url)`` runs once bound, before any connection is
        accepted, with the bound addresses that are not loopback: it may raise to refuse them
        (the server is closed) or warn. ``stopping()`` runs when the stop begins, before the
        open connections are cancelled (the proxy's grace period). Raises :class:`ListenError`
        when the address cannot be bound."""
        loop = asyncio.get_running_loop()
        self._reporting = asyncio.Lock()
        try:
            server = await loop.create_server(
                lambda: ClientConnection(self, loop),
                host,
                port,
                reuse_address=True,
                start_serving=False,
            )
        except OSError as exc:
            raise ListenError(f"cannot listen: {exc.strerror or exc}") from exc
        bound = [s.getsockname() for s in server.sockets]
        first = bound[0]
        display = f"[{first[0]}]" if ":" in first[0] else first[0]
        base_url = f"http://{display}:{first[1]}"
        exposed = [address for address, *_ in bound if not is_loopback(address)]
        self._exposed = bool(exposed)
        try:
            if on_bound is not None:
                on_bound(exposed, base_url)
        except BaseException:
            server.close()
            await server.wait_closed()
            raise
        counter = _SendErrorCounter(self.events)
        asyncio_logger = logging.getLogger("asyncio")
        self._previous_handler = loop.get_exception_handler()
        loop.set_exception_handler(self._exception_handler)
        asyncio_logger.addFilter(counter)
        try:
            await server.start_serving()
            if ready is not None:
                ready(base_url)
            await stop.wait()
        finally:
            server.close()
            try:
                if stopping is not None:
                    await stopping()
            finally:
                for task in list(self.tasks):
                    task.cancel()
                if self.tasks:
                    await asyncio.gather(*self.tasks, return_exceptions=True)
                await server.wait_closed()
                asyncio_logger.removeFilter(counter)
                loop.set_exception_handler(self._previous_handler)

    def _exception_handler(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        """The loop's exception handler while serving: accept() failing for want of descriptors
        is counted and reported once per :data:`_ACCEPT_REPORT_EVERY`; the rest goes on to the
        handler that was there before."""
        if "out of system resource" in str(context.get("message", "")):
            self.events["accept-failed"] += 1
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
        if self._previous_handler is not None:
            self._previous_handler(loop, context)
        else:
            loop.default_exception_handler(context)

    # -- one connection -----------------------------------------------------------------------

    async def serve_client(self, client: ClientConnection) -> None:
        task = asyncio.current_task()
        assert task is not None and client.writer is not None
        writer = client.writer
        try:
            if len(self.tasks) >= self.limit:
                self.events["refused"] += 1
                await self._refuse_over_cap(client.reader, writer)
                return
            self.tasks.add(task)
            sock = writer.get_extra_info("socket")
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            client.requests = RequestReader(client.reader, writer, self.timeouts)
            try:
                while await self._one(client, client.requests, writer):
                    pass
            except (ConnectionError, asyncio.IncompleteReadError, TimeoutError, OSError):
                pass  # the client went away or stopped talking: nothing to answer
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
        """A 503 with ``Retry-After: 1``. The request head is read first and the rest drained (a
        quarter second each at most, so a flood of refusals holds few descriptors), so the close
        is a clean FIN, not a reset that could discard the answer before the client reads it."""
        with contextlib.suppress(Exception):
            async with asyncio.timeout(_REFUSAL_WAIT):
                await reader.readuntil(b"\r\n\r\n")
        await refuse(
            writer,
            503,
            f"{self.name}: too many connections (the limit is {self.limit})",
            server=self.server_header,
            headers=OWN_ANSWER_HEADERS,
        )
        with contextlib.suppress(Exception):
            async with asyncio.timeout(_REFUSAL_WAIT):
                await wait_for_close(reader)
        with contextlib.suppress(Exception):
            writer.close()
            async with asyncio.timeout(_REFUSAL_WAIT):
                await writer.wait_closed()
        writer.transport.abort()

    async def _one(
        self, client: ClientConnection, requests: RequestReader, writer: asyncio.StreamWriter
    ) -> bool:
        """Serve one request; ``False`` when the connection should close."""
        try:
            head = await requests.head()
            if head is None:
                return False
            refusal = self.guard.check(head, self._local_address(writer))
            if refusal is not None:
                await self._refuse(refusal, writer)
                return False
            if head.path in PAGE_PATHS and head.method == "GET" and self.pages is not None:
                await client.body(head)
                await self._page(head, writer)
                return head.keep_alive
            keep_alive = await self.respond(head, client)
        except BadRequest as bad:
            await refuse(
                writer,
                bad.status,
                bad.reason,
                server=self.server_header,
                headers=OWN_ANSWER_HEADERS,
                code=bad.code,
            )
            return False
        return keep_alive and head.keep_alive and requests.body_read

    def _local_address(self, writer: asyncio.StreamWriter) -> str | None:
        if not self._exposed:
            return None
        sockname = writer.get_extra_info("sockname")
        return str(sockname[0]) if sockname else None

    async def _refuse(self, refusal: Refusal, writer: asyncio.StreamWriter) -> None:
        """Count a request the guard refused, tell the operator about a new Host or Origin (a
        few, once each), answer it and close: nothing else saw it."""
        self.events[refusal.kind] += 1
        value = refusal.value
        if value is not None and value not in self._named and len(self._named) < _REFUSALS_NAMED:
            self._named.add(value)
            if refusal.kind == "host" and refusal.status == 421:
                self.warn(
                    f"refused a request for Host {value!r} (421): if you reach this server "
                    f"under that name, pass {self.guard.flag} "
                    f"{value.rsplit(':', 1)[0] if not value.endswith(']') else value}"
                )
            elif refusal.kind == "origin":
                self.warn(
                    f"refused a request from the web page origin {value!r} (403): a page in a "
                    "browser tried to use this server; nothing was done"
                )
        await refuse(
            writer,
            refusal.status,
            refusal.message,
            server=self.server_header,
            code=refusal.code,
            headers=OWN_ANSWER_HEADERS,
        )

    async def _page(self, head: Head, writer: asyncio.StreamWriter) -> None:
        """A live page, made off the event loop (diagnosing a long trace must not stall the
        streams being served), one at a time."""
        pages, lock = self.pages, self._reporting
        assert pages is not None and lock is not None
        if_none_match = ", ".join(head.values("if-none-match")) or None
        async with lock:
            answer = await asyncio.to_thread(pages, head.path, head.query, if_none_match)
        await send_answer(
            writer,
            answer.status,
            answer.body,
            answer.content_type,
            (*answer.headers, *OWN_ANSWER_HEADERS),
            server=self.server_header,
        )
