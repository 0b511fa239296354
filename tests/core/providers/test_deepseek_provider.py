"""DeepSeekProvider over httpx.MockTransport: wire, HTTP failures, transport faults, truncation,
timeouts, cancellation, and the API key never leaking."""

from __future__ import annotations

import asyncio
import json
import pickle
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from dsh_core import CancelToken, Finish, LlmFailure, Provider, ProviderError, TextBlock, TokenUsage
from dsh_core._assembly import BlockAssembler
from dsh_core.providers import DeepSeekProvider
from dsh_core.providers._http import Secret
from dsh_core.providers.deepseek import encode_request

from ._helpers import API_KEY, USAGE, collect, delta, hello_body, kinds, options, sse, streaming


def provider(transport: httpx.AsyncBaseTransport, **kwargs: Any) -> DeepSeekProvider:
    kwargs.setdefault("api_key", API_KEY)
    kwargs.setdefault("env", {})
    return DeepSeekProvider(transport=transport, **kwargs)


async def run(p: DeepSeekProvider, **overrides: Any) -> list[Any]:
    async with p:
        return await collect(p.stream(options(**overrides)))


def failure_of(chunks: list[Any]) -> LlmFailure:
    finish = chunks[-1]
    assert isinstance(finish, Finish)
    assert finish.reason.failure is not None
    return finish.reason.failure


def test_it_is_a_provider() -> None:
    assert isinstance(DeepSeekProvider(api_key="k"), Provider)


async def test_success_end_to_end_and_the_request_on_the_wire() -> None:
    seen: list[httpx.Request] = []
    opts = options(session_id="s-1", purpose="compaction")
    async with provider(streaming(hello_body(), seen=seen)) as p:
        chunks = await collect(p.stream(opts))
    assembler = BlockAssembler()
    for chunk in chunks:
        assembler.feed(chunk)
    assert assembler.blocks() == (TextBlock(text="hello"),)
    assert assembler.usage == TokenUsage(
        input_tokens=50, output_tokens=85, cache_read_tokens=256, reasoning_tokens=31
    )
    assert kinds(chunks) == ["block-start", "text-delta", "block-end", "usage", "finish"]
    (request,) = seen
    assert request.method == "POST"
    assert str(request.url) == "https://api.deepseek.com/chat/completions"
    assert request.content == encode_request(opts)
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["accept"] == "text/event-stream"
    assert request.headers["user-agent"].startswith("dsh-core")
    assert request.headers["x-deepseek-harness-session-id"] == "s-1"
    assert request.headers["x-deepseek-harness-compact"] == "1"


async def test_optional_headers_absent_and_extra_headers_added() -> None:
    seen: list[httpx.Request] = []
    await run(provider(streaming(hello_body(), seen=seen), headers={"x-extra": "1"}))
    headers = seen[0].headers
    assert "x-deepseek-harness-session-id" not in headers
    assert "x-deepseek-harness-compact" not in headers
    assert headers["x-extra"] == "1"


async def test_keep_alive_comments_before_the_answer() -> None:
    body = b": keep-alive\n\n" * 3 + hello_body()
    chunks = await run(provider(streaming(body, size=3)))
    assert isinstance(chunks[-1], Finish) and chunks[-1].reason.kind == "stop"


@pytest.mark.parametrize(
    ("base_url", "env", "expected"),
    [
        ("http://127.0.0.1:9/v1/", {}, "http://127.0.0.1:9/v1/chat/completions"),
        (None, {"DEEPSEEK_BASE_URL": "http://127.0.0.1:8/"}, "http://127.0.0.1:8/chat/completions"),
        (None, {}, "https://api.deepseek.com/chat/completions"),
    ],
)
async def test_base_url_resolution(
    base_url: str | None, env: dict[str, str], expected: str
) -> None:
    seen: list[httpx.Request] = []
    await run(provider(streaming(hello_body(), seen=seen), base_url=base_url, env=env))
    assert str(seen[0].url) == expected


