"""Compaction: above a token threshold, summarize the oldest surface range and replace it.

:class:`Compactor` is a ``pre_step`` hook, so its surface replace lands before the step's
snapshot and the next request derives the compacted surface with no header event. The summary
is a one-shot provider call (``purpose="compaction"``, exempt from the request invariant) that
reuses the conversation's logged system prompt and tools, so it shares the cached prefix of the
last request; its envelope scalars (``model``, ``maxTokens``) are logged in ``compact/summary``,
so it is reconstructable from the log and this code.

The transaction (generation-B event names, docs/design.md §10):
``compact/start {turn}`` → summarize → ``compact/summary {summary, shadowedRange, shadowedSeqs,
shadowedTokenCount, model, maxTokens?, usage?}`` (``usage``: the summary call's token usage when
the provider reported one, so replay serves it and cache reports count the call) → the checkpoint ``user/message`` with
``surfaceOp {op: replace, start, end}`` citing every shadowed seq and the summary event →
``compact/end {turn}``. A failure writes ``compact/end {turn, error}`` and the turn goes on
uncompacted; a cancellation writes it and propagates. A cut never separates a tool call from its
result.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ._assembly import BlockAssembler
from ._errors import AgentError
from ._events import SurfaceReplace
from ._messages import Message, TextBlock, derive_event_message, user_message
from ._request import GenerateOptions
from ._session import Session
from ._stream import Finish, TokenUsage

if TYPE_CHECKING:
    from ._agent_values import PreStepContext

__all__ = [
    "DEFAULT_COMPACTION_INSTRUCTION",
    "CompactionError",
    "Compactor",
    "balanced_cut",
    "estimate_context_tokens",
    "estimate_message_tokens",
]

DEFAULT_COMPACTION_INSTRUCTION: Final = (
    "Summarize the conversation so far for your own later use: the user's goals, decisions "
    "made, facts learned (file names, values, tool results that still matter) and what remains "
    "to do. Be concise and concrete. Reply with the summary only."
)

_PREAMBLE: Final = (
    "Earlier messages of this conversation were compacted. This summary replaces them:"
)


class CompactionError(AgentError):
    """A compaction attempt failed (logged in ``compact/end.error``; the turn goes on)."""


# A traceback names it where users import it from, not this private module.
CompactionError.__module__ = "dsh_core"


def estimate_message_tokens(messages: Sequence[Message]) -> int:
    """A provider-free estimate: about four characters of JSON per token."""
    return sum(len(m.canonical_json()) for m in messages) // 4


@dataclass(slots=True)
class _EstimateState:
    """What :func:`estimate_context_tokens` remembers of one session between calls.

    Kept by the session itself (:meth:`Session.fold_state`), whose log only grows: the events
    folded so far are always the first ``seen`` of the log.
    """

    seen: int = 0
    """Events folded so far."""
    usage_seq: int | None = None
    """Seq of the last ``assistant/message`` with usage after the last replace (``None``: none)."""
    usage_tokens: int = 0
    """That usage's prompt + output tokens."""
    tail_chars: int = 0
    """JSON characters of the surface messages appended after that usage."""
    generation: int = -1
    """Surface generation the whole-surface sum belongs to (a replace starts a new one)."""
    projected: int = 0
    """Messages of that generation's derived view summed into ``surface_chars``."""
    surface_chars: int = 0


