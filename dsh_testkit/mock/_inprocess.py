"""The in-process transport: the mock as an ``httpx.MockTransport`` handler.

:class:`MockHandler` is a plain callable ``request → response``, so it plugs into
``httpx.MockTransport`` and ``httpx2.MockTransport`` alike (the official openai/anthropic SDKs use
``httpx2``), for sync and async clients, and into respx (:func:`respx_route`). It speaks each
library's own types: the response, and the exceptions a fault raises — a reset or a mid-body
hang-up is ``RemoteProtocolError``, a stall is ``ReadTimeout`` — are built from the module the
request came from.

Timing: pauses really wait (``time.sleep`` in sync iteration, ``asyncio.sleep`` in async
iteration). A stall or hang cannot wait for a socket timeout that does not exist in process; it
waits ``stall_seconds`` (default 0) and then raises ``ReadTimeout``, as the client's read timeout
would have.
"""

from __future__ import annotations

import asyncio
import sys
import time
import types
from collections.abc import AsyncIterator, Iterator
from typing import Any

from ._model import MockDeepSeek
from ._plan import Emit, Hangup, HttpRequest, Pause, ResponsePlan, Stall

__all__ = ["DEFAULT_BASE_URL", "MockHandler", "mock_transport", "respx_route"]

DEFAULT_BASE_URL = "https://api.deepseek.com"

_RESET_MESSAGE = "Server disconnected without sending a response."
_HANGUP_MESSAGE = (
    "peer closed connection without sending complete message body (incomplete chunked read)"
)
_STALL_MESSAGE = "The read operation timed out"

_stream_types: dict[str, type[Any]] = {}


def _module_of(request: Any) -> types.ModuleType:
    """``httpx`` or ``httpx2`` (or any library with httpx's API): the request's own package."""
    return sys.modules[type(request).__module__.split(".", 1)[0]]


def _stream_type(module: types.ModuleType) -> type[Any]:
    cached = _stream_types.get(module.__name__)
    if cached is not None:
        return cached

    class PlanStream(module.SyncByteStream, module.AsyncByteStream):  # type: ignore[misc,name-defined]
        """A response body that carries out a plan's actions as it is read."""

        def __init__(self, plan: ResponsePlan, request: Any, stall_seconds: float) -> None:
            self._plan = plan
            self._request = request
            self._stall = stall_seconds

        def _fault(self, action: Hangup | Stall) -> Exception:
            if isinstance(action, Hangup):
                return module.RemoteProtocolError(_HANGUP_MESSAGE, request=self._request)  # type: ignore[no-any-return]
            return module.ReadTimeout(_STALL_MESSAGE, request=self._request)  # type: ignore[no-any-return]

        def __iter__(self) -> Iterator[bytes]:
            last = self._plan.last_write
            try:
                for index, action in enumerate(self._plan.body):
                    if isinstance(action, Emit):
                        if index == last:
                            self._plan.complete()  # recorded before the end can be read
                        yield action.data
                    elif isinstance(action, Pause):
                        time.sleep(action.seconds)
                    else:
                        if isinstance(action, Stall) and self._stall:
                            time.sleep(self._stall)
                        raise self._fault(action)
            finally:
                self._plan.complete()

        async def __aiter__(self) -> AsyncIterator[bytes]:
            last = self._plan.last_write
            try:
                for index, action in enumerate(self._plan.body):
                    if isinstance(action, Emit):
                        if index == last:
                            self._plan.complete()  # recorded before the end can be read
                        yield action.data
                    elif isinstance(action, Pause):
                        await asyncio.sleep(action.seconds)
                    else:
                        if isinstance(action, Stall) and self._stall:
                            await asyncio.sleep(self._stall)
                        raise self._fault(action)
            finally:
                self._plan.complete()

    _stream_types[module.__name__] = PlanStream
    return PlanStream


class MockHandler:
    """``handler(request) → response`` for ``httpx.MockTransport`` / ``httpx2.MockTransport``.

    ``stall_seconds``: how long a scripted stall or hang waits before ``ReadTimeout`` (a hang
    waits with ``time.sleep`` even under an async client: keep it short).
    """

    def __init__(self, mock: MockDeepSeek, *, stall_seconds: float = 0.0) -> None:
        self.mock = mock
        self.stall_seconds = stall_seconds

    def __repr__(self) -> str:
        return f"MockHandler(stall_seconds={self.stall_seconds})"

    def __call__(self, request: Any) -> Any:
        module = _module_of(request)
        url = request.url
        path = url.raw_path.decode("ascii", errors="replace")
        body = request.read()  # already read by MockTransport; a no-op then
        plan = self.mock.handle(
            HttpRequest.build(
                request.method,
                path,
                headers=[(k, v) for k, v in request.headers.multi_items()],
                body=body,
                received=time.time(),
            )
        )
        if plan.abort is not None:
            plan.complete()
        if plan.abort == "reset":
            raise module.RemoteProtocolError(_RESET_MESSAGE, request=request)
        if plan.abort == "hang":
            if self.stall_seconds:
                time.sleep(self.stall_seconds)
            raise module.ReadTimeout(_STALL_MESSAGE, request=request)
        headers = list(plan.headers)
        if plan.framing == "length":
            headers.append(("content-length", str(plan.declared_length)))
        stream = _stream_type(module)(plan, request, self.stall_seconds)
        return module.Response(plan.status, headers=headers, stream=stream, request=request)


def mock_transport(
    mock: MockDeepSeek, *, module: types.ModuleType | None = None, stall_seconds: float = 0.0
) -> Any:
    """``module.MockTransport(MockHandler(mock))`` — ``module`` is ``httpx`` (default) or
    ``httpx2``. Works for sync and async clients."""
    if module is None:
        import httpx

        module = httpx
    return module.MockTransport(MockHandler(mock, stall_seconds=stall_seconds))


def respx_route(
    router: Any, mock: MockDeepSeek, *, base_url: str = DEFAULT_BASE_URL, stall_seconds: float = 0.0
) -> Any:
    """Route every request under ``base_url`` of a respx ``router`` (or the ``respx`` module's
    global router) to the mock; returns the route (its ``.calls`` record what was sent)."""
    prefix = base_url.rstrip("/") + "/"
    return router.route(url__startswith=prefix).mock(
        side_effect=MockHandler(mock, stall_seconds=stall_seconds)
    )
