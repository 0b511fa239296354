"""One exchange relayed: the request to the upstream, the answer back as it arrives, the outcome.

The answer is relayed one upstream read at a time (one client write each), never buffered. An
exchange is recorded exactly once, when it ends, with how it ended
(:data:`~dsh_testkit.traces._file.OUTCOMES`):

- the client received the whole answer: ``delivered``, recorded right after the client got
  the terminating chunk and before anything else runs (:meth:`Recorder.ending` makes a
  :meth:`Recorder.trace` from another thread wait for it);
- the client went away (its connection closed or half-closed: the client connection's
  protocol cancels the exchange's task at once): the upstream connection is aborted, so the
  upstream stops producing (and billing) the answer, and the exchange is ``abandoned`` with what
  had been relayed;
- the proxy stopped while the answer was still coming (after its grace period): ``interrupted``;
- the upstream timed out or broke off: ``upstream-timeout`` / ``upstream-error``; the client
  gets a 504 / 502 when no answer head had come, else an answer cut short (no terminating chunk).

A request that never reached the upstream (it could not be connected to) is no exchange: the
client gets a 502 (504 for a connect timeout) and it is counted, not recorded.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Final
from urllib.parse import urlsplit

from .._loopback.http import Head, reason, send_answer
from .._loopback.server import ClientConnection
from ..scrub._scrubber import credentials_of
from ..traces._model import SIDE_CALL_HEADERS
from ..traces._readers._build import CONVERSATION_HEADERS
from ..traces._wire import answer_of_json, answer_of_text, endpoint_of, error_of_text
from ._recorder import TRIM_ABOVE, Recorder, trim_heap
from ._upstream import Upstream, UpstreamError, UpstreamResponse, UpstreamTimeout

__all__ = ["InFlight", "Relay"]

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
        # Judged by the proxy (dsh_testkit._loopback.guard), not relayed: the upstream is
        # another origin, and a mock behind the proxy would refuse the proxy's own callers.
        "origin",
        "sec-fetch-site",
        "sec-fetch-mode",
        "sec-fetch-dest",
        "sec-fetch-user",
    }
)


class InFlight:
    """What is known of one exchange while it is relayed (the request body is dropped once
    it is parsed for the record: a large body is not held twice)."""

    __slots__ = (
        "body",
        "first_byte",
        "head",
        "large",
        "received",
        "recorded",
        "response",
        "started",
    )

    def __init__(self, head: Head, body: bytes) -> None:
        self.head = head
        self.body = body
        self.large = len(body) > TRIM_ABOVE
        self.started = time.time()
        self.first_byte: float | None = None
        self.received = bytearray()
        """The answer's body as relayed so far (transfer coding removed)."""
        self.response: UpstreamResponse | None = None
        self.recorded = False


def _error_body(exc: Exception) -> bytes:
    body = {"error": {"message": f"dsh-testkit proxy: {exc}", "type": "proxy_error"}}
    return json.dumps(body).encode()


