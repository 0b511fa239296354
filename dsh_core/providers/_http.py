"""The streaming call both adapters share: send, race reads against cancellation and an idle
watchdog, frame SSE, hand events to a translator, and turn every way a call can fail into one
terminal ``Finish`` chunk.

Nothing here raises for a failed call: HTTP errors, transport errors, timeouts, truncation,
malformed payloads and cancellation all end the stream with ``Finish(kind="error" | "aborted")``,
which the loop logs like any chunk. The API key travels only inside :class:`Secret` and the
request's headers; every failure message is scrubbed of it before it leaves.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Self, TypeVar, cast

import httpx

from .._request import CancelToken, GenerateOptions
from .._stream import Finish, FinishReason, LlmFailure, ProviderError, StreamChunk
from ._failures import classify_http_error, failure
from ._sse import SseEvent, SseParser, SseTruncatedError
from ._wire import WireFormatError

__all__ = [
    "DEFAULT_IDLE_TIMEOUT",
    "EventHandler",
    "Secret",
    "SseProvider",
    "finish_with",
    "resolve_key",
    "stream_sse",
]

T = TypeVar("T")

DEFAULT_IDLE_TIMEOUT = 300.0
"""Seconds a read may wait for bytes (keep-alive comments count) before the call times out."""

_MAX_ERROR_BODY = 64 * 1024

EventHandler = Callable[[SseEvent], tuple[list[StreamChunk], bool]]
"""Translates one SSE event: the chunks to emit, and whether the stream is complete."""


class Secret:
    """A string that never shows itself in ``repr``/``str`` (an API key)."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('********')"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        raise TypeError("an API key is not picklable")


def resolve_key(
    explicit: Secret | None, env_var: str, env: Mapping[str, str] | None
) -> Secret | LlmFailure:
    """The key to use for one call: the explicit one, else ``env_var``; checked, never echoed."""
    if explicit is not None:
        raw, where = explicit.reveal(), "the api_key argument"
    else:
        found = (os.environ if env is None else env).get(env_var)
        if found is None or not found.strip():
            return failure(
                "MISSING_CREDENTIAL",
                f"no API key: pass api_key= or set {env_var} in the environment",
            )
        raw, where = found, env_var
    key = raw.strip()
    if not key or not all("!" <= ch <= "~" for ch in key):
        return failure(
            "INVALID_CREDENTIAL",
            f"the API key from {where} must be printable ASCII without spaces (value not shown)",
        )
    return Secret(key)


def redact(text: str, secret: Secret) -> str:
    """``text`` with every occurrence of the key replaced (a server may echo it back)."""
    return text.replace(secret.reveal(), "[redacted]")


def finish_with(fault: LlmFailure, *, aborted: bool = False) -> Finish:
    return Finish(reason=FinishReason(kind="aborted" if aborted else "error", failure=fault))


def _aborted(cancel: CancelToken | None) -> Finish:
    reason = cancel.reason if cancel is not None and cancel.reason else "cancelled"
    return finish_with(failure("ABORTED", f"request cancelled ({reason})"), aborted=True)


class _Cancelled(Exception):
    pass


class _IdleTimeout(Exception):
    pass


async def _drop(task: asyncio.Future[Any]) -> None:
    """Cancel ``task`` and wait until it has stopped, without re-raising its outcome here.

    Waiting with ``asyncio.wait`` (rather than ``await task`` inside a ``suppress``) keeps the
    task's ``CancelledError`` out of this frame; on CPython 3.11 catching it there also breaks
    line tracing for the rest of the stack (cpython#106749), which hides code from coverage.
    """
    task.cancel()
    await asyncio.wait({task})
    if not task.cancelled():
        task.exception()  # retrieved, so asyncio does not report it as never retrieved