async def test_an_injected_client_is_used_and_left_open() -> None:
    seen: list[httpx.Request] = []
    async with httpx.AsyncClient(transport=streaming(hello_body(), seen=seen)) as client:
        p = DeepSeekProvider(api_key=API_KEY, client=client, env={})
        await collect(p.stream(options()))
        await p.aclose()
        assert not client.is_closed
    assert len(seen) == 1


async def test_client_and_transport_together_are_refused() -> None:
    async with httpx.AsyncClient() as client:
        with pytest.raises(ValueError, match="either client= or transport="):
            DeepSeekProvider(client=client, transport=streaming(b""))


def error_body(
    message: str, type_: str = "invalid_request_error", code: str = "invalid_request_error"
) -> bytes:
    return json.dumps(
        {"error": {"message": message, "type": type_, "param": None, "code": code}}
    ).encode()


@pytest.mark.parametrize(
    ("status", "body", "headers", "code", "retryable", "retry_after"),
    [
        (400, error_body("Model Not Exist"), {}, "INVALID_REQUEST", False, None),
        (
            400,
            error_body(
                "This model's maximum context length is 1048576 tokens",
                code="context_length_exceeded",
            ),
            {},
            "CONTEXT_WINDOW_EXCEEDED",
            False,
            None,
        ),
        (
            401,
            error_body(
                "Authentication Fails, Your api key: ****cdef is invalid", "authentication_error"
            ),
            {},
            "AUTH",
            False,
            None,
        ),
        (402, error_body("Insufficient Balance", "unknown_error"), {}, "QUOTA", False, None),
        (
            422,
            b"Failed to deserialize the JSON body into the target type: messages[0].content: invalid type",
            {"content-type": "text/plain"},
            "INVALID_REQUEST",
            False,
            None,
        ),
        (
            429,
            error_body("Rate Limit Reached", "rate_limit_error"),
            {"retry-after": "3"},
            "RATE_LIMIT",
            True,
            3000,
        ),
        (
            429,
            error_body("You exceeded your current quota", code="insufficient_quota"),
            {},
            "QUOTA",
            False,
            None,
        ),
        (500, error_body("Server Error", "server_error"), {}, "SERVER", True, None),
        (503, b"", {"retry-after": "0"}, "SERVER", True, None),
        (418, b"<html>teapot</html>", {}, "HTTP_418", False, None),
        (302, b"", {"location": "http://127.0.0.1/"}, "HTTP_302", False, None),
    ],
)
async def test_http_status_mapping(
    status: int,
    body: bytes,
    headers: dict[str, str],
    code: str,
    retryable: bool,
    retry_after: int | None,
) -> None:
    chunks = await run(
        provider(streaming(body, status=status, headers={"x-request-id": "req-1", **headers}))
    )
    assert kinds(chunks) == ["finish"]
    failure = failure_of(chunks)
    assert chunks[-1].reason.kind == "error"
    assert (failure.code, failure.status, failure.retryable) == (code, status, retryable)
    assert failure.retry_after_ms == retry_after
    assert failure.request_id == "req-1"
    if body.startswith(b"{"):
        assert failure.message == json.loads(body)["error"]["message"]
    else:
        assert failure.message.startswith(f"DeepSeek API error (HTTP {status})")


async def test_plain_text_error_body_is_quoted_in_the_message() -> None:
    body = b"Failed to deserialize the JSON body"
    chunks = await run(provider(streaming(body, status=422)))
    assert (
        failure_of(chunks).message
        == "DeepSeek API error (HTTP 422): Failed to deserialize the JSON body"
    )


async def test_retry_after_http_date_in_the_future() -> None:
    date = "Wed, 21 Oct 2099 07:28:00 GMT"
    chunks = await run(
        provider(streaming(error_body("busy"), status=503, headers={"retry-after": date}))
    )
    failure = failure_of(chunks)
    assert failure.retry_after_ms is not None and failure.retry_after_ms > 10**9


def raising(exc: Exception) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc

    return httpx.MockTransport(handler)


