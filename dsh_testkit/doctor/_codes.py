"""The doctor's vocabulary: cause codes, severities, and the report's terms, each said once.

Every finding carries one :data:`CauseCode`; its sentence, advice and kind live here and
nowhere else (the docs' cause-code table and the report's legend are generated from this
module). Codes are stable: they are never renamed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias

__all__ = [
    "CAUSE_CODES",
    "CODES",
    "TERMS",
    "CauseCode",
    "CodeInfo",
    "Severity",
    "cause_codes_markdown",
    "terms_markdown",
]

CauseCode: TypeAlias = Literal[
    "volatile-system-text",
    "system-changed",
    "system-moved",
    "tools-changed",
    "tool-args-reserialized",
    "reasoning-dropped",
    "reasoning-altered",
    "history-rewritten",
    "params-changed",
    "request-refused",
    "below-cache-unit",
    "not-yet-persisted",
    "provider-miss",
]
"""A cause of lost cache hits, as the report and ``allow=`` name it (:data:`CAUSE_CODES` words each)."""

Severity: TypeAlias = Literal["loss", "refusal", "note"]
"""``loss``: this finding limited the request's hit (its lost tokens are counted on it);
``refusal``: the API refused the request; ``note``: true, but it cost nothing here."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CodeInfo:
    """What one cause code means and what to do about it."""

    code: CauseCode
    sentence: str
    """What it means, in one sentence."""
    advice: str
    """What to change so it stops costing."""
    kind: Literal["change", "refusal", "size", "timing", "provider"]
    """``change``: the client sent something different from what it sent (or received)
    before; ``refusal``: the API refused the request; ``size``: too short to cache;
    ``timing``: too soon; ``provider``: nothing the client did explains it."""


_INFO: Final = (
    CodeInfo(
        code="volatile-system-text",
        sentence="The system prompt changes in a span that looks volatile (a timestamp, a date, "
        "a UUID, a counter, a random id), so nothing after that point can be reused.",
        advice="Keep the system prompt fixed; put the changing value in the latest user message.",
        kind="change",
    ),
    CodeInfo(
        code="system-changed",
        sentence="The system prompt was edited, so nothing after the edit can be reused.",
        advice="Edit the system prompt only between sessions, or accept one full miss per edit.",
        kind="change",
    ),
    CodeInfo(
        code="system-moved",
        sentence="A system message moved (for example from the start to after the history), so "
        "the prompt diverges where it used to be.",
        advice="Keep system messages where they were first sent; append new instructions as a "
        "user message instead.",
        kind="change",
    ),
    CodeInfo(
        code="tools-changed",
        sentence="The tool list changed as the template renders it (added, removed, reordered or "
        "edited); tools come before the history, so everything after the first changed tool is "
        "read again.",
        advice="Offer one fixed tool list for the whole session; add new tools at the end.",
        kind="change",
    ),
    CodeInfo(
        code="tool-args-reserialized",
        sentence="The client resent the model's tool-call arguments written differently from "
        "what the model produced (spacing, key order, escapes, '' for '{}').",
        advice="Send back the arguments string exactly as the model produced it.",
        kind="change",
    ),
    CodeInfo(
        code="reasoning-dropped",
        sentence="The model's reasoning was not sent back with its turn.",
        advice="Resend reasoning_content (or the thinking blocks) with every assistant turn "
        "that made tool calls.",
        kind="change",
    ),
    CodeInfo(
        code="reasoning-altered",
        sentence="The reasoning sent back differs from what the model produced.",
        advice="Resend the reasoning exactly as the model produced it.",
        kind="change",
    ),
    CodeInfo(
        code="history-rewritten",
        sentence="An earlier message was edited or removed (truncation, summarization, "
        "compaction), so the prompt diverges there and everything after it is read again.",
        advice="Append instead of rewriting; when history must shrink, do it rarely and all at "
        "once (one compaction), not a little every turn.",
        kind="change",
    ),
    CodeInfo(
        code="params-changed",
        sentence="A parameter the cache is keyed by (the serving model, the end user) or that "
        "changes the prompt (thinking mode) changed; nothing is shared across it.",
        advice="Keep model, user and thinking mode fixed within a conversation.",
        kind="change",
    ),
    CodeInfo(
        code="request-refused",
        sentence="The API refused the request (an error status): it cached nothing and answered "
        "nothing.",
        advice="Fix what the error names; a refused request costs a round trip and no tokens.",
        kind="refusal",
    ),
    CodeInfo(
        code="below-cache-unit",
        sentence="What the request shares with the one before is shorter than one cache unit, "
        "so it cannot hit.",
        advice="Nothing to fix: short prompts are not cached.",
        kind="size",
    ),
    CodeInfo(
        code="not-yet-persisted",
        sentence="The request came sooner after the one it extends than the provider needs to "
        "make that request's cache unit usable.",
        advice="Nothing to fix in the requests; the next one will hit.",
        kind="timing",
    ),
    CodeInfo(
        code="provider-miss",
        sentence="The request extends the one before unchanged, yet the provider did not reuse "
        "all of it: its cache is best-effort (eviction, another replica).",
        advice="Nothing to fix in the requests.",
        kind="provider",
    ),
)

