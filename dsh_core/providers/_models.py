"""The model table and the rules that follow from it: which model serves an id, whether a
request runs in thinking mode, and how the model's prefix cache behaves (:class:`CacheFacts`).

Both codecs (Chat Completions and the Anthropic format) and the mock DeepSeek read these facts
from here, so a model's defaults and the thinking rule exist once. Facts and their public
sources: ``docs/wire.md`` §1.2 (models), §1.3 (``thinking``, ``reasoning_effort``, ``max_tokens``),
§3 (the Anthropic-format endpoint).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Any, Literal, TypeAlias

__all__ = [
    "CHAT_TEMPLATES",
    "MODELS",
    "REASONING_EFFORT_ALIASES",
    "CacheFacts",
    "CacheRules",
    "ChatTemplate",
    "Endpoint",
    "ModelInfo",
    "ModelStatus",
    "UnitVisibility",
    "cache_model",
    "resolve_model",
    "thinking_enabled",
]

ModelStatus: TypeAlias = Literal["not-yet", "served", "retired"]
"""Where a date falls in a model id's life (:meth:`ModelInfo.served_at`)."""

Endpoint: TypeAlias = Literal["chat", "anthropic"]
"""Which of DeepSeek's two wire formats a request was sent to."""


ChatTemplate: TypeAlias = Literal["deepseek-v3", "deepseek-v4"]
"""The chat template that turns a request into the model's prompt tokens. ``deepseek-v4`` (and
V3.2's, which renders tool calls the same way) writes a tool call's arguments one parameter per
argument and keeps system messages where they stand; ``deepseek-v3`` (the V3-era service, until
V3.2) gathered every system message into the leading system prompt and wrote arguments as their
text (docs/wire.md §1.4)."""

CHAT_TEMPLATES: tuple[ChatTemplate, ...] = ("deepseek-v3", "deepseek-v4")
"""Every template a model of the table can name."""


