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

The client side is the kit's loopback server (:mod:`dsh_testkit._loopback.server`, shared with
the mock: requests read with h11, keep-alive, the connection cap, the refusals); the upstream side
is a small keep-alive HTTP/1.1 client (``_upstream.py``). The live report pages
(``/_dsh/report``, ``/_dsh/explorer``) are handed in (``pages=``;
:func:`dsh_testkit.explorer.live_pages` makes them from the recorder).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import TracebackType
from typing import Final, Self
from urllib.parse import urlsplit

from .._errors import TestkitError
from .._loopback.http import OWN_ANSWER_HEADERS, Head, error_body, send_answer
from .._loopback.pages import PAGE_PATHS, Pages, no_pages_message
from .._loopback.server import (
    ClientConnection,
    ListenError,
    LoopbackServer,
    default_max_connections,
)
from .._loopback.thread import ServerThread
from ..scrub._scrubber import scrub_url
from ..traces import Trace
from ..traces._readers._otlp._ingest import OtlpIngest, otlp_route
from ._recorder import Recorder
from ._relay import InFlight, Relay
from ._upstream import Upstream

__all__ = ["ProxyError", "ProxyLimits", "ProxyPages", "ProxyServer", "serve_proxy"]

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
    """Concurrent client connections; ``None``: 512, or less to fit the open-file limit."""
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


class ProxyError(TestkitError):
    """The proxy could not start: a bad upstream URL or option, an address that cannot be
    bound, or a non-loopback one without ``allow_remote`` (``.host``, ``.port``)."""

    def __init__(self, message: str, *, host: str, port: int) -> None:
        self.host = host
        self.port = port
        super().__init__(f"{message} ({host}:{port})")


# A traceback names it where users import it from, not this private module.
ProxyError.__module__ = "dsh_testkit.proxy"


_OWN: Final = "/_dsh"
"""The proxy's own path prefix."""
_RESET: Final = _OWN + "/reset"
"""The one upstream control path the proxy relays (``POST``): a reset between two runs."""

ProxyPages = Callable[[Recorder], Pages]
"""What a proxy takes as ``pages``: given its recorder, the live pages of the trace it records
(:func:`dsh_testkit.explorer.live_pages`)."""


