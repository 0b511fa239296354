"""Capture of any httpx-based agent's traffic: each request and the answer it got.

Agents built on this project's core get cache-stable requests from their log; any other agent
(the openai SDK, pydantic-ai, a hand-rolled loop) is checked from the outside: capture what it
sends and receives, then hand the capture to the cache doctor (``dsh_testkit.doctor``)::

    capture = RequestCapture()
    client = OpenAI(http_client=httpx2.Client(transport=capture.transport(httpx2.HTTPTransport())))
    run_agent(client)
    assert_cache_friendly(capture)          # from dsh_testkit.doctor

Three ways in, for ``httpx`` and ``httpx2`` (the fork the openai and anthropic SDKs use):
:meth:`RequestCapture.transport` wraps a transport, :meth:`RequestCapture.install` adds event
hooks to an existing client, and :func:`capture_requests` captures every request of every
client inside a ``with`` block (for agents that build their own clients).

Each :class:`CapturedRequest` keeps the request (method, URL, headers with credentials
redacted, the exact body bytes) and, once the client has read it, the answer: status, headers,
and the body text — JSON, or the event stream as it arrived, teed as the client reads it so
streaming is not delayed. The answer is what lets the doctor see a client that resends the
model's tool-call arguments re-serialized, or drops its reasoning. This module only records;
judging is the doctor's.

The capture holds the request's exact bytes in memory (the doctor compares bytes); what leaves
it (:meth:`RequestCapture.to_trace`, :meth:`RequestCapture.save`, the answer's text) goes
through the one scrubbing rule with the credentials the request's own headers presented, in
every spelling (:mod:`dsh_testkit.scrub`).
"""

from __future__ import annotations

import importlib
import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any, overload
from unittest import mock

from .scrub._scrubber import credentials_of, scrub_headers, scrub_json, scrub_text, scrub_url
from .scrub._spellings import KnownSecrets
from .traces import Trace
from .traces._file import TraceWriter
from .traces._readers._trace_file import records_trace
from .traces._wire import answer_of_text, endpoint_of, error_of_text

__all__ = [
    "CapturedRequest",
    "RequestCapture",
    "capture_requests",
]

_NO_SECRETS = KnownSecrets(())


@dataclass(frozen=True, slots=True, kw_only=True)
class CapturedRequest:
    """One request as it went on the wire, and its answer once the client read it."""

    method: str
    url: str
    headers: tuple[tuple[str, str], ...]
    """Request header pairs in wire order; ``Authorization``, ``x-api-key``, cookies redacted."""
    content: bytes
    """The exact request body bytes sent."""
    started: float | None = None
    """When it was sent (Unix seconds)."""
    status: int | None = None
    """The status answered; ``None`` until the answer arrived (or when the call failed)."""
    response_headers: tuple[tuple[str, str], ...] = ()
    """Answer header pairs (credentials redacted)."""
    response_text: str | None = None
    """The answer's body as the client received it: JSON, or the server-sent events."""
    first_byte: float | None = None
    finished: float | None = None
    """When the client had read the whole answer (Unix seconds)."""

    @property
    def body(self) -> Any:
        """The request body parsed as JSON (``None`` when it is not JSON) — as on every exchange
        shape (:class:`~dsh_testkit.traces.Exchange`, the mock's ``ReceivedRequest``)."""
        try:
            return json.loads(self.content) if self.content else None
        except ValueError:
            return None

    @property
    def json(self) -> Any:
        """The same as :attr:`body`."""
        return self.body

    @property
    def is_chat(self) -> bool:
        """Whether the body is a chat request (a JSON object with a ``messages`` list)."""
        body = self.body
        return isinstance(body, dict) and isinstance(body.get("messages"), list)

    def to_trace_record(self) -> dict[str, Any]:
        """The request and its answer as a ``dsh-trace`` record (the trace file's shape)."""
        parsed = self.body
        record: dict[str, Any] = {
            "method": self.method,
            "url": self.url,
            "headers": [list(pair) for pair in self.headers],
            "request": parsed,
            "started": self.started,
            "firstByte": self.first_byte,
            "finished": self.finished,
            "status": self.status,
        }
        text = self.content.decode("utf-8", "surrogateescape")
        if parsed is None or json.dumps(parsed, ensure_ascii=False, separators=(",", ":")) != text:
            record["requestText"] = text
        endpoint = endpoint_of(self.url, parsed)
        if self.response_text is not None:
            record["responseText"] = self.response_text
            if endpoint is not None:
                if self.status is not None and self.status >= 400:
                    record["error"] = error_of_text(self.response_text)
                else:
                    answer, usage = answer_of_text(
                        self.response_text,
                        endpoint,
                        event_stream=True
                        if any(
                            k.lower() == "content-type" and "event-stream" in v
                            for k, v in self.response_headers
                        )
                        else None,
                    )
                    record["response"] = answer
                    record["usage"] = usage.to_json() if usage is not None else None
        return record

    def __repr__(self) -> str:
        answer = f" → {self.status}" if self.status is not None else ""
        return f"CapturedRequest({self.method} {self.url}, {len(self.content)} bytes{answer})"


