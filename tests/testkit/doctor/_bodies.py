"""Wire bodies and traces for the doctor's tests, with usage figures that fit the template.

A test builds a conversation request by request (``Chat``), each with the answer the model gave
and the hit the provider reported; prompt tokens are the chat template's own count, so a test
says only what the provider hit.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dsh_testkit.prompt import PromptRenderer
from dsh_testkit.traces import Exchange, Trace, TraceUsage
from dsh_testkit.traces._readers._build import header_key

SYSTEM = (
    "You are a careful coding assistant. Read the files you are asked about before you edit "
    "them, run the tests after every change, and keep answers short and factual. "
) * 6
"""About 200 tokens: longer than one 128-token unit."""

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a text file and return its lines.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "limit": {"type": "integer"}},
                "required": ["path"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "run_tests",
            "description": "Run the test suite and return its output.",
            "parameters": {"type": "object", "properties": {}},
        },
    },
]

_RENDERER = PromptRenderer()


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def system(text: str) -> dict[str, Any]:
    return {"role": "system", "content": text}


def tool_result(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def assistant(
    text: str = "",
    *,
    reasoning: str | None = None,
    calls: Sequence[tuple[str, str, str]] = (),
) -> dict[str, Any]:
    """An assistant turn; ``calls`` are ``(id, name, arguments text)``."""
    out: dict[str, Any] = {"role": "assistant", "content": text}
    if reasoning is not None:
        out["reasoning_content"] = reasoning
    if calls:
        out["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": a}}
            for i, n, a in calls
        ]
    return out


def body(
    messages: Sequence[Mapping[str, Any]],
    *,
    model: str = "deepseek-v4-flash",
    tools: Sequence[Mapping[str, Any]] | None = TOOLS,
    **params: Any,
) -> dict[str, Any]:
    out: dict[str, Any] = {"model": model, "messages": [dict(m) for m in messages]}
    if tools:
        out["tools"] = [dict(t) for t in tools]
    out.update(params)
    return out


def prompt_tokens(request: Mapping[str, Any]) -> int:
    return len(_RENDERER.render_chat(request).tokens)


@dataclass
class Traffic:
    """Exchanges built one at a time: each request, its answer, and the hit reported."""

    exchanges: list[Exchange] = field(default_factory=list)
    time_resolution: float | None = None

    def add(
        self,
        request: Mapping[str, Any],
        *,
        answer: Mapping[str, Any] | None = None,
        hit: int | None = None,
        status: int = 200,
        error: str | None = None,
        started: float | None = None,
        finished: float | None = None,
        conversation: str | None = None,
        headers: Sequence[tuple[str, str]] = (),
    ) -> Exchange:
        exchange = Exchange(
            index=len(self.exchanges),
            endpoint="chat",
            body=copy.deepcopy(dict(request)),
            content=json.dumps(request).encode(),
            status=status,
            error=error,
            response=copy.deepcopy(dict(answer)) if answer is not None else None,
            usage=None
            if hit is None
            else TraceUsage(prompt_tokens=prompt_tokens(request), hit_tokens=hit),
            started=started,
            finished=finished,
            conversation=conversation if conversation is not None else header_key(headers),
            headers=tuple(headers),
        )
        self.exchanges.append(exchange)
        return exchange

    def trace(self) -> Trace:
        return Trace(
            exchanges=tuple(self.exchanges), source="memory", time_resolution=self.time_resolution
        )


def floor(tokens: int, unit: int = 128) -> int:
    return tokens // unit * unit


def tokens_before(request: Mapping[str, Any], message: int) -> int:
    """Prompt tokens before ``messages[message]`` of ``request`` (leading system messages
    counted in the index): where an earlier request's input or answer ends inside this one."""
    rendered = _RENDERER.render_chat(request)
    messages = request["messages"]
    leading = 0
    while leading < len(messages) and messages[leading].get("role") in ("system", "developer"):
        leading += 1
    return rendered.marks[2 + message - leading]
