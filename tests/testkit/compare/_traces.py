"""Small dsh-trace files written by hand, each request's figures chosen by the test."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dsh_testkit.traces._file import TraceWriter

SYSTEM = "\n".join(f"Rule {i}: answer precisely and cite the file you read." for i in range(60))


def body(*users: str, system: str = SYSTEM, model: str = "deepseek-v4-flash") -> dict[str, Any]:
    """A chat request: the system prompt, then the users' turns, each answered ``ok``."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for i, text in enumerate(users):
        if i:
            messages.append({"role": "assistant", "content": "ok"})
        messages.append({"role": "user", "content": text})
    return {"model": model, "messages": messages}


def conversation(*users: str, system: str = SYSTEM) -> list[dict[str, Any]]:
    """The requests of a conversation that grows by one turn a request."""
    return [body(*users[: i + 1], system=system) for i in range(len(users))]


def write(
    path: Path,
    bodies: Sequence[dict[str, Any]],
    *,
    scenario: str | None = None,
    key: str | Sequence[str | None] | None = None,
    usage: Sequence[tuple[int, int] | None] | None = None,
    status: Sequence[int] | None = None,
    started: float | None = None,
    url: str = "https://api.deepseek.com/chat/completions",
) -> Path:
    """A dsh-trace file of ``bodies``; ``key`` an explicit conversation key (one, or one per
    request); ``usage`` (prompt, hit) per request (default: none, figures simulated)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with TraceWriter(path, source="proxy", scenario=scenario) as writer:
        for i, request in enumerate(bodies):
            keys = [key] * len(bodies) if key is None or isinstance(key, str) else list(key)
            figures = usage[i] if usage is not None else None
            code = status[i] if status is not None else 200
            writer.append(
                {
                    "index": i,
                    "endpoint": "chat",
                    "url": url,
                    "conversation": keys[i],
                    "started": None if started is None else started + 60 * i,
                    "status": code,
                    "error": "bad request" if code >= 400 else None,
                    "request": request,
                    "response": {"role": "assistant", "content": "ok"} if code < 400 else None,
                    "usage": None
                    if figures is None
                    else {
                        "promptTokens": figures[0],
                        "hitTokens": figures[1],
                        "completionTokens": 5,
                    },
                }
            )
    return path
