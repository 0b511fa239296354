"""Tools: their schemas and callables, the registry, and the step's tool scheduler.

A :class:`Tool` is a :class:`ToolSchema` (what the model sees) plus an async callable (what runs).
The :class:`ToolRegistry` renders the schemas in a deterministic order every step (sorted by
name unless an explicit order is given), so a tool added mid-session shows up as a logged header
change, never as a silent difference.

:class:`ToolScheduler` runs one assistant message's calls (docs/design.md §6.6): a call whose tool
declares itself concurrency-safe joins a rolling parallel group (capped), any other call is an
exclusive barrier. ``tool/call`` is logged when a call starts; ``tool/result`` is committed in
model order, citing its ``tool/call``. Every call id gets exactly one result: a tool's exception,
unknown tool or invalid JSON arguments become an error result the model sees, and on
cancellation running calls are cancelled and calls never started get an error result too.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from ._cancel import Aborted
from ._errors import AgentError, JsonValueError
from ._header import ToolSchema
from ._json import FrozenDict, freeze_json
from ._json_text import loads_json
from ._messages import ContentBlock, Message, ToolCallBlock, tool_result_message
from ._request import CancelToken
from ._session import Session

__all__ = [
    "Tool",
    "ToolContext",
    "ToolFunction",
    "ToolOutput",
    "ToolRegistry",
    "ToolScheduler",
    "tool",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolContext:
    """What a running tool may know about its call, and the two effects it may have on the turn.

    Deliberately narrow (no agent, no writable session): a tool can stop the turn
    (``cancel.cancel(reason)``, what ``Agent.cancel`` does) and add a user message to the next
    request (``inject``); everything else it does goes through its result.
    """

    call_id: str
    name: str
    turn: int
    step: int
    session_id: str
    cancel: CancelToken
    """The turn's cancel token: a long-running tool may watch it and stop early, or cancel the
    turn itself with ``cancel.cancel(reason)``."""
    inject: Callable[[str | Message], Message] | None = field(
        default=None, repr=False, compare=False
    )
    """Queue a user message for the NEXT request (the agent's ``inject``); ``None`` when the
    tools run without an agent."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolOutput:
    """A tool's result as the model will see it."""

    content: str | tuple[ContentBlock, ...]
    is_error: bool = False
    error: FrozenDict | None = None
    """Internal failure identity ``{name, code}``, logged beside the result (not model-visible)."""
    meta: Any = None
    """Tool-private presentation payload (lossless JSON), logged beside the result."""

    def __post_init__(self) -> None:
        if not isinstance(self.content, str):
            object.__setattr__(self, "content", tuple(self.content))
        if self.error is not None and not isinstance(self.error, FrozenDict):
            object.__setattr__(self, "error", freeze_json(dict(self.error), path="error"))

    @classmethod
    def failure(cls, text: str, *, name: str, code: str) -> ToolOutput:
        """An error result: ``text`` for the model, ``{name, code}`` for the log."""
        return cls(content=text, is_error=True, error=freeze_json({"name": name, "code": code}))


ToolReturn: TypeAlias = "str | ToolOutput | Sequence[ContentBlock]"
ToolFunction: TypeAlias = Callable[[Any, ToolContext], Awaitable[ToolReturn]]
"""``async def run(args, ctx)``: ``args`` are the parsed JSON arguments (a ``dict``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Tool:
    """A callable tool: the schema the model sees and the coroutine that runs a call."""

    schema: ToolSchema
    run: ToolFunction
    concurrency_safe: bool | Callable[[Any], bool] = False
    """True (or a predicate of the parsed arguments returning exactly ``True``) lets calls run in
    parallel with their concurrency-safe neighbours; anything else makes the call a barrier."""

    @property
    def name(self) -> str:
        return self.schema.name

    def is_concurrency_safe(self, args: Any) -> bool:
        flag = self.concurrency_safe
        if callable(flag):
            try:
                return flag(args) is True
            except Exception:
                return False  # a predicate that cannot decide makes the call exclusive
        return flag is True


def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    concurrency_safe: bool | Callable[[Any], bool] = False,
) -> Callable[[ToolFunction], Tool]:
    """Decorate ``async def fn(args, ctx)`` into a :class:`Tool`.

    The name defaults to the function's name, the description to its docstring, the parameters
    to an empty object schema.
    """

    def wrap(fn: ToolFunction) -> Tool:
        if not inspect.iscoroutinefunction(fn):
            raise AgentError(
                f"tool {name or getattr(fn, '__name__', fn)!r} must be an async function"
            )
        schema = ToolSchema(
            name=name or fn.__name__,
            description=description
            if description is not None
            else inspect.cleandoc(fn.__doc__ or ""),
            parameters=freeze_json(
                dict(parameters or {"type": "object", "properties": {}}), path="parameters"
            ),
        )
        return Tool(schema=schema, run=fn, concurrency_safe=concurrency_safe)

    return wrap


class ToolRegistry:
    """The agent's tools, rendered in a deterministic order.

    ``order`` lists names to put first, in that order (names not registered are skipped); every
    other tool follows, sorted by name.
    """

    __slots__ = ("_order", "_tools")

    def __init__(self, tools: Iterable[Tool] = (), *, order: Sequence[str] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._order = tuple(order)
        for item in tools:
            self.register(item)

    def register(self, item: Tool, *, replace: bool = False) -> Tool:
        """Add a tool; a second tool of the same name needs ``replace=True``."""
        if not isinstance(item, Tool):
            raise AgentError(f"register() takes a Tool, got {type(item).__name__}")
        if item.name in self._tools and not replace:
            raise AgentError(
                f"a tool named {item.name!r} is already registered; pass replace=True to swap it"
            )
        self._tools[item.name] = item
        return item

    def unregister(self, name: str) -> Tool:
        try:
            return self._tools.pop(name)
        except KeyError:
            raise AgentError(
                f"no tool named {name!r} is registered (have: {sorted(self._tools)})"
            ) from None

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __len__(self) -> int:
        return len(self._tools)

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._ordered())

    def _ordered(self) -> list[Tool]:
        first = [self._tools[n] for n in dict.fromkeys(self._order) if n in self._tools]
        listed = {t.name for t in first}
        rest = sorted(
            (t for t in self._tools.values() if t.name not in listed), key=lambda t: t.name
        )
        return first + rest

    def schemas(self) -> tuple[ToolSchema, ...]:
        """The schemas in header order."""
        return tuple(t.schema for t in self._ordered())

    def snapshot(self) -> dict[str, Tool]:
        """The tools by name, as of now (a step runs its calls against one snapshot)."""
        return dict(self._tools)


# --------------------------------------------------------------------------------------------
# Scheduling


@dataclass(slots=True)
class _Call:
    block: ToolCallBlock
    tool: Tool | None = None
    args: Any = None
    early: ToolOutput | None = None
    """A result known without running anything (unknown tool, invalid arguments)."""
    call_seq: int | None = None
    outcome: ToolOutput | None = None
    task: asyncio.Task[ToolOutput] | None = None
    exclusive: bool = False


_MAX_ARGUMENT_DEPTH = 256
"""How deep a tool call's arguments may nest. Deeper arguments are refused with a tool error the
model sees (``INVALID_ARGUMENTS``), so no tool's own recursive code (``repr``, ``copy``, schema
validators) can hit the recursion limit on what a model sent."""


def _parse_arguments(raw: str, name: str) -> tuple[Any, ToolOutput | None]:
    if raw.strip() == "":
        return {}, None
    try:
        value = loads_json(raw, max_depth=_MAX_ARGUMENT_DEPTH)
    except JsonValueError as exc:  # valid JSON, nested past the limit
        return None, ToolOutput.failure(
            f"Error: the arguments of {name!r} nest deeper than {_MAX_ARGUMENT_DEPTH} levels; "
            f"send flatter arguments matching the tool's parameters ({exc})",
            name="InvalidArgumentsError",
            code="INVALID_ARGUMENTS",
        )
    except ValueError as exc:
        return None, ToolOutput.failure(
            f"Error: the arguments of {name!r} are not valid JSON ({exc}); "
            "send a JSON object matching the tool's parameters",
            name="InvalidArgumentsError",
            code="INVALID_ARGUMENTS",
        )
    if not isinstance(value, dict):
        return None, ToolOutput.failure(
            f"Error: the arguments of {name!r} must be a JSON object, got {type(value).__name__}",
            name="InvalidArgumentsError",
            code="INVALID_ARGUMENTS",
        )
    return value, None


def _coerce(value: object, name: str) -> ToolOutput:
    if isinstance(value, ToolOutput):
        return value
    if isinstance(value, str):
        return ToolOutput(content=value)
    if isinstance(value, Sequence) and all(
        hasattr(b, "to_json") and hasattr(b, "type") for b in value
    ):
        return ToolOutput(content=tuple(value))
    return ToolOutput.failure(
        f"Error: tool {name!r} returned {type(value).__name__}; "
        "a tool must return a str, content blocks or a ToolOutput",
        name="InvalidToolResultError",
        code="INVALID_RESULT",
    )


async def _execute(tool: Tool, args: Any, ctx: ToolContext) -> ToolOutput:
    try:
        value = await tool.run(args, ctx)
    except asyncio.CancelledError:
        raise
    except Exception as exc:
        return ToolOutput.failure(
            f"Error: {type(exc).__name__}: {exc}", name=type(exc).__name__, code="TOOL_ERROR"
        )
    return _coerce(value, tool.name)


def _settled(task: asyncio.Task[ToolOutput]) -> ToolOutput:
    if task.cancelled():  # the tool cancelled itself; the turn goes on
        return ToolOutput.failure(
            "Error: the tool call was cancelled", name="CancelledError", code="CANCELLED"
        )
    return task.result()


_ABORTED_RUNNING = "Error: tool call aborted while running"
_ABORTED_BEFORE = "Error: tool call aborted before dispatch"


class ToolScheduler:
    """Runs one assistant message's tool calls and commits one result per call, in model order."""

    def __init__(
        self,
        *,
        session: Session,
        tools: Mapping[str, Tool],
        turn: int,
        step: int,
        cancel: CancelToken,
        id_factory: Callable[[], str],
        max_parallel: int,
        inject: Callable[[str | Message], Message] | None = None,
    ) -> None:
        """``max_parallel`` is at least 1 (``AgentOptions`` validates it)."""
        self._session = session
        self._tools = tools
        self._turn = turn
        self._step = step
        self._cancel = cancel
        self._id_factory = id_factory
        self._max_parallel = max_parallel
        self._inject = inject
        self._waiter: asyncio.Task[None] | None = None

    def _prepare(self, block: ToolCallBlock) -> _Call:
        call = _Call(block=block)
        found = self._tools.get(block.name)
        if found is None:
            available = ", ".join(sorted(self._tools)) or "none"
            call.early = ToolOutput.failure(
                f"Error: unknown tool {block.name!r}; available tools: {available}",
                name="UnknownToolError",
                code="UNKNOWN_TOOL",
            )
            return call
        call.tool = found
        call.args, call.early = _parse_arguments(block.arguments, block.name)
        return call

    def _is_exclusive(self, call: _Call) -> bool:
        if call.early is not None or call.tool is None:
            return False  # nothing runs: it can never conflict with anything
        return not call.tool.is_concurrency_safe(call.args)

    def _log_call(self, call: _Call) -> None:
        block = call.block
        event = self._session.append(
            "tool/call",
            {
                "turn": self._turn,
                "step": self._step,
                "callId": block.id,
                "name": block.name,
                "arguments": block.arguments,
            },
        )
        call.call_seq = event.seq

    def _start(self, call: _Call) -> None:
        self._log_call(call)
        if call.early is not None:
            call.outcome = call.early
            return
        assert call.tool is not None
        ctx = ToolContext(
            call_id=call.block.id,
            name=call.block.name,
            turn=self._turn,
            step=self._step,
            session_id=self._session.id,
            cancel=self._cancel,
            inject=self._inject,
        )
        call.exclusive = self._is_exclusive(call)
        call.task = asyncio.ensure_future(_execute(call.tool, call.args, ctx))

    def _commit(self, call: _Call) -> None:
        outcome = call.outcome
        assert outcome is not None and call.call_seq is not None
        message = tool_result_message(
            call.block.id,
            outcome.content,
            is_error=outcome.is_error,
            id=self._id_factory(),
        )
        data: dict[str, Any] = {
            "turn": self._turn,
            "step": self._step,
            "message": message.to_json(),
        }
        if outcome.error is not None:
            data["error"] = outcome.error
        if outcome.meta is not None:
            data["meta"] = outcome.meta
        self._session.append(
            "tool/result", data, surface_op="append", source_event_seqs=[call.call_seq]
        )

    async def run(self, blocks: Sequence[ToolCallBlock]) -> None:
        """Run the calls; on cancellation, commit every result owed and raise :class:`Aborted`."""
        calls = [self._prepare(b) for b in blocks]
        committed = 0
        started = 0
        try:
            if self._cancel.cancelled:
                raise Aborted(self._cancel.reason or "user")
            while committed < len(calls):
                started = self._start_what_may_start(calls, started)
                running = [c.task for c in calls[committed:started] if c.task and not c.task.done()]
                if running:
                    await self._wait_any(running)
                for c in calls[committed:started]:
                    if c.outcome is None and c.task is not None and c.task.done():
                        c.outcome = _settled(c.task)
                while committed < started and calls[committed].outcome is not None:
                    self._commit(calls[committed])
                    committed += 1
        except (Aborted, asyncio.CancelledError):
            await self._settle_aborted(calls, committed, started)
            raise
        finally:
            if self._waiter is not None and not self._waiter.done():
                self._waiter.cancel()
                await asyncio.gather(self._waiter, return_exceptions=True)

    def _start_what_may_start(self, calls: list[_Call], started: int) -> int:
        running = [c for c in calls[:started] if c.task is not None and not c.task.done()]
        while started < len(calls):
            if any(c.exclusive for c in running):
                break  # an exclusive call runs alone
            nxt = calls[started]
            if self._is_exclusive(nxt):
                if running:
                    break  # a barrier: the parallel group drains first
            elif len(running) >= self._max_parallel:
                break
            self._start(nxt)
            if nxt.task is not None:
                running.append(nxt)
            started += 1
        return started

    async def _wait_any(self, running: list[asyncio.Task[ToolOutput]]) -> None:
        if self._waiter is None or self._waiter.done():
            self._waiter = asyncio.ensure_future(self._cancel.wait())
        await asyncio.wait([*running, self._waiter], return_when=asyncio.FIRST_COMPLETED)
        if self._cancel.cancelled:
            raise Aborted(self._cancel.reason or "user")

    async def _settle_aborted(self, calls: list[_Call], committed: int, started: int) -> None:
        tasks = [c.task for c in calls[committed:started] if c.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for c in calls[committed:started]:
            if c.outcome is None:
                done = c.task
                if done is not None and not done.cancelled() and done.exception() is None:
                    c.outcome = done.result()  # finished before the cancellation landed
                else:
                    c.outcome = ToolOutput.failure(
                        _ABORTED_RUNNING, name="AbortError", code="ABORTED"
                    )
            self._commit(c)
        for c in calls[started:]:
            self._log_call(c)
            c.outcome = ToolOutput.failure(
                _ABORTED_BEFORE, name="AbortError", code="ABORTED_BEFORE_DISPATCH"
            )
            self._commit(c)
