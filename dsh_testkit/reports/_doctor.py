"""The cache doctor: every lost prefix-cache hit of any agent's trace, explained in wire terms.

For each request after the first of a conversation (see :meth:`Trace.conversations`), the
doctor asks whether it extends the previous request; if not, where it first diverges (message
index, field, and for text the line and column with the differing characters visible); and why,
as a stable :data:`CauseCode` with a sentence and the evidence:

========================  ====================================================================
``volatile-system-text``  the system prompt differs in a span that looks volatile (a timestamp,
                          a date, a UUID, a counter, a random id) — the span is named
``system-changed``        the system prompt was edited (not a volatile-looking span)
``tools-changed``         tools added, removed, reordered or edited (named); a mid-list insert
                          invalidates every tool after it and the whole history
``tool-args-reserialized`` the assistant turn resent differs from what the model produced only in
                          the JSON formatting of tool-call arguments
``reasoning-dropped``     the model's ``reasoning_content`` was not sent back (and whether the
                          API rejects the request for it)
``reasoning-altered``     the ``reasoning_content`` sent back differs from the model's
``history-rewritten``     an earlier message was edited or removed (truncation, summarization)
``params-changed``        model, thinking mode, reasoning effort or ``user_id`` changed
``below-cache-unit``      the shared prefix is shorter than one cache unit
``not-yet-persisted``     sent too soon after the request it extends for the cache to hold it
``provider-miss``         a pure extension that still missed (best-effort cache, eviction)
========================  ====================================================================

Figures (per request, in provider tokens; "reported" from the trace's usage, or "simulated" by
the mock's prefix-cache simulator over the trace — ``simulate=True``, the default when the trace
has no usage):

- **prompt**, **hit**: the request's prompt tokens and cache hit;
- **reusable**: the previous request's prompt, rounded down to the cache unit and capped at
  this prompt — what a request that extends the previous one can reuse at least;
- **shared** (best possible): the prefix this request shares with the previous one (≤ reusable);
- **lost to changes** = reusable − shared (the causes above explain it);
- **counted hit** = min(hit, shared); **lost by provider** = shared − counted hit;
- **extra** = hit − counted hit: hit beyond the shared prefix (the previous answer's tokens, a
  prefix cached by an earlier request).

So reusable = counted hit + lost to changes + lost by provider, and hit = counted hit + extra.
The conversation's efficiency is Σ counted hit / Σ reusable over its requests after the first.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from ..traces import Conversation, Exchange, Trace, trace_of
from ..traces._model import paused_gc, shared_chars
from ._evidence import (
    _CHANGE_CODES,
    CAUSE_CODES,
    CauseCode,
    Finding,
    compare_exchanges,
)

__all__ = [
    "CAUSE_CODES",
    "DEFAULT_PERSIST_SECONDS",
    "DOCTOR_FORMAT_VERSION",
    "CauseCode",
    "ConversationDiagnosis",
    "DoctorReport",
    "Finding",
    "RequestDiagnosis",
    "diagnose",
]

DOCTOR_FORMAT_VERSION: Final = 1
"""Version of the trace cache report's JSON document."""


