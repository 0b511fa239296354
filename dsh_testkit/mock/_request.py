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

from .._scrub_rules import REDACTED as REDACTED
from ._validate import ToolFacts

__all__ = ["Endpoint", "MockRequest", "ReceivedRequest", "redact"]

Endpoint: TypeAlias = Literal["chat", "anthropic", "models", "control", "unknown"]


def redact(value: Any, secret: str | None) -> Any:
    """``value`` (JSON) with every occurrence of ``secret`` in its strings replaced."""
    if not secret:
        return value
    if isinstance(value, str):
        return value.replace(secret, REDACTED)
    if isinstance(value, list):
        return [redact(v, secret) for v in value]
    if isinstance(value, dict):
        return {redact(k, secret): redact(v, secret) for k, v in value.items()}
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class MockRequest:
    """A validated model request, as a responder callable sees it."""

    seq: int
    """1-based position among all requests the mock received."""
    endpoint: Literal["chat", "anthropic"]
    path: str
    body: Any
    """The decoded JSON body (frozen)."""
    parsed: Any
    """The codec's parsed request (``dsh_core.providers.deepseek.parse_request`` or the
    Anthropic one), for responders that want typed access."""
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
    """Whether a queued script entry answered (rather than the responder or the default)."""
    extras: dict[str, Any] = field(default_factory=dict, compare=False)
    """Derived facts for tests: ``isolationKey`` (hashed), ``cacheHitTokens``, … (may grow)."""

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
        if self.entry is not None:
            out["entry"] = self.entry
        if self.error is not None:
            out["error"] = self.error
        if self.extras:
            out.update(self.extras)
        return out
