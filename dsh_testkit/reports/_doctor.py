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

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from ..traces import Conversation, Endpoint, Exchange, Trace, trace_of
from ..traces._model import common_prefix_length, shared_chars

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

CauseCode: TypeAlias = Literal[
    "volatile-system-text",
    "system-changed",
    "tools-changed",
    "tool-args-reserialized",
    "reasoning-dropped",
    "reasoning-altered",
    "history-rewritten",
    "params-changed",
    "below-cache-unit",
    "not-yet-persisted",
    "provider-miss",
]

CAUSE_CODES: Final[Mapping[str, str]] = {
    "volatile-system-text": "The system prompt changes in a volatile-looking span (a timestamp, "
    "date, UUID, counter or random id), so nothing after that point can be reused.",
    "system-changed": "The system prompt was edited, so nothing after the edit can be reused.",
    "tools-changed": "The tool list changed; tools are part of the prompt, so everything after "
    "the first changed tool (the later tools and the whole history) is read again.",
    "tool-args-reserialized": "The client resent the model's tool-call arguments with different "
    "JSON formatting, so the cache unit that ends at the model's output can never be reused.",
    "reasoning-dropped": "The model's reasoning_content was not sent back with its turn.",
    "reasoning-altered": "The reasoning_content sent back differs from what the model produced.",
    "history-rewritten": "An earlier message was edited or removed, so the prompt diverges "
    "there and everything after it is read again.",
    "params-changed": "A prefix-relevant parameter changed (model, thinking mode, reasoning "
    "effort, user_id); the cache is not shared across them.",
    "below-cache-unit": "The shared prefix is shorter than one cache unit, so it cannot hit.",
    "not-yet-persisted": "The request was sent before the cache could hold the one it extends.",
    "provider-miss": "A pure extension still missed: the provider's cache is best-effort "
    "(eviction, another replica).",
}
"""Every cause code and its sentence (stable: codes are never renamed)."""

_CHANGE_CODES: Final = frozenset(
    {
        "volatile-system-text",
        "system-changed",
        "tools-changed",
        "history-rewritten",
        "params-changed",
        "reasoning-altered",
    }
)
DEFAULT_PERSIST_SECONDS: Final = 2.0
"""A request sent sooner than this after the one it extends finished may miss because the
cache has not stored it yet (DeepSeek builds its cache in seconds)."""

_PARAMS: Final = ("model", "thinking", "reasoning_effort", "user_id", "user")
_CONTEXT: Final = 24

