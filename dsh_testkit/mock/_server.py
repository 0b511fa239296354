"""The loopback transport: the mock DeepSeek over HTTP/1.1, for any client in any language.

The HTTP side is the kit's loopback server (:mod:`dsh_testkit._loopback.server`, shared with
the recording proxy): requests read with h11, kept-alive connections, a connection cap fitted to
the open-file limit, malformed HTTP answered 400 (or 408/413/431/501/505) and the connection
closed; nothing a client sends can stop the server. This module carries out the mock's
response plan (:mod:`dsh_testkit.mock._plan`) on the socket: JSON with ``Content-Length``, SSE with
chunked transfer encoding (one chunk per event, flushed at once, so a client sees the first
chunk before the last is produced), and the faults the plan asks for, byte for byte (a reset
before the status line, a hang-up inside a chunked body, a ``Content-Length`` the body never
reaches, a stall with the socket open).

:class:`MockServer` runs the server on its own event loop in a background thread (for tests,
including sync ones); :func:`serve` runs it in the caller's loop until a stop event is set (the
``dsh-testkit serve`` command). The live report pages (``/_dsh/report``, ``/_dsh/explorer``)
are handed in (``pages=``; :func:`dsh_testkit.explorer.live_pages` makes them).
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Iterable
from email.utils import formatdate
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from .._loopback.http import (
    BODY_TIMEOUT,
    HEAD_TIMEOUT,
    IDLE_TIMEOUT,
    OWN_ANSWER_HEADERS,
    Head,
    Timeouts,
    reason,
    reset,
    send_answer,
    wait_for_close,
)
from .._loopback.pages import Pages
from .._loopback.server import ClientConnection, ListenError, LoopbackServer
from .._loopback.thread import ServerThread
from ..traces._readers._otlp._ingest import OtlpIngest
from ._errors import MockServerError
from ._model import MockDeepSeek
from ._plan import Emit, Hangup, HttpRequest, Pause, ResponsePlan

if TYPE_CHECKING:
    from ..traces import Trace

__all__ = ["MockPages", "MockServer", "serve"]

_SERVER_NAME = "dsh-testkit-mock"

MockPages = Callable[[MockDeepSeek], Pages]
"""What a mock server takes as ``pages``: given the mock, the live pages of its request log
(:func:`dsh_testkit.explorer.live_pages`)."""


class _Responder:
    """Carries out the mock's plan for each request of a connection."""

    def __init__(self, mock: MockDeepSeek, otlp: OtlpIngest) -> None:
        self.mock = mock
        self.otlp = otlp

    async def __call__(self, head: Head, client: ClientConnection) -> bool:
        body = await client.body(head)
        exported = self.otlp.answer(head.method, head.path, head.headers, body)
        if exported is not None:  # the OTLP route: /v1/traces, /v1/logs, /_dsh/otlp
            writer = client.writer
            assert writer is not None
            await send_answer(
                writer,
                exported.status,
                exported.body,
                exported.content_type,
                (*exported.headers, *OWN_ANSWER_HEADERS),
                server=_SERVER_NAME,
                head_only=head.method == "HEAD",
            )
            return head.keep_alive
        request = HttpRequest.build(
            head.method, head.target, headers=head.headers, body=body, received=time.time()
        )
        del body
        plan = self.mock.handle(request)
        writer = client.writer
        assert writer is not None
        try:
            return await _send(client.reader, writer, head, plan)
        finally:
            # the record's end time (and its line in the request log file), if not given yet
            plan.complete()


