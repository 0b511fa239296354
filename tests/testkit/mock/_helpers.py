"""Helpers for the mock DeepSeek's tests: requests to the model, decoding its plans."""

from __future__ import annotations

import json
from typing import Any

from dsh_core.providers._sse import SseEvent, SseParser
from dsh_testkit.mock import MockDeepSeek
from dsh_testkit.mock._plan import HttpRequest, ResponsePlan

API_KEY = "sk-mock-secret-5f3a9c"
"""A key the tests check never leaks into bodies, logs or errors."""

CHAT = "/chat/completions"
ANTHROPIC = "/anthropic/v1/messages"


def user(text: str = "hello") -> dict[str, Any]:
    return {"role": "user", "content": text}


def chat_body(*messages: dict[str, Any], **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "deepseek-v4-flash", "messages": list(messages) or [user()]}
    body.update(fields)
    return body


def anthropic_body(*messages: dict[str, Any], **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": "deepseek-v4-flash",
        "max_tokens": 1024,
        "messages": list(messages) or [user()],
    }
    body.update(fields)
    return body


def request(
    path: str,
    body: Any = None,
    *,
    method: str = "POST",
    key: str | None = API_KEY,
    headers: dict[str, str] | None = None,
) -> HttpRequest:
    pairs = [("content-type", "application/json")]
    if key is not None:
        if path.startswith("/anthropic"):
            pairs.append(("x-api-key", key))
        else:
            pairs.append(("authorization", f"Bearer {key}"))
    pairs.extend((headers or {}).items())
    raw = body if isinstance(body, bytes) else b"" if body is None else json.dumps(body).encode()
    return HttpRequest.build(method, path, headers=pairs, body=raw)


def call(mock: MockDeepSeek, path: str, body: Any = None, **kwargs: Any) -> ResponsePlan:
    return mock.handle(request(path, body, **kwargs))


def payload(plan: ResponsePlan) -> Any:
    return json.loads(plan.body_bytes)


def events(plan: ResponsePlan) -> list[SseEvent]:
    parser = SseParser()
    out = parser.feed(plan.body_bytes)
    out.extend(parser.close())
    return out


def chunks(plan: ResponsePlan) -> list[dict[str, Any]]:
    """The JSON chunks of a chat stream, ``[DONE]`` excluded."""
    return [json.loads(e.data) for e in events(plan) if e.data != "[DONE]"]
