"""The one interception of httpx / httpx2 transports: the cassette's record/replay and any
other layer (the pytest plugin's live-call routing) composed behind one patch per method.

Why not vcrpy's own httpx stubs: on playback they rebuild every response with
``httpx.ByteStream(body)``, a stream that yields the whole body as ONE chunk. An SSE response
replayed that way still parses, but its event boundaries are gone, so a client that reacts per
chunk (a streaming UI, a stall detector, a parser's framing edge cases) sees a different stream
than it saw live. The cassette layer (:class:`CassetteLayer`) keeps vcrpy for everything else
(cassette, matching, record modes, hooks, persistence) and differs in three places only:

- playback returns a stream that yields the recorded chunks one by one (one per SSE event) to
  sync and async clients alike;
- a request with no recording raises :class:`~dsh_testkit.cassettes.CassetteMismatch` naming the closest
  recording and the first differing field, instead of vcrpy's generic message;
- a request the user's ``before_record_request`` hook leaves out goes to its target unrecorded.

**One interception point.** :func:`intercepting` installs a layer; while any layer is active,
``handle_request`` / ``handle_async_request`` of ``HTTPTransport``, ``AsyncHTTPTransport``,
``MockTransport``, ``WSGITransport`` and ``ASGITransport`` of both ``httpx`` and ``httpx2`` (the
fork the openai and anthropic SDKs use) are patched exactly once, whatever the number of layers:
the patched method (``__wrapped__``: the class's own) runs the layers, the latest installed
first, each handing the request on to the next (``send``) and the last to the transport itself.
A pytest cassette test is then one patch per transport method (the cassette over the plugin's
routing to the mock) on top of the plugin's socket guard. A client with a transport class of its
own is not intercepted.

Layers are process-wide, as vcrpy's patches are: a layer sees the requests of every thread and
task while it is active (the routing must catch a live call wherever it starts). They may leave
in any order, from any thread; the classes get their own methods back when the last one leaves.
"""

from __future__ import annotations

import functools
import importlib
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import ExitStack, contextmanager
from types import ModuleType
from typing import Any, Protocol

from dsh_core.providers._sse import split_events

from ._format import is_event_stream, response_chunks

__all__ = ["AsyncSend", "CassetteLayer", "Send", "TransportLayer", "intercepting"]

_SYNC = ("HTTPTransport", "MockTransport", "WSGITransport")
_ASYNC = ("AsyncHTTPTransport", "MockTransport", "ASGITransport")

Send = Callable[[Any], Any]
"""Hands a request on to the next layer (the last: the transport itself); returns the response."""
AsyncSend = Callable[[Any], Awaitable[Any]]


class TransportLayer(Protocol):
    """One layer of the interception: sees each request before the layers installed earlier and
    the transport, and answers it or hands it on with ``send``. ``mod`` is the client library
    (``httpx`` or ``httpx2``), whose types the answer must be built from."""

    def handle(self, mod: ModuleType, transport: Any, request: Any, send: Send) -> Any: ...

    async def handle_async(
        self, mod: ModuleType, transport: Any, request: Any, send: AsyncSend
    ) -> Any: ...


_layers: list[TransportLayer] = []
"""The active layers, oldest first (the latest runs first)."""
_patches: ExitStack | None = None
_lock = threading.Lock()


