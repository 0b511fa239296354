"""Where an answer comes from: routes, the queued script, the responder, then ``on_exhausted``.

:class:`AnswerSources` holds the mock's scripting state and picks the entry for an admitted
request, in this order (docs/mock-server.md, "Routes and the script"):

1. the routes, in the order they were added: the first that matches and answers;
2. the queued script entries, in order;
3. the responder callable;
4. what ``on_exhausted`` says: the default reply, the last entry again, the call-tools answer
   (bounded by ``call_tools_limit`` answers that call tools, so agents that spawn agents stop
   fanning out), or — ``error`` — nothing: the mock refuses with a 410 naming the request and
   why no route matched (:func:`exhausted_error`).

It also words a request for errors and the strict check (:func:`describe_request`), and fills
in the reasoning the live API always sends in thinking mode (:func:`with_reasoning`). Not
thread-safe on its own: the facade calls it under its lock.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Final

from ..scrub._scrubber import redact_known, scrub_text
from ..scrub._spellings import KnownSecrets
from ._api_errors import ApiError
from ._errors import ScriptError
from ._request import AnsweredBy, MockRequest
from ._responder import call_each_tool_once, default_reply, generated_reasoning
from ._routes import Route, RouteAnswer, RouteMatch
from ._script import ErrorReply, OnExhausted, Reply, ScriptEntry

__all__ = [
    "DEFAULT_CALL_TOOLS_LIMIT",
    "SCRIPT_EXHAUSTED_STATUS",
    "AnswerSources",
    "Picked",
    "describe_request",
    "exhausted_error",
    "with_reasoning",
]

SCRIPT_EXHAUSTED_STATUS: Final = 410
"""What an exhausted script answers with ``onExhausted: "error"``: a 4xx that neither official
SDK (nor our provider) retries, unlike a 5xx."""

DEFAULT_CALL_TOOLS_LIMIT: Final = 16
"""Answers that call tools the ``call-tools`` answer gives per mock (since its last reset)
before it answers without tools: each conversation calls each tool once, and an agent whose tool
starts a sub-agent (a new conversation offered the same tools) would otherwise fan out without
end."""

_SNIPPET: Final = 80

Picked = tuple[ScriptEntry | None, AnsweredBy | None, Route | None]
"""The entry picked (``None``: nothing answers), what answered it, and the route if one did."""


def _cut(text: str, limit: int = _SNIPPET) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else f"{text[: limit - 1]}…"


def _optional(answer: RouteAnswer) -> bool:
    return isinstance(answer, (Reply, ErrorReply)) and answer.optional


def describe_request(request: MockRequest) -> str:
    """``request 3 (POST /chat/completions; model deepseek-v4-flash; last user message 'Hi';
    tools: search)``: enough to tell one request of a test from another."""
    parts = [f"POST {request.path}", f"model {request.model}"]
    if request.after_tool_result:
        parts.append("after tool results")
    elif request.last_user_text:
        parts.append(f"last user message {_cut(request.last_user_text)!r}")
    offered = [name for name, _ in request.tools.schemas]
    if offered:
        parts.append(f"tools: {', '.join(offered)}")
    conversation = request.header("x-dsh-conversation")
    if conversation:
        parts.append(f"conversation {conversation!r}")
    return f"request {request.seq} ({'; '.join(parts)})"


def exhausted_error(
    request: MockRequest, routes: tuple[Route, ...], *, secrets: KnownSecrets | None = None
) -> ApiError:
    """The 410 ``MOCK_SCRIPT_EXHAUSTED`` the mock answers when nothing scripted answers a request
    and ``on_exhausted`` is ``error`` (what the strict pytest fixtures set): the request in words
    and, for each route, why it did not answer. ``secrets`` are the request's own credentials,
    redacted from the words quoted of it (key-shaped text is, always)."""
    reasons = ["the script queue is empty"]
    for route in routes:
        why = "its answers are used up" if route.used_up else route.match.mismatch(request)
        reasons.append(f"{route.describe()}: {why or 'its responder declined'}")

    def scrubbed(text: str) -> str:
        # The request's own words are quoted: a key pasted into a prompt must not travel on in
        # the client's exception and the test's failure text.
        return scrub_text(str(redact_known(text, secrets)) if secrets else text)

    return ApiError(
        status=SCRIPT_EXHAUSTED_STATUS,
        message=scrubbed(
            f"MOCK_SCRIPT_EXHAUSTED: nothing scripted answers {describe_request(request)}: "
            + "; ".join(reasons)
            + ". Script it (push an entry or add a route: mock.push(...), mock.route(...), POST "
            "/_dsh/script, POST /_dsh/routes), or let unscripted requests get the default reply "
            "(onExhausted 'default'; in pytest, dsh_mock.lenient() or @pytest.mark.dsh_lenient)."
        ),
        type="invalid_request_error",
        code="MOCK_SCRIPT_EXHAUSTED",
        detail=scrubbed("; ".join(reasons)),
    )


def with_reasoning(entry: ScriptEntry, request: MockRequest) -> tuple[ScriptEntry, str | None]:
    """The entry as answered, and a warning for the request log.

    In thinking mode the live API always sends reasoning, and a client may rely on it (pydantic-ai
    drops an empty ``reasoning_content``, and the API then refuses the next request for the
    missing pass-back). A reply scripted without reasoning gets a short generated one
    (:func:`generated_reasoning`: the same request gives the same text); an explicit
    ``reasoning=""`` is kept, with a warning. A reply with nothing at all (``Reply()``, the
    behaviour ``empty``) stays the degenerate empty completion it scripts.
    """
    if not isinstance(entry, Reply) or not request.thinking:
        return entry, None
    if entry.reasoning is None:
        if not entry.text and not entry.tool_calls:
            return entry, None  # the degenerate empty completion (behaviour "empty"), on purpose
        return replace(entry, reasoning=generated_reasoning(entry, request)), None
    if entry.reasoning == "":
        return entry, (
            "a reply with empty reasoning in thinking mode: the live API always sends reasoning "
            "here, and a client that drops the empty field has its next request refused (the "
            "reasoning_content pass-back rule); leave reasoning out to get a generated one"
        )
    return entry, None


class AnswerSources:
    """The routes, the queue, the responder and ``on_exhausted`` of one mock."""

    def __init__(
        self,
        *,
        lock: threading.RLock,
        initial_on_exhausted: OnExhausted,
        call_tools_limit: int,
    ) -> None:
        if isinstance(call_tools_limit, bool) or not (
            isinstance(call_tools_limit, int) and call_tools_limit >= 0
        ):
            raise ValueError(f"call_tools_limit must be an integer ≥ 0, got {call_tools_limit!r}")
        self._lock = lock
        self.queue: deque[ScriptEntry] = deque()
        self.routes: list[Route] = []
        self.responder: Callable[[MockRequest], ScriptEntry | None] | None = None
        self.on_exhausted: OnExhausted = initial_on_exhausted
        self.call_tools_limit = call_tools_limit
        self.call_tools_used = 0
        """Answers of ``call-tools`` that called tools since the last reset."""
        self.last_entry: ScriptEntry | None = None

    def reset(self, entries: tuple[ScriptEntry, ...], on_exhausted: OnExhausted) -> None:
        self.queue = deque(entries)
        self.routes = []
        self.on_exhausted = on_exhausted
        self.call_tools_used = 0
        self.last_entry = None

    def add_route(self, match: RouteMatch, *, optional: bool = False) -> Route:
        route = Route(match, index=len(self.routes) + 1, lock=self._lock, optional=optional)
        self.routes.append(route)
        return route

    def add_route_json(self, obj: object, *, path: str = "route") -> Route:
        """A route from its JSON document: ``{"match": {...}, "reply": … | "replies": [...]}``."""
        if not isinstance(obj, Mapping):
            raise ScriptError(f"must be a JSON object, got {type(obj).__name__}", path=path)
        extra = sorted(set(obj) - {"match", "reply", "replies", "optional"})
        if extra:
            raise ScriptError(
                f"unknown keys {extra}; allowed: ['match', 'optional', 'reply', 'replies']",
                path=path,
            )
        optional = obj.get("optional")
        if optional is not None and not isinstance(optional, bool):
            raise ScriptError(f"must be true or false, got {optional!r}", path=f"{path}.optional")
        match = RouteMatch.from_json(obj.get("match", {}), path=f"{path}.match")
        answers = Route.answers_from_json(obj, path=path)
        route = self.add_route(match, optional=bool(optional))
        if answers is not None:
            route.respond(*answers)
        return route

    # -- picking ------------------------------------------------------------------------------

    def resolve(self, answer: RouteAnswer, request: MockRequest) -> ScriptEntry | None:
        """An answer turned into the entry for ``request`` (``None``: a responder declined)."""
        if answer == "default":
            return default_reply(request)
        if answer == "call-tools":
            return self._call_tools(request)
        if isinstance(answer, (Reply, ErrorReply)):
            return answer
        entry = answer(request)
        if entry is not None and not isinstance(entry, (Reply, ErrorReply)):
            raise ScriptError(
                f"a responder must return a Reply, an ErrorReply or None, got {entry!r}",
                path="responder",
            )
        return entry

    def _call_tools(self, request: MockRequest) -> Reply:
        if self.call_tools_used >= self.call_tools_limit:
            # Bounded: the answer a conversation gets once its tools ran, without new calls.
            return call_each_tool_once(request, call=False)
        reply = call_each_tool_once(request)
        if reply.tool_calls:
            self.call_tools_used += 1
        return reply

    def pick(self, request: MockRequest) -> Picked:
        """The entry for ``request``: routes, then the queue, the responder, ``on_exhausted``."""
        for route in self.routes:
            if route.used_up or route.match.mismatch(request) is not None:
                continue
            entry = route.take(request, lambda answer: self.resolve(answer, request))
            if entry is not None:
                return entry, "route", route
        if self.queue:
            return self.queue.popleft(), "script", None
        if self.responder is not None:
            answer = self.resolve(self.responder, request)
            if answer is not None:
                return answer, "responder", None
        if self.on_exhausted == "error":
            return None, None, None
        if self.on_exhausted == "repeat-last" and self.last_entry is not None:
            return self.last_entry, "repeat-last", None
        if self.on_exhausted == "call-tools":
            return self._call_tools(request), "call-tools", None
        return default_reply(request), "default", None

    # -- what is left ---------------------------------------------------------------------------

    def unused_routes(self) -> list[str]:
        """Routes never called, and sequences with answers left, in words (the strict check);
        optional routes and optional answers are not asked for."""
        out: list[str] = []
        for route in self.routes:
            if route.optional:
                continue
            required = [a for a in route.pending if not _optional(a)]
            if not route.called and (not route.pending or required):
                out.append(f"{route.describe()} was never matched")
            elif required:
                left = len(required)
                out.append(
                    f"{route.describe()} has {left} answer{'' if left == 1 else 's'} never used"
                )
        return out

    def routes_json(self) -> list[dict[str, Any]]:
        return [route.to_json() for route in self.routes]