class Relay:
    """Forwards exchanges to one upstream and records each as it ends."""

    def __init__(self, upstream: str, recorder: Recorder, client: Upstream, grace: float) -> None:
        parts = urlsplit(upstream)
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.base_path = parts.path.rstrip("/")
        self.recorder = recorder
        self.client = client
        self.grace = grace
        self.stopping = False
        """Set when the grace period is over: exchanges cancelled now are ``interrupted``."""
        self.busy = 0
        """Exchanges being relayed now."""
        self.idle = asyncio.Event()
        """Set while no exchange is being relayed."""
        self.idle.set()

    async def forward(self, conn: ClientConnection, exchange: InFlight) -> bool:
        """Relay one exchange; ``False`` when the client connection is done for (the client
        left, or its answer was cut short)."""
        task = asyncio.current_task()
        assert task is not None
        conn.exchange = task
        self.busy += 1
        self.idle.clear()
        writer = conn.writer
        assert writer is not None
        try:
            return await self._relay(conn, exchange, writer)
        except asyncio.CancelledError:
            if conn.gone:
                task.uncancel()
                self._end(exchange, "abandoned", self._left(exchange))
                return False
            if self.stopping:
                self._end(
                    exchange,
                    "interrupted",
                    f"the proxy stopped while the answer was still coming, {self.grace:g} s "
                    f"after it was asked to ({self._relayed(exchange)})",
                )
            raise
        finally:
            conn.exchange = None
            if exchange.response is not None:
                exchange.response.close()
            if exchange.large or len(exchange.received) > TRIM_ABOVE:
                exchange.body = b""
                exchange.received = bytearray()
                trim_heap()
            self.busy -= 1
            if not self.busy:
                self.idle.set()

    @staticmethod
    def _relayed(exchange: InFlight) -> str:
        if exchange.response is None:
            return "no answer head had come"
        return f"{len(exchange.received)} bytes of the answer relayed"

    def _left(self, exchange: InFlight) -> str:
        response = exchange.response
        if response is not None and response.complete:
            return "the client went away before the end of the answer reached it"
        return (
            f"the client went away ({self._relayed(exchange)}); the upstream request was cancelled"
        )

    async def _relay(
        self, conn: ClientConnection, exchange: InFlight, writer: asyncio.StreamWriter
    ) -> bool:
        head = exchange.head
        target = self.base_path + head.target
        headers = [(k, v) for k, v in head.headers if k.lower() not in _HOP_BY_HOP]
        headers.append(("accept-encoding", "identity"))
        try:
            response = await self.client.request(head.method, target, headers, exchange.body)
        except UpstreamError as exc:
            timeout = isinstance(exc, UpstreamTimeout)
            if exc.sent:
                self._end(exchange, "upstream-timeout" if timeout else "upstream-error", str(exc))
            else:
                self.recorder.events["upstream-unreachable"] += 1
            await send_answer(writer, 504 if timeout else 502, _error_body(exc), "application/json")
            return True
        exchange.response = response
        lines = [f"HTTP/1.1 {response.status} {response.reason or reason(response.status)}"]
        lines += [f"{k}: {v}" for k, v in response.headers if k.lower() not in _HOP_BY_HOP]
        # No body may follow an answer to HEAD, a 204 or a 304: no chunked framing then.
        ended = response.bodiless or response.status in (204, 304)
        lines.append("\r\n" if ended else "transfer-encoding: chunked\r\n\r\n")
        # The head goes out with the first body bytes when they came with it, else alone at
        # once (an empty piece: the upstream has sent nothing more yet).
        pending = "\r\n".join(lines).encode("latin-1")
        received = exchange.received
        try:
            async for piece in response.body():
                if not piece:
                    if pending:
                        writer.write(pending)
                        pending = b""
                        await writer.drain()
                    continue
                if exchange.first_byte is None:
                    exchange.first_byte = time.time()
                received += piece
                # One client write per upstream read; the transport sends it at once when the
                # socket takes it (almost always): drain only when a slow client lets bytes pile
                # up, not once per event (a coroutine and a check per read).
                writer.write(b"%b%x\r\n%b\r\n" % (pending, len(piece), piece))
                pending = b""
                if writer.transport.get_write_buffer_size() > _DRAIN_ABOVE:
                    await writer.drain()
        except UpstreamError as exc:
            if pending:
                writer.write(pending)
            outcome = "upstream-timeout" if isinstance(exc, UpstreamTimeout) else "upstream-error"
            self._end(
                exchange,
                outcome,
                f"{exc} ({self._relayed(exchange)}; the client's answer was cut short)",
            )
            writer.close()  # no terminating chunk: the client knows the body is cut
            return False
        # The end goes out first, then the exchange is recorded before this task yields again:
        # a report request on this loop finds it in, and a test reading ProxyServer.trace()
        # from its own thread waits for it (Recorder.ending).
        with self.recorder.ending():
            writer.write(pending if ended else pending + b"0\r\n\r\n")
            if conn.gone:
                self._end(exchange, "abandoned", self._left(exchange))
            else:
                self._end(exchange, "delivered")
        await writer.drain()
        return not conn.gone

    def _end(self, exchange: InFlight, outcome: str, detail: str | None = None) -> None:
        """Record the exchange (once) with how it ended; a request that is not a model request
        (no JSON body with ``messages``, or another endpoint) is counted, not recorded."""
        if exchange.recorded:
            return
        exchange.recorded = True
        finished = time.time()
        head = exchange.head
        try:
            parsed = json.loads(exchange.body) if exchange.body else None
        except ValueError:
            parsed = None
        exchange.body = b""  # forwarded and parsed: not needed again
        endpoint = endpoint_of(head.target, parsed)
        if endpoint is None:
            self.recorder.events["not-recorded"] += 1
            status = exchange.response.status if exchange.response is not None else 0
            path = head.target.split("?", 1)[0].rstrip("/")
            if head.method == "POST" and path.endswith("/_dsh/reset") and 200 <= status < 300:
                when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(finished))
                self.recorder.reset_seen = (
                    f"the upstream's cache was reset (POST {path} relayed at {when}): the cache "
                    "is cold from this request on"
                )
            return
        response = exchange.response
        answer = usage = error = None
        if response is not None and exchange.received:
            text = exchange.received.decode("utf-8", "replace")
            if response.status >= 400:
                error = error_of_text(text)  # the API's own words for the refusal
            elif "event-stream" in (response.header("content-type") or ""):
                answer, usage = answer_of_text(text, endpoint, event_stream=True)
            else:
                try:
                    answer, usage = answer_of_json(json.loads(text), endpoint)
                except ValueError:
                    answer, usage = None, None
        record = {
            "index": 0,
            "endpoint": endpoint,
            "url": self.origin + self.base_path + head.target,
            "conversation": next(
                (v for name in CONVERSATION_HEADERS for v in head.values(name)), None
            ),
            "started": round(exchange.started, 6),
            "firstByte": None if exchange.first_byte is None else round(exchange.first_byte, 6),
            "finished": round(finished, 6),
            "status": None if response is None else response.status,
            "request": parsed,
            "response": answer,
            "usage": usage.to_json() if usage is not None else None,
            "outcome": outcome,
        }
        marks = [[name, v] for name in SIDE_CALL_HEADERS for v in head.values(name)]
        if marks:
            # The side-call marks only (never a credential): the cache doctor makes the request
            # a branch, as it does from the mock's request log of the same traffic.
            record["headers"] = marks
        if error is not None:
            record["error"] = error
        if detail is not None:
            record["detail"] = detail
        if self.recorder.reset_seen is not None:
            record["logEvents"] = [{"seq": 0, "kind": "reset", "detail": self.recorder.reset_seen}]
            self.recorder.reset_seen = None
        self.recorder.record(record, secrets=credentials_of(head.headers))