@pytest.mark.parametrize(
    ("exc", "code", "fragment"),
    [
        (
            httpx.ConnectError("connection refused"),
            "TRANSPORT",
            "request to https://api.deepseek.com failed: ConnectError",
        ),
        (httpx.ConnectTimeout("slow"), "TIMEOUT", "timed out before a response"),
        (OSError("network down"), "TRANSPORT", "OSError: network down"),
    ],
)
async def test_failures_before_a_response(exc: Exception, code: str, fragment: str) -> None:
    chunks = await run(provider(raising(exc)))
    failure = failure_of(chunks)
    assert (failure.code, failure.retryable, failure.status) == (code, True, None)
    assert fragment in failure.message


def stream_of(source: AsyncIterator[bytes], status: int = 200) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=source, headers={"content-type": "text/event-stream"})

    return httpx.MockTransport(handler)


@pytest.mark.parametrize("exc", [httpx.ReadError("reset"), ConnectionResetError("peer reset")])
async def test_reset_mid_stream_is_a_retryable_transport_failure(exc: Exception) -> None:
    async def body() -> AsyncIterator[bytes]:
        yield sse(delta(content="par"))
        raise exc

    chunks = await run(provider(stream_of(body())))
    assert kinds(chunks) == ["block-start", "text-delta", "finish"]
    failure = failure_of(chunks)
    assert (failure.code, failure.retryable) == ("TRANSPORT", True)
    assert "stream from https://api.deepseek.com failed" in failure.message


async def test_read_timeout_mid_stream() -> None:
    async def body() -> AsyncIterator[bytes]:
        yield sse(delta(content="a"))
        raise httpx.ReadTimeout("slow")

    failure = failure_of(await run(provider(stream_of(body()))))
    assert (failure.code, failure.retryable) == ("TIMEOUT", True)


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (sse(delta(content="a")), "ended before the end-of-stream marker"),
        (sse(delta(content="a")) + b"data: [DONE]\n", "ended inside an event ('data: [DONE]')"),
        (sse(delta(content="a")) + b"data: [DONE]", "ended inside an event"),
        (b"", "ended before the end-of-stream marker"),
    ],
)
async def test_eof_without_done_is_stream_closed(body: bytes, fragment: str) -> None:
    chunks = await run(provider(streaming(body)))
    failure = failure_of(chunks)
    assert chunks[-1].reason.kind == "error"
    assert (failure.code, failure.retryable) == ("STREAM_CLOSED", False)
    assert fragment in failure.message


async def test_malformed_json_event() -> None:
    chunks = await run(provider(streaming(b"data: {not-json\n\n")))
    failure = failure_of(chunks)
    assert failure.code == "MALFORMED_RESPONSE"
    assert "{not-json" in failure.message


async def test_bytes_after_done_are_not_read() -> None:
    read_after_done = False

    async def body() -> AsyncIterator[bytes]:
        nonlocal read_after_done
        yield hello_body()
        read_after_done = True
        yield b"data: garbage\n\n"

    chunks = await run(provider(stream_of(body())))
    assert isinstance(chunks[-1], Finish) and chunks[-1].reason.kind == "stop"
    assert not read_after_done


class Stall(httpx.AsyncByteStream):
    """A response body that sends ``first`` and then waits forever, like a stalled server.

    ``closed`` records that the provider closed the response (a real transport releases the
    connection in ``aclose``).
    """

    def __init__(self, first: bytes) -> None:
        self.first = first
        self.closed = False
        self.started = asyncio.Event()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.first
        self.started.set()
        await asyncio.Event().wait()
        yield b""  # pragma: no cover - never reached

    async def aclose(self) -> None:
        self.closed = True


def stalling(stall: Stall) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=stall, headers={"content-type": "text/event-stream"})

    return httpx.MockTransport(handler)


async def test_idle_watchdog_times_out_a_stalled_stream() -> None:
    stall = Stall(sse(delta(content="a")))
    chunks = await run(provider(stalling(stall), idle_timeout=0.02))
    failure = failure_of(chunks)
    assert (failure.code, failure.retryable) == ("TIMEOUT", True)
    assert "went idle" in failure.message
    assert stall.closed


