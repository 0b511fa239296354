"""A small openai-SDK agent for the trace and cache-doctor tests, and HAR building.

The agent is an ordinary tool loop over the official ``openai`` client; knobs reproduce the
classic cache breakers the doctor must name (a timestamp in the system prompt, a tool inserted
mid-list, arguments re-serialized, reasoning not sent back, history truncation).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import openai

KEY = "sk-" + "Z9y8X7w6V5" * 4
RULES = "\n".join(
    f"Rule {i}: answer precisely, cite the file you read, keep it short." for i in range(1, 31)
)


def tool(name: str, description: str = "a tool") -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }


TOOLS = [tool("read_file", "Read a file."), tool("list_dir", "List a directory.")]


def run_agent(
    client: openai.OpenAI,
    prompts: Sequence[str],
    *,
    system: Callable[[int], str] = lambda _: RULES,
    tools: Callable[[int], list[dict[str, Any]]] = lambda _: TOOLS,
    reserialize_args: bool = False,
    drop_reasoning: bool = False,
    truncate_after: int | None = None,
    model: str = "deepseek-v4-flash",
    stream: bool = True,
) -> list[dict[str, Any]]:
    """Run a tool loop: one turn per prompt, tools answered with a fixed text."""
    history: list[dict[str, Any]] = []
    request = 0
    for prompt in prompts:
        history.append({"role": "user", "content": prompt})
        for _ in range(4):
            if truncate_after is not None and request >= truncate_after:
                history = history[-2:]
            messages = [{"role": "system", "content": system(request)}, *history]
            message = _call(client, model, messages, tools(request), stream=stream)
            request += 1
            sent: dict[str, Any] = {"role": "assistant", "content": message["content"] or ""}
            if message.get("reasoning_content") is not None and not drop_reasoning:
                sent["reasoning_content"] = message["reasoning_content"]
            calls = message.get("tool_calls") or []
            if calls:
                sent["tool_calls"] = [
                    {
                        "id": c["id"],
                        "type": "function",
                        "function": {
                            "name": c["function"]["name"],
                            "arguments": json.dumps(
                                json.loads(c["function"]["arguments"]), separators=(",", ":")
                            )
                            if reserialize_args
                            else c["function"]["arguments"],
                        },
                    }
                    for c in calls
                ]
            history.append(sent)
            if not calls:
                break
            for c in calls:
                history.append({"role": "tool", "tool_call_id": c["id"], "content": "file text"})
    return history


def _call(
    client: openai.OpenAI,
    model: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]],
    *,
    stream: bool,
) -> dict[str, Any]:
    # Plain dicts on the wire: the SDK's TypedDict params are not what this agent builds.
    wire_messages: Any = messages
    wire_tools: Any = tools
    if not stream:
        done = client.chat.completions.create(model=model, messages=wire_messages, tools=wire_tools)
        return done.choices[0].message.model_dump()
    content: list[str] = []
    reasoning: list[str] | None = None
    calls: dict[int, dict[str, Any]] = {}
    for chunk in client.chat.completions.create(
        model=model, messages=wire_messages, tools=wire_tools, stream=True
    ):
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        if delta.content:
            content.append(delta.content)
        extra = getattr(delta, "reasoning_content", None)
        if extra is not None:
            reasoning = [*(reasoning or []), extra]
        for call in delta.tool_calls or ():
            slot = calls.setdefault(
                call.index, {"id": "", "function": {"name": "", "arguments": ""}}
            )
            if call.id:
                slot["id"] = call.id
            if call.function and call.function.name:
                slot["function"]["name"] += call.function.name
            if call.function and call.function.arguments:
                slot["function"]["arguments"] += call.function.arguments
    return {
        "content": "".join(content),
        "reasoning_content": None if reasoning is None else "".join(reasoning),
        "tool_calls": [calls[k] for k in sorted(calls)],
    }


def har_of(exchanges: Sequence[tuple[Any, Any, float, float]]) -> dict[str, Any]:
    """A HAR 1.2 document of real httpx request/response pairs (request, response, start, end)."""
    entries = []
    for request, response, started, finished in exchanges:
        body = response.content
        entries.append(
            {
                "startedDateTime": datetime.fromtimestamp(started, UTC).isoformat(),
                "time": (finished - started) * 1000,
                "request": {
                    "method": request.method,
                    "url": str(request.url),
                    "httpVersion": "HTTP/1.1",
                    "headers": [{"name": k, "value": v} for k, v in request.headers.items()],
                    "queryString": [],
                    "cookies": [],
                    "headersSize": -1,
                    "bodySize": len(request.content),
                    "postData": {
                        "mimeType": "application/json",
                        "text": request.content.decode("utf-8"),
                    },
                },
                "response": {
                    "status": response.status_code,
                    "statusText": response.reason_phrase,
                    "httpVersion": "HTTP/1.1",
                    "headers": [{"name": k, "value": v} for k, v in response.headers.items()],
                    "cookies": [],
                    "content": {
                        "size": len(body),
                        "mimeType": response.headers.get("content-type", ""),
                        "encoding": "base64",
                        "text": base64.b64encode(body).decode("ascii"),
                    },
                    "redirectURL": "",
                    "headersSize": -1,
                    "bodySize": len(body),
                },
                "cache": {},
                "timings": {"send": 0, "wait": (finished - started) * 1000, "receive": 0},
            }
        )
    return {
        "log": {"version": "1.2", "creator": {"name": "test", "version": "1"}, "entries": entries}
    }