class _Responder:
    """What the proxy does with each request: its own ``/_dsh/`` pages, or a relayed exchange."""

    def __init__(self, relay: Relay, otlp: OtlpIngest) -> None:
        self.relay = relay
        self.otlp = otlp

    async def __call__(self, head: Head, client: ClientConnection) -> bool:
        path = head.path
        if otlp_route(path):
            # OpenTelemetry exports are the proxy's to keep, never relayed upstream.
            writer = client.writer
            assert writer is not None
            body = await client.body(head)
            exported = self.otlp.answer(head.method, path, head.headers, body)
            assert exported is not None
            await send_answer(
                writer,
                exported.status,
                exported.body,
                exported.content_type,
                (*exported.headers, *OWN_ANSWER_HEADERS),
                head_only=head.method == "HEAD",
            )
            return head.keep_alive
        if (path == _OWN or path.startswith(_OWN + "/")) and not (
            path == _RESET and head.method == "POST"
        ):
            # The proxy's own paths, never relayed (an upstream mock's control API stays out of
            # reach through the proxy), but for a reset between runs, relayed and recorded as a
            # reset event (the next exchange starts from a cold cache). GETs of the live pages
            # never get here when it has them.
            writer = client.writer
            assert writer is not None
            await client.body(head)
            headers: tuple[tuple[str, str], ...] = ()
            if path in PAGE_PATHS and head.method == "GET":
                attach = "ProxyServer(pages=dsh_testkit.explorer.live_pages)"
                status, message = 404, f"Not Found: {no_pages_message('proxy', attach)}"
            elif path in PAGE_PATHS:
                status, message, headers = 405, "Method Not Allowed", (("allow", "GET"),)
            else:
                status = 404
                message = (
                    f"Not Found: {path} is not one of the proxy's own paths (/_dsh/report, "
                    "/_dsh/explorer); the proxy relays no /_dsh/ path to the upstream but "
                    "POST /_dsh/reset"
                )
            code = "not_found" if status == 404 else "method_not_allowed"
            await send_answer(
                writer,
                status,
                error_body(message, code=code),
                "application/json",
                (*headers, *OWN_ANSWER_HEADERS),
                head_only=head.method == "HEAD",
            )
            return head.keep_alive
        exchange = InFlight(head, await client.body(head))
        # The exchange holds the only reference to the body: dropped once it is recorded.
        return await self.relay.forward(client, exchange)


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
    pages: ProxyPages | None = None,
    allow_hosts: Iterable[str] = (),
    otlp: OtlpIngest | None = None,
) -> Recorder:
    """Proxy to ``upstream`` on ``host:port`` until ``stop`` is set; ``ready(base_url)`` once
    listening. Returns the recorder (its trace file holds the session; its counts say how each
    exchange ended). ``warn`` gets the lines meant for the operator (default: stderr).
    ``pages(recorder)`` makes the live report pages (:func:`dsh_testkit.explorer.live_pages`),
    before any exchange is recorded; without them ``/_dsh/report`` and ``/_dsh/explorer``
    answer 404.

    Who may use it (:mod:`dsh_testkit._loopback.guard`): requests must name a loopback host (or
    one of ``allow_hosts``: ``--allow-host``; ``"*"`` any), else 421; a request carrying another
    origin's ``Origin`` is 403. Nothing refused is relayed or recorded; the ``Origin`` and
    ``Sec-Fetch-*`` headers the proxy judged are not relayed, and ``/_dsh/`` paths are its own
    (never relayed to an upstream mock's control API, but ``POST /_dsh/reset``: relayed and
    recorded as a reset).

    OpenTelemetry exports posted to ``/v1/traces`` and ``/v1/logs`` (OTLP/HTTP, protobuf or
    JSON) go to ``otlp`` (a new one when not given), never upstream; ``GET /_dsh/otlp`` gives
    them back as OTLP JSON lines.

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
    try:
        server = LoopbackServer(
            _Responder(relay, otlp if otlp is not None else OtlpIngest(path="otlp:proxy")),
            name="dsh-testkit proxy",
            label="proxy",
            max_connections=limit,
            events=recorder.events,
            warn=say,
            pages=pages(recorder) if pages is not None else None,
            allow_hosts=allow_hosts,
        )
    except ValueError as exc:
        raise ProxyError(str(exc), host=host, port=port) from None

    def on_bound(exposed: list[str], base_url: str) -> None:
        if exposed and not allow_remote:
            raise ProxyError(
                f"refusing to listen on {', '.join(exposed)}, which is not a loopback address: "
                "anyone who can reach it could send requests through the proxy to the upstream "
                "and read every recorded prompt and answer at /_dsh/report, with no "
                "authentication. Pass --allow-remote (allow_remote=True) to listen there anyway",
                host=host,
                port=port,
            )
        if exposed:
            bound_port = base_url.rsplit(":", 1)[1]
            say(
                f"WARNING: listening on {', '.join(exposed)} port {bound_port}, not a loopback "
                f"address: anyone who can reach it can send requests through this proxy to "
                f"{scrub_url(upstream)} (with their own key or none; the proxy adds no key and "
                f"asks for none) and read every recorded prompt and answer at "
                f"{base_url}/_dsh/report. There is no authentication"
            )

    async def stopping() -> None:
        # Exchanges in flight get a moment to end and be recorded (a client that stopped
        # reading at `data: [DONE]` may stop the proxy before the upstream's last bytes).
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(limits.grace):
                await relay.idle.wait()
        relay.stopping = True

    try:
        await server.serve(host, port, stop=stop, ready=ready, on_bound=on_bound, stopping=stopping)
    except ListenError as exc:
        raise ProxyError(str(exc), host=host, port=port) from exc
    finally:
        client.close()
    return recorder


def _stderr(message: str) -> None:
    print(f"dsh-testkit proxy: {message}", file=sys.stderr, flush=True)


class ProxyServer:
    """The proxy on a background thread, for tests: ``with ProxyServer(upstream) as proxy: …``.

    ``proxy.base_url`` is what a client takes as its base URL; :meth:`trace` is what it saw
    (read back from the trace file ``out``, continued when it exists, or from a temporary one).
    ``ProxyServer(upstream, pages=live_pages)`` (from :mod:`dsh_testkit.explorer`) serves the
    live report and the Cache Explorer of the trace at ``/_dsh/report`` and ``/_dsh/explorer``.
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
        pages: ProxyPages | None = None,
        allow_hosts: Iterable[str] = (),
    ) -> None:
        self.upstream = upstream
        self.allow_hosts = tuple(allow_hosts)
        self.host = host
        self.port = port
        self.out = out
        self.limits = limits
        self.allow_remote = allow_remote
        self.pages = pages
        self.otlp = OtlpIngest(path="otlp:proxy")
        """The OpenTelemetry exports posted to ``/v1/traces`` and ``/v1/logs`` (kept, never
        relayed): ``proxy.otlp.trace()`` is their model calls."""
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
                    pages=self.pages,
                    otlp=self.otlp,
                    allow_hosts=self.allow_hosts,
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
