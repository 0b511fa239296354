"""The agent loop: turns and steps whose every request is a pure function of the session log.

Per step, in exactly this order (docs/design.md §6, "transmission-stateless"):

1. render the prompt assembly: system sections and the tool registry, every step, so a section
   that varies per step surfaces as a logged header event instead of a silent cache bust;
2. ``pre_step`` hooks: the sanctioned seam for content that must reach the CURRENT request
   (compaction replaces surface ranges here);
3. append the queued ``inject()`` messages, snapshot the messages (an O(1)
   :class:`MessageView`) and append ``step/start``, with no ``await`` in between: nothing can
   enter this request past that boundary;
4. seed the call config: from :class:`AgentOptions` on this instance's first request (explicit
   options beat the logged baseline), from the folded header afterwards;
5. request middleware: each gets the frozen :class:`LlmCallConfig` and may return a replacement;
   that is all a middleware can shape;
6. the header event the request owes the log (:func:`plan_header_event`);
7. build the deep-immutable :class:`GenerateOptions` (only the cancel token is live), check it
   against the log's reconstruction in dev mode, dispatch;
8. log every chunk as ``assistant/chunk``, then ``assistant/message`` citing this attempt's
   chunks; a retry resends the very same request object;
9. run the tool calls (:class:`ToolScheduler`).

``inject()`` while a turn runs is queued and appended just before the next step's snapshot (or
before ``turn/end`` when the turn stops), so it always joins the NEXT request; when no turn runs
it is appended at once. Pending injections keep a turn going for one more step.

The loop's only transmission state is one boolean: whether this instance has logged its
anchoring header snapshot (``initial`` or ``resume``).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from ._agent_values import (
    AgentOptions,
    PreStepContext,
    PreStepHook,
    PromptContext,
    RequestContext,
    RequestMiddleware,
    SystemSection,
    TurnCancelledError,
)
from ._assembly import BlockAssembler, message_from_blocks
from ._cancel import Aborted, CancelGuard
from ._errors import AgentError
from ._events import last_turn_boundary, open_turn, turn_step
from ._header import EpochHeader, LlmCallConfig, ToolSchema, canonical_header
from ._header_delta import plan_header_event
from ._invariants import LogInvariant, RequestInvariant
from ._messages import Message, user_message
from ._request import CancelToken, GenerateOptions, Provider
from ._session import Session
from ._stream import Finish, FinishReason, LlmFailure, ProviderError, StreamChunk
from ._tools import Tool, ToolRegistry, ToolScheduler
from ._views import MessageView

__all__ = ["Agent"]


@dataclass(slots=True)
class _Turn:
    turn: int
    token: CancelToken
    guard: CancelGuard
    partial: Message | None = None


_StepKind: TypeAlias = Literal["tools", "completed", "max-tokens"]


def _reason_json(reason: str) -> dict[str, Any]:
    return {"kind": "aborted", "reason": {"kind": reason}}


def _error_json(exc: BaseException) -> dict[str, Any]:
    if isinstance(exc, ProviderError):
        return {"kind": "error", "error": exc.failure.to_json()}
    return {
        "kind": "error",
        "error": {"message": f"{type(exc).__name__}: {exc}", "code": "UNKNOWN"},
    }


async def _next_chunk(iterator: AsyncIterator[StreamChunk]) -> StreamChunk:
    return await iterator.__anext__()


def _aborted_finish(reason: str) -> Finish:
    return Finish(
        reason=FinishReason(
            kind="aborted", failure=LlmFailure(message=f"cancelled ({reason})", code="ABORTED")
        )
    )


class Agent:
    """A conversation loop over one :class:`Session` (asyncio).

    ``await agent.run(prompt)`` runs one turn and returns its final assistant message.
    Errors end the turn with reason ``error`` and propagate; ``agent.cancel()`` ends it with
    ``aborted`` and ``run`` raises :class:`TurnCancelledError`. Either way the log is balanced.
    """

    def __init__(
        self,
        session: Session,
        provider: Provider,
        options: AgentOptions | None = None,
        *,
        tools: Iterable[Tool] = (),
    ) -> None:
        self.session = session
        self.provider = provider
        self.options = options or AgentOptions()
        self.tools = ToolRegistry(tools, order=self.options.tool_order)
        self._pre_steps: list[PreStepHook] = []
        self._middleware: list[RequestMiddleware] = []
        self._header_logged = False
        self._last_turn = _last_turn(session)
        self._queue: list[Message] = []
        self._running: _Turn | None = None
        self.request_invariant: RequestInvariant | None = None
        """The dev-mode request check (``None`` unless ``options.invariants``)."""
        self._remove_log_invariant: Callable[[], None] | None = None
        if self.options.invariants:
            self.request_invariant = RequestInvariant()
            self._remove_log_invariant = session.add_validator(LogInvariant.for_session(session))

    # ------------------------------------------------------------------ configuration

    def register_tool(self, item: Tool, *, replace: bool = False) -> Tool:
        """Add a tool; it reaches the model from the next step's header on."""
        return self.tools.register(item, replace=replace)

    def unregister_tool(self, name: str) -> Tool:
        return self.tools.unregister(name)

    def add_pre_step(self, hook: PreStepHook) -> Callable[[], None]:
        """Run ``hook`` before each step's snapshot; returns a function that removes it."""
        self._pre_steps.append(hook)
        return lambda: self._pre_steps.remove(hook)

    def add_middleware(self, middleware: RequestMiddleware) -> Callable[[], None]:
        """Add a request middleware (run in the order added); returns a remover."""
        self._middleware.append(middleware)
        return lambda: self._middleware.remove(middleware)

    def close(self) -> None:
        """Detach the dev-mode log validator from the session."""
        if self._remove_log_invariant is not None:
            self._remove_log_invariant()
            self._remove_log_invariant = None

    # ------------------------------------------------------------------ state

    @property
    def turn(self) -> int:
        """The number of the last turn started on this session (0 before any)."""
        return self._last_turn

    @property
    def running(self) -> bool:
        return self._running is not None

    @property
    def header_logged(self) -> bool:
        """Whether this instance has logged its anchoring header snapshot (its one bit of state)."""
        return self._header_logged

    def inject(self, message: str | Message) -> Message:
        """Add a user message to the conversation; it joins the NEXT request, never the current.

        While a turn runs the message is queued and appended right before the next step's
        snapshot (a pending injection keeps the turn going for one more step) or, if the turn
        stops first, before its ``turn/end``. With no turn running it is appended now.
        """
        msg = message if isinstance(message, Message) else self._user(message)
        if msg.role != "user":
            raise AgentError(f"inject() takes a user message, got role {msg.role!r}")
        if self._running is None:
            self.session.append("user/message", msg.to_json(), surface_op="append")
        else:
            self._queue.append(msg)
        return msg

    def _injector(self) -> Callable[[str | Message], Message]:
        """``inject`` as a plain function: a bound method would hand a middleware the agent."""
        inject = self.inject

        def inject_next(message: str | Message) -> Message:
            """Queue a user message for the NEXT request."""
            return inject(message)

        return inject_next

    def cancel(self, reason: str = "user") -> bool:
        """Cancel the running turn (the first reason wins); False when no turn runs."""
        if self._running is None:
            return False
        self._running.token.cancel(reason)
        return True

    def _user(self, text: str) -> Message:
        if not isinstance(text, str) or not text:
            raise AgentError("a prompt must be a non-empty string or a user Message")
        return user_message(text, id=self.options.id_factory())

    def _flush_queue(self) -> None:
        while self._queue:
            msg = self._queue.pop(0)
            self.session.append("user/message", msg.to_json(), surface_op="append")

    # ------------------------------------------------------------------ the turn

    async def run(self, prompt: str | Message) -> Message:
        """Run one turn for ``prompt`` and return its final assistant message."""
        if self._running is not None:
            raise AgentError(
                f"turn {self._running.turn} is still running; await it (or cancel it) before "
                "starting another"
            )
        message = prompt if isinstance(prompt, Message) else self._user(prompt)
        if message.role != "user":
            raise AgentError(f"a prompt must be a user message, got role {message.role!r}")
        _check_no_open_turn(self.session)
        token = CancelToken()
        state = self._running = _Turn(
            turn=_last_turn(self.session) + 1, token=token, guard=CancelGuard(token)
        )
        try:
            return await self._run_turn(state, message)
        finally:
            self._running = None
            await state.guard.aclose()

    async def _run_turn(self, state: _Turn, prompt: Message) -> Message:
        session, turn = self.session, state.turn
        session.append("turn/start", {"turn": turn})
        self._last_turn = turn
        reason: dict[str, Any] | None = None
        final: Message | None = None
        try:
            session.append("user/message", prompt.to_json(), surface_op="append")
            step = 0
            while True:
                step += 1
                kind, message = await self._step(state, step)
                final = message
                if kind == "max-tokens":
                    reason = {"kind": "max-tokens"}
                elif kind == "completed" and reason is None:
                    reason = {"kind": "completed"}
                if kind == "tools" or self._queue:
                    continue
                return final
        except Aborted as exc:
            reason = _reason_json(exc.reason)
            raise TurnCancelledError(turn=turn, reason=exc.reason, partial=state.partial) from None
        except asyncio.CancelledError:
            reason = _reason_json("disposed")
            raise
        except BaseException as exc:
            reason = _error_json(exc)
            raise
        finally:
            self._flush_queue()
            session.append("turn/end", {"turn": turn, "reason": reason or {"kind": "completed"}})

    # ------------------------------------------------------------------ the step

    def render_system(self, ctx: PromptContext) -> str | None:
        """The system prompt for one step: sections rendered, empty ones dropped, blank-line joined."""
        spec = self.options.system
        sections: tuple[SystemSection, ...] = (
            () if spec is None else spec if isinstance(spec, tuple) else (spec,)
        )
        parts: list[str] = []
        for section in sections:
            text = section if isinstance(section, str) else section(ctx)
            if text is not None and not isinstance(text, str):
                raise AgentError(
                    f"a system section must render to a str or None, got {type(text).__name__}"
                )
            if text:
                parts.append(text)
        return "\n\n".join(parts) or None

    async def _step(self, state: _Turn, step: int) -> tuple[_StepKind, Message]:
        session, turn, guard = self.session, state.turn, state.guard
        system = self.render_system(PromptContext(turn=turn, step=step, session=session))
        tools = self.tools.schemas()
        for hook in tuple(self._pre_steps):
            ctx = PreStepContext(
                session=session,
                provider=self.provider,
                turn=turn,
                step=step,
                system=system,
                tools=tools,
                cancel=state.token,
                options=self.options,
                inject=self._injector(),
            )
            result = hook(ctx)
            if inspect.isawaitable(result):
                await guard(result)
        guard.check()
        # The boundary: queued injections, the snapshot and step/start, with no await between.
        self._flush_queue()
        messages = session.message_view()
        step_start = session.append("step/start", {"turn": turn, "step": step})
        try:
            request = await self._prepare_request(state, step, messages, system, tools)
            message, finish = await self._dispatch(state, step, step_start.seq, request)
            if finish.kind == "max-tokens":
                return "max-tokens", message
            calls = message.tool_calls
            if not calls:
                return "completed", message
            # No cancellation check here: a cancelled scheduler still owes every call a result.
            scheduler = ToolScheduler(
                session=session,
                tools=self.tools.snapshot(),
                turn=turn,
                step=step,
                cancel=state.token,
                id_factory=self.options.id_factory,
                max_parallel=self.options.max_parallel_tools,
                inject=self._injector(),
            )
            await scheduler.run(calls)
            return "tools", message
        finally:
            session.append("step/end", {"turn": turn, "step": step})

    def _first_config(self) -> LlmCallConfig:
        """The seed of this instance's first request: explicit options over the logged baseline."""
        o = self.options
        persisted = self.session.request_header()
        base = persisted.config if persisted is not None else None
        if base is not None and (
            (o.provider is not None and o.provider != base.provider)
            or (o.model is not None and o.model != base.model)
        ):
            base = None  # another route: the logged sampling belonged to the old one
        provider = o.provider or (base.provider if base else None)
        model = o.model or (base.model if base else None)
        if not provider or not model:
            raise AgentError(
                "the agent has no provider/model: set AgentOptions(provider=..., model=...) "
                "(a resumed session may omit them to keep the logged ones)"
            )

        def pick(explicit: Any, logged: Any) -> Any:
            return explicit if explicit is not None else logged

        return LlmCallConfig(
            provider=provider,
            model=model,
            reasoning_effort=pick(o.reasoning_effort, base.reasoning_effort if base else None),
            temperature=pick(o.temperature, base.temperature if base else None),
            max_tokens=pick(o.max_tokens, base.max_tokens if base else None),
            stop=pick(o.stop, base.stop if base else None),
        )

    async def _prepare_request(
        self,
        state: _Turn,
        step: int,
        messages: MessageView,
        system: str | None,
        tools: tuple[ToolSchema, ...],
    ) -> GenerateOptions:
        session = self.session
        folded = session.request_header()
        # The first request of this instance seeds from the options; later ones from the log.
        config = folded.config if self._header_logged and folded else self._first_config()
        inject = self._injector()
        for middleware in tuple(self._middleware):
            ctx = RequestContext(turn=state.turn, step=step, config=config, inject=inject)
            proposed = middleware(config, ctx)
            if inspect.isawaitable(proposed):
                proposed = await state.guard(proposed)
            if proposed is None:
                continue
            if not isinstance(proposed, LlmCallConfig):
                raise AgentError(
                    f"request middleware {getattr(middleware, '__name__', middleware)!r} returned "
                    f"{type(proposed).__name__}; return an LlmCallConfig (or None to keep the config)"
                )
            config = proposed
        state.guard.check()
        header = canonical_header(
            EpochHeader(
                config=config,
                system=system or None,
                tools=tools or None,
                message_prefix=self.options.message_prefix,
            )
        )
        plan = plan_header_event(
            session.request_header(),
            header,
            first_of_instance=not self._header_logged,
            snapshots_only=self.options.snapshots_only,
        )
        if plan is not None:
            session.append(plan[0], plan[1])
        self._header_logged = True
        return self._build_request(header, messages, state.token)

    def _build_request(
        self, header: EpochHeader, messages: Sequence[Message], cancel: CancelToken
    ) -> GenerateOptions:
        """The request: the header's config, system and tools, the snapshot's messages."""
        return GenerateOptions.from_header(
            header, messages, session_id=self.session.id, cancel=cancel
        )

    # ------------------------------------------------------------------ dispatch

    async def _dispatch(
        self, state: _Turn, step: int, step_start_seq: int, request: GenerateOptions
    ) -> tuple[Message, FinishReason]:
        session, turn, policy = self.session, state.turn, self.options.retry
        retries = 0
        while True:
            state.guard.check()
            if self.request_invariant is not None:
                self.request_invariant.check(session, step_start_seq, request)
            assembler = BlockAssembler()
            seqs: list[int] = []
            await self._stream_attempt(state, step, request, assembler, seqs)
            reason = assembler.finish_reason
            if reason.kind in ("error", "aborted"):
                if state.token.cancelled:  # cancel beats retry
                    if reason.kind == "aborted":  # the provider stopped because we cancelled
                        self._log_interrupted(state, step, request, assembler, seqs)
                    state.guard.check()
                failure = reason.failure or LlmFailure(
                    message=f"the stream finished with {reason.kind} and no failure", code="UNKNOWN"
                )
                if reason.kind == "error" and policy.should_retry(failure, retries):
                    retries += 1
                    delay = policy.delay_ms(retries, failure, self.options.random)
                    session.append(
                        "llm/retry",
                        {
                            "turn": turn,
                            "step": step,
                            "retry": retries,
                            "maxRetries": policy.max_retries,
                            "delayMs": delay,
                            "failure": failure.to_json(),
                        },
                    )
                    await state.guard(self.options.sleep(delay / 1000))
                    continue  # the same frozen request: a byte-identical resend
                raise ProviderError(failure)
            message = message_from_blocks(
                assembler.blocks(),
                provider=request.provider,
                model=request.model,
                id=self.options.id_factory(),
            )
            data: dict[str, Any] = {"turn": turn, "step": step, "message": message.to_json()}
            if assembler.usage is not None:
                data["usage"] = assembler.usage.to_json()
            session.append("assistant/message", data, surface_op="append", source_event_seqs=seqs)
            return message, reason

    def _log_interrupted(
        self,
        state: _Turn,
        step: int,
        request: GenerateOptions,
        assembler: BlockAssembler,
        seqs: list[int],
    ) -> None:
        """Log a cancelled stream's non-blank text/reasoning prefix (``interrupted: true``)."""
        blocks = assembler.interrupted_blocks()
        if not blocks:
            return
        partial = message_from_blocks(
            blocks, provider=request.provider, model=request.model, id=self.options.id_factory()
        )
        data: dict[str, Any] = {
            "turn": state.turn,
            "step": step,
            "message": partial.to_json(),
            "interrupted": True,
        }
        if assembler.usage is not None:
            data["usage"] = assembler.usage.to_json()
        self.session.append("assistant/message", data, surface_op="append", source_event_seqs=seqs)
        state.partial = partial

    async def _stream_attempt(
        self,
        state: _Turn,
        step: int,
        request: GenerateOptions,
        assembler: BlockAssembler,
        seqs: list[int],
    ) -> None:
        """Stream one attempt, logging every chunk; it always logs at least one chunk."""
        session, turn = self.session, state.turn

        def log(chunk: StreamChunk) -> None:
            event = session.append(
                "assistant/chunk", {"turn": turn, "step": step, "chunk": chunk.to_json()}
            )
            seqs.append(event.seq)
            assembler.feed(chunk)

        iterator: AsyncIterator[StreamChunk] | None = None
        try:
            iterator = aiter(self.provider.stream(request))
            while True:
                try:
                    chunk = await state.guard(_next_chunk(iterator))
                except StopAsyncIteration:
                    break
                log(chunk)
                if isinstance(chunk, Finish):
                    break
        except (Aborted, asyncio.CancelledError) as exc:
            log(_aborted_finish(exc.reason if isinstance(exc, Aborted) else "disposed"))
            self._log_interrupted(state, step, request, assembler, seqs)
            raise
        except ProviderError as exc:
            log(Finish(reason=FinishReason(kind="error", failure=exc.failure)))
        except Exception as exc:
            failure = LlmFailure(message=f"{type(exc).__name__}: {exc}", code="UNKNOWN")
            log(Finish(reason=FinishReason(kind="error", failure=failure)))
            raise
        finally:
            close = getattr(iterator, "aclose", None)
            if close is not None:
                # a provider failing to close must not hide the attempt's outcome
                with contextlib.suppress(Exception):
                    await close()
        if not seqs:
            log(
                Finish(
                    reason=FinishReason(
                        kind="error",
                        failure=LlmFailure(
                            message="the provider returned an empty stream",
                            code="EMPTY_RESPONSE",
                            retryable=True,
                        ),
                    )
                )
            )


def _last_turn(session: Session) -> int:
    boundary = last_turn_boundary(session.events)
    return (turn_step(boundary).turn or 0) if boundary is not None else 0


def _check_no_open_turn(session: Session) -> None:
    inside = open_turn(session.events)
    if inside is not None:
        raise AgentError(
            f"the session ends inside open turn {inside.turn} (turn/start at seq {inside.seq}); "
            "close it first (persistence's crash repair does) or fork before the turn"
        )