@dataclass(frozen=True, slots=True, kw_only=True)
class UnitVisibility:
    """How long after it is persisted each kind of prefix-cache unit can hit, in seconds.

    Input-side units (``input``, ``common``, and ``interval`` units inside the prompt) count from
    the moment the server has read the request's input; output-side units (``output``, and
    ``interval`` units inside the reply) from the reply's last chunk. The default is no delay for
    any kind; what the live service does is in each model's :class:`CacheFacts`.
    """

    input: float = 0.0
    """Units ending at the end of the user input."""
    output: float = 0.0
    """Units ending at the end of the model output."""
    common: float = 0.0
    """Prefixes shared with an earlier prompt."""
    interval: float = 0.0
    """Fixed-interval units (from the read inside the prompt, from the last chunk inside the
    reply)."""

    def __post_init__(self) -> None:
        for name in ("input", "output", "common", "interval"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value < 0:
                raise ValueError(f"UnitVisibility.{name} must be >= 0 seconds, got {value!r}")

    @classmethod
    def uniform(cls, delay: float) -> UnitVisibility:
        """The same delay for every kind."""
        return cls(input=delay, output=delay, common=delay, interval=delay)


_EARLIER_VISIBILITY: tuple[tuple[str, UnitVisibility], ...] = (
    ("2026-07-11T00:00:00Z", UnitVisibility(output=1.45)),
)
"""Measured on live traffic (docs/fidelity.md): through 2026-07-09 a tool step reused the
previous reply's output-end unit only when it came at least ~1.45 s after the reply's last chunk
(none at 1.41 s or less, all at 1.49 s or more); from 2026-07-13 on, output-end units were reused
by the next request whatever the gap. The switch is put between the two."""


_EARLIER_GRANULARITY: tuple[tuple[str, int], ...] = (("2026-04-24T00:00:00Z", 64),)

CacheRules: TypeAlias = Literal["2024", "2026"]
"""DeepSeek's prefix-cache rules (docs/wire.md §2.1–§2.2): ``2024``, any repeated prefix from
token 0 hits, in storage units; ``2026``, a request hits only whole units persisted at request
boundaries (the end of an input, of an answer), fixed intervals and common prefixes."""

_EARLIER_RULES: tuple[tuple[str, CacheRules], ...] = (("2026-04-24T00:00:00Z", "2024"),)
"""The 2024 rules held until the V4 models (their cache documentation is the 2026 one)."""

_EARLIER_TEMPLATES: tuple[tuple[str, ChatTemplate], ...] = (
    ("2025-12-01T00:00:00Z", "deepseek-v3"),
)
"""Until DeepSeek-V3.2 (2025-12-01) the service's template wrote a tool call's arguments as their
text and gathered system messages into the leading system prompt (measured on real recordings,
docs/wire.md §1.4): resending the model's arguments reformatted then cost the answer's cache unit,
and a system message added after the history changed the prompt's head."""
"""Before the V4 models (2026-04-24), DeepSeek's cache stored 64-token units (its 2024
announcement, docs/wire.md §2.2); every V4-era hit measured is a multiple of 128 (§2.3)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheFacts:
    """How one model's prompt cache and prompt look, as documented or measured
    (docs/fidelity.md holds each fact's source and how well it agrees with live traffic)."""

    granularity: int = 128
    """Tokens per reported cache unit: every hit is a whole number of them (every V4-era live
    hit measured is a multiple of 128)."""
    template: ChatTemplate = "deepseek-v4"
    """The chat template its prompts are rendered with (tool preamble, turn and tool framing)."""
    visibility: UnitVisibility = UnitVisibility()
    """When each kind of unit becomes reusable on the live service now: every kind by the next
    request (measured from July 2026 on)."""
    earlier_visibility: tuple[tuple[str, UnitVisibility], ...] = _EARLIER_VISIBILITY
    """The service's earlier behaviour, oldest first: ``(until, visibility)`` pairs, where
    ``until`` is an ISO 8601 UTC instant before which requests saw ``visibility``."""
    earlier_templates: tuple[tuple[str, ChatTemplate], ...] = _EARLIER_TEMPLATES
    """The templates before :attr:`template`, oldest first: ``(until, template)`` pairs."""
    earlier_granularity: tuple[tuple[str, int], ...] = _EARLIER_GRANULARITY
    earlier_rules: tuple[tuple[str, CacheRules], ...] = _EARLIER_RULES
    """The caching rules before the 2026 ones, oldest first: ``(until, rules)`` pairs."""

    def rules_at(self, when: float | None) -> CacheRules:
        """The caching rules a request made at ``when`` met: ``"2026"`` (whole units persisted
        at request boundaries) or ``"2024"`` (any repeated prefix, in storage units)."""
        if when is not None:
            for until, rules in self.earlier_rules:
                if when < _unix_seconds(until):
                    return rules
        return "2026"

    """The unit before :attr:`granularity`, oldest first: ``(until, tokens)`` pairs (the V3-era
    service stored 64-token units, docs/wire.md §2.2–§2.3)."""

    def template_at(self, when: float | None) -> ChatTemplate:
        """The template a request made at ``when`` (Unix seconds) was rendered with."""
        if when is not None:
            for until, template in self.earlier_templates:
                if when < _unix_seconds(until):
                    return template
        return self.template

    def granularity_at(self, when: float | None) -> int:
        """The cache unit a request made at ``when`` (Unix seconds) met; ``None``: now."""
        if when is not None:
            for until, tokens in self.earlier_granularity:
                if when < _unix_seconds(until):
                    return tokens
        return self.granularity

    def visibility_at(self, when: float | None) -> UnitVisibility:
        """The visibility a request made at ``when`` (Unix seconds) met; ``None``: now."""
        if when is not None:
            for until, visibility in self.earlier_visibility:
                if when < _unix_seconds(until):
                    return visibility
        return self.visibility

    def __post_init__(self) -> None:
        if isinstance(self.granularity, bool) or self.granularity < 1:
            raise ValueError(f"CacheFacts.granularity must be >= 1, got {self.granularity!r}")
        if self.template not in CHAT_TEMPLATES:
            raise ValueError(f"CacheFacts.template must be one of {CHAT_TEMPLATES}")


@functools.lru_cache(maxsize=256)
def _unix_seconds(instant: str) -> float:
    """Unix seconds of an ISO 8601 UTC instant (``…Z``; the table's few dates, parsed once
    each: every request of a trace asks)."""
    return datetime.fromisoformat(instant.replace("Z", "+00:00")).timestamp()


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelInfo:
    """What the API does with one model id."""

    id: str
    """The id a request sends."""
    served_by: str
    """The model that answers, e.g. ``DeepSeek-V4.1-Flash``."""
    context_window: int
    """Input + output tokens the model can hold."""
    max_output_tokens: int
    """The largest accepted ``max_tokens``."""
    default_output_tokens: int
    """``max_tokens`` when the request sends none, thinking off."""
    default_output_tokens_thinking: int
    """``max_tokens`` when the request sends none, thinking on."""
    default_output_tokens_max_effort: int
    """``max_tokens`` when the request sends none and ``reasoning_effort`` is ``max``."""
    reasoning: bool
    """Whether the model can think (``reasoning_content``)."""
    thinking_default: bool
    """Whether thinking is on when the request does not say."""
    reasoning_efforts: tuple[str, ...]
    """Wire values of ``reasoning_effort`` (``none`` turns thinking off)."""
    input_modalities: tuple[str, ...]
    concurrency_limit: int | None
    """In-flight requests per account before HTTP 429 (None: not documented)."""
    alias_of: str | None = None
    """The id this one is an alias of, if any."""
    served_from: str | None = None
    """When the API began to serve the id (ISO 8601, UTC), if known: before it, the id was
    unknown to the API ("Model Not Exist")."""
    retired_at: str | None = None
    """When the id stops working (ISO 8601, UTC), if announced."""
    cache: CacheFacts = CacheFacts()
    """Its prefix cache's granularity and unit visibility, and its chat template."""
    reported_as: str | None = None
    """The id a response names in its ``model`` field when it is not :attr:`id` (V4-era traffic
    for the ``deepseek-chat`` / ``deepseek-reasoner`` aliases names ``deepseek-v4-flash``)."""

    @property
    def response_model(self) -> str:
        """The ``model`` a response to a request naming this id carries."""
        return self.reported_as or self.id

    def served_at(self, when: float) -> ModelStatus:
        """Whether a request made at ``when`` (Unix seconds) met this id before it was served
        (``"not-yet"``), while it was (``"served"``), or after its announced retirement
        (``"retired"``)."""
        if self.served_from is not None and when < _unix_seconds(self.served_from):
            return "not-yet"
        if self.retired_at is not None and when >= _unix_seconds(self.retired_at):
            return "retired"
        return "served"


_V4_EFFORTS = ("none", "low", "high", "max")
REASONING_EFFORT_ALIASES: Mapping[str, str] = MappingProxyType(
    {"minimal": "low", "medium": "high", "xhigh": "high", "ultra": "max"}
)
"""Wire aliases the V4.1 API accepts for ``reasoning_effort`` (docs/wire.md §1.3)."""


_V4 = "2026-04-24T00:00:00Z"
"""The V4 models' launch day (docs/wire.md §1.2); the hour is not published."""
_V4_1 = "2026-09-10T00:00:00Z"
"""V4.1's launch day (docs/wire.md §1.2), when ``deepseek-flash`` appeared."""


def _model(model_id: str, served_by: str, **facts: Any) -> ModelInfo:
    base: dict[str, Any] = {
        "context_window": 1_048_576,
        "max_output_tokens": 393_216,
        "default_output_tokens": 8_192,
        "default_output_tokens_thinking": 65_536,
        "default_output_tokens_max_effort": 131_072,
        "reasoning": True,
        "thinking_default": True,
        "reasoning_efforts": _V4_EFFORTS,
        "input_modalities": ("text",),
        "concurrency_limit": 2500,
    }
    base.update(facts)
    return ModelInfo(id=model_id, served_by=served_by, **base)


MODELS: Mapping[str, ModelInfo] = MappingProxyType(
    {
        m.id: m
        for m in (
            _model(
                "deepseek-flash",
                "DeepSeek-V4.1-Flash",
                input_modalities=("text", "image"),
                served_from=_V4_1,
            ),
            _model(
                "deepseek-v4-flash",
                "DeepSeek-V4.1-Flash",
                alias_of="deepseek-flash",
                served_from=_V4,
            ),
            _model(
                "deepseek-v4-flash-vision-exp",
                "DeepSeek-V4.1-Flash",
                alias_of="deepseek-flash",
                input_modalities=("text", "image"),
                served_from=_V4_1,
            ),
            _model(
                "deepseek-v4-pro", "DeepSeek-V4-Pro-0813", concurrency_limit=500, served_from=_V4
            ),
            _model(
                "deepseek-chat",
                "DeepSeek-V4-Flash (non-thinking)",
                alias_of="deepseek-v4-flash",
                thinking_default=False,
                retired_at="2026-07-24T15:59:00Z",
                reported_as="deepseek-v4-flash",
            ),
            _model(
                "deepseek-reasoner",
                "DeepSeek-V4-Flash (thinking)",
                alias_of="deepseek-v4-flash",
                retired_at="2026-07-24T15:59:00Z",
                reported_as="deepseek-v4-flash",
            ),
        )
    }
)
"""Model id → :class:`ModelInfo`, as of late 2026 (docs/wire.md §1.2). Read-only."""


def cache_model(model: str) -> str:
    """The model whose cache a request naming ``model`` uses: the end of its alias chain in the
    model table (``deepseek-chat`` → ``deepseek-v4-flash`` → ``deepseek-flash``); an id the table
    does not know stands for itself. Aliases of one model share its cache (docs/fidelity.md,
    "Cache key")."""
    seen: set[str] = set()
    while model not in seen:
        seen.add(model)
        info = MODELS.get(model)
        if info is None or info.alias_of is None:
            return model
        model = info.alias_of
    return model


_CLAUDE_MODELS = (("claude-opus", "deepseek-v4-pro"), ("claude-sonnet", "deepseek-flash"))


def resolve_model(model: str, *, endpoint: Endpoint = "chat") -> ModelInfo | None:
    """The table entry serving ``model``; ``None`` when the API answers "Model Not Exist".

    The Anthropic-format endpoint also maps Claude names (docs/wire.md §3): ``claude-opus*`` →
    ``deepseek-v4-pro``, ``claude-sonnet*`` and ``claude-haiku*`` → ``deepseek-flash``. The chat
    endpoint knows only the table's ids.
    """
    info = MODELS.get(model)
    if info is not None or endpoint == "chat":
        return info
    if model.startswith("claude-opus"):
        return MODELS["deepseek-v4-pro"]
    if model.startswith(("claude-sonnet", "claude-haiku")):
        return MODELS["deepseek-flash"]
    return None


def thinking_enabled(
    model: ModelInfo | None, *, thinking_type: str | None = None, effort: str | None = None
) -> bool:
    """Whether a request runs in thinking mode: THE rule, for both endpoints.

    1. A model that cannot reason never thinks.
    2. An explicit ``thinking.type`` decides: ``disabled`` turns thinking off; ``enabled`` turns
       it on, and so does the Anthropic format's ``adaptive`` (the client asks for thinking and
       leaves the budget to the model; DeepSeek ignores budgets, docs/wire.md §3), even on the
       ``deepseek-chat`` alias whose default is off.
    3. Otherwise an effort of ``none`` turns it off (``reasoning_effort`` on the chat endpoint,
       ``reasoning.effort`` on the Anthropic format; V4.1 docs, docs/wire.md §1.3). Any other
       effort leaves the decision to the model: an effort sets strength, not the switch.
    4. Otherwise the model's :attr:`ModelInfo.thinking_default` (an unknown model: on, as every
       V4-era model is).

    ``thinking_type`` values other than these three (the chat codec refuses them) count as
    unset.
    """
    if model is not None and not model.reasoning:
        return False
    if thinking_type == "disabled":
        return False
    if thinking_type in ("enabled", "adaptive"):
        return True
    if effort == "none":
        return False
    return True if model is None else model.thinking_default
