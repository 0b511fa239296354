"""Strategies for messages, events and session logs (see the package docstring)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from dsh_core import Event, Message, Session, thaw_json

from ._values import MAX_SAFE_INTEGER, _cached, tool_names

__all__ = [
    "EventDraft",
    "content_blocks",
    "message_events",
    "messages",
    "noise_events",
    "session_logs",
]

# ----------------------------------------------------------------------------------- messages

_IDS = st.uuids().map(str)


@_cached
def _text_blocks(max_size: int = 3) -> st.SearchStrategy[list[dict[str, Any]]]:
    return st.lists(st.builds(lambda t: {"type": "text", "text": t}, st.text()), max_size=max_size)


@_cached
def content_blocks(*, nested: bool = True) -> st.SearchStrategy[dict[str, Any]]:
    """Content blocks as JSON: text, reasoning, tool-call (raw argument text), an image
    reference (an opaque block), and with ``nested`` a tool-result holding text blocks."""
    blocks = [
        st.builds(lambda t: {"type": "text", "text": t}, st.text()),
        st.builds(lambda t: {"type": "reasoning", "text": t}, st.text()),
        st.builds(
            lambda i, n, a: {"type": "tool-call", "id": i, "name": n, "arguments": a},
            _IDS,
            tool_names(),
            st.one_of(st.just(""), st.just('{"path": "a.txt"}'), st.text(max_size=20)),
        ),
        st.builds(
            lambda d: {"type": "image", "attachment": {"digest": d, "mediaType": "image/png"}},
            st.text("0123456789abcdef", min_size=8, max_size=8),
        ),
    ]
    if nested:
        blocks.append(
            st.builds(
                lambda i, c, e: {
                    "type": "tool-result",
                    "toolCallId": i,
                    "content": c,
                    "isError": e,
                },
                _IDS,
                _text_blocks(),
                st.booleans(),
            )
        )
    return st.one_of(blocks)


@_cached
def _user_json() -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(
        lambda i, c: {"id": i, "role": "user", "content": c, "source": {"kind": "user"}},
        _IDS,
        st.lists(content_blocks(nested=False), max_size=3),
    )


@_cached
def _assistant_json() -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(
        lambda i, c: {
            "id": i,
            "role": "assistant",
            "content": c,
            "source": {"kind": "model", "provider": "deepseek", "model": "deepseek-v4-flash"},
        },
        _IDS,
        st.lists(content_blocks(nested=False), max_size=3),
    )


@_cached
def _tool_result_json() -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(
        lambda i, c, content, e: {
            "id": i,
            "role": "user",
            "content": [{"type": "tool-result", "toolCallId": c, "content": content, "isError": e}],
            "source": {"kind": "tool", "callId": c},
        },
        _IDS,
        _IDS,
        _text_blocks(),
        st.booleans(),
    )


@_cached
def messages() -> st.SearchStrategy[Message]:
    """Typed messages: user, assistant (possibly empty) and tool-result messages."""
    return st.one_of(_user_json(), _assistant_json(), _tool_result_json()).map(Message.from_json)


# ------------------------------------------------------------------------------------- events


@dataclass(frozen=True, slots=True, kw_only=True)
class EventDraft:
    """An event before it has a seq: what :meth:`dsh_core.Session.append` takes."""

    type: str
    """The event type, e.g. ``user/message``."""
    data: Any
    """Plain JSON (mutable; the session freezes its own copy)."""
    surface_op: str | Mapping[str, Any] | None = None
    """``"append"``, a ``{op: "replace", start, end}`` object, or ``None`` for log-only events."""
    source_event_seqs: tuple[int, ...] | None = None
    """Provenance: the earlier seqs this event cites."""

    def append_to(self, session: Session) -> Event:
        """Append this draft to ``session``; returns the logged event."""
        return session.append(
            self.type,
            self.data,
            surface_op=self.surface_op,
            source_event_seqs=self.source_event_seqs,
        )

    def to_json(self, *, seq: int, time: int = 0) -> dict[str, Any]:
        """The envelope this draft becomes at ``seq`` (a seed entry; ``data`` is a fresh copy)."""
        out: dict[str, Any] = {
            "type": self.type,
            "seq": seq,
            "time": time,
            "data": thaw_json(self.data),
        }
        if self.surface_op is not None:
            out["surfaceOp"] = (
                self.surface_op if isinstance(self.surface_op, str) else dict(self.surface_op)
            )
        if self.source_event_seqs is not None:
            out["sourceEventSeqs"] = list(self.source_event_seqs)
        return out


@_cached
def message_events() -> st.SearchStrategy[EventDraft]:
    """Surface appends: ``user/message``, ``assistant/message`` with and without usage (its
    content may be empty, which projects to nothing) and ``tool/result``."""
    user = _user_json().map(lambda m: EventDraft(type="user/message", data=m, surface_op="append"))
    assistant = st.builds(
        lambda m, usage: EventDraft(
            type="assistant/message",
            data={"turn": 1, "step": 1, "message": m, **usage},
            surface_op="append",
        ),
        _assistant_json(),
        st.sampled_from([{}, {"usage": {"inputTokens": 1, "outputTokens": 1}}]),
    )
    result = _tool_result_json().map(
        lambda m: EventDraft(
            type="tool/result",
            data={"turn": 1, "step": 1, "message": m},
            surface_op="append",
        )
    )
    return st.one_of(user, assistant, result)


@_cached
def noise_events() -> st.SearchStrategy[EventDraft]:
    """Log-only events that never change the derived messages: turn/step boundaries, chunks,
    todo writes, header snapshots and an opaque plugin event."""
    config = {"provider": "deepseek", "model": "deepseek-v4-flash"}
    return st.one_of(
        st.just(EventDraft(type="turn/start", data={"turn": 1})),
        st.just(EventDraft(type="turn/end", data={"turn": 1, "reason": {"kind": "completed"}})),
        st.just(EventDraft(type="step/start", data={"turn": 1, "step": 1})),
        st.just(EventDraft(type="step/end", data={"turn": 1, "step": 1})),
        st.builds(
            lambda t: EventDraft(
                type="assistant/chunk",
                data={"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": t}},
            ),
            st.text(),
        ),
        st.builds(
            lambda t: EventDraft(
                type="todo/write", data={"todos": [{"content": t, "status": "pending"}]}
            ),
            st.text(max_size=10),
        ),
        st.builds(
            lambda s: EventDraft(
                type="request/header",
                data={"header": {"config": config, "system": s}, "reason": "initial"},
            ),
            st.text(min_size=1, max_size=10),
        ),
        st.just(EventDraft(type="session/title", data={"title": "t"})),
    )


def _replace_range(nodes: Sequence[int], i: int, j: int) -> dict[str, Any]:
    return {"op": "replace", "start": nodes[i], "end": nodes[j]}


@st.composite
def _session_logs(
    draw: st.DrawFn, max_size: int, replaces: bool, noise: bool
) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    nodes: list[int] = []  # the surface, simulated exactly as dsh_core folds it
    kinds = (
        ["message", "message"]
        + (["noise"] if noise else [])
        + (["replace", "trim"] if replaces else [])
    )
    times = st.integers(min_value=0, max_value=MAX_SAFE_INTEGER)
    for _ in range(draw(st.integers(0, max_size))):
        seq = len(events)
        kind = draw(st.sampled_from(kinds))
        results = [n for n in nodes if events[n]["type"] == "tool/result"]
        draft: EventDraft
        if kind == "replace" and nodes:
            # A compaction-style range replace, by surface position; it may cite extra seqs.
            i = draw(st.integers(0, len(nodes) - 1))
            j = draw(st.integers(i, len(nodes) - 1))
            shadowed = nodes[i : j + 1]
            extra = draw(st.lists(st.integers(0, seq - 1), max_size=2))
            cited = draw(st.permutations(sorted(set(shadowed) | set(extra))))
            checkpoint = draw(_user_json())
            checkpoint["source"] = {"kind": "plugin", "plugin": "compact"}
            draft = EventDraft(
                type="user/message",
                data=checkpoint,
                surface_op=_replace_range(nodes, i, j),
                source_event_seqs=tuple(cited),
            )
            nodes[i : j + 1] = [seq]
        elif kind == "trim" and results:
            # A single-node tool/result rewrite: only the result block's inner content changes.
            target = draw(st.sampled_from(results))
            data = thaw_json(events[target]["data"])
            data["message"]["content"][0]["content"] = draw(_text_blocks())
            draft = EventDraft(
                type="tool/result",
                data=data,
                surface_op={"op": "replace", "start": target, "end": target},
                source_event_seqs=(target,),
            )
            nodes[nodes.index(target)] = seq
        elif kind == "noise":
            draft = draw(noise_events())
        else:
            draft = draw(message_events())
            nodes.append(seq)
        events.append(draft.to_json(seq=seq, time=draw(times)))
    return events


@_cached
def session_logs(
    *, max_size: int = 25, replaces: bool = True, noise: bool = True
) -> st.SearchStrategy[list[dict[str, Any]]]:
    """Valid session logs as seed JSON (``seq == index``): surface appends, range replaces that
    cite every shadowed seq (and sometimes more), single tool-result rewrites, and noise.

    Seed them (``Session.create(id, log)``) or append them one by one in order to a fresh
    session; ``time`` is any safe integer (never infer order from it).
    """
    return _session_logs(max_size, replaces, noise)
