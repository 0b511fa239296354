"""What an :class:`~dsh_core.Agent` is configured and called with: its options, the contexts
its hooks and middleware receive, and the error a cancelled turn raises. The loop itself is
``_loop.py``.
"""

from __future__ import annotations

import asyncio
import random as _random
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from ._errors import AgentError
from ._header import LlmCallConfig, ToolSchema
from ._messages import Message
from ._request import CancelToken, Provider
from ._retry import RetryPolicy
from ._session import Session

__all__ = [
    "AgentOptions",
    "PreStepContext",
    "PreStepHook",
    "PromptContext",
    "RequestContext",
    "RequestMiddleware",
    "SystemSection",
    "TurnCancelledError",
]


def _uuid() -> str:
    return str(uuid.uuid4())


@dataclass(frozen=True, slots=True, kw_only=True)
class PromptContext:
    """What a system section may render from: where the loop is, and the log (read only)."""

    turn: int
    step: int
    session: Session


SystemSection: TypeAlias = "str | Callable[[PromptContext], str | None]"
"""A fixed text, or a function rendering the section each step (``None``/``''`` drops it)."""


class TurnCancelledError(AgentError):
    """``Agent.cancel()`` stopped a turn; the log is balanced (``turn/end`` reason ``aborted``)."""

    def __init__(self, *, turn: int, reason: str, partial: Message | None) -> None:
        super().__init__(f"turn {turn} was cancelled ({reason})")
        self.turn = turn
        self.reason = reason
        self.partial = partial
        """The interrupted stream's logged prefix, if the cancellation landed mid-stream."""


# A traceback names it where users import it from, not this private module.
TurnCancelledError.__module__ = "dsh_core"


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentOptions:
    """How an :class:`Agent` calls its model. Frozen: change it by building a new agent."""

    provider: str | None = None
    """The provider name recorded in the call config (e.g. ``deepseek``). ``None`` on a resumed
    session keeps the logged one."""
    model: str | None = None
    """``None`` on a resumed session keeps the logged model."""
    reasoning_effort: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] | None = None
    system: SystemSection | tuple[SystemSection, ...] | None = None
    """The system prompt: one section or several, rendered every step and joined by a blank line
    (empty sections are dropped)."""
    tool_order: tuple[str, ...] = ()
    """Tool names to put first in the header, in this order; the rest follow sorted by name."""
    message_prefix: tuple[Message, ...] = ()
    """Request-only messages sent right after the system prompt, before the history, in every
    request of this agent (a skills catalog, a workspace digest). Logged in the request header
    like the system prompt and tools (a change is a header change), never part of the derived
    history, so compaction cannot touch it and a fork does not bake it in."""
    max_parallel_tools: int = 10
    """Cap on concurrency-safe calls running at once (1 runs every call serially)."""
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    invariants: bool = False
    """Dev mode: check every loop request against the log's reconstruction before dispatch and
    validate every append (:class:`RequestInvariant`, :class:`LogInvariant`)."""
    snapshots_only: bool = False
    """Write header changes as full snapshots (reason ``change``), never deltas."""
    id_factory: Callable[[], str] = _uuid
    """Mints message ids (deterministic in tests)."""
    sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep
    """Waits between retries, in seconds (tests pass a fake that records and returns)."""
    random: Callable[[], float] = _random.random
    """The retry jitter's source, in [0, 1)."""

    def __post_init__(self) -> None:
        if self.stop is not None and not isinstance(self.stop, tuple):
            if isinstance(self.stop, str):
                raise AgentError("AgentOptions.stop must be a sequence of strings, not one string")
            object.__setattr__(self, "stop", tuple(self.stop))
        if isinstance(self.system, list):
            object.__setattr__(self, "system", tuple(self.system))
        if not isinstance(self.tool_order, tuple):
            object.__setattr__(self, "tool_order", tuple(self.tool_order))
        if not isinstance(self.message_prefix, tuple):
            object.__setattr__(self, "message_prefix", tuple(self.message_prefix))
        for i, message in enumerate(self.message_prefix):
            if not isinstance(message, Message):
                raise AgentError(
                    f"AgentOptions.message_prefix[{i}] must be a Message, got "
                    f"{type(message).__name__}"
                )
        if self.max_parallel_tools < 1:
            raise AgentError(
                f"AgentOptions.max_parallel_tools must be at least 1, got {self.max_parallel_tools}"
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class PreStepContext:
    """What a ``pre_step`` hook gets: the step about to open and its rendered assembly.

    Narrow on purpose (no agent): the log to read and append to, the provider (a compactor's
    one-shot call), the agent's options, the turn's cancel token (``cancel.cancel(reason)`` is
    what ``Agent.cancel`` does) and ``inject``.
    """

    session: Session
    provider: Provider
    turn: int
    step: int
    """The step about to open (its ``step/start`` is not logged yet)."""
    system: str | None
    """This step's rendered system prompt."""
    tools: tuple[ToolSchema, ...]
    """This step's tool schemas, in header order."""
    cancel: CancelToken
    options: AgentOptions
    """The agent's options (model, provider, ``id_factory``, …), read only."""
    inject: Callable[[str | Message], Message] = field(repr=False, compare=False)
    """Queue a user message for the NEXT request (the agent's ``inject``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestContext:
    """Everything a request middleware is given besides the config it may replace.

    Deliberately narrow: no agent, session, provider, tools or options, so nothing but the
    returned :class:`LlmCallConfig` can shape the request. ``inject`` is the one effect allowed,
    and it lands after the step's boundary (the NEXT request, never this one).
    """

    turn: int
    step: int
    """The step whose request is being prepared (its ``step/start`` is logged)."""
    config: LlmCallConfig
    """The frozen config as this middleware receives it (the previous middleware's result)."""
    inject: Callable[[str | Message], Message] = field(repr=False, compare=False)
    """Queue a user message for the NEXT request (the agent's ``inject``)."""


PreStepHook: TypeAlias = Callable[[PreStepContext], "Awaitable[None] | None"]
RequestMiddleware: TypeAlias = Callable[
    [LlmCallConfig, RequestContext], "LlmCallConfig | Awaitable[LlmCallConfig | None] | None"
]
"""Gets the frozen config; returns a replacement (or ``None`` to keep it)."""