def _module_of(obj: object) -> ModuleType:
    """``httpx`` or ``httpx2``: the package of the nearest base class from either."""
    for cls in type(obj).__mro__:
        root = cls.__module__.split(".")[0]
        if root in ("httpx", "httpx2"):
            return importlib.import_module(root)
    raise TypeError(
        f"expected an httpx or httpx2 client or transport, got {type(obj).__qualname__}"
    )


class _Tee:
    """A response byte stream that records what the client reads, as it reads it."""

    def __init__(self, inner: Any, capture: RequestCapture, slot: int) -> None:
        self._inner = inner
        self._capture = capture
        self._slot = slot
        self._parts: list[bytes] = []
        self._first: float | None = None
        self._done = False

    def _part(self, chunk: bytes) -> bytes:
        if self._first is None:
            self._first = time.time()
        self._parts.append(chunk)
        return chunk

    def _finish(self) -> None:
        if not self._done:
            self._done = True
            self._capture._answered(self._slot, b"".join(self._parts), self._first)

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._inner:
            yield self._part(chunk)
        self._finish()

    async def __aiter__(self) -> Any:
        async for chunk in self._inner:
            yield self._part(chunk)
        self._finish()

    def close(self) -> None:
        self._finish()
        close = getattr(self._inner, "close", None)
        if close is not None:
            close()

    async def aclose(self) -> None:
        self._finish()
        aclose = getattr(self._inner, "aclose", None)
        if aclose is not None:
            await aclose()


def _wrap_stream(mod: ModuleType, response: Any, tee: _Tee) -> None:
    """Make ``response`` stream through ``tee`` (sync and async in one class per package)."""
    base = (mod.SyncByteStream, mod.AsyncByteStream)
    cls = _stream_classes.get(mod.__name__)
    if cls is None:

        class TeeStream(*base):  # type: ignore[misc]
            def __init__(self, tee: _Tee) -> None:
                self.tee = tee

            def __iter__(self) -> Iterator[bytes]:
                return iter(self.tee)

            def __aiter__(self) -> Any:
                return self.tee.__aiter__()

            def close(self) -> None:
                self.tee.close()

            async def aclose(self) -> None:
                await self.tee.aclose()

        cls = _stream_classes[mod.__name__] = TeeStream
    response.stream = cls(tee)


_stream_classes: dict[str, type[Any]] = {}
_wrapper_classes: dict[str, type[Any]] = {}


def _wrapper_class(mod: ModuleType) -> type[Any]:
    cls = _wrapper_classes.get(mod.__name__)
    if cls is None:

        class CapturingTransport(mod.BaseTransport, mod.AsyncBaseTransport):  # type: ignore[name-defined,misc]
            """Records each request and its answer, handing both on unchanged."""

            def __init__(self, inner: Any, capture: RequestCapture) -> None:
                self.inner = inner
                self.capture = capture

            def handle_request(self, request: Any) -> Any:
                request.read()
                slot = self.capture._sent(request)
                response = self.inner.handle_request(request)
                self.capture._receiving(mod, slot, response)
                return response

            async def handle_async_request(self, request: Any) -> Any:
                await request.aread()
                slot = self.capture._sent(request)
                response = await self.inner.handle_async_request(request)
                self.capture._receiving(mod, slot, response)
                return response

            def close(self) -> None:
                self.inner.close()

            async def aclose(self) -> None:
                await self.inner.aclose()

        cls = _wrapper_classes[mod.__name__] = CapturingTransport
    return cls