async def test_idle_watchdog_covers_the_wait_for_headers() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")  # pragma: no cover

    chunks = await run(provider(httpx.MockTransport(handler), idle_timeout=0.02))
    assert failure_of(chunks).code == "TIMEOUT"


async def test_cancelled_before_sending_sends_nothing() -> None:
    seen: list[httpx.Request] = []
    token = CancelToken()
    token.cancel("user")
    chunks = await run(provider(streaming(hello_body(), seen=seen)), cancel=token)
    assert kinds(chunks) == ["finish"]
    assert chunks[0].reason.kind == "aborted"
    assert failure_of(chunks).code == "ABORTED"
    assert seen == []


async def test_cancel_mid_stream_stops_reading_and_closes_the_response() -> None:
    stall = Stall(sse(delta(content="partial")))
    token = CancelToken()
    chunks: list[Any] = []
    async with provider(stalling(stall)) as p:
        async for chunk in p.stream(options(cancel=token)):
            chunks.append(chunk)
            if chunk.type == "text-delta":
                asyncio.get_running_loop().call_soon(token.cancel, "user pressed esc")
    assert kinds(chunks) == ["block-start", "text-delta", "finish"]
    failure = failure_of(chunks)
    assert chunks[-1].reason.kind == "aborted"
    assert failure.code == "ABORTED" and "user pressed esc" in failure.message
    assert stall.closed


async def test_cancel_between_chunks_of_one_read() -> None:
    body = sse(delta(content="a"), delta(content="b"), delta(finish_reason="stop"), "[DONE]")
    token = CancelToken()
    chunks: list[Any] = []
    async with provider(streaming(body, size=len(body))) as p:
        async for chunk in p.stream(options(cancel=token)):
            chunks.append(chunk)
            if chunk.type == "text-delta":
                token.cancel()
    assert kinds(chunks) == ["block-start", "text-delta", "finish"]
    failure_of(chunks)
    assert chunks[-1].reason.kind == "aborted"


async def test_cancel_while_waiting_for_headers() -> None:
    token = CancelToken()

    async def handler(request: httpx.Request) -> httpx.Response:
        token.cancel()
        await asyncio.Event().wait()
        raise AssertionError("unreachable")  # pragma: no cover

    chunks = await run(provider(httpx.MockTransport(handler)), cancel=token)
    assert kinds(chunks) == ["finish"] and chunks[0].reason.kind == "aborted"


async def test_cancel_while_reading_an_error_body() -> None:
    token = CancelToken()

    async def body() -> AsyncIterator[bytes]:
        token.cancel()
        await asyncio.Event().wait()
        yield b""  # pragma: no cover

    chunks = await run(provider(stream_of(body(), status=500)), cancel=token)
    assert chunks[0].reason.kind == "aborted"


async def test_consumer_stopping_early_closes_the_response() -> None:
    stall = Stall(sse(delta(content="a")))
    async with provider(stalling(stall)) as p:
        stream = p.stream(options())
        async for chunk in stream:
            if chunk.type == "text-delta":
                break
        await stream.aclose()  # type: ignore[attr-defined]
    assert stall.closed


async def test_task_cancellation_propagates_and_closes_the_response() -> None:
    stall = Stall(sse(delta(content="a")))
    async with provider(stalling(stall)) as p:
        task = asyncio.ensure_future(collect(p.stream(options())))
        await stall.started.wait()
        await asyncio.sleep(0)
        task.cancel()
        # Checked through the task, not pytest.raises(asyncio.CancelledError): under some
        # `coverage run` setups the C task module raises a different CancelledError class.
        await asyncio.wait({task})
        assert task.cancelled()
    assert stall.closed


async def test_unsupported_effort_finishes_without_a_request() -> None:
    seen: list[httpx.Request] = []
    chunks = await run(provider(streaming(hello_body(), seen=seen)), reasoning_effort="turbo")
    assert failure_of(chunks).code == "UNSUPPORTED_REASONING_EFFORT"
    assert seen == []


# --- the API key never leaks -------------------------------------------------------------


