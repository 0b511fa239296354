"""Shared helpers: SSE bodies, byte streams split into small reads, MockTransport handlers."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import Any

import httpx

from dsh_core import GenerateOptions, StreamChunk, user_message

API_KEY = "sk-test-0123456789abcdef"


def sse(*payloads: Any) -> bytes:
    """``data:`` events; a str payload is sent verbatim (``[DONE]``), others as JSON."""
    out = bytearray()
    for payload in payloads:
        data = payload if isinstance(payload, str) else json.dumps(payload)
        out += f"data: {data}\n\n".encode()
    return bytes(out)


def named(*events: tuple[str, Any]) -> bytes:
    """Anthropic-style named events."""
    out = bytearray()
    for name, payload in events:
        out += f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode()
    return bytes(out)


def delta(**fields: Any) -> dict[str, Any]:
    """A chat.completion.chunk with one choice whose delta is ``fields`` (finish_reason / usage
    are lifted out of ``fields``)."""
    finish = fields.pop("finish_reason", None)
    usage = fields.pop("usage", None)
    chunk: dict[str, Any] = {
        "id": "9f3c",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "deepseek-v4-flash",
        "choices": [{"index": 0, "delta": fields, "logprobs": None, "finish_reason": finish}],
    }
    if usage is not None:
        chunk["usage"] = usage
    return chunk


USAGE = {
    "prompt_tokens": 306,
    "completion_tokens": 85,
    "total_tokens": 391,
    "prompt_tokens_details": {"cached_tokens": 256},
    "completion_tokens_details": {"reasoning_tokens": 31},
    "prompt_cache_hit_tokens": 256,
    "prompt_cache_miss_tokens": 50,
}


def hello_body() -> bytes:
    """The canonical success stream: role chunk, one text chunk, a final chunk with usage."""
    return sse(
        delta(role="assistant", content=None, reasoning_content=""),
        delta(content="hello", reasoning_content=None),
        delta(content="", reasoning_content=None, finish_reason="stop", usage=USAGE),
        "[DONE]",
    )


async def pieces(body: bytes, size: int = 5) -> AsyncIterator[bytes]:
    """``body`` in small reads, yielding to the loop between them."""
    for start in range(0, len(body), size):
        yield body[start : start + size]
        await asyncio.sleep(0)


def streaming(
    body: bytes,
    *,
    status: int = 200,
    headers: dict[str, str] | None = None,
    seen: list[httpx.Request] | None = None,
    size: int = 5,
) -> httpx.MockTransport:
    """A transport answering every request with ``body`` in ``size``-byte reads."""

    def handler(request: httpx.Request) -> httpx.Response:
        if seen is not None:
            seen.append(request)
        return httpx.Response(
            status,
            content=pieces(body, size),
            headers={"content-type": "text/event-stream", **(headers or {})},
        )

    return httpx.MockTransport(handler)


def options(**overrides: Any) -> GenerateOptions:
    fields: dict[str, Any] = {
        "provider": "deepseek",
        "model": "deepseek-v4-flash",
        "messages": (user_message("hi", id="u1"),),
    }
    fields.update(overrides)
    return GenerateOptions(**fields)


async def collect(stream: AsyncIterator[StreamChunk]) -> list[StreamChunk]:
    return [chunk async for chunk in stream]


def kinds(chunks: Sequence[StreamChunk]) -> list[str]:
    return [c.type for c in chunks]


def split_at(data: bytes, cuts: Iterable[int]) -> list[bytes]:
    points = sorted({c for c in cuts if 0 < c < len(data)})
    bounds = [0, *points, len(data)]
    return [data[a:b] for a, b in itertools.pairwise(bounds)]


Handler = Callable[[httpx.Request], httpx.Response]
