"""Routes: answers picked by what a request holds, as respx routes pick HTTP responses.

An ordered script answers requests in the order they come; an agent that runs tools in
parallel, spawns sub-agents or asks a side question (a title, a summary) does not send them in
an order a test can rely on. A route matches requests on what they hold — the last user
message, the offered tools, the model, a header, thinking mode, a predicate — and answers each
match::

    weather = mock.route(last_user="weather", tools=["get_weather"])
    weather.respond(Reply(tool_calls=[ToolCall(name="get_weather", arguments={"city": "Oslo"})]))
    mock.route(after_tool_result=True).reply(text="Sunny in Oslo.")
    ...
    assert weather.call_count == 1

The answer is one entry (it answers every match), several entries or a list (one match each,
in order; then the route is used up and stops matching), a responder callable (called with each
match; ``None`` declines, and the request goes on to the next route), ``"call-tools"`` or
``"default"`` (the mock's automatic answers). A route without an answer answers with the
default reply, so ``route(...)`` alone is an expectation (``route.called``).

Precedence (:class:`~dsh_testkit.mock.MockDeepSeek`): routes first, in the order they were
added (the first that matches and answers wins), then the queued script, then the responder,
then ``on_exhausted``. Routes are the specific answers, the queue the general order.

Every matcher and answer of a route except a predicate and a callable also reads from JSON
(``POST /_dsh/routes``, :meth:`Route.from_json`), so a test in any language can route.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from ._errors import ScriptError
from ._request import MockRequest
from ._script import ErrorReply, Reply, ScriptEntry, ToolCall, entry_from_json

_TOOL_CALL_FIELDS: Final = ("name", "arguments", "id", "fragments")
"""What ``route(...).reply(tool_calls=[{...}])`` takes for a call (a :class:`ToolCall`'s fields)."""

__all__ = [
    "AUTOMATIC_ANSWERS",
    "Route",
    "RouteAnswer",
    "RouteMatch",
    "TextMatcher",
]

TextMatcher: TypeAlias = str | re.Pattern[str]
"""A string (the text contains it; for ``model``, equals it) or a compiled regular expression
(``re.search``)."""

AUTOMATIC_ANSWERS: Final = ("call-tools", "default")
"""Answers by name: ``call-tools`` (each offered tool called once per conversation, bounded by
the mock's ``call_tools_limit``), ``default`` (the deterministic default reply)."""

RouteAnswer: TypeAlias = (
    ScriptEntry | Callable[[MockRequest], ScriptEntry | None] | Literal["call-tools", "default"]
)
"""What a route answers with: an entry, a responder callable or an automatic answer's name."""

_SNIPPET: Final = 60


def _cut(text: str, limit: int = _SNIPPET) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else f"{text[: limit - 1]}…"


def _text_matcher(value: object, path: str) -> TextMatcher | None:
    if value is None or isinstance(value, (str, re.Pattern)):
        return value
    raise ScriptError(f"must be a string or a compiled regex, got {value!r}", path=path)


def _shown(matcher: TextMatcher) -> str:
    return f"/{matcher.pattern}/" if isinstance(matcher, re.Pattern) else repr(matcher)


def _text_matches(matcher: TextMatcher, text: str, *, whole: bool) -> bool:
    if isinstance(matcher, re.Pattern):
        return matcher.search(text) is not None
    return text == matcher if whole else matcher in text


@dataclass(frozen=True, slots=True, kw_only=True)
class RouteMatch:
    """What a route's requests must hold; every given matcher must match (``None``: any)."""

    last_user: TextMatcher | None = None
    """The last user message's text contains this string (or matches this regex)."""
    model: TextMatcher | None = None
    """The model id as sent equals this string (or matches this regex)."""
    tools: bool | tuple[str, ...] | None = None
    """``True``: some tool is offered; ``False``: none is; names: each of them is offered."""
    headers: tuple[tuple[str, TextMatcher | None], ...] = ()
    """Request headers (name, any case): equal to the string, matching the regex, or, for
    ``None``, present with any value."""
    endpoint: Literal["chat", "anthropic"] | None = None
    """The endpoint: Chat Completions or the Anthropic format."""
    thinking: bool | None = None
    """Thinking mode is on (``True``) or off (``False``) for the request."""
    after_tool_result: bool | None = None
    """The conversation ends with tool results (the model's turn after its tools ran)."""
    when: Callable[[MockRequest], bool] | None = None
    """A predicate of your own (not available over JSON)."""

    def __post_init__(self) -> None:
        _text_matcher(self.last_user, "route.last_user")
        _text_matcher(self.model, "route.model")
        tools = self.tools
        if isinstance(tools, str):
            object.__setattr__(self, "tools", (tools,))
        elif tools is not None and not isinstance(tools, bool):
            names = tuple(tools)
            if not all(isinstance(n, str) and n for n in names):
                raise ScriptError(
                    f"must be True, False or tool names, got {tools!r}", path="route.tools"
                )
            object.__setattr__(self, "tools", names)
        headers = self.headers
        pairs = list(headers.items()) if isinstance(headers, Mapping) else list(headers)
        checked: list[tuple[str, TextMatcher | None]] = []
        for pair in pairs:
            if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], str)):
                raise ScriptError(f"must be (name, value) pairs, got {pair!r}", path="route.header")
            checked.append((pair[0].lower(), _text_matcher(pair[1], f"route.header[{pair[0]}]")))
        object.__setattr__(self, "headers", tuple(checked))
        if self.endpoint not in (None, "chat", "anthropic"):
            raise ScriptError(
                f"must be 'chat' or 'anthropic', got {self.endpoint!r}", path="route.endpoint"
            )
        for name in ("thinking", "after_tool_result"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, bool):
                raise ScriptError(f"must be True or False, got {value!r}", path=f"route.{name}")
        if self.when is not None and not callable(self.when):
            raise ScriptError(f"must be a callable, got {self.when!r}", path="route.when")

    # -- matching -------------------------------------------------------------------------------

    def mismatch(self, request: MockRequest) -> str | None:
        """Why ``request`` does not match, in words (the first matcher that fails), or ``None``."""
        if self.endpoint is not None and request.endpoint != self.endpoint:
            return f"the endpoint is {request.endpoint}"
        if self.model is not None and not _text_matches(self.model, request.model, whole=True):
            return f"the model is {request.model!r}"
        if self.last_user is not None and not _text_matches(
            self.last_user, request.last_user_text, whole=False
        ):
            return f"the last user message is {_cut(request.last_user_text)!r}"
        offered = [name for name, _ in request.tools.schemas]
        if self.tools is True and not offered:
            return "no tool is offered"
        if self.tools is False and offered:
            return f"tools are offered ({', '.join(offered)})"
        if isinstance(self.tools, tuple):
            missing = [name for name in self.tools if name not in offered]
            if missing:
                listed = ", ".join(offered) if offered else "none"
                return f"{', '.join(missing)} not offered (offered: {listed})"
        for name, expected in self.headers:
            value = next((v for k, v in request.headers if k.lower() == name), None)
            if value is None:
                return f"no {name} header"
            if expected is not None and not _text_matches(expected, value, whole=True):
                return f"the {name} header is {_cut(value)!r}"
        if self.thinking is not None and request.thinking != self.thinking:
            return "thinking mode is " + ("on" if request.thinking else "off")
        if self.after_tool_result is not None and (
            request.after_tool_result != self.after_tool_result
        ):
            return (
                "the conversation ends with tool results"
                if request.after_tool_result
                else "the conversation does not end with tool results"
            )
        if self.when is not None:
            try:
                said = self.when(request)
            except Exception as exc:
                raise ScriptError(
                    f"the predicate of the route matching {self.describe()} raised "
                    f"{type(exc).__name__}: {exc}",
                    path="route.when",
                ) from exc
            if not said:
                return f"the predicate {getattr(self.when, '__name__', 'when')} said no"
        return None

    def describe(self) -> str:
        """The matchers in words (``any request`` when there are none)."""
        parts: list[str] = []
        if self.endpoint is not None:
            parts.append(f"endpoint {self.endpoint}")
        if self.model is not None:
            parts.append(f"model {_shown(self.model)}")
        if self.last_user is not None:
            verb = "matches" if isinstance(self.last_user, re.Pattern) else "contains"
            parts.append(f"last user message {verb} {_shown(self.last_user)}")
        if self.tools is True:
            parts.append("some tool offered")
        elif self.tools is False:
            parts.append("no tool offered")
        elif isinstance(self.tools, tuple):
            parts.append(f"tools {', '.join(self.tools)} offered")
        for name, value in self.headers:
            parts.append(f"header {name}" + ("" if value is None else f" = {_shown(value)}"))
        if self.thinking is not None:
            parts.append("thinking " + ("on" if self.thinking else "off"))
        if self.after_tool_result is not None:
            parts.append(("" if self.after_tool_result else "not ") + "after tool results")
        if self.when is not None:
            parts.append(f"when {getattr(self.when, '__name__', 'predicate')}")
        return "; ".join(parts) if parts else "any request"

    # -- JSON ---------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The matchers as JSON (a predicate is shown by name only: it cannot travel)."""
        out: dict[str, Any] = {}

        def text(value: TextMatcher) -> Any:
            return {"regex": value.pattern} if isinstance(value, re.Pattern) else value

        if self.last_user is not None:
            out["lastUser"] = text(self.last_user)
        if self.model is not None:
            out["model"] = text(self.model)
        if self.tools is not None:
            out["tools"] = self.tools if isinstance(self.tools, bool) else list(self.tools)
        if self.headers:
            out["headers"] = {
                name: (None if value is None else text(value)) for name, value in self.headers
            }
        if self.endpoint is not None:
            out["endpoint"] = self.endpoint
        if self.thinking is not None:
            out["thinking"] = self.thinking
        if self.after_tool_result is not None:
            out["afterToolResult"] = self.after_tool_result
        if self.when is not None:
            out["when"] = getattr(self.when, "__name__", "predicate")
        return out

    @classmethod
    def from_json(cls, obj: object, *, path: str = "match") -> RouteMatch:
        """Matchers from JSON: ``lastUser``, ``model`` (a string or ``{"regex": …}``),
        ``tools`` (``true``, ``false`` or names), ``headers`` (``{name: value | {"regex": …} |
        null}``), ``endpoint``, ``thinking``, ``afterToolResult``."""
        if not isinstance(obj, Mapping):
            raise ScriptError(f"must be a JSON object, got {type(obj).__name__}", path=path)
        allowed = (
            "lastUser",
            "model",
            "tools",
            "headers",
            "endpoint",
            "thinking",
            "afterToolResult",
        )
        extra = sorted(set(obj) - set(allowed))
        if extra:
            raise ScriptError(f"unknown keys {extra}; allowed: {sorted(allowed)}", path=path)

        def text(value: object, where: str) -> TextMatcher | None:
            if isinstance(value, Mapping):
                if set(value) != {"regex"} or not isinstance(value["regex"], str):
                    raise ScriptError('must be a string or {"regex": "..."}', path=where)
                try:
                    return re.compile(value["regex"])
                except re.error as exc:
                    raise ScriptError(f"not a valid regex: {exc}", path=where) from None
            if value is None or isinstance(value, str):
                return value
            raise ScriptError(f'must be a string or {{"regex": "..."}}, got {value!r}', path=where)

        headers = obj.get("headers", {})
        if not isinstance(headers, Mapping):
            raise ScriptError("must be an object of header names", path=f"{path}.headers")
        tools = obj.get("tools")
        if isinstance(tools, list):
            tools = tuple(tools)
        last_user = text(obj.get("lastUser"), f"{path}.lastUser")
        model = text(obj.get("model"), f"{path}.model")
        header_pairs = tuple(
            (str(name), text(value, f"{path}.headers.{name}")) for name, value in headers.items()
        )
        try:
            return cls(
                last_user=last_user,
                model=model,
                tools=tools,
                headers=header_pairs,
                endpoint=obj.get("endpoint"),
                thinking=obj.get("thinking"),
                after_tool_result=obj.get("afterToolResult"),
            )
        except ScriptError as exc:
            where = exc.path.removeprefix("route.").replace("after_tool_result", "afterToolResult")
            raise ScriptError(str(exc).split(": ", 1)[-1], path=f"{path}.{where}") from None