def estimate_context_tokens(session: Session) -> int:
    """The context size the next request will have, estimated from the log.

    The last ``assistant/message`` usage (prompt + output tokens) plus a chars/4 estimate of
    the surface messages logged after it; the chars/4 estimate of the whole surface when there
    is no usage, or when a surface replace happened after it (the usage is stale then).

    Incremental: a per-session state remembers how far the log was folded, the last usage and
    the running sums, so each call reads only the events appended since the previous one and
    sums only newly derived messages; its cost per step does not grow with the history (a
    replace costs one pass over the new surface).
    """
    events = session.events
    state = session.fold_state(_EstimateState, _EstimateState)
    # Fold into locals and commit at the end: an event that does not parse raises and leaves
    # the state as it was (the next call meets the same event and raises again).
    usage_seq, usage_tokens, tail_chars = state.usage_seq, state.usage_tokens, state.tail_chars
    count = len(events)
    for i in range(state.seen, count):
        event = events[i]
        if isinstance(event.surface_op, SurfaceReplace):
            usage_seq, tail_chars = None, 0
            continue
        usage = event.data.get("usage") if isinstance(event.data, Mapping) else None
        if event.type == "assistant/message" and usage is not None:
            counted = TokenUsage.from_json(usage)
            usage_seq, tail_chars = i, 0
            usage_tokens = counted.prompt_tokens + counted.output_tokens
        elif usage_seq is not None and event.surface_op == "append":
            message = derive_event_message(event)
            if message is not None:
                tail_chars += len(message.canonical_json())
    state.seen = count
    state.usage_seq, state.usage_tokens, state.tail_chars = usage_seq, usage_tokens, tail_chars
    if usage_seq is not None:
        return usage_tokens + tail_chars // 4
    view = session.message_view()  # the session's own cached derivation: no projection here
    if state.generation != session.surface_generation:
        state.generation, state.projected, state.surface_chars = session.surface_generation, 0, 0
    for i in range(state.projected, len(view)):
        state.surface_chars += len(view[i].canonical_json())
    state.projected = len(view)
    return state.surface_chars // 4


def _tool_balance(session: Session, seq: int) -> int:
    event = session.events[seq]
    if event.type == "tool/result":
        return -1
    if event.type == "assistant/message":
        message = derive_event_message(event)
        return len(message.tool_calls) if message is not None else 0
    return 0


def balanced_cut(session: Session, nodes: Sequence[int], keep_last: int) -> int | None:
    """The largest surface index ``k`` such that ``nodes[0..k]`` holds every tool call together
    with its result and at least ``keep_last`` nodes stay after it; ``None`` if there is none
    covering two nodes or more."""
    limit = len(nodes) - 1 - keep_last
    balance = 0
    best: int | None = None
    for index in range(limit + 1):
        balance += _tool_balance(session, nodes[index])
        if balance == 0 and index >= 1:
            best = index
    return best