DEFAULT_PERSIST_SECONDS: Final = 2.0
"""A request sent sooner than this after the one it extends finished may miss because the
cache has not stored it yet (DeepSeek builds its cache in seconds)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestDiagnosis:
    """One request of a conversation: its figures, whether it extends the previous, and why not."""

    index: int
    """0-based position in the trace."""
    position: int
    """1-based position in its conversation."""
    extends_previous: bool | None
    """``None`` for the first request of a conversation."""
    divergence: str | None
    """Where it first diverges from the previous request (``None`` when it extends it)."""
    prompt_tokens: int | None
    hit_tokens: int | None
    """``None`` when the figures are reported and this request has no cache figure."""
    reusable_tokens: int
    shared_tokens: int
    findings: tuple[Finding, ...]

    @property
    def counted_hit_tokens(self) -> int | None:
        return None if self.hit_tokens is None else min(self.hit_tokens, self.shared_tokens)

    @property
    def extra_tokens(self) -> int | None:
        counted = self.counted_hit_tokens
        return None if counted is None or self.hit_tokens is None else self.hit_tokens - counted

    @property
    def lost_to_changes(self) -> int:
        return self.reusable_tokens - self.shared_tokens

    @property
    def lost_by_provider(self) -> int | None:
        counted = self.counted_hit_tokens
        return None if counted is None else self.shared_tokens - counted

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(f.code for f in self.findings)

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "position": self.position,
            "extendsPrevious": self.extends_previous,
            "divergence": self.divergence,
            "promptTokens": self.prompt_tokens,
            "hitTokens": self.hit_tokens,
            "reusableTokens": self.reusable_tokens,
            "sharedTokens": self.shared_tokens,
            "countedHitTokens": self.counted_hit_tokens,
            "extraTokens": self.extra_tokens,
            "lostToChangesTokens": self.lost_to_changes,
            "lostByProviderTokens": self.lost_by_provider,
            "findings": [f.to_json() for f in self.findings],
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class ConversationDiagnosis:
    """The doctor's view of one conversation."""

    key: str
    requests: tuple[RequestDiagnosis, ...]

    def _measured(self) -> list[RequestDiagnosis]:
        return [r for r in self.requests[1:] if r.hit_tokens is not None]

    def totals(self) -> dict[str, int]:
        measured = self._measured()
        return {
            "reusableTokens": sum(r.reusable_tokens for r in measured),
            "sharedTokens": sum(r.shared_tokens for r in measured),
            "countedHitTokens": sum(r.counted_hit_tokens or 0 for r in measured),
            "extraTokens": sum(r.extra_tokens or 0 for r in measured),
            "lostToChangesTokens": sum(r.lost_to_changes for r in measured),
            "lostByProviderTokens": sum(r.lost_by_provider or 0 for r in measured),
            "promptTokens": sum(r.prompt_tokens or 0 for r in self.requests),
            "hitTokens": sum(r.hit_tokens or 0 for r in self.requests),
        }

    @property
    def efficiency(self) -> float | None:
        """Σ counted hit / Σ reusable over the requests after the first (``None`` if nothing
        was reusable)."""
        totals = self.totals()
        if not totals["reusableTokens"]:
            return None
        return totals["countedHitTokens"] / totals["reusableTokens"]

    def findings(self) -> list[tuple[RequestDiagnosis, Finding]]:
        return [(r, f) for r in self.requests for f in r.findings]

    def to_json(self) -> dict[str, Any]:
        efficiency = self.efficiency
        return {
            "key": self.key,
            "totals": self.totals(),
            "efficiency": None if efficiency is None else round(efficiency, 4),
            "requests": [r.to_json() for r in self.requests],
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class DoctorReport:
    """The cache doctor's report of a trace."""

    source: str
    path: str | None
    figures: Literal["reported", "simulated"]
    """Where hit and prompt figures come from: the trace's usage, or the simulator."""
    unit_tokens: int
    conversations: tuple[ConversationDiagnosis, ...]
    notes: tuple[str, ...] = ()

    def counts(self) -> dict[str, int]:
        """How many requests each cause code was found on."""
        out: dict[str, int] = {}
        for conversation in self.conversations:
            for _, finding in conversation.findings():
                out[finding.code] = out.get(finding.code, 0) + 1
        return dict(sorted(out.items()))

    def to_json(self) -> dict[str, Any]:
        return {
            "formatVersion": DOCTOR_FORMAT_VERSION,
            "kind": "dsh-testkit/trace-cache-report",
            "source": self.source,
            "path": self.path,
            "figures": self.figures,
            "unitTokens": self.unit_tokens,
            "causeCounts": self.counts(),
            "conversations": [c.to_json() for c in self.conversations],
            "notes": list(self.notes),
        }


# ---------------------------------------------------------------------------------------------
# Figures


def _common_tokens(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the common prefix of two token sequences (block-wise slice compares in C)."""
    n, limit, step = 0, min(len(a), len(b)), 256
    while n + step <= limit and a[n : n + step] == b[n : n + step]:
        n += step
    while n < limit and a[n] == b[n]:
        n += 1
    return n


@dataclass(frozen=True, slots=True)
class _Figures:
    prompt: int | None
    hit: int | None
    tokens: tuple[int, ...] | None


def _simulated(trace: Trace, unit_tokens: int) -> dict[int, _Figures]:
    """Run the mock's prefix-cache simulator over the whole trace (one account, trace order)."""
    from ..mock import PrefixCacheSimulator, PromptRenderer

    renderer = PromptRenderer()
    now = [0.0]
    simulator = PrefixCacheSimulator(granularity=unit_tokens, clock=lambda: now[0])
    out: dict[int, _Figures] = {}
    for exchange in trace:
        body = exchange.body
        if exchange.endpoint == "anthropic":
            prompt = renderer.render_anthropic(body)
        else:
            prompt = renderer.render_chat(body)
        if exchange.started is not None:
            now[0] = max(now[0], exchange.started)
        else:
            now[0] += 1.0
        found = simulator.lookup("trace", prompt)
        completion = None
        answer = exchange.response
        if answer is not None:
            if exchange.endpoint == "anthropic":
                completion = renderer.render_anthropic_completion(
                    answer.get("content"), thinking=prompt.thinking
                )
            else:
                completion = renderer.render_chat_completion(answer, thinking=prompt.thinking)
        simulator.commit(found, completion)
        out[exchange.index] = _Figures(
            prompt=found.usage.prompt_tokens, hit=found.usage.hit_tokens, tokens=prompt.tokens
        )
    return out


def _reported(trace: Trace) -> dict[int, _Figures]:
    out: dict[int, _Figures] = {}
    for exchange in trace:
        usage = exchange.usage
        out[exchange.index] = _Figures(
            prompt=usage.prompt_tokens if usage is not None else None,
            hit=usage.hit_tokens if usage is not None else None,
            tokens=None,
        )
    return out


def _floor(tokens: int, unit: int) -> int:
    return max(0, tokens) // unit * unit


def _qualify_reserialized(
    findings: list[Finding], previous: Exchange, hit: int | None, reusable: int
) -> list[Finding]:
    """Say what a re-serialized tool call cost here, from the figures.

    Whether the resent bytes reach the prompt tokens depends on the provider's chat template: a
    template that renders arguments by value (one parameter per argument) hides the difference,
    and then the hit reaches past the previous prompt into the answer.
    """
    if not any(f.code == "tool-args-reserialized" for f in findings):
        return findings
    answered = previous.usage.completion_tokens if previous.usage is not None else None
    if hit is not None and hit > reusable:
        note = (
            "the provider still reused tokens past the previous prompt here (its chat template "
            "renders the arguments by value), so it cost nothing this time"
        )
    elif answered:
        note = (
            f"the cache unit that ends after the model's answer (about {answered} more tokens) "
            "cannot be hit"
        )
    else:
        return findings
    return [
        dataclasses.replace(f, detail=f"{f.detail}; {note}")
        if f.code == "tool-args-reserialized"
        else f
        for f in findings
    ]


def _diagnose_conversation(
    trace: Trace,
    conversation: Conversation,
    figures: dict[int, _Figures],
    *,
    unit_tokens: int,
    persist_seconds: float,
) -> ConversationDiagnosis:
    out: list[RequestDiagnosis] = []
    previous: Exchange | None = None
    for position, exchange in enumerate(conversation, start=1):
        mine = figures[exchange.index]
        if previous is None:
            out.append(
                RequestDiagnosis(
                    index=exchange.index,
                    position=position,
                    extends_previous=None,
                    divergence=None,
                    prompt_tokens=mine.prompt,
                    hit_tokens=mine.hit,
                    reusable_tokens=0,
                    shared_tokens=0,
                    findings=(),
                )
            )
            previous = exchange
            continue
        theirs = figures[previous.index]
        divergence, findings = compare_exchanges(previous, exchange)
        reusable = shared = 0
        if mine.tokens is not None and theirs.tokens is not None:
            reusable = len(theirs.tokens)
            shared = _common_tokens(theirs.tokens, mine.tokens)
        elif theirs.prompt is not None:
            old_parts, new_parts = trace.parts(previous), trace.parts(exchange)
            total = sum(len(p) for p in old_parts)
            reusable = theirs.prompt
            common = shared_chars(old_parts, new_parts)
            shared = reusable if common >= total else round(reusable * common / max(1, total))
        if any(
            f.code == "params-changed" and f.where in ("model", "user", "user_id") for f in findings
        ):
            shared = 0  # the cache is keyed by model and user: nothing is shared across them
        cap = mine.prompt if mine.prompt is not None else reusable
        raw_shared = min(shared, reusable, cap)
        reusable = _floor(min(reusable, cap), unit_tokens)
        shared = _floor(min(shared, reusable), unit_tokens)
        changes = [f for f in findings if f.code in _CHANGE_CODES]
        if not changes and 0 < raw_shared < unit_tokens:
            findings.append(
                Finding(
                    code="below-cache-unit",
                    detail=(
                        f"the shared prefix (about {raw_shared} tokens) is below one "
                        f"{unit_tokens}-token cache unit"
                    ),
                    where=divergence,
                )
            )
        if not changes and mine.hit is not None and shared - min(mine.hit, shared) > unit_tokens:
            gap = (
                exchange.started - previous.finished
                if exchange.started is not None and previous.finished is not None
                else None
            )
            missed = shared - min(mine.hit, shared)
            if gap is not None and gap < persist_seconds:
                findings.append(
                    Finding(
                        code="not-yet-persisted",
                        detail=(
                            f"sent {gap:.3f} s after request #{previous.index + 1} finished "
                            f"(the cache needs about {persist_seconds:g} s); {missed} shared tokens "
                            "missed"
                        ),
                        evidence=(f"gap {gap:.3f} s",),
                    )
                )
            else:
                findings.append(
                    Finding(
                        code="provider-miss",
                        detail=(
                            f"a pure extension of request #{previous.index + 1} still missed "
                            f"{missed} of {shared} shared tokens"
                        ),
                    )
                )
        findings = _qualify_reserialized(findings, previous, mine.hit, reusable)
        out.append(
            RequestDiagnosis(
                index=exchange.index,
                position=position,
                extends_previous=divergence is None,
                divergence=divergence,
                prompt_tokens=mine.prompt,
                hit_tokens=mine.hit,
                reusable_tokens=reusable,
                shared_tokens=shared,
                findings=tuple(findings),
            )
        )
        previous = exchange
    return ConversationDiagnosis(key=conversation.key, requests=tuple(out))


def diagnose(
    trace_or_capture: Any,
    *,
    simulate: bool | None = None,
    conversation: str | None = None,
    unit_tokens: int = 128,
    persist_seconds: float = DEFAULT_PERSIST_SECONDS,
) -> DoctorReport:
    """The cache doctor's report of a trace (anything :func:`~dsh_testkit.traces.trace_of` takes).

    ``simulate``: ``True`` runs the mock's prefix-cache simulator for the figures, ``False``
    uses the trace's reported usage; ``None`` (default) simulates when the trace has no usage.
    ``conversation`` restricts the report to one conversation key.
    """
    if unit_tokens < 1:
        raise ValueError(f"unit_tokens must be at least 1, got {unit_tokens}")
    with paused_gc():
        return _diagnose(
            trace_of(trace_or_capture), simulate, conversation, unit_tokens, persist_seconds
        )


def _diagnose(
    trace: Trace,
    simulate: bool | None,
    conversation: str | None,
    unit_tokens: int,
    persist_seconds: float,
) -> DoctorReport:
    use_simulator = (not trace.has_usage) if simulate is None else simulate
    figures = _simulated(trace, unit_tokens) if use_simulator else _reported(trace)
    conversations = trace.conversations(unit_tokens=unit_tokens)
    if conversation is not None:
        conversations = tuple(c for c in conversations if c.key == conversation)
        if not conversations:
            keys = ", ".join(c.key for c in trace.conversations(unit_tokens=unit_tokens))
            raise KeyError(f"no conversation {conversation!r} in the trace; it has: {keys}")
    notes = list(trace.notes)
    if use_simulator and simulate is None:
        notes.append("the trace carries no cache usage: figures are simulated")
    return DoctorReport(
        source=trace.source,
        path=trace.path,
        figures="simulated" if use_simulator else "reported",
        unit_tokens=unit_tokens,
        conversations=tuple(
            _diagnose_conversation(
                trace, c, figures, unit_tokens=unit_tokens, persist_seconds=persist_seconds
            )
            for c in conversations
        ),
        notes=tuple(notes),
    )