CODES: Final[Mapping[str, CodeInfo]] = {info.code: info for info in _INFO}
"""Every cause code's :class:`CodeInfo`, in the order the docs list them."""

CAUSE_CODES: Final[Mapping[str, str]] = {info.code: info.sentence for info in _INFO}
"""Every cause code and its sentence (stable: codes are never renamed)."""

TERMS: Final[tuple[tuple[str, str], ...]] = (
    (
        "conversation",
        "Requests that continue one another. A request belongs to the conversation of the "
        "earlier request it is compared with; an explicit key (the x-dsh-conversation header, "
        "a session id, a session log's id, an OpenTelemetry conversation id) keeps them "
        "together, except a keyed request with no history and no checkpoint, which starts one "
        "of its own under the key (key · 2: a new run reusing the id, a sub-agent).",
    ),
    (
        "compared with",
        "The earlier request this one extends: the latest request whose whole prompt it "
        "starts with, else the one it shares the longest prefix with; the main line's latest "
        "request when it returns to an older request's shape. Side calls (compactions, titles, "
        "marked side calls) are branches: compared on what they share with the request they "
        "branch off, reported apart from the main line, they never make it look rewritten.",
    ),
    ("prompt", "Prompt tokens of the request (hit + miss)."),
    ("hit", "Prompt tokens the provider served from its prefix cache."),
    ("hit rate", "hit / prompt: the share of prompt tokens served from cache."),
    (
        "reusable",
        "What the request could have reused had it only appended to the request it is compared "
        "with (that request's prompt, and the model's answer when it is resent), rounded down "
        "to whole cache units.",
    ),
    (
        "lost",
        "reusable − hit (never below 0): what the request could have reused and did not. Every "
        "loss of one unit or more has a cause code.",
    ),
    (
        "efficiency",
        "Σ min(hit, reusable) / Σ reusable over the requests compared with an earlier one: how "
        "much of what could be reused was reused.",
    ),
    (
        "granularity",
        "Tokens per cache unit: the provider counts every hit in whole units. Taken from the "
        "trace's own hits when they tell it, else from the model table by model and date, or "
        "--granularity.",
    ),
    (
        "cost",
        "Estimated dollars at the provider's list prices (hit and miss prompt tokens, output "
        "tokens); 'lost cost' is what the lost tokens cost beyond a hit.",
    ),
)
"""The report's terms and their definitions: the legend under every report and in the docs."""


def cause_codes_markdown() -> str:
    """The cause codes as the docs show them: one heading a code (its anchor is the code), its
    sentence, what it costs and the advice."""
    kinds = {
        "change": "a change the client made",
        "refusal": "the API refused the request",
        "size": "too short to cache",
        "timing": "too soon",
        "provider": "nothing the client did",
    }
    parts: list[str] = []
    for info in _INFO:
        parts += [
            f"### `{info.code}`",
            "",
            info.sentence,
            "",
            f"*Kind:* {kinds[info.kind]}. *Advice:* {info.advice}",
            "",
        ]
    return "\n".join(parts).rstrip() + "\n"


def terms_markdown() -> str:
    """The report's terms as a definition table (the legend under every report)."""
    rows = ["| term | meaning |", "|---|---|"]
    pipe = "\\|"
    rows += [f"| {term} | {meaning.replace('|', pipe)} |" for term, meaning in TERMS]
    return "\n".join(rows) + "\n"