_VOLATILE: Final = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
    r"|\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?"
    r"|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"|\b(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{8,}\b"
    r"|\b\d+\b"
    r"|\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*\b"
    r"|\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\b"
)
"""What looks volatile in a system prompt: dates, times, UUIDs, hex ids, counters, day/month names."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """One cause of a lost (or at-risk) cache hit, with the evidence."""

    code: CauseCode
    detail: str
    """What happened here, in wire terms (``tool 'grep' inserted at position 1 of 3``)."""
    evidence: tuple[str, ...] = ()
    """Lines showing it: both sides of the differing text with the changed characters marked
    ``⟦…⟧``, the arguments as produced and as resent, the timing."""
    where: str | None = None
    """The wire location (``system line 31``, ``tools[1]``, ``messages[3].reasoning_content``)."""
    rejected: bool | None = None
    """For ``reasoning-dropped``: whether the API answers 400 for this request."""

    @property
    def sentence(self) -> str:
        return CAUSE_CODES[self.code]

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "sentence": self.sentence,
            "detail": self.detail,
            "where": self.where,
            "evidence": list(self.evidence),
            "rejected": self.rejected,
        }


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
# Evidence


def _split_system(body: Mapping[str, Any]) -> tuple[str, list[Any]]:
    messages = body.get("messages")
    messages = list(messages) if isinstance(messages, list) else []
    parts: list[str] = []
    if "system" in body:
        system = body["system"]
        parts.append(
            system
            if isinstance(system, str)
            else "\n".join(str(b.get("text", "")) for b in system or () if isinstance(b, Mapping))
        )
    while (
        messages
        and isinstance(messages[0], Mapping)
        and messages[0].get("role") in ("system", "developer")
    ):
        content = messages.pop(0).get("content")
        parts.append(content if isinstance(content, str) else json.dumps(content))
    return "\n".join(parts), messages


def text_divergence(a: str, b: str) -> tuple[str, tuple[str, str], tuple[str, str]]:
    """Where two texts first differ and the differing spans, with context on both sides.

    Returns ``(location, (span_a, span_b), (excerpt_a, excerpt_b))``: location is
    ``line L column C`` (1-based), spans are the characters that differ between the common
    prefix and the common suffix, and each excerpt shows up to 24 characters of context on both
    sides with the span marked ``⟦…⟧`` (an empty span marks an insertion point).
    """
    start = common_prefix_length(a, b)
    limit = min(len(a), len(b))
    end = 0
    while end < limit - start and a[len(a) - 1 - end] == b[len(b) - 1 - end]:
        end += 1
    span_a, span_b = a[start : len(a) - end], b[start : len(b) - end]
    line = a.count("\n", 0, start) + 1
    column = start - (a.rfind("\n", 0, start) + 1) + 1

    def excerpt(text: str, span: str) -> str:
        before = text[max(0, start - _CONTEXT) : start]
        after = text[start + len(span) : start + len(span) + _CONTEXT]
        lead = "…" if start > _CONTEXT else ""
        tail = "…" if start + len(span) + _CONTEXT < len(text) else ""
        shown = span if len(span) <= 80 else span[:77] + "…"
        return f"{lead}{before}⟦{shown}⟧{after}{tail}".replace("\n", "⏎")

    return (
        f"line {line} column {column}",
        (span_a, span_b),
        (excerpt(a, span_a), excerpt(b, span_b)),
    )


def _volatile_token(text: str, lo: int, hi: int) -> str | None:
    """The volatile-looking token overlapping ``text[lo:hi]`` (or touching it when empty)."""
    for match in _VOLATILE.finditer(text, max(0, lo - 40), min(len(text), hi + 40)):
        if match.start() <= hi and match.end() >= lo and match.group():
            if match.end() == lo and match.start() == hi == lo:
                continue
            return match.group()
    return None


def _volatile_span(a: str, b: str, span_a: str, span_b: str, start: int) -> str | None:
    """The volatile-looking span on both sides, as ``'old' → 'new'`` (``None`` if not volatile)."""
    old = _volatile_token(a, start, start + len(span_a)) if a else None
    new = _volatile_token(b, start, start + len(span_b)) if b else None
    if old is None and new is None:
        return None
    if old is None:
        return f"{new!r} added"
    if new is None:
        return f"{old!r} removed"
    return f"{old!r} → {new!r}"


def _first_diff_start(a: str, b: str) -> int:
    return common_prefix_length(a, b)


def _tool_name(tool: Any) -> str:
    if isinstance(tool, Mapping):
        function = tool.get("function")
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            return str(function["name"])
        if isinstance(tool.get("name"), str):
            return str(tool["name"])
    return json.dumps(tool, sort_keys=True)[:40]


def _tools_finding(old: Any, new: Any) -> Finding:
    old_list = list(old) if isinstance(old, list) else []
    new_list = list(new) if isinstance(new, list) else []
    old_names = [_tool_name(t) for t in old_list]
    new_names = [_tool_name(t) for t in new_list]
    added = [n for n in new_names if n not in old_names]
    removed = [n for n in old_names if n not in new_names]
    parts: list[str] = []
    first_changed = next(
        (
            i
            for i, (x, y) in enumerate(zip(old_list, new_list, strict=False))
            if json.dumps(x, sort_keys=True) != json.dumps(y, sort_keys=True)
        ),
        min(len(old_list), len(new_list)),
    )
    for name in added:
        at = new_names.index(name)
        where = (
            "appended at the end"
            if at >= len(old_names)
            else (
                f"inserted at position {at + 1} of {len(new_names)} (mid-list: every tool after it "
                "and the whole history are read again)"
            )
        )
        parts.append(f"tool {name!r} {where}")
    parts += [f"tool {name!r} removed" for name in removed]
    kept_old = [n for n in old_names if n in new_names]
    kept_new = [n for n in new_names if n in old_names]
    if kept_old != kept_new:
        parts.append(f"tools reordered: {kept_old} → {kept_new}")
    for name in kept_new:
        before = old_list[old_names.index(name)]
        after = new_list[new_names.index(name)]
        if json.dumps(before, sort_keys=True) != json.dumps(after, sort_keys=True):
            parts.append(f"tool {name!r} schema edited")
    if not parts:
        parts.append("the tool list differs")
    evidence = (f"before: {old_names}", f"after:  {new_names}")
    return Finding(
        code="tools-changed",
        detail="; ".join(parts),
        evidence=evidence,
        where=f"tools[{first_changed}]",
    )


def _thinking(body: Mapping[str, Any], endpoint: Endpoint = "chat") -> bool:
    """Whether the request runs in thinking mode (the providers' one rule)."""
    from dsh_core.providers import resolve_model, thinking_enabled

    model = body.get("model")
    thinking = body.get("thinking")
    kind = thinking.get("type") if isinstance(thinking, Mapping) else None
    effort: Any = body.get("reasoning_effort")
    reasoning = body.get("reasoning")
    if effort is None and isinstance(reasoning, Mapping):
        effort = reasoning.get("effort")
    return thinking_enabled(
        resolve_model(model, endpoint=endpoint) if isinstance(model, str) else None,
        thinking_type=kind if isinstance(kind, str) else None,
        effort=effort if isinstance(effort, str) else None,
    )


def _echo_findings(
    produced: Mapping[str, Any], sent: Any, where: str, body: Mapping[str, Any]
) -> list[Finding]:
    """Compare the assistant turn the model produced with the one the client sent back."""
    if not isinstance(sent, Mapping) or sent.get("role") != "assistant":
        return []
    out: list[Finding] = []
    reasoning = produced.get("reasoning_content")
    sent_reasoning = sent.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning and not isinstance(sent_reasoning, str):
        rejected = _thinking(body) and bool(sent.get("tool_calls"))
        out.append(
            Finding(
                code="reasoning-dropped",
                detail=(
                    f"{where} was sent without the model's reasoning_content ({len(reasoning)} "
                    "characters); "
                    + (
                        "the API rejects this request (400: reasoning_content must be passed "
                        "back in thinking mode on a tool-call turn)"
                        if rejected
                        else "the API accepts it, but the prompt no longer matches the cached one"
                    )
                ),
                evidence=(f"produced: reasoning_content {reasoning[:60]!r}", "sent: (absent)"),
                where=f"{where}.reasoning_content",
                rejected=rejected,
            )
        )
    elif (
        isinstance(reasoning, str)
        and isinstance(sent_reasoning, str)
        and reasoning != sent_reasoning
    ):
        location, _, (x, y) = text_divergence(reasoning, sent_reasoning)
        out.append(
            Finding(
                code="reasoning-altered",
                detail=f"{where}.reasoning_content differs from the model's at {location}",
                evidence=(f"produced: {x}", f"sent:     {y}"),
                where=f"{where}.reasoning_content",
                rejected=False,
            )
        )
    calls = produced.get("tool_calls") or []
    sent_calls = sent.get("tool_calls") or []
    for i, (call, back) in enumerate(zip(calls, sent_calls, strict=False)):
        try:
            made = call["function"]["arguments"]
            echoed = back["function"]["arguments"]
        except (KeyError, TypeError):
            continue
        if made == echoed or not isinstance(made, str) or not isinstance(echoed, str):
            continue
        try:
            same = json.loads(made) == json.loads(echoed)
        except ValueError:
            same = False
        if same:
            name = call["function"].get("name")
            out.append(
                Finding(
                    code="tool-args-reserialized",
                    detail=(
                        f"{where}.tool_calls[{i}] ({name!r}): the arguments mean the same JSON "
                        "but are written differently"
                    ),
                    evidence=(f"produced: {made}", f"sent:     {echoed}"),
                    where=f"{where}.tool_calls[{i}].function.arguments",
                )
            )
    return out


def _passback_missing(
    messages: Sequence[Any], body: Mapping[str, Any], start: int, offset: int
) -> list[Finding]:
    """Assistant tool-call turns sent without reasoning in thinking mode (no answer needed)."""
    if not _thinking(body):
        return []
    out = []
    for i in range(start, len(messages)):
        message = messages[i]
        if (
            isinstance(message, Mapping)
            and message.get("role") == "assistant"
            and message.get("tool_calls")
            and not isinstance(message.get("reasoning_content"), str)
        ):
            out.append(
                Finding(
                    code="reasoning-dropped",
                    detail=(
                        f"messages[{i + offset}] is a tool-call turn sent without "
                        "reasoning_content in thinking mode; the API rejects this request (400)"
                    ),
                    evidence=(f"sent: {json.dumps(message, ensure_ascii=False)[:100]}",),
                    where=f"messages[{i + offset}].reasoning_content",
                    rejected=True,
                )
            )
    return out


def _message_diff(old: Any, new: Any) -> tuple[str, tuple[str, ...]]:
    """The first differing field of two messages, with the differing text visible."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        for key in dict.fromkeys([*old, *new]):
            a, b = old.get(key), new.get(key)
            if a == b:
                continue
            if isinstance(a, str) and isinstance(b, str):
                location, _, (x, y) = text_divergence(a, b)
                return f".{key} {location}", (f"before: {x}", f"after:  {y}")
            return f".{key}", (
                f"before: {json.dumps(a, ensure_ascii=False)[:100]}",
                f"after:  {json.dumps(b, ensure_ascii=False)[:100]}",
            )
    return "", (
        f"before: {json.dumps(old, ensure_ascii=False)[:100]}",
        f"after:  {json.dumps(new, ensure_ascii=False)[:100]}",
    )


def _same_turn(produced: Mapping[str, Any], sent: Any) -> bool:
    """Whether ``sent`` is the model's answer resent (content and tool-call names agree)."""
    if not isinstance(sent, Mapping) or sent.get("role") != "assistant":
        return False
    names = [c.get("function", {}).get("name") for c in produced.get("tool_calls") or ()]
    sent_names = [c.get("function", {}).get("name") for c in sent.get("tool_calls") or ()]
    return (produced.get("content") or "") == (sent.get("content") or "") and names == sent_names


def _history_findings(
    old: list[Any], new: list[Any], offset: int, previous: Exchange, current: Exchange
) -> tuple[str | None, list[Finding]]:
    """Compare the previous request's messages (and answer) with this request's."""
    same = 0
    for x, y in zip(old, new, strict=False):
        if x != y:
            break
        same += 1
    if same < len(old):
        where = f"messages[{same + offset}]"
        if same < len(new):
            a, b = old[same], new[same]
            if (
                isinstance(a, Mapping)
                and isinstance(b, Mapping)
                and a.get("role") == b.get("role") == "assistant"
            ):
                echo = _echo_findings(a, b, where, current.body)
                stripped_a = {
                    k: v for k, v in a.items() if k not in ("reasoning_content", "tool_calls")
                }
                stripped_b = {
                    k: v for k, v in b.items() if k not in ("reasoning_content", "tool_calls")
                }
                if echo and stripped_a == stripped_b:
                    return where + echo[0].where.removeprefix(where) if echo[
                        0
                    ].where else where, echo
            # removed messages: does b appear later in old (a truncation), or is it new text?
            later = next((j for j in range(same + 1, len(old)) if old[j] == b), None)
            if later is not None:
                removed = later - same
                return where, [
                    Finding(
                        code="history-rewritten",
                        detail=(
                            f"{removed} message(s) from {where} on were removed (truncation): "
                            f"the previous request had {len(old) + offset} messages"
                        ),
                        evidence=(f"removed: {json.dumps(old[same], ensure_ascii=False)[:80]}",),
                        where=where,
                    )
                ]
            answer = previous.response
            if answer is not None and _same_turn(answer, b):
                return where, [
                    Finding(
                        code="history-rewritten",
                        detail=(
                            f"{len(old) - same} message(s) from {where} on were removed "
                            "(truncation): the request continues with the model's answer right "
                            "after them"
                        ),
                        evidence=(f"removed: {json.dumps(old[same], ensure_ascii=False)[:80]}",),
                        where=where,
                    )
                ]
            field, evidence = _message_diff(a, b)
            shorter = len(new) < len(old)
            kind = (
                "replaced by a message the previous request did not have and the history "
                "shortened (truncation, summarization or compaction)"
                if shorter
                else "edited"
            )
            return where + field, [
                Finding(
                    code="history-rewritten",
                    detail=f"{where} was {kind}",
                    evidence=evidence,
                    where=where + field,
                )
            ]
        return where, [
            Finding(
                code="history-rewritten",
                detail=(
                    f"the history was cut: the previous request had {len(old) + offset} messages, "
                    f"this one {len(new) + offset} (truncation)"
                ),
                where=where,
            )
        ]
    findings: list[Finding] = []
    if previous.response is not None and len(new) > len(old):
        findings += _echo_findings(
            previous.response, new[len(old)], f"messages[{len(old) + offset}]", current.body
        )
    if not any(f.code == "reasoning-dropped" for f in findings):
        findings += _passback_missing(new, current.body, len(old), offset)
    return None, findings


def compare_exchanges(previous: Exchange, current: Exchange) -> tuple[str | None, list[Finding]]:
    """Where ``current`` first diverges from ``previous`` (``None``: it extends it) and why.

    The findings include causes that do not break the prefix of the previous request itself but
    cost the next hit (the echo of the model's answer) or get the request rejected.
    """
    out: list[Finding] = []
    divergence: str | None = None
    for key in _PARAMS:
        a, b = previous.body.get(key), current.body.get(key)
        if a != b:
            out.append(
                Finding(
                    code="params-changed",
                    detail=f"{key}: {json.dumps(a)} → {json.dumps(b)}",
                    where=key,
                )
            )
            divergence = divergence or key
    if _thinking(previous.body) != _thinking(current.body) and not any(
        f.where in ("thinking", "reasoning_effort", "model") for f in out
    ):
        out.append(
            Finding(
                code="params-changed",
                detail=f"thinking mode {_thinking(previous.body)} → {_thinking(current.body)}",
                where="thinking",
            )
        )
        divergence = divergence or "thinking"
    old_system, old_messages = _split_system(previous.body)
    new_system, new_messages = _split_system(current.body)
    offset = len(current.messages) - len(new_messages)
    if old_system != new_system:
        location, (span_a, span_b), (x, y) = text_divergence(old_system, new_system)
        start = _first_diff_start(old_system, new_system)
        volatile = _volatile_span(old_system, new_system, span_a, span_b, start)
        where = f"system {location}"
        evidence = (f"request #{previous.index + 1}: {x}", f"request #{current.index + 1}: {y}")
        if volatile is not None:
            out.append(
                Finding(
                    code="volatile-system-text",
                    detail=(
                        f"the system prompt changes at {location} in a volatile-looking span: "
                        f"{volatile}; move it out of the system prompt (e.g. into the latest "
                        "user message)"
                    ),
                    evidence=evidence,
                    where=where,
                )
            )
        else:
            out.append(
                Finding(
                    code="system-changed",
                    detail=f"the system prompt was edited at {location}",
                    evidence=evidence,
                    where=where,
                )
            )
        divergence = divergence or where
    old_tools, new_tools = previous.body.get("tools"), current.body.get("tools")
    if (old_tools or None) != (new_tools or None):
        finding = _tools_finding(old_tools, new_tools)
        out.append(finding)
        divergence = divergence or finding.where
    at, history = _history_findings(old_messages, new_messages, offset, previous, current)
    out += history
    divergence = divergence or at
    return divergence, out


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
        reusable = _floor(min(reusable, cap), unit_tokens)
        shared = _floor(min(shared, reusable), unit_tokens)
        changes = [f for f in findings if f.code in _CHANGE_CODES]
        if not changes and reusable and shared < unit_tokens:
            findings.append(
                Finding(
                    code="below-cache-unit",
                    detail=f"the shared prefix is below one {unit_tokens}-token cache unit",
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
    unit_tokens: int = 64,
    persist_seconds: float = DEFAULT_PERSIST_SECONDS,
) -> DoctorReport:
    """The cache doctor's report of a trace (anything :func:`~dsh_testkit.traces.trace_of` takes).

    ``simulate``: ``True`` runs the mock's prefix-cache simulator for the figures, ``False``
    uses the trace's reported usage; ``None`` (default) simulates when the trace has no usage.
    ``conversation`` restricts the report to one conversation key.
    """
    if unit_tokens < 1:
        raise ValueError(f"unit_tokens must be at least 1, got {unit_tokens}")
    trace = trace_of(trace_or_capture)
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
