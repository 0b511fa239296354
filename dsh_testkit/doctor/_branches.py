"""Conversations as branches: which earlier request each request is compared with.

A provider's prefix cache holds the prompts of earlier requests; what a request could reuse
is what it shares with one of them. So each request is compared not with the request just
before it in the trace but with its **parent**:

1. the latest earlier request whose whole prompt it starts with (it *extends* it; an equal
   prompt *repeats* it) — the longest such prompt wins; else
2. the earlier request it shares the longest prefix of whole components with (system, tools,
   each message), when it continues a conversation (it carries history: an assistant turn,
   or more than the first message in common); else
3. for a request with history whose system prompt or tools changed, the latest earlier request
   that began with the same first message.

Refused requests (status 400 or more) cached nothing and are never a parent. Side calls
(compaction, titles, subagents, retries) so become branches of the request they start from,
and the main line after them still extends its own previous request. A request marked as a
side call (:data:`SIDE_CALL_HEADERS`) is never the parent of a request that departs from the
main line (the request after a compaction is compared with the main line, not the summary
call).

A request without a parent starts a new conversation, and so does one that repeats the start
of a conversation already under way (a run started again from its first message) or repeats a
one-shot request (the same single question asked again), except under an explicit key (a
header, a session id), which always decides the conversation.

Lookups go through hashes of each prompt's component prefixes, so linking is linear in the
number of components; :class:`Brancher` links one request at a time (the proxy's live report)
and can keep only the latest ``window`` requests to bound its memory.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from ..prompt._wire_view import WireView, wire_view
from ..traces import Exchange, Trace

__all__ = [
    "SIDE_CALL_HEADERS",
    "Brancher",
    "Conversation",
    "Link",
    "Relation",
    "conversations",
    "link_trace",
]

Relation: TypeAlias = Literal["first", "extends", "repeats", "diverges"]
"""How a request relates to its parent: ``first`` (no parent: a new conversation), ``extends``
(starts with the parent's whole prompt), ``repeats`` (the same prompt), ``diverges`` (shares a
prefix, then differs)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Link:
    """One request's place in its conversation."""

    index: int
    """The exchange's index in the trace."""
    parent: int | None
    """The index of the request it is compared with (``None``: the first of a conversation)."""
    relation: Relation
    shared_parts: int
    """How many whole components (system, tools, messages) it shares with the parent."""
    conversation: str
    """Its conversation's key: the explicit key, or ``#1``, ``#2``, … in order of appearance."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Conversation:
    """Requests that continue one another (or were keyed together), in trace order."""

    key: str
    exchanges: tuple[Exchange, ...]
    links: tuple[Link, ...]

    def __len__(self) -> int:
        return len(self.exchanges)

    def __iter__(self) -> Iterator[Exchange]:
        return iter(self.exchanges)


def _prefix_hashes(parts: Sequence[str]) -> list[int]:
    out = [0]
    for part in parts:
        out.append(hash((out[-1], part)))
    return out


def _has_history(view: WireView) -> bool:
    return any(isinstance(m, Mapping) and m.get("role") == "assistant" for m in view.messages)


SIDE_CALL_HEADERS = ("x-dsh-side-call", "x-deepseek-harness-compact")
"""Request headers that mark a side call (a compaction, a title): it branches off the request
it extends, and a later request that departs from the main line is never compared with it."""


def _side_call(exchange: Exchange) -> bool:
    return any(
        name.lower() in SIDE_CALL_HEADERS and value not in ("", "0", "false")
        for name, value in exchange.headers
    )


@dataclass(slots=True)
class _Known:
    conversation: str
    keys: list[tuple[str, int]]
    """The ``(scope, prefix hash)`` entries this request set (forgotten with it)."""
    first: tuple[str, str] | None
    children: int = 0


class Brancher:
    """Links requests to their parents one at a time (see the module docstring).

    ``window`` bounds how many earlier requests stay candidates (``None``: all), so a long
    live session keeps bounded memory; the oldest are forgotten first.
    """

    def __init__(self, *, window: int | None = None) -> None:
        if window is not None and window < 1:
            raise ValueError(f"window must be at least 1, got {window}")
        self._window = window
        self._known: OrderedDict[int, _Known] = OrderedDict()
        # prefix hash -> latest request whose prompt has that prefix / is exactly that prompt,
        # per scope (an explicit key, or "" for unkeyed requests).
        self._through: dict[tuple[str, int], int] = {}
        self._ends: dict[tuple[str, int], int] = {}
        self._first_message: dict[tuple[str, str], int] = {}
        self._auto = 0

    def _scope(self, exchange: Exchange) -> str:
        return exchange.conversation or ""

    def _new_conversation(self, exchange: Exchange) -> str:
        if exchange.conversation is not None:
            return exchange.conversation
        self._auto += 1
        return f"#{self._auto}"

    def link(self, exchange: Exchange, view: WireView | None = None) -> Link:
        """The link of the next request (requests must come in trace order)."""
        if view is None:
            view = wire_view(exchange.body, endpoint=exchange.endpoint)
        parts = view.parts() if view is not None else ()
        hashes = _prefix_hashes(parts)
        scope = self._scope(exchange)
        parent: int | None = None
        relation: Relation = "first"
        shared = 0
        # 1. the longest earlier prompt this one starts with; an exact repeat loses to a more
        #    recent shorter one (a run started over follows its own new requests, not the
        #    old run's; a retry repeats the latest request, so it keeps its parent)
        repeat: int | None = None
        for k in range(len(parts), 2, -1):
            found = self._ends.get((scope, hashes[k]))
            if found is None:
                continue
            if k == len(parts):
                repeat = found
                continue
            if repeat is not None and found < repeat:
                break
            parent, shared = found, k
            relation = "repeats" if k == len(parts) else "extends"
            break
        if parent is None and repeat is not None:
            parent, shared, relation = repeat, len(parts), "repeats"
        if parent is not None and relation == "extends":
            # A more recent request that shares more than the extended one's whole prompt, and
            # that this one departs from before its own end (a pruned or edited message of the
            # recent history), is what it continues: compare with that one. A request that is
            # only a prefix of a longer one (the main line after a side call) keeps its parent.
            for k in range(len(parts) - 1, shared, -1):
                recent = self._through.get((scope, hashes[k]))
                if recent is not None:
                    if recent > parent:
                        parent, shared, relation = recent, k, "diverges"
                    break
        if parent is None:
            # 2. the longest shared prefix of whole components
            best = 0
            for k in range(len(parts), 0, -1):
                if (scope, hashes[k]) in self._through:
                    best = k
                    break
            # Under an explicit key, sharing the system prompt is enough: the key says it is the
            # same conversation (a compaction that rewrote everything after the header).
            keyed = exchange.conversation is not None
            continues = view is not None and (
                _has_history(view) or best >= 3 or (keyed and best >= 1)
            )
            if best >= 1 and continues:
                parent, shared, relation = self._through[(scope, hashes[best])], best, "diverges"
            elif view is not None and _has_history(view) and len(parts) > 2:
                # 3. a changed system prompt or tools: the same first message
                found = self._first_message.get((scope, parts[2]))
                if found is not None:
                    parent, shared, relation = found, 0, "diverges"
        if parent is not None:
            known = self._known[parent]  # a forgotten request is never found
            # A repeat starts a conversation of its own when the request it repeats was already
            # continued (a run started over) or is a one-shot (one message, no history: the same
            # question asked again), unless an explicit key says otherwise.
            restart = (
                relation == "repeats"
                and exchange.conversation is None
                and (known.children > 0 or len(parts) <= 3)
            )
            if restart:
                key = self._new_conversation(exchange)
            else:
                key = known.conversation
                known.children += 1
        else:
            key = self._new_conversation(exchange)
        link = Link(
            index=exchange.index,
            parent=parent,
            relation=relation,
            shared_parts=shared,
            conversation=key,
        )
        if not exchange.refused:
            self._remember(
                exchange.index, scope, parts, hashes, key, side_call=_side_call(exchange)
            )
        return link

    def _remember(
        self,
        index: int,
        scope: str,
        parts: Sequence[str],
        hashes: list[int],
        key: str,
        *,
        side_call: bool,
    ) -> None:
        keys = [(scope, h) for h in hashes[1:]]
        if not side_call:  # a side call is extended by its own retries only
            for entry in keys:
                self._through[entry] = index
        if keys:
            self._ends[keys[-1]] = index
        first = (scope, parts[2]) if len(parts) > 2 else None
        if first is not None:
            self._first_message[first] = index
        # Only a window forgets entries: without one a key list per request is O(n²) memory
        # over a long conversation, for nothing.
        kept = keys if self._window is not None else []
        self._known[index] = _Known(conversation=key, keys=kept, first=first)
        if self._window is not None:
            while len(self._known) > self._window:
                self._forget(*self._known.popitem(last=False))

    def _forget(self, index: int, known: _Known) -> None:
        for entry in known.keys:
            for table in (self._through, self._ends):
                if table.get(entry) == index:
                    del table[entry]
        if known.first is not None and self._first_message.get(known.first) == index:
            del self._first_message[known.first]


def link_trace(trace: Trace) -> list[Link]:
    """Every request's link, in trace order."""
    brancher = Brancher()
    return [brancher.link(e) for e in trace]


def conversations(trace: Trace) -> tuple[Conversation, ...]:
    """The trace's conversations, in order of their first request (see the module docstring)."""
    links = link_trace(trace)
    order: dict[str, list[int]] = {}
    for link in links:
        order.setdefault(link.conversation, []).append(link.index)
    return tuple(
        Conversation(
            key=key,
            exchanges=tuple(trace.exchanges[i] for i in indexes),
            links=tuple(links[i] for i in indexes),
        )
        for key, indexes in order.items()
    )
