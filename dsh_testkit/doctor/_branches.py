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

Refused requests (status 400 or more) cached nothing and are never a parent.

**The main line and its branches.** Each conversation has a main line: its latest request that
is not a side call. A request that returns to an earlier request's shape after the main line
moved on (a tool order flipped and flipped back) departs from the main line's latest request,
and is compared with it (:attr:`Link.returns_to` names the earlier one its hit came from). A
**side call** — marked (:data:`SIDE_CALL_HEADERS`), or shaped like one: the main line's latest
prompt cut after a message it keeps, then one new user message (a compaction replaying the
history's head, a title call) — is a ``branch``: compared with the request it branches off on
what they share only, it never makes anything look rewritten, is never the parent of a request
that departs from the main line (the request after a compaction is compared with the main
line, and carries the compaction's one ``history-rewritten``), and is reported apart from the
main line. A branch that a later request extends was the main line after all (a conversation
rewound): it becomes it.

A request without a parent starts a new conversation, and so does one that repeats the start
of a conversation already under way (a run started again from its first message) or repeats a
one-shot request (the same single question asked again). An explicit key (a header, a session
id) keeps its requests together, except that a keyed request with no history that carries no
checkpoint of an earlier one (a new run reusing a session id, a sub-agent, a title call) starts
a conversation of its own under that key (``key · 2``). A reset of the provider's cache (a
``reset`` event: the mock was reset) forgets every earlier request: the cache is cold.

Lookups go through hashes of each prompt's component prefixes, so linking is linear in the
number of components; :class:`Brancher` links one request at a time (the proxy's live report)
and can keep only the latest ``window`` requests to bound its memory.
"""

from __future__ import annotations

from array import array
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from ..prompt._wire_view import WireView, wire_view
from ..traces import Exchange, Trace
from ..traces._model import SIDE_CALL_HEADERS

__all__ = [
    "SIDE_CALL_HEADERS",
    "Brancher",
    "Conversation",
    "Link",
    "Relation",
    "conversations",
    "link_trace",
]

Relation: TypeAlias = Literal["first", "extends", "repeats", "diverges", "branch"]
"""How a request relates to its parent: ``first`` (no parent: a new conversation), ``extends``
(starts with the parent's whole prompt), ``repeats`` (the same prompt), ``diverges`` (shares a
prefix, then differs), ``branch`` (a side call off the parent: compared on what they share)."""


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
    """Its conversation's key: the explicit key (``key · 2``, … for the later conversations
    under one key), or ``#1``, ``#2``, … in order of appearance."""
    returns_to: int | None = None
    """For a request compared with the main line's latest request while it starts with an
    older request's whole prompt (a change undone): that older request, where its hit came
    from."""


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


def _side_call(exchange: Exchange) -> bool:
    return any(
        name.lower() in SIDE_CALL_HEADERS and value not in ("", "0", "false")
        for name, value in exchange.headers
    )


_CHECKPOINT_KINDS = ("compaction", "prune", "rewrite", "resume")
"""Session-log events that say a request's history was rewritten on purpose (a checkpoint)."""

_ANSWERS = 8
"""Recent side-call answers kept per key: a later request that carries one is a continuation."""

_QUOTED = 40
"""Characters of a side call's answer a later message must carry to be its checkpoint."""


def _text_of(message: object) -> str:
    if not isinstance(message, Mapping):
        return ""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "".join(str(b.get("text") or "") for b in content if isinstance(b, Mapping))
    return ""


def _is_user(message: object) -> bool:
    return isinstance(message, Mapping) and message.get("role") == "user"


@dataclass(slots=True)
class _Known:
    conversation: str
    hashes: array[int]
    """The prefix hashes of its components (its entries in the tables are ``(scope, hash)``,
    forgotten with it): 8 bytes each, where a list of tuples took ~100."""
    first: tuple[str, str] | None
    children: int = 0
    branch: bool = False
    """A side call: out of the main line (its ``_through`` entries are not set)."""
    scope: str = ""


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
        self._latest: dict[str, int] = {}
        """Conversation → its latest main-line request."""
        self._under_key: dict[str, int] = {}
        self._refused_start: dict[str, str] = {}
        """Key → the conversation its requests so far all started and were refused in: the retry
        that follows a refusal is the same conversation, not a new run under the key."""
        """Explicit key → how many conversations started under it."""
        self._answers: dict[str, list[str]] = {}
        """Scope → the latest side calls' answers (a checkpoint a later request may carry)."""

    def _scope(self, exchange: Exchange) -> str:
        return exchange.conversation or ""

    def _new_conversation(self, exchange: Exchange) -> str:
        key = exchange.conversation
        if key is not None:
            if key in self._refused_start:
                return self._refused_start[key]
            count = self._under_key.get(key, 0) + 1
            self._under_key[key] = count
            return key if count == 1 else f"{key} · {count}"
        self._auto += 1
        return f"#{self._auto}"

    def _cold(self) -> None:
        """The provider's cache was reset: no earlier request can be a parent any more."""
        self._through.clear()
        self._ends.clear()
        self._first_message.clear()
        self._latest.clear()
        self._answers.clear()

    def _carries_checkpoint(self, exchange: Exchange, scope: str, view: WireView) -> bool:
        """Whether a keyed request without history continues its conversation all the same:
        the session log says its history was rewritten on purpose, or one of its messages
        carries a recent side call's answer (a compaction's summary)."""
        if any(e.kind in _CHECKPOINT_KINDS for e in exchange.log_events):
            return True
        answers = self._answers.get(scope, ())
        if not answers:
            return False
        texts = [_text_of(m) for m in view.messages]
        return any(a and a[:_QUOTED] in t for a in answers for t in texts)

    def _shared_with(self, hashes: Sequence[int], known: _Known) -> int:
        """How many leading components a prompt (its prefix hashes) shares with ``known``."""
        k = 0
        for h, mine in zip(known.hashes, hashes[1:], strict=False):
            if h != mine:
                break
            k += 1
        return k

    def link(self, exchange: Exchange, view: WireView | None = None) -> Link:
        """The link of the next request (requests must come in trace order)."""
        if view is None:
            view = wire_view(exchange.body, endpoint=exchange.endpoint)
        if any(e.kind == "reset" for e in exchange.log_events):
            self._cold()
        parts = view.parts() if view is not None else ()
        hashes = _prefix_hashes(parts)
        scope = self._scope(exchange)
        side_call = _side_call(exchange)
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
        returns_to: int | None = None
        if parent is not None and relation == "extends" and not side_call:
            # It starts with an older request's whole prompt, but the main line moved on since
            # (a tool order flipped and flipped back): what it could reuse, had it only appended,
            # is the main line's latest request — compare with that one.
            origin = self._known[parent]
            latest = self._latest.get(origin.conversation)
            if latest is not None and latest > parent and latest in self._known:
                newest = self._known[latest]
                common = self._shared_with(hashes, newest)
                # Only when the main line itself departed from that older request (a change
                # made, then undone): one that extends it too is a sibling, a side call off it.
                kept = len(origin.hashes)
                departed = (
                    len(newest.hashes) < kept
                    or newest.scope != origin.scope
                    or newest.hashes[kept - 1] != origin.hashes[-1]
                )
                if departed and common < len(newest.hashes):
                    returns_to = parent
                    parent, shared, relation = latest, common, "diverges"
        if parent is None:
            # 2. the longest shared prefix of whole components
            best = 0
            for k in range(len(parts), 0, -1):
                if (scope, hashes[k]) in self._through:
                    best = k
                    break
            # Under an explicit key, sharing the system prompt is enough for a request that
            # carries a checkpoint (a compaction that rewrote everything after the header); one
            # with no history and no checkpoint starts a conversation of its own under the key
            # (a new run reusing a session id, a sub-agent, a title call).
            keyed = exchange.conversation is not None
            continues = view is not None and (
                _has_history(view)
                or best >= 3
                or (keyed and best >= 1 and self._carries_checkpoint(exchange, scope, view))
            )
            if best >= 1 and continues:
                parent, shared, relation = self._through[(scope, hashes[best])], best, "diverges"
            elif view is not None and _has_history(view) and len(parts) > 2:
                # 3. a changed system prompt or tools: the same first message
                found = self._first_message.get((scope, parts[2]))
                if found is not None:
                    parent, shared, relation = found, 0, "diverges"
        branch = False
        if parent is not None and (side_call or self._branches_off(parent, hashes, view)):
            branch = True
            relation = "branch"
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
            if known.branch and not branch and relation in ("extends", "repeats"):
                self._promote(parent, known)  # a "side call" the conversation went on from
        else:
            key = self._new_conversation(exchange)
        if exchange.conversation is not None:
            if exchange.refused and parent is None:
                self._refused_start[exchange.conversation] = key
            else:
                self._refused_start.pop(exchange.conversation, None)
        link = Link(
            index=exchange.index,
            parent=parent,
            relation=relation,
            shared_parts=shared,
            conversation=key,
            returns_to=returns_to,
        )
        if not exchange.refused:
            self._remember(exchange.index, scope, parts, hashes, key, side_call=branch)
            if branch:
                answer = _text_of(exchange.response)
                if answer:
                    answers = self._answers.setdefault(scope, [])
                    answers.append(answer)
                    del answers[:-_ANSWERS]
            else:
                self._latest[key] = exchange.index
        return link

    def _branches_off(self, parent: int, hashes: Sequence[int], view: WireView | None) -> bool:
        """Shaped like a side call: the main line's latest prompt cut after a message it keeps
        (or an earlier main-line prompt whole), then one new user message — a compaction
        replaying the history's head with its instruction, a title call under the key."""
        known = self._known[parent]
        if known.branch or view is None or not view.messages or not _is_user(view.messages[-1]):
            return False
        latest = self._latest.get(known.conversation)
        if latest is None or latest not in self._known:
            return False
        main = self._known[latest]
        kept = len(hashes) - 2  # components before the new user message
        return 3 <= kept < len(main.hashes) and self._shared_with(hashes, main) == kept

    def _promote(self, index: int, known: _Known) -> None:
        """A branch a later request extends: it was the main line after all."""
        known.branch = False
        for h in known.hashes:
            entry = (known.scope, h)
            self._through[entry] = max(self._through.get(entry, -1), index)
        latest = self._latest.get(known.conversation)
        if latest is None or latest < index:
            self._latest[known.conversation] = index

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
        own = array("q", hashes[1:])
        if not side_call:  # a side call is extended by its own retries only
            for h in own:
                self._through[(scope, h)] = index
        if own:
            self._ends[(scope, own[-1])] = index
        first = (scope, parts[2]) if len(parts) > 2 else None
        if first is not None and not side_call:
            self._first_message[first] = index
        # Every request keeps its hashes: a window forgets entries by them, and a request that
        # returns to an earlier shape is told from a sibling by comparing two of them.
        self._known[index] = _Known(
            conversation=key, hashes=own, first=first, branch=side_call, scope=scope
        )
        if self._window is not None:
            while len(self._known) > self._window:
                self._forget(*self._known.popitem(last=False))

    def _forget(self, index: int, known: _Known) -> None:
        for h in known.hashes:
            entry = (known.scope, h)
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