async def test_missing_key() -> None:
    p = DeepSeekProvider(transport=streaming(hello_body()), env={})
    chunks = await run(p)
    failure = failure_of(chunks)
    assert failure.code == "MISSING_CREDENTIAL" and "DEEPSEEK_API_KEY" in failure.message
    assert not failure.retryable


async def test_key_from_the_environment_at_call_time() -> None:
    seen: list[httpx.Request] = []
    env: dict[str, str] = {}
    p = DeepSeekProvider(transport=streaming(hello_body(), seen=seen), env=env)
    assert "<from $DEEPSEEK_API_KEY>" in repr(p)
    env["DEEPSEEK_API_KEY"] = f"  {API_KEY}\n"
    await run(p)
    assert seen[0].headers["authorization"] == f"Bearer {API_KEY}"


@pytest.mark.parametrize("bad", ["sk-with space-123", "sk-\x01-ctrl", "sk-ünïcode"])
async def test_invalid_key_is_refused_without_echoing_it(bad: str) -> None:
    for p in (
        DeepSeekProvider(api_key=bad, transport=streaming(hello_body()), env={}),
        DeepSeekProvider(transport=streaming(hello_body()), env={"DEEPSEEK_API_KEY": bad}),
    ):
        failure = failure_of(await run(p))
        assert failure.code == "INVALID_CREDENTIAL"
        assert bad.strip() not in failure.message
        assert "value not shown" in failure.message


async def test_key_never_appears_in_reprs_failures_or_exceptions() -> None:
    p = provider(streaming(hello_body()))
    assert API_KEY not in repr(p) and API_KEY not in str(p)
    assert "api_key=<set>" in repr(p)
    secret = Secret(API_KEY)
    assert API_KEY not in repr(secret) and API_KEY not in str(secret)
    with pytest.raises(TypeError):
        pickle.dumps(secret)

    echoing = error_body(f"Authentication Fails, Your api key: {API_KEY} is invalid")
    leaks = [
        provider(streaming(echoing, status=401)),
        provider(raising(httpx.ConnectError(f"cannot reach with {API_KEY}"))),
        provider(stream_of(_raise_after_first(OSError(f"reset {API_KEY}")))),
        provider(streaming(f"data: {API_KEY}\n\n".encode())),
    ]
    for leaky in leaks:
        chunks = await run(leaky)
        failure = failure_of(chunks)
        texts = [
            failure.message,
            str(ProviderError(failure)),
            repr(failure),
            json.dumps(failure.to_json()),
        ]
        for text in texts:
            assert API_KEY not in text, text
        assert "[redacted]" in failure.message


async def _raise_after_first(exc: Exception) -> AsyncIterator[bytes]:
    yield sse(delta(content="a"))
    raise exc


async def test_usage_detail_survives_a_stream_split_in_tiny_reads() -> None:
    body = sse(delta(content="a"), delta(content="", finish_reason="stop", usage=USAGE), "[DONE]")
    chunks = await run(provider(streaming(body, size=1)))
    assert kinds(chunks) == ["block-start", "text-delta", "block-end", "usage", "finish"]


async def test_huge_error_bodies_are_read_only_up_to_a_bound() -> None:
    body = error_body("x" * 100_000)
    chunks = await run(provider(streaming(body, status=500, size=4096)))
    failure = failure_of(chunks)
    # Truncated JSON is not JSON: the status line stands in for the message.
    assert failure.code == "SERVER"
    assert len(failure.message) < 400


async def test_an_unreadable_error_body_still_gives_the_status() -> None:
    async def body() -> AsyncIterator[bytes]:
        yield b'{"error":'
        raise httpx.ReadError("reset")

    chunks = await run(provider(stream_of(body(), status=429)))
    failure = failure_of(chunks)
    assert (failure.code, failure.status, failure.message) == (
        "RATE_LIMIT",
        429,
        "DeepSeek API error (HTTP 429)",
    )


def test_user_agent_without_package_metadata(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.metadata

    from dsh_core.providers import _http

    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert _http._user_agent() == "dsh-core"
    assert _http.USER_AGENT.startswith("dsh-core/")