def _sync_method(mod: ModuleType, original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def handle_request(transport: Any, request: Any) -> Any:
        __tracebackhide__ = True  # a failing test's traceback would print the raw body
        chain = tuple(_layers)

        def send_from(index: int) -> Send:
            if index < 0:
                return functools.partial(original, transport)
            return lambda r: chain[index].handle(mod, transport, r, send_from(index - 1))

        return send_from(len(chain) - 1)(request)

    return handle_request


def _async_method(mod: ModuleType, original: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
    @functools.wraps(original)
    async def handle_async_request(transport: Any, request: Any) -> Any:
        __tracebackhide__ = True  # a failing test's traceback would print the raw body
        chain = tuple(_layers)

        def send_from(index: int) -> AsyncSend:
            if index < 0:
                return functools.partial(original, transport)
            return lambda r: chain[index].handle_async(mod, transport, r, send_from(index - 1))

        return await send_from(len(chain) - 1)(request)

    return handle_async_request


def _install() -> ExitStack:
    from unittest import mock

    stack = ExitStack()
    for name in ("httpx", "httpx2"):
        try:
            mod = importlib.import_module(name)
        except ImportError:
            continue
        for method, classes, wrap in (
            ("handle_request", _SYNC, _sync_method),
            ("handle_async_request", _ASYNC, _async_method),
        ):
            for cls_name in classes:
                cls = getattr(mod, cls_name, None)
                if cls is not None and method in vars(cls):
                    patched = wrap(mod, getattr(cls, method))
                    stack.enter_context(mock.patch.object(cls, method, patched))
    return stack


@contextmanager
def intercepting(layer: TransportLayer) -> Iterator[None]:
    """While active, ``layer`` sees every request of the httpx / httpx2 transports (see the
    module docstring). Layers nest: the first one installs the patches, the last one to leave
    removes them."""
    global _patches
    with _lock:
        if not _layers:
            _patches = _install()
        _layers.append(layer)
    try:
        yield
    finally:
        with _lock:
            _layers.remove(layer)
            if not _layers and _patches is not None:
                _patches.close()
                _patches = None


_stream_classes: dict[str, type[Any]] = {}


def _chunk_stream(mod: ModuleType, chunks: list[bytes]) -> Any:
    """A response stream of ``mod`` (httpx or httpx2) yielding ``chunks`` one by one."""
    cls = _stream_classes.get(mod.__name__)
    if cls is None:

        class ChunkStream(mod.SyncByteStream, mod.AsyncByteStream):  # type: ignore[name-defined,misc]
            """Yields recorded chunks one at a time, to sync and async readers."""

            def __init__(self, parts: list[bytes]) -> None:
                self._parts = parts

            def __iter__(self) -> Any:
                yield from self._parts

            async def __aiter__(self) -> Any:
                for part in self._parts:
                    yield part

        cls = _stream_classes[mod.__name__] = ChunkStream
    return cls(chunks)


def _live_chunks(headers: Any, content: bytes) -> list[bytes]:
    """How a just-recorded body is handed on: per SSE event, exactly as replay will."""
    if content and is_event_stream(dict(headers)) and "content-encoding" not in headers:
        try:
            return [e.encode("utf-8") for e in split_events(content.decode("utf-8"))]
        except UnicodeDecodeError:
            pass
    return [content] if content else []


def _relayed(mod: ModuleType, response: Any, content: bytes) -> Any:
    """A fresh response carrying what was just recorded, chunked exactly as replay will."""
    return mod.Response(
        response.status_code,
        headers=response.headers,
        stream=_chunk_stream(mod, _live_chunks(response.headers, content)),
        extensions=response.extensions,
    )


def _multi_headers(headers: Any) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, value in headers.multi_items():
        out.setdefault(name, []).append(value)
    return out


class CassetteLayer:
    """The cassette's layer: ``handler`` (the :class:`~dsh_testkit.cassettes.Cassette`) decides
    play / record / pass / fail; recording sends the request on and keeps what comes back."""

    def __init__(self, handler: Any) -> None:
        self._handler = handler

    def _replayed(self, mod: ModuleType, response: dict[str, Any]) -> Any:
        status = response["status"]
        message = status.get("message")
        headers = [(k, v) for k, values in response["headers"].items() for v in values]
        return mod.Response(
            status["code"],
            headers=headers,
            stream=_chunk_stream(mod, response_chunks(response)),
            extensions={"reason_phrase": message.encode("ascii")} if message else None,
        )

    def handle(self, mod: ModuleType, transport: Any, request: Any, send: Send) -> Any:
        __tracebackhide__ = True  # a failing test's traceback would print the raw body
        handler = self._handler
        body = request.read()
        decision, payload = handler.decide(request, body)
        if decision == "play":
            return self._replayed(mod, payload)
        if decision == "pass":  # left out of the cassette by the user's hook
            return send(request)
        response = send(request)
        try:
            content = b"".join(response.stream)
        finally:
            response.stream.close()
        handler.record(
            payload,
            response.status_code,
            response.reason_phrase,
            _multi_headers(response.headers),
            content,
        )
        return _relayed(mod, response, content)

    async def handle_async(
        self, mod: ModuleType, transport: Any, request: Any, send: AsyncSend
    ) -> Any:
        __tracebackhide__ = True  # a failing test's traceback would print the raw body
        handler = self._handler
        body = await request.aread()
        decision, payload = handler.decide(request, body)
        if decision == "play":
            return self._replayed(mod, payload)
        if decision == "pass":  # left out of the cassette by the user's hook
            return await send(request)
        response = await send(request)
        try:
            content = b"".join([part async for part in response.stream])
        finally:
            await response.stream.aclose()
        handler.record(
            payload,
            response.status_code,
            response.reason_phrase,
            _multi_headers(response.headers),
            content,
        )
        return _relayed(mod, response, content)
