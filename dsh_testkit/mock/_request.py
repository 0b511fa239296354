"""What the mock knows about a request: the view a script callable gets, and the log record.

:class:`MockRequest` is the validated request as a responder callable sees it (the decoded body,
the codec's parsed form, and the facts the mock derived: thinking mode, tools, the last user
text). :class:`ReceivedRequest` is what ``GET /_dsh/requests`` and
:attr:`MockDeepSeek.requests <dsh_testkit.mock.MockDeepSeek.requests>` report for every request,
valid or not — with the API key redacted wherever it appeared.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from dsh_core.providers.anthropic import AnthropicRequest
from dsh_core.providers.deepseek import ChatRequest

from ._validate import ToolFacts

__all__ = ["AnsweredBy", "Endpoint", "MockRequest", "ReceivedRequest"]

Endpoint: TypeAlias = Literal["chat", "anthropic", "models", "control", "unknown"]
AnsweredBy: TypeAlias = Literal[
    "route", "script", "responder", "repeat-last", "call-tools", "default"
]
"""What answered a model request: a route, a queued script entry, the responder callable, or
what ``on_exhausted`` says (the last entry again, the call-tools answer, the default reply)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MockRequest:
    """A validated model request, as a responder callable sees it."""

    seq: int
    """1-based position among all requests the mock received."""
    endpoint: Literal["chat", "anthropic"]
    path: str
    body: Any
    """The decoded JSON body (frozen)."""
    parsed: ChatRequest | AnthropicRequest
    """The codec's typed request (``dsh_core.providers.deepseek.parse_request`` on the chat
    endpoint, ``anthropic.parse_request`` on the Anthropic one): what the mock's own checks and
    answers read, and what a responder should read too."""
    model: str
    """The model id as sent (echoed in the answer)."""
    stream: bool
    thinking: bool
    tools: ToolFacts
    user_id: str | None
    """``user_id`` (Chat Completions) or ``metadata.user_id`` (Anthropic format)."""
    last_user_text: str
    """The text of the last user message ("" when it carries only tool results)."""
    after_tool_result: bool
    """Whether the conversation ends with tool results (the model's turn after a tool ran)."""
    headers: tuple[tuple[str, str], ...] = ()
    """The request's header pairs as received, every credential-bearing one ``<REDACTED>``
    (what a route's ``header`` matcher reads, e.g. the ``x-dsh-conversation`` key)."""

    def header(self, name: str) -> str | None:
        """The first value of header ``name`` (any case), or ``None``."""
        wanted = name.lower()
        return next((value for key, value in self.headers if key.lower() == wanted), None)


@dataclass(frozen=True, slots=True, kw_only=True)
class ReceivedRequest:
    """One request as the mock recorded it (no API key anywhere)."""

    seq: int
    method: str
    path: str
    endpoint: Endpoint
    headers: tuple[tuple[str, str], ...]
    """Header pairs, credentials replaced by ``<REDACTED>``."""
    body: Any
    """The decoded JSON body, or the body text when it was not JSON (``None`` when empty)."""
    status: int
    """The status answered (a faulted reply still counts as its 200)."""
    entry: Any = None
    """The script entry that answered (its JSON), ``None`` for rejected requests."""
    error: Any = None
    """The API error that rejected the request (its JSON), if any."""
    scripted: bool = False
    """Whether the test's script answered: a queued entry or a route (rather than the
    responder, ``on_exhausted`` or the default)."""
    answered_by: AnsweredBy | None = None
    """What answered an admitted model request (``None`` for refused requests)."""
    route: int | None = None
    """The 1-based index of the route that answered, when one did."""
    extras: dict[str, Any] = field(default_factory=dict, compare=False)
    """Derived facts for tests: ``isolationKey`` (hashed), ``cacheHitTokens``, … (may grow)."""
    started: float | None = field(default=None, compare=False)
    """When the request reached the mock (UNIX seconds: the transport's stamp when it gives
    one, else when the model got it)."""
    finished: float | None = field(default=None, compare=False)
    """When the answer's last byte was handed to the client, once the transport says so
    (``None`` while it is in flight, or when no transport reported it)."""

    @property
    def json(self) -> Any:
        """The same as :attr:`body`: the decoded JSON body (as on every exchange shape)."""
        return self.body

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "seq": self.seq,
            "method": self.method,
            "path": self.path,
            "endpoint": self.endpoint,
            "headers": [list(h) for h in self.headers],
            "body": self.body,
            "status": self.status,
            "scripted": self.scripted,
        }
        if self.answered_by is not None:
            out["answeredBy"] = self.answered_by
        if self.route is not None:
            out["route"] = self.route
        if self.entry is not None:
            out["entry"] = self.entry
        if self.error is not None:
            out["error"] = self.error
        if self.extras:
            out.update(self.extras)
        if self.started is not None:
            out["started"] = self.started
        if self.finished is not None:
            out["finished"] = self.finished
        return out