def _check_answer(answer: object, path: str) -> RouteAnswer:
    if isinstance(answer, (Reply, ErrorReply)) or answer in AUTOMATIC_ANSWERS:
        return answer
    if callable(answer):
        return answer
    raise ScriptError(
        "must be a Reply, an ErrorReply, a responder callable, 'call-tools' or 'default', got "
        f"{answer!r}",
        path=path,
    )


class Route:
    """One route of a mock: its matchers, its answers and the requests it answered.

    Made by :meth:`MockDeepSeek.route <dsh_testkit.mock.MockDeepSeek.route>` (and the
    ``dsh_mock`` fixture's ``route``); :meth:`respond` and :meth:`reply` set what it answers and
    return the route, so ``mock.route(model="x").reply(text="hi")`` reads as one line.
    """

    def __init__(
        self, match: RouteMatch, *, index: int, lock: threading.RLock, optional: bool = False
    ) -> None:
        if not isinstance(optional, bool):
            raise ScriptError(f"must be True or False, got {optional!r}", path="route.optional")
        self.match = match
        """The matchers."""
        self.optional = optional
        """The strict check does not ask for this route: never matched, or answers left over,
        the test still passes (respx's ``assert_all_called``, per route)."""
        self.index = index
        """1-based position among the mock's routes (errors and the request log name it)."""
        self._lock = lock
        self._repeat: RouteAnswer | None = None
        self._queue: list[RouteAnswer] = []
        self._given = False
        self._calls: list[MockRequest] = []

    def __repr__(self) -> str:
        optional = " (optional)" if self.optional else ""
        return f"<Route {self.index}{optional}: {self.match.describe()}; {self.call_count} call(s)>"

    def describe(self) -> str:
        """``route 1 (last user message contains 'weather')``."""
        return f"route {self.index} ({self.match.describe()})"

    # -- answers --------------------------------------------------------------------------------

    def respond(self, *answers: RouteAnswer | Sequence[RouteAnswer]) -> Route:
        """Set what the route answers; replaces earlier answers.

        One answer (an entry, a responder callable, ``"call-tools"``, ``"default"``) answers
        every match. Several answers, or one list of them, answer one match each, in order; once
        they are used the route stops matching (and the strict fixtures report any left over).
        A responder returning ``None`` declines: the request goes on to the next route.
        """
        if not answers:
            raise ScriptError("give at least one answer", path=f"route {self.index}")
        if len(answers) == 1 and isinstance(answers[0], (list, tuple)):
            items = list(answers[0])
            sequence = True
        else:
            items = list(answers)
            sequence = len(items) > 1
        checked = [
            _check_answer(item, f"route {self.index}.answers[{i}]") for i, item in enumerate(items)
        ]
        with self._lock:
            self._given = True
            if sequence:
                self._repeat, self._queue = None, checked
            else:
                self._repeat, self._queue = checked[0], []
        return self

    def reply(
        self,
        text: str | None = "",
        *,
        reasoning: str | None = None,
        tool_calls: Iterable[ToolCall | Mapping[str, Any]] | None = (),
        **fields: Any,
    ) -> Route:
        """Answer every match with ``Reply(text=…, reasoning=…, tool_calls=…, **fields)``;
        a tool call may be a ``ToolCall`` or a mapping of its fields (``None``: none)."""
        if tool_calls is None:
            tool_calls = ()
        if isinstance(tool_calls, (ToolCall, Mapping)) or not isinstance(tool_calls, Iterable):
            raise ScriptError(
                f"must be a list of ToolCall or mappings (even for one call), got {tool_calls!r}",
                path="reply.tool_calls",
            )
        calls = []
        for i, call in enumerate(tool_calls):
            if isinstance(call, ToolCall):
                calls.append(call)
                continue
            if not isinstance(call, Mapping):
                raise ScriptError(
                    f"must be a ToolCall or a mapping of its fields, got {call!r}",
                    path=f"reply.tool_calls[{i}]",
                )
            try:
                calls.append(ToolCall(**dict(call)))
            except TypeError as exc:  # an unknown field
                raise ScriptError(
                    f"{exc}; a tool call takes {', '.join(_TOOL_CALL_FIELDS)}",
                    path=f"reply.tool_calls[{i}]",
                ) from None
        return self.respond(
            Reply(text=text, reasoning=reasoning, tool_calls=tuple(calls), **fields)
        )

    # -- state ----------------------------------------------------------------------------------

    @property
    def calls(self) -> tuple[MockRequest, ...]:
        """The requests this route answered, in order."""
        with self._lock:
            return tuple(self._calls)

    @property
    def call_count(self) -> int:
        """How many requests this route answered."""
        with self._lock:
            return len(self._calls)

    @property
    def called(self) -> bool:
        """Whether the route answered any request."""
        return self.call_count > 0

    @property
    def pending(self) -> tuple[RouteAnswer, ...]:
        """Answers of a sequence not used yet (empty for a route that repeats one answer)."""
        with self._lock:
            return tuple(self._queue)

    @property
    def used_up(self) -> bool:
        """A route given a sequence of answers that used them all (it no longer matches)."""
        with self._lock:
            return self._given and self._repeat is None and not self._queue

    def take(
        self, request: MockRequest, resolve: Callable[[RouteAnswer], ScriptEntry | None]
    ) -> ScriptEntry | None:
        """The answer for a request this route matched (``None``: it declines); called by the
        mock under its lock. ``resolve`` turns an answer into an entry (it runs callables and
        the automatic answers)."""
        if not self._given:
            entry = resolve("default")
        elif self._repeat is not None:
            entry = resolve(self._repeat)
        elif self._queue:
            entry = resolve(self._queue[0])
            if entry is not None:
                self._queue.pop(0)
        else:
            return None
        if entry is not None:
            self._calls.append(request)
        return entry

    # -- JSON -----------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The route as ``GET /_dsh/routes`` shows it."""
        with self._lock:

            def shown(answer: RouteAnswer) -> Any:
                if isinstance(answer, (Reply, ErrorReply)):
                    return answer.to_json()
                if isinstance(answer, str):
                    return answer
                return f"<responder {getattr(answer, '__name__', 'callable')}>"

            out: dict[str, Any] = {"index": self.index, "match": self.match.to_json()}
            if self.optional:
                out["optional"] = True
            if self._repeat is not None:
                out["reply"] = shown(self._repeat)
            elif self._given:
                out["replies"] = [shown(a) for a in self._queue]
            out["calls"] = [r.seq for r in self._calls]
            return out

    @staticmethod
    def answers_from_json(obj: Mapping[str, Any], *, path: str) -> list[Any] | None:
        """The answers of a route document: ``reply`` (one entry, or ``"call-tools"`` /
        ``"default"``, answering every match) or ``replies`` (a list, one match each);
        ``None`` when neither is given. The result is what :meth:`respond` takes."""
        if "reply" in obj and "replies" in obj:
            raise ScriptError("give 'reply' or 'replies', not both", path=path)

        def one(value: object, where: str) -> Any:
            if isinstance(value, str):
                if value not in AUTOMATIC_ANSWERS:
                    raise ScriptError(
                        f"must be an entry, 'call-tools' or 'default', got {value!r}", path=where
                    )
                return value
            return entry_from_json(value, path=where)

        if "reply" in obj:
            return [one(obj["reply"], f"{path}.reply")]
        if "replies" in obj:
            replies = obj["replies"]
            if not isinstance(replies, list) or not replies:
                raise ScriptError("must be a non-empty array of entries", path=f"{path}.replies")
            return [[one(r, f"{path}.replies[{i}]") for i, r in enumerate(replies)]]
        return None