class RequestCapture:
    """The requests an agent sent and the answers it got, in order (``capture.requests``)."""

    def __init__(self) -> None:
        self.requests: list[CapturedRequest] = []
        self._lock = threading.Lock()
        self._secrets: dict[int, KnownSecrets] = {}
        """What each request's credential headers presented (by position in ``requests``)."""

    # -- recording --------------------------------------------------------------------------

    def _sent(self, request: Any) -> int:
        known = KnownSecrets(credentials_of(request.headers.multi_items()))
        captured = CapturedRequest(
            method=request.method,
            url=str(request.url),
            headers=tuple(scrub_headers(request.headers.multi_items(), known)),
            content=bytes(request.content),
            started=time.time(),
        )
        with self._lock:
            self.requests.append(captured)
            slot = len(self.requests) - 1
            self._secrets[slot] = known
            return slot

    def _known(self, slot: int) -> KnownSecrets:
        return self._secrets.get(slot, _NO_SECRETS)

    def _receiving(self, mod: ModuleType, slot: int, response: Any) -> None:
        with self._lock:
            self.requests[slot] = replace(
                self.requests[slot],
                status=response.status_code,
                response_headers=tuple(
                    scrub_headers(response.headers.multi_items(), self._known(slot))
                ),
            )
        if getattr(response, "is_stream_consumed", False) or getattr(response, "_content", None):
            self._answered(slot, bytes(response.content), None)
            return
        _wrap_stream(mod, response, _Tee(response.stream, self, slot))

    def _answered(self, slot: int, data: bytes, first_byte: float | None) -> None:
        text = scrub_text(data.decode("utf-8", "replace"), self._known(slot))
        with self._lock:
            if slot < len(self.requests):
                self.requests[slot] = replace(
                    self.requests[slot],
                    response_text=text,
                    first_byte=first_byte,
                    finished=time.time(),
                )

    # -- ways in ----------------------------------------------------------------------------

    def transport(self, inner: Any) -> Any:
        """A transport that captures every request and answer, then hands them on.

        ``inner`` is any ``httpx`` or ``httpx2`` transport (``HTTPTransport``,
        ``AsyncHTTPTransport``, ``MockTransport``, …); the wrapper belongs to the same package.
        """
        return _wrapper_class(_module_of(inner))(inner, self)

    def install(self, client: Any) -> Any:
        """Add request and response event hooks to an ``httpx``/``httpx2`` client (sync or
        async); returns it. Event hooks see the request as the client built it."""
        mod = _module_of(client)
        hooks = client.event_hooks
        slots: dict[int, int] = {}
        if isinstance(client, mod.AsyncClient):

            async def on_request(request: Any) -> None:
                await request.aread()
                slots[id(request)] = self._sent(request)

            async def on_response(response: Any) -> None:
                slot = slots.pop(id(response.request), None)
                if slot is not None:
                    self._receiving(mod, slot, response)

        else:

            def on_request(request: Any) -> None:  # type: ignore[misc]
                request.read()
                slots[id(request)] = self._sent(request)

            def on_response(response: Any) -> None:  # type: ignore[misc]
                slot = slots.pop(id(response.request), None)
                if slot is not None:
                    self._receiving(mod, slot, response)

        hooks["request"] = [*hooks.get("request", []), on_request]
        hooks["response"] = [*hooks.get("response", []), on_response]
        client.event_hooks = hooks
        return client

    # -- reading ----------------------------------------------------------------------------

    def chat_requests(self) -> list[CapturedRequest]:
        """Only the chat requests (JSON bodies with ``messages``), in order."""
        return [r for r in self.requests if r.is_chat]

    def _records(self) -> list[dict[str, Any]]:
        """Each request as a ``dsh-trace`` record, scrubbed by the one rule (its own
        credentials in every spelling, key shapes, credential fields and query parameters)."""
        out = []
        for slot, request in enumerate(self.requests):
            known = self._known(slot)
            record = request.to_trace_record()
            record["url"] = scrub_url(record["url"], known)
            out.append(scrub_json(record, known))
        return out

    def to_trace(self) -> Trace:
        """The capture as a :class:`~dsh_testkit.traces.Trace` (what the doctor reads)."""
        return records_trace(
            [(i + 1, record) for i, record in enumerate(self._records())],
            source="capture",
            scrubbed=True,
        )

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()
            self._secrets.clear()

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the capture to a ``dsh-trace`` file (credentials stay redacted).

        Any tool that reads traces takes the file (``dsh-testkit cache-report FILE``);
        :meth:`load` reads it back request for request, body bytes and answers included.
        """
        with TraceWriter(path, source="capture") as writer:
            for index, record in enumerate(self._records()):
                writer.append({"index": index, **record})

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> RequestCapture:
        """The capture :meth:`save` wrote; :class:`~dsh_testkit.traces.TraceError` otherwise."""
        from .traces import TraceError
        from .traces._file import read_trace_lines

        name = os.fspath(path)
        with open(name, encoding="utf-8") as file:
            header, records, _ = read_trace_lines(file.read(), path=name)
        if header.get("source") != "capture":
            raise TraceError(
                f"a {header.get('source')!r} trace, not a saved capture; read it with "
                "dsh_testkit.traces.load_trace",
                path=name,
            )
        capture = cls()
        for number, record in records:
            try:
                text = record.get("requestText")
                if text is None:
                    text = json.dumps(record["request"], ensure_ascii=False, separators=(",", ":"))
                response_text = record.get("responseText")
                capture.requests.append(
                    CapturedRequest(
                        method=str(record["method"]),
                        url=str(record["url"]),
                        headers=tuple((str(k), str(v)) for k, v in record["headers"]),
                        content=text.encode("utf-8", "surrogateescape"),
                        started=record.get("started"),
                        status=record.get("status"),
                        response_text=response_text if isinstance(response_text, str) else None,
                        first_byte=record.get("firstByte"),
                        finished=record.get("finished"),
                    )
                )
            except (KeyError, TypeError, ValueError) as exc:
                raise TraceError(
                    f"line {number}: not a captured request ({type(exc).__name__}: {exc})",
                    path=name,
                ) from None
        return capture

    def __len__(self) -> int:
        return len(self.requests)

    def __iter__(self) -> Iterator[CapturedRequest]:
        return iter(list(self.requests))

    @overload
    def __getitem__(self, index: int) -> CapturedRequest: ...
    @overload
    def __getitem__(self, index: slice) -> list[CapturedRequest]: ...
    def __getitem__(self, index: int | slice) -> CapturedRequest | list[CapturedRequest]:
        return self.requests[index]


_SYNC = ("HTTPTransport", "MockTransport", "WSGITransport")
_ASYNC = ("AsyncHTTPTransport", "MockTransport", "ASGITransport")


@contextmanager
def capture_requests() -> Iterator[RequestCapture]:
    """Capture every request (and answer) any ``httpx``/``httpx2`` client sends inside the block.

    For agents that build their own clients: the standard transports of both packages are
    patched for the duration (requests still go where they were going).
    """
    capture = RequestCapture()
    patches = []
    for name in ("httpx", "httpx2"):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        for cls_name in _SYNC:
            cls = getattr(mod, cls_name, None)
            if cls is not None:
                patches.append(
                    mock.patch.object(cls, "handle_request", _sync_hook(capture, mod, cls))
                )
        for cls_name in _ASYNC:
            cls = getattr(mod, cls_name, None)
            if cls is not None:
                patches.append(
                    mock.patch.object(cls, "handle_async_request", _async_hook(capture, mod, cls))
                )
    for patch in patches:
        patch.start()
    try:
        yield capture
    finally:
        for patch in reversed(patches):
            patch.stop()


def _sync_hook(capture: RequestCapture, mod: ModuleType, cls: type[Any]) -> Any:
    original = cls.handle_request

    def handle_request(transport: Any, request: Any) -> Any:
        request.read()
        slot = capture._sent(request)
        response = original(transport, request)
        capture._receiving(mod, slot, response)
        return response

    return handle_request


def _async_hook(capture: RequestCapture, mod: ModuleType, cls: type[Any]) -> Any:
    original = cls.handle_async_request

    async def handle_async_request(transport: Any, request: Any) -> Any:
        await request.aread()
        slot = capture._sent(request)
        response = await original(transport, request)
        capture._receiving(mod, slot, response)
        return response

    return handle_async_request
