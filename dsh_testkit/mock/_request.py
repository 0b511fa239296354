"""What the mock knows about a request: the view a script callable gets, and the log record.

:class:`MockRequest` is the validated request as a responder callable sees it (the decoded body,
the codec's parsed form, and the facts the mock derived: thinking mode, tools, the last user
text). :class:`ReceivedRequest` is what ``GET /_dsh/requests`` and
:attr:`MockDeepSeek.requests <dsh_testkit.mock.MockDeepSeek.requests>` report for every request,
valid or not — with the API key redacted wherever it appeared.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from dsh_core.providers import AnthropicRequest, ChatRequest

from .._scrub_rules import REDACTED as REDACTED
from ._validate import ToolFacts

__all__ = ["REDACTED", "AnsweredBy", "Endpoint", "MockRequest", "ReceivedRequest", "redact"]

Endpoint: TypeAlias = Literal["chat", "anthropic", "models", "control", "unknown"]
AnsweredBy: TypeAlias = Literal[
    "route", "script", "responder", "repeat-last", "call-tools", "default"
]
"""What answered a model request: a route, a queued script entry, the responder callable, or
what ``on_exhausted`` says (the last entry again, the call-tools answer, the default reply)."""


def redact(value: Any, secrets: str | Iterable[str] | None) -> Any:
    """``value`` (JSON) with every occurrence of each secret in its strings replaced.

    Iterative, so a deeply nested value cannot exhaust the stack; a copy is made only when there
    is something to redact."""
    if secrets is None:
        return value
    wanted = tuple(s for s in ([secrets] if isinstance(secrets, str) else secrets) if s)
    if not wanted:
        return value

    def text(item: str) -> str:
        for secret in wanted:
            if secret in item:
                item = item.replace(secret, REDACTED)
        return item

    if isinstance(value, str):
        return text(value)
    if not isinstance(value, (list, dict)):
        return value
    root: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(root, 0, value)]
    while stack:
        target, key, item = stack.pop()
        if isinstance(item, str):
            target[key] = text(item)
        elif isinstance(item, list):
            copy: list[Any] = [None] * len(item)
            target[key] = copy
            stack.extend((copy, i, v) for i, v in enumerate(item))
        elif isinstance(item, dict):
            mapping: dict[str, Any] = {}
            target[key] = mapping
            for k, v in item.items():
                new_key = text(k) if isinstance(k, str) else k
                mapping[new_key] = None
                stack.append((mapping, new_key, v))
        else:
            target[key] = item
    return root[0]


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
        return out
