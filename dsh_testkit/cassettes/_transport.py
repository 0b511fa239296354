"""The httpx / httpx2 transport patches that record into and replay from a vcrpy cassette.

Why not vcrpy's own httpx stubs: on playback they rebuild every response with
``httpx.ByteStream(body)``, a stream that yields the whole body as ONE chunk. An SSE response
replayed that way still parses, but its event boundaries are gone, so a client that reacts per
chunk (a streaming UI, a stall detector, a parser's framing edge cases) sees a different stream
than it saw live. These patches keep vcrpy for everything else (cassette, matching, record
modes, hooks, persistence) and differ in two places only:

- playback returns a stream that yields the recorded chunks one by one (one per SSE event) to
  sync and async clients alike;
- a request with no recording raises :class:`~dsh_testkit.cassettes.CassetteMismatch` naming the closest
  recording and the first differing field, instead of vcrpy's generic message;
- a request the user's ``before_record_request`` hook leaves out goes to its target unrecorded.

The patched classes are ``HTTPTransport``, ``AsyncHTTPTransport``, ``MockTransport``,
``WSGITransport`` and ``ASGITransport`` of both ``httpx`` and ``httpx2`` (the fork the openai
and anthropic SDKs use). A client with a transport class of its own is not intercepted.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from types import ModuleType
from typing import Any
from unittest import mock

from ._format import is_event_stream, response_chunks, split_sse

__all__ = ["TransportPatches"]

_SYNC = ("HTTPTransport", "MockTransport", "WSGITransport")
_ASYNC = ("AsyncHTTPTransport", "MockTransport", "ASGITransport")

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
            return [e.encode("utf-8") for e in split_sse(content.decode("utf-8"))]
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


class TransportPatches:
    """Installs the patches for one cassette use; ``handler`` decides play / record / fail."""

    def __init__(self, handler: Any) -> None:
        self._handler = handler

    def install(self, stack: ExitStack) -> None:
        for name in ("httpx", "httpx2"):
            try:
                mod = importlib.import_module(name)
            except ImportError:
                continue
            for cls_name in _SYNC:
                cls = getattr(mod, cls_name, None)
                if cls is not None and hasattr(cls, "handle_request"):
                    patched = self._sync(mod, cls.handle_request)
                    stack.enter_context(mock.patch.object(cls, "handle_request", patched))
            for cls_name in _ASYNC:
                cls = getattr(mod, cls_name, None)
                if cls is not None and hasattr(cls, "handle_async_request"):
                    patched_async = self._async(mod, cls.handle_async_request)
                    stack.enter_context(
                        mock.patch.object(cls, "handle_async_request", patched_async)
                    )

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

    def _sync(self, mod: ModuleType, original: Callable[..., Any]) -> Callable[..., Any]:
        handler = self._handler

        def handle_request(transport: Any, request: Any) -> Any:
            __tracebackhide__ = True  # a failing test's traceback would print the raw body
            body = request.read()
            decision, payload = handler.decide(request, body)
            if decision == "play":
                return self._replayed(mod, payload)
            if decision == "pass":  # left out of the cassette by the user's hook
                return original(transport, request)
            response = original(transport, request)
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

        return handle_request

    def _async(
        self, mod: ModuleType, original: Callable[..., Awaitable[Any]]
    ) -> Callable[..., Awaitable[Any]]:
        handler = self._handler

        async def handle_async_request(transport: Any, request: Any) -> Any:
            __tracebackhide__ = True  # a failing test's traceback would print the raw body
            body = await request.aread()
            decision, payload = handler.decide(request, body)
            if decision == "play":
                return self._replayed(mod, payload)
            if decision == "pass":  # left out of the cassette by the user's hook
                return await original(transport, request)
            response = await original(transport, request)
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

        return handle_async_request