class _Watch:
    """Races each awaited step against the cancel token and the idle watchdog."""

    def __init__(self, cancel: CancelToken | None, idle_timeout: float | None) -> None:
        self.cancel = cancel
        self.idle_timeout = idle_timeout
        self._cancel_task: asyncio.Task[None] | None = (
            asyncio.ensure_future(cancel.wait()) if cancel is not None else None
        )

    async def run(self, step: Awaitable[T]) -> T:
        """``await step``, unless the token fires first (``_Cancelled``) or nothing happens
        for ``idle_timeout`` seconds (``_IdleTimeout``); the step is then cancelled."""
        task: asyncio.Future[T] = asyncio.ensure_future(step)
        waiting: set[asyncio.Future[Any]] = {task}
        if self._cancel_task is not None:
            waiting.add(self._cancel_task)
        try:
            done, _ = await asyncio.wait(
                waiting, timeout=self.idle_timeout, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            if not task.done():
                await _drop(task)
        if task in done:
            return task.result()
        if self._cancel_task is not None and self._cancel_task in done:
            raise _Cancelled
        raise _IdleTimeout

    async def close(self) -> None:
        if self._cancel_task is not None:
            await _drop(self._cancel_task)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Call:
    client: httpx.AsyncClient
    url: str
    headers: Mapping[str, str]
    content: bytes
    api: str
    base_url: str
    handle: EventHandler


def _scrub(fault: LlmFailure, secret: Secret) -> LlmFailure:
    return LlmFailure(
        message=redact(fault.message, secret),
        code=fault.code,
        status=fault.status,
        retryable=fault.retryable,
        retry_after_ms=fault.retry_after_ms,
        request_id=fault.request_id,
    )


def _pieces(response: httpx.Response) -> AsyncGenerator[bytes, None]:
    # httpx types aiter_bytes() as an iterator; it is an async generator, closed explicitly
    # so an early stop never leaves it for the garbage collector.
    return cast(AsyncGenerator[bytes, None], response.aiter_bytes())


async def _read_error_body(response: httpx.Response) -> bytes:
    body = bytearray()
    async with contextlib.aclosing(_pieces(response)) as pieces:
        async for piece in pieces:
            body += piece
            if len(body) >= _MAX_ERROR_BODY:
                break
    return bytes(body[:_MAX_ERROR_BODY])


async def stream_sse(
    *,
    client: httpx.AsyncClient,
    url: str,
    headers: Mapping[str, str],
    content: bytes,
    api: str,
    base_url: str,
    secret: Secret,
    cancel: CancelToken | None,
    idle_timeout: float | None,
    handle: EventHandler,
) -> AsyncGenerator[StreamChunk, None]:
    """One streaming POST; yields translated chunks and always ends with exactly one ``Finish``
    (the inner generators stop right after it). Failure messages are scrubbed of the key."""
    call = _Call(
        client=client,
        url=url,
        headers=headers,
        content=content,
        api=api,
        base_url=base_url,
        handle=handle,
    )
    watch = _Watch(cancel, idle_timeout)
    try:
        async with contextlib.aclosing(_exchange(call, watch)) as chunks:
            async for chunk in chunks:
                if isinstance(chunk, Finish) and chunk.reason.failure is not None:
                    chunk = Finish(
                        reason=FinishReason(
                            kind=chunk.reason.kind, failure=_scrub(chunk.reason.failure, secret)
                        ),
                        replay_state=chunk.replay_state,
                    )
                yield chunk
    finally:
        await watch.close()


async def _exchange(call: _Call, watch: _Watch) -> AsyncGenerator[StreamChunk, None]:
    request = call.client.build_request(
        "POST", call.url, headers=call.headers, content=call.content
    )
    try:
        response = await watch.run(call.client.send(request, stream=True))
    except _Cancelled:
        yield _aborted(watch.cancel)
        return
    except (_IdleTimeout, httpx.TimeoutException):
        yield finish_with(
            failure("TIMEOUT", f"{call.api} request to {call.base_url} timed out before a response")
        )
        return
    except (httpx.HTTPError, OSError) as exc:
        yield finish_with(
            failure(
                "TRANSPORT",
                f"{call.api} request to {call.base_url} failed: {type(exc).__name__}: {exc}",
            )
        )
        return
    try:
        if 200 <= response.status_code < 300:
            async with contextlib.aclosing(_read_stream(call, response, watch)) as chunks:
                async for chunk in chunks:
                    yield chunk
            return
        try:
            body = await watch.run(_read_error_body(response))
        except _Cancelled:
            yield _aborted(watch.cancel)
            return
        except Exception:  # the status says enough when the error body cannot be read
            body = b""
        yield finish_with(
            classify_http_error(response.status_code, body, response.headers, api=call.api)
        )
    finally:
        await response.aclose()


def _closed_failure(call: _Call, parser: SseParser) -> LlmFailure:
    try:
        parser.close()
    except SseTruncatedError as exc:
        return failure(
            "STREAM_CLOSED",
            f"{call.api} stream from {call.base_url} ended inside an event ({exc.pending[:60]!r}) "
            "before the end-of-stream marker; the answer is incomplete",
        )
    return failure(
        "STREAM_CLOSED",
        f"{call.api} stream from {call.base_url} ended before the end-of-stream marker; "
        "the answer is incomplete",
    )


async def _next_piece(
    call: _Call, pieces: AsyncGenerator[bytes, None], watch: _Watch
) -> bytes | Finish | None:
    """The next read (``None`` at end of body), or the ``Finish`` that ends the stream instead."""
    try:
        piece = await watch.run(anext(pieces, None))
    except _Cancelled:
        return _aborted(watch.cancel)
    except (_IdleTimeout, httpx.TimeoutException):
        return finish_with(failure("TIMEOUT", f"{call.api} stream from {call.base_url} went idle"))
    except Exception as exc:  # a reset body, a broken proxy: the stream is gone
        return finish_with(
            failure(
                "TRANSPORT",
                f"{call.api} stream from {call.base_url} failed: {type(exc).__name__}: {exc}",
            )
        )
    return piece


def _translate_piece(
    call: _Call, parser: SseParser, piece: bytes
) -> tuple[list[StreamChunk], bool]:
    """The chunks the events completed by ``piece`` produce, and whether the stream is done."""
    out: list[StreamChunk] = []
    for event in parser.feed(piece):
        try:
            chunks, done = call.handle(event)
        except WireFormatError as exc:
            out.append(
                finish_with(
                    failure("MALFORMED_RESPONSE", f"{call.api} sent a malformed event: {exc}")
                )
            )
            return out, True
        out.extend(chunks)
        if done:
            return out, True
    return out, False


async def _read_stream(
    call: _Call, response: httpx.Response, watch: _Watch
) -> AsyncGenerator[StreamChunk, None]:
    cancel = watch.cancel
    parser = SseParser()
    async with contextlib.aclosing(_pieces(response)) as pieces:
        done = False
        while not done:
            piece = await _next_piece(call, pieces, watch)
            chunks: list[StreamChunk]
            if isinstance(piece, Finish):
                chunks, done = [piece], True
            elif piece is None:
                chunks, done = [finish_with(_closed_failure(call, parser))], True
            else:
                chunks, done = _translate_piece(call, parser, piece)
            for chunk in chunks:
                if cancel is not None and cancel.cancelled:
                    # Cancelled while the consumer held the previous chunk: stop reading here.
                    yield _aborted(cancel)
                    return
                yield chunk


def _user_agent() -> str:
    try:
        from importlib.metadata import version

        return f"dsh-core/{version('dsh-testkit')}"
    except Exception:  # not installed as a distribution (a source checkout)
        return "dsh-core"


USER_AGENT = _user_agent()


class SseProvider:
    """What both adapters share: key and base-URL resolution, the HTTP client, one streaming
    POST per :meth:`stream` call. Subclasses say where to post, which headers, which body, and
    how to translate events."""

    api: ClassVar[str]
    """Names the API in failure messages, e.g. ``DeepSeek API``."""
    default_base_url: ClassVar[str]
    base_url_env: ClassVar[str]
    api_key_env: ClassVar[str] = "DEEPSEEK_API_KEY"
    path: ClassVar[str]
    """Appended to the base URL, e.g. ``/chat/completions``."""

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        client: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        headers: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if client is not None and transport is not None:
            raise ValueError("pass either client= or transport=, not both")
        self._key = Secret(api_key) if api_key is not None else None
        self._base_url = base_url
        self._client = client
        self._owns_client = client is None
        self._transport = transport
        self.idle_timeout = idle_timeout
        """Seconds one read may wait for bytes (keep-alive comments count); None: forever."""
        self._headers = dict(headers or {})
        self._env = env

    def __repr__(self) -> str:
        key = "<set>" if self._key is not None else f"<from ${self.api_key_env}>"
        return f"{type(self).__name__}(base_url={self.base_url!r}, api_key={key})"

    @property
    def base_url(self) -> str:
        """The explicit base URL, else the environment's, else the default (no trailing /)."""
        env = os.environ if self._env is None else self._env
        return (self._base_url or env.get(self.base_url_env) or self.default_base_url).rstrip("/")

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                transport=self._transport, timeout=httpx.Timeout(None, connect=30.0)
            )
        return self._client

    async def aclose(self) -> None:
        """Close the provider's own client (a client passed in is left open)."""
        if self._owns_client and self._client is not None:
            await self._client.aclose()
            self._client = None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def request_headers(self, options: GenerateOptions, key: Secret) -> dict[str, str]:
        raise NotImplementedError

    def encode(self, options: GenerateOptions) -> bytes:
        raise NotImplementedError

    def new_handler(self) -> EventHandler:
        raise NotImplementedError

    def _extra_headers(self, options: GenerateOptions) -> dict[str, str]:
        headers = {"user-agent": USER_AGENT}
        if options.session_id is not None:
            headers["x-deepseek-harness-session-id"] = options.session_id
        if options.purpose == "compaction":
            headers["x-deepseek-harness-compact"] = "1"
        headers.update(self._headers)
        return headers

    async def stream(self, options: GenerateOptions) -> AsyncIterator[StreamChunk]:
        """The chunks of one call; always ends with exactly one ``Finish``."""
        if options.cancel is not None and options.cancel.cancelled:
            yield _aborted(options.cancel)
            return
        key = resolve_key(self._key, self.api_key_env, self._env)
        if isinstance(key, LlmFailure):
            yield finish_with(key)
            return
        try:
            content = self.encode(options)
        except ProviderError as exc:
            yield finish_with(exc.failure)
            return
        base = self.base_url
        call = stream_sse(
            client=self._http(),
            url=base + self.path,
            headers=self.request_headers(options, key),
            content=content,
            api=self.api,
            base_url=base,
            secret=key,
            cancel=options.cancel,
            idle_timeout=self.idle_timeout,
            handle=self.new_handler(),
        )
        # Closing this stream early (a consumer that stops reading) must close the response now,
        # not when the garbage collector finalizes the inner generators.
        async with contextlib.aclosing(call) as chunks:
            async for chunk in chunks:
                yield chunk
