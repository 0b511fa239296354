"""Synthetic session logs for the audit and cache-report tests, built through ``dsh_core.Session``.

Events are appended by hand in this project's shape (the prompt before ``step/start``, the
header event between ``step/start`` and the first chunk), so each test states exactly which
events a log holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dsh_core import Session, SessionInfo
from dsh_core.persistence import dumps_session
from tests._support import REFERENCE_LOGS

SYSTEM_LINES = [f"rule {i}: answer precisely and cite the file you read" for i in range(1, 41)]
SYSTEM = "\n".join(SYSTEM_LINES)
GREP = {
    "name": "grep",
    "description": "search files",
    "parameters": {"type": "object", "properties": {"pattern": {"type": "string"}}},
}
LS = {
    "name": "ls",
    "description": "list a directory",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
}


def header(
    *,
    system: str | None = SYSTEM,
    tools: list[dict[str, Any]] | None = None,
    model: str = "deepseek-chat",
    **config: Any,
) -> dict[str, Any]:
    out: dict[str, Any] = {"config": {"provider": "deepseek", "model": model, **config}}
    if system is not None:
        out["system"] = system
    out["tools"] = [GREP] if tools is None else tools
    return out


def usage(miss: int, hit: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"inputTokens": miss, "outputTokens": 5}
    if hit is not None:
        out["cacheReadTokens"] = hit
    return out


class LogBuilder:
    """Appends turns and steps to a fresh session; ``ids`` stay deterministic."""

    def __init__(self, session_id: str = "synthetic") -> None:
        self.session = Session.create(
            session_id, info=SessionInfo(id=session_id, created_at=0), clock=lambda: 0
        )
        self.turn_no = 0
        self.step_no = 0
        self._ids = 0

    def _id(self, prefix: str) -> str:
        self._ids += 1
        return f"{prefix}-{self._ids}"

    def append(self, kind: str, data: Any, **kw: Any) -> int:
        return self.session.append(kind, data, **kw).seq

    def start_turn(self, prompt: str) -> int:
        """``turn/start`` then the prompt; returns the prompt's seq."""
        self.turn_no += 1
        self.step_no = 0
        self.append("turn/start", {"turn": self.turn_no})
        return self.user(prompt)

    def user(self, text: str) -> int:
        message = {
            "id": self._id("u"),
            "role": "user",
            "content": [{"type": "text", "text": text}],
            "source": {"kind": "user"},
        }
        return self.append("user/message", message, surface_op="append")

    def end_turn(self) -> None:
        self.append("turn/end", {"turn": self.turn_no, "reason": {"kind": "completed"}})

    def step(
        self,
        *,
        text: str = "ok",
        header_event: tuple[str, dict[str, Any]] | None = None,
        usage_data: dict[str, Any] | None = None,
        usage_chunk: dict[str, Any] | None = None,
        message: bool = True,
        tool_call: str | None = None,
    ) -> int:
        """One step: ``step/start``, an optional header event, chunks, the assistant message.

        ``tool_call`` names a tool: the message carries a call and a ``tool/call`` +
        ``tool/result`` follow. Returns the seq of the step's first chunk (its request).
        """
        self.step_no += 1
        turn, step = self.turn_no, self.step_no
        self.append("step/start", {"turn": turn, "step": step})
        if header_event is not None:
            self.append(*header_event)
        first = self.append(
            "assistant/chunk",
            {"turn": turn, "step": step, "chunk": {"type": "text-delta", "index": 0, "text": text}},
        )
        chunks = [first]
        if usage_chunk is not None:
            chunks.append(
                self.append(
                    "assistant/chunk",
                    {"turn": turn, "step": step, "chunk": {"type": "usage", "usage": usage_chunk}},
                )
            )
        chunks.append(
            self.append(
                "assistant/chunk",
                {
                    "turn": turn,
                    "step": step,
                    "chunk": {"type": "finish", "reason": {"kind": "stop"}},
                },
            )
        )
        if message:
            content: list[dict[str, Any]] = [{"type": "text", "text": text}]
            call_id = self._id("call")
            if tool_call is not None:
                content.append(
                    {"type": "tool-call", "id": call_id, "name": tool_call, "arguments": "{}"}
                )
            data: dict[str, Any] = {
                "turn": turn,
                "step": step,
                "message": {
                    "id": self._id("a"),
                    "role": "assistant",
                    "content": content,
                    "source": {"kind": "model", "provider": "deepseek", "model": "deepseek-chat"},
                },
            }
            if usage_data is not None:
                data["usage"] = usage_data
            self.append("assistant/message", data, surface_op="append", source_event_seqs=chunks)
            if tool_call is not None:
                call = self.append(
                    "tool/call",
                    {
                        "turn": turn,
                        "step": step,
                        "callId": call_id,
                        "name": tool_call,
                        "arguments": "{}",
                    },
                )
                self.append(
                    "tool/result",
                    self.tool_result_data(call_id, "result text " * 20),
                    surface_op="append",
                    source_event_seqs=[call],
                )
        self.append("step/end", {"turn": turn, "step": step})
        return first

    def tool_result_data(
        self, call_id: str, text: str, message_id: str | None = None
    ) -> dict[str, Any]:
        return {
            "turn": self.turn_no,
            "step": self.step_no,
            "message": {
                "id": message_id or self._id("r"),
                "role": "user",
                "content": [
                    {
                        "type": "tool-result",
                        "toolCallId": call_id,
                        "content": [{"type": "text", "text": text}],
                        "isError": False,
                    }
                ],
                "source": {"kind": "tool", "callId": call_id},
            },
        }

    @property
    def events(self) -> Any:
        return self.session.events

    def write(self, path: Path) -> Path:
        path.write_bytes(dumps_session(self.session.info, self.session.events))
        return path


def snapshot(reason: str, **kw: Any) -> tuple[str, dict[str, Any]]:
    return ("request/header", {"header": header(**kw), "reason": reason})


def initial_two_turns(*, hits: tuple[int | None, int | None] = (0, 960)) -> LogBuilder:
    """Two turns, one step each, unchanged header: request 2 is a pure extension of request 1."""
    log = LogBuilder()
    log.start_turn("first question")
    log.step(header_event=snapshot("initial"), usage_data=usage(1000 - (hits[0] or 0), hits[0]))
    log.end_turn()
    log.start_turn("second question")
    miss = 1100 - (hits[1] or 0)
    log.step(usage_data=usage(miss, hits[1]))
    log.end_turn()
    return log


def reference_logs() -> list[Path]:
    """The reference harness's session logs (skips where ../shared/fixtures is absent)."""
    if not REFERENCE_LOGS.is_dir():
        pytest.skip(f"reference logs not found at {REFERENCE_LOGS}")
    paths = sorted(REFERENCE_LOGS.glob("*/session*.jsonl"))
    # A loop over an empty list would pass without checking anything.
    assert len(paths) >= 12, f"expected the 12 reference session logs, found {paths}"
    return paths