@dataclass(frozen=True, slots=True, kw_only=True)
class Compactor:
    """A ``pre_step`` hook that compacts the oldest surface range above ``threshold_tokens``.

    ``agent.add_pre_step(Compactor(threshold_tokens=60_000))``.
    """

    threshold_tokens: int
    """Compact when the estimated context reaches this many tokens."""
    keep_last: int = 2
    """Surface nodes (messages) at the tail that are never compacted."""
    model: str | None = None
    """The summarization model; default: the conversation's logged model."""
    max_tokens: int | None = None
    """The summary call's ``maxTokens``; default: the conversation's."""
    instruction: str = DEFAULT_COMPACTION_INSTRUCTION
    estimator: Callable[[Session], int] = estimate_context_tokens
    """How many tokens the next request would carry (configurable: a real tokenizer, usage…)."""

    def __post_init__(self) -> None:
        if self.threshold_tokens < 0 or self.keep_last < 0:
            raise AgentError(
                f"Compactor needs non-negative threshold_tokens and keep_last, got "
                f"{self.threshold_tokens}, {self.keep_last}"
            )

    async def __call__(self, ctx: PreStepContext) -> None:
        session = ctx.session
        if self.estimator(session) < self.threshold_tokens:
            return
        nodes = session.surface_nodes
        cut = balanced_cut(session, nodes, self.keep_last)
        if cut is None:
            return
        shadowed = tuple(nodes[: cut + 1])
        await self.compact(ctx, shadowed)

    async def compact(self, ctx: PreStepContext, shadowed: tuple[int, ...]) -> bool:
        """Summarize the surface nodes ``shadowed`` (a prefix-contiguous range) and replace them.

        Returns True when the replace was committed, False when the attempt failed (logged).
        """
        session, turn = ctx.session, ctx.turn
        generation = session.surface_generation
        nodes_before = session.surface_nodes
        events = session.events
        messages = [m for s in shadowed if (m := derive_event_message(events[s])) is not None]
        session.append("compact/start", {"turn": turn})
        try:
            request = self._request(ctx, messages)
            summary, usage = await self._summarize(ctx, request)
            checkpoint = user_message(
                [
                    TextBlock(text=f"{_PREAMBLE}\n\n<compacted-summary>"),
                    *summary,
                    TextBlock(text="</compacted-summary>"),
                ],
                id=ctx.options.id_factory(),
                source={"kind": "plugin", "plugin": "compact"},
            )
            shadowed_tokens = estimate_message_tokens(messages)
            if estimate_message_tokens([checkpoint]) >= shadowed_tokens:
                raise CompactionError(
                    f"the summary ({estimate_message_tokens([checkpoint])} tokens) is not smaller "
                    f"than what it would replace ({shadowed_tokens} tokens)"
                )
            if (
                session.surface_generation != generation
                or session.surface_nodes[: len(nodes_before)] != nodes_before
            ):
                raise CompactionError("the surface changed while the summary was written")
            data: dict[str, Any] = {
                "summary": [b.to_json() for b in summary],
                "shadowedRange": {"start": shadowed[0], "end": shadowed[-1]},
                "shadowedSeqs": list(shadowed),
                "shadowedTokenCount": shadowed_tokens,
                "model": request.model,
            }
            if request.max_tokens is not None:
                data["maxTokens"] = request.max_tokens
            if usage is not None:
                data["usage"] = usage.to_json()
            summary_event = session.append("compact/summary", data)
            session.append(
                "user/message",
                checkpoint.to_json(),
                surface_op=SurfaceReplace(start=shadowed[0], end=shadowed[-1]),
                source_event_seqs=[*shadowed, summary_event.seq],
            )
        except asyncio.CancelledError:
            session.append("compact/end", {"turn": turn, "error": "cancelled"})
            raise
        except Exception as exc:
            error = "cancelled" if ctx.cancel.cancelled else f"{type(exc).__name__}: {exc}"
            session.append("compact/end", {"turn": turn, "error": error})
            return False
        session.append("compact/end", {"turn": turn})
        return True

    def _request(self, ctx: PreStepContext, messages: Sequence[Message]) -> GenerateOptions:
        header = ctx.session.request_header()
        options = ctx.options
        config = header.config if header is not None else None
        provider = config.provider if config is not None else options.provider
        model = self.model or (config.model if config is not None else options.model)
        if not provider or not model:
            raise CompactionError("no provider/model to summarize with")
        max_tokens = self.max_tokens
        if max_tokens is None:
            max_tokens = config.max_tokens if config is not None else options.max_tokens
        instruction = user_message(
            self.instruction,
            id=options.id_factory(),
            source={"kind": "plugin", "plugin": "compact"},
        )
        return GenerateOptions(
            provider=provider,
            model=model,
            messages=(*messages, instruction),
            system=header.system if header is not None else ctx.system,
            tools=header.tools if header is not None else (ctx.tools or None),
            max_tokens=max_tokens,
            session_id=ctx.session.id,
            purpose="compaction",
            cancel=ctx.cancel,
        )

    async def _summarize(
        self, ctx: PreStepContext, request: GenerateOptions
    ) -> tuple[list[TextBlock], TokenUsage | None]:
        """The summary's non-blank text blocks and the call's usage (if reported)."""
        assembler = BlockAssembler()
        async for chunk in ctx.provider.stream(request):
            assembler.feed(chunk)
            if isinstance(chunk, Finish):
                break
        reason = assembler.finish_reason
        if reason.kind != "stop" and reason.kind != "tool-calls":
            detail = f": {reason.failure.message}" if reason.failure is not None else ""
            raise CompactionError(f"the summary call finished with {reason.kind}{detail}")
        texts = [b for b in assembler.blocks() if isinstance(b, TextBlock) and b.text.strip()]
        if not texts:
            raise CompactionError("the summary call returned no text")
        return texts, assembler.usage