async def _send(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    head: Head,
    plan: ResponsePlan,
) -> bool:
    """Carry out ``plan``; ``False`` when the connection should close."""
    if plan.abort == "reset":
        reset(writer)
        return False
    if plan.abort == "hang":
        await wait_for_close(reader)
        return False
    chunked = plan.framing == "chunked" and head.version >= (1, 1)
    # An HTTP/1.0 client cannot read chunks: it gets the stream delimited by the close.
    keep_alive = head.keep_alive and (chunked or plan.framing == "length")
    lines = [f"HTTP/1.1 {plan.status} {reason(plan.status)}"]
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
    last = plan.last_write
    for index, action in enumerate(plan.body):
        if isinstance(action, Emit):
            if not action.data:
                continue
            if index == last:
                plan.complete()  # recorded before the client can read the end of the answer
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
            await wait_for_close(reader)
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
    pages: MockPages | None = None,
    allow_hosts: Iterable[str] = (),
    allow_remote: bool = False,
    warn: Callable[[str], None] | None = None,
    otlp: OtlpIngest | None = None,
) -> None:
    """Serve ``mock`` on ``host:port`` until ``stop`` is set; ``ready(base_url)`` once listening.

    OpenTelemetry exports posted to ``/v1/traces`` and ``/v1/logs`` (OTLP/HTTP, protobuf or
    JSON) go to ``otlp`` (a new one when not given); ``GET /_dsh/otlp`` gives them back as OTLP
    JSON lines.

    ``max_connections`` caps concurrent connections (default: 512, or less to fit the open-file
    limit); one more is answered 503 and closed. ``head_timeout`` / ``body_timeout`` bound how
    long a client may take to send a request head / body (then 408); ``idle_timeout`` how long a
    kept-alive connection may wait for its next request. ``pages(mock)`` makes the live report
    pages (:func:`dsh_testkit.explorer.live_pages`); without them ``/_dsh/report`` and
    ``/_dsh/explorer`` answer 404.

    Who may use it (:mod:`dsh_testkit._loopback.guard`): requests must name a loopback host (or
    one of ``allow_hosts``: ``--allow-host``; ``"*"`` any), else 421; a request carrying another
    origin's ``Origin`` is 403. A ``host`` beyond loopback needs ``allow_remote`` (anyone who
    reaches it can then script the mock and read its request log: ``warn`` says so, default
    stderr). Raises :class:`MockServerError` when the address cannot be bound, is not loopback
    without ``allow_remote``, or an option is out of range.
    """
    say = warn if warn is not None else _stderr
    try:
        server = LoopbackServer(
            _Responder(mock, otlp if otlp is not None else OtlpIngest(path="otlp:serve")),
            name="dsh-testkit serve",
            label="mock server",
            server_header=_SERVER_NAME,
            max_connections=max_connections,
            timeouts=Timeouts(head=head_timeout, body=body_timeout, idle=idle_timeout),
            pages=pages(mock) if pages is not None else None,
            allow_hosts=allow_hosts,
            warn=say,
        )
    except ValueError as exc:
        raise MockServerError(str(exc), host=host, port=port) from None

    def on_bound(exposed: list[str], base_url: str) -> None:
        if exposed and not allow_remote:
            raise MockServerError(
                f"refusing to listen on {', '.join(exposed)}, which is not a loopback address: "
                "anyone who can reach it could script the mock, reset it and read every request "
                "it logged at /_dsh/requests, with no authentication. Pass --allow-remote "
                "(allow_remote=True) to listen there anyway",
                host=host,
                port=port,
            )
        if exposed:
            say(
                f"WARNING: listening on {', '.join(exposed)}, not a loopback address: anyone who "
                f"can reach {base_url} can script the mock and read its request log. There is no "
                "authentication. Clients must use that address or a name given with --allow-host"
            )

    try:
        await server.serve(host, port, stop=stop, ready=ready, on_bound=on_bound)
    except ListenError as exc:
        raise MockServerError(str(exc), host=host, port=port) from exc


def _stderr(message: str) -> None:
    print(f"dsh-testkit serve: {message}", file=sys.stderr, flush=True)


class MockServer:
    """The loopback server on a background thread: ``with MockServer() as server: …``.

    ``server.base_url`` (``http://127.0.0.1:<port>``) is the DeepSeek base URL (``/v1`` is
    accepted too); the Anthropic-format base is ``server.base_url + "/anthropic"``. ``port=0``
    (the default) picks a free port. ``server.mock`` is the model: push script entries and read
    ``server.mock.requests`` from the test's own thread. The connection cap and timeouts are
    :func:`serve`'s, and so are ``allow_hosts`` and ``allow_remote``; so is ``pages``:
    ``MockServer(pages=live_pages)`` (from :mod:`dsh_testkit.explorer`) serves the live report
    and the Cache Explorer of the request log at ``/_dsh/report`` and ``/_dsh/explorer``.
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
        pages: MockPages | None = None,
        allow_hosts: Iterable[str] = (),
        allow_remote: bool = False,
    ) -> None:
        self.mock = mock if mock is not None else MockDeepSeek()
        self.host = host
        self.otlp = OtlpIngest(path="otlp:serve")
        """The OpenTelemetry exports posted to ``/v1/traces`` and ``/v1/logs``:
        ``server.otlp.trace()`` is their model calls, for :func:`~dsh_testkit.doctor.diagnose`."""
        self._options: dict[str, Any] = {
            "max_connections": max_connections,
            "head_timeout": head_timeout,
            "body_timeout": body_timeout,
            "idle_timeout": idle_timeout,
            "pages": pages,
            "allow_hosts": tuple(allow_hosts),
            "allow_remote": allow_remote,
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
                otlp=self.otlp,
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
