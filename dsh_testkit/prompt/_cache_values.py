"""The prefix-cache simulator's vocabulary and values: its rules and unit kinds, the isolation key,
the per-kind visibility setting, and what a request reused (usage, the unit, the lookup)."""

from __future__ import annotations

import hashlib
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from dsh_core.providers._models import cache_model

from ._template_tokens import RenderedPrompt

__all__ = [
    "CacheKey",
    "CacheLookup",
    "CacheRules",
    "CacheUsage",
    "CommonPrefixRule",
    "PrefixUnit",
    "PrefixUnitKind",
    "anthropic_usage",
    "deepseek_usage",
]

CacheRules: TypeAlias = Literal["2026", "2024"]
"""``"2026"``: persisted cache prefix units, full match. ``"2024"``: any shared block prefix."""

PrefixUnitKind: TypeAlias = Literal["input", "output", "interval", "common", "block"]
"""Why a cache prefix unit was persisted: end of user input, end of model output, a fixed interval, a
detected common prefix, or (rules ``"2024"``) a block boundary."""

CommonPrefixRule: TypeAlias = Literal["blocks", "detected"]
"""Rules ``"2026"``, how a prefix shared with an earlier prompt becomes reusable. ``"blocks"``
(the default): every granularity-aligned prefix of every earlier prompt of the key is reusable
once visible, so a second session hits the system prompt and tools the first one sent.
``"detected"``: only after two requests share it (the documented "A+B then A+C persists A"
example taken literally: the second request misses, the third hits)."""

_RECENT_BLOCKS_PER_KEY = 1 << 18
"""Bound on the block hashes of recent prompts kept per key for common-prefix detection."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheKey:
    """An isolation key: one account (API key), one ``user_id``, one serving model.

    DeepSeek isolates caches per account and ``user_id``; it documents no sharing between
    models, and a unit is a model's own attention state, so a unit is also the serving model's:
    ``model`` is the model an id is served by, where aliases (``deepseek-chat``,
    ``deepseek-v4-flash``, …) lead to one model and share its units (:func:`cache_model`).

    Built with :meth:`for_request`, which keeps only a digest of the API key, so a key can be
    logged, printed and compared without exposing the credential.
    """

    account: str
    """A SHA-256 digest prefix of the API key (never the key itself)."""
    user_id: str = ""
    """The request's ``user_id`` (chat) or ``metadata.user_id`` (Anthropic); ``""`` when absent."""
    model: str = ""
    """The serving model's id (:func:`cache_model`); ``""`` when not distinguished."""

    @classmethod
    def for_request(
        cls, api_key: str, user_id: str | None = None, *, model: str | None = None
    ) -> CacheKey:
        """The key for a request made with ``api_key`` on behalf of ``user_id`` to ``model``."""
        digest = hashlib.sha256(api_key.encode("utf-8")).hexdigest()[:16]
        return cls(
            account=digest,
            user_id=user_id or "",
            model=cache_model(model) if model is not None else "",
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheUsage:
    """The cache outcome of one request, as DeepSeek reports it."""

    prompt_tokens: int
    """All prompt tokens; always ``hit_tokens + miss_tokens``."""
    hit_tokens: int
    """Tokens served from cache: a multiple of the granularity (``prompt_cache_hit_tokens``)."""
    miss_tokens: int
    """Tokens not served from cache (``prompt_cache_miss_tokens``)."""
    unit_tokens: int = 0
    """Length of the unit that hit, before rounding down to the granularity (0 on a miss)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PrefixUnit:
    """A cache prefix unit (docs/wire.md §2.1): a prefix the cache persisted, which a request
    hits only in full; as :meth:`PrefixCacheSimulator.units` lists it. (Its hits are counted in
    whole cache units of the granularity, :class:`~dsh_testkit.prompt._granularity.CacheGranularity`.)"""

    length: int
    """Tokens covered, from the start of the sequence."""
    kind: PrefixUnitKind
    """Why it was first persisted."""
    visible_at: float
    """Clock time from which requests can hit it."""
    last_used: float
    """Clock time it was last persisted again or hit (the idle TTL counts from here)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheLookup:
    """The result of :meth:`PrefixCacheSimulator.lookup`; pass it to ``commit``."""

    key: Hashable
    """The isolation key looked up."""
    usage: CacheUsage
    """The hit/miss split of this request."""
    prompt: RenderedPrompt | None = field(repr=False, compare=False)
    """The rendered prompt, when one was given (``None`` for raw token sequences)."""
    tokens: Sequence[int] = field(repr=False, compare=False)
    """The prompt tokens."""
    input_end: int = field(repr=False)
    """Where the input ends (the "end of user input" unit)."""
    chain: tuple[int, ...] = field(repr=False, compare=False)
    """Block-chain hashes of the prompt (``chain[k]`` covers the first ``k`` blocks)."""
    time: float
    """Clock time of the lookup."""
    unit_kind: PrefixUnitKind | None = None
    """The kind of the unit that hit (``None`` on a miss)."""


def deepseek_usage(
    cache: CacheUsage, *, completion_tokens: int, reasoning_tokens: int | None = None
) -> dict[str, object]:
    """The ``usage`` object of a DeepSeek chat completion, in the API's field order.

    ``prompt_tokens = prompt_cache_hit_tokens + prompt_cache_miss_tokens``;
    ``prompt_tokens_details.cached_tokens`` mirrors the hit; ``completion_tokens`` includes
    reasoning; ``completion_tokens_details`` appears only in thinking mode (pass
    ``reasoning_tokens``), as in V4 captures (docs/wire.md §1.5, §1.7).
    """
    usage: dict[str, object] = {
        "prompt_tokens": cache.prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": cache.prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cache.hit_tokens},
    }
    if reasoning_tokens is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
    usage["prompt_cache_hit_tokens"] = cache.hit_tokens
    usage["prompt_cache_miss_tokens"] = cache.miss_tokens
    return usage


def anthropic_usage(cache: CacheUsage, *, output_tokens: int) -> dict[str, int]:
    """The ``usage`` object of DeepSeek's Anthropic-compatible endpoint.

    The disk-cache hit is ``cache_read_input_tokens``, ``input_tokens`` is the uncached rest,
    and ``cache_creation_input_tokens`` is always 0 (no cache writes are billed; docs/wire.md §3,
    §4.2). The three input fields sum to the prompt's tokens; there is no ``total_tokens``.
    """
    return {
        "input_tokens": cache.miss_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": cache.hit_tokens,
        "output_tokens": output_tokens,
    }
