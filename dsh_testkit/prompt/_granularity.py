"""The cache granularity, said once: how many tokens a cache hit is counted in, and why.

DeepSeek reports every hit as a whole number of fixed-size cache units: 64 tokens in V3-era
traffic, 128 since the V4 models (docs/wire.md §2.2–§2.3). The prefix-cache simulator rounds its
hits down to it, the cache doctor reads it off a trace, calibration holds live hits against it;
``dsh-testkit serve --cache-granularity``, ``calibrate --granularity`` and ``cache-report
--granularity`` set it. :class:`CacheGranularity` is that one value with where it came from:
``given`` (the user), ``model-table`` (the model and the date, :func:`table_granularity`), or
``usage`` (a trace's own hits, when they tell it: :func:`granularity_of_hits`).

Not to be confused with a *cache prefix unit*, a prefix the cache persisted and a request hits
in full (:class:`~dsh_testkit.prompt._cache_values.PrefixUnit`): granularity is the size hits
are counted in, a prefix unit is what they hit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final, Literal, TypeAlias

from dsh_core.providers import CacheFacts, resolve_model
from dsh_core.providers._models import Endpoint

__all__ = [
    "DEFAULT_GRANULARITY",
    "CacheGranularity",
    "GranularityOrigin",
    "day_of",
    "granularity_of_hits",
    "on_day",
    "table_granularity",
]

GranularityOrigin: TypeAlias = Literal["usage", "model-table", "given"]
"""``usage``: a trace's hits; ``model-table``: the model and date; ``given``: the user."""

DEFAULT_GRANULARITY: Final = CacheFacts().granularity
"""Tokens per cache unit for a model the table does not know: the table's default (128; every
hit of the V4-era API we found is a multiple of it)."""

_CANDIDATES: Final = (128, 64)
"""The granularities a trace's hits can tell apart (the service's, by era)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheGranularity:
    """Tokens per cache unit (every hit is a whole number of them), and where that came from."""

    tokens: int
    origin: GranularityOrigin
    detail: str
    """Where exactly it came from, for a report (``every one of 57 hit(s) is a multiple of
    128``)."""

    def __post_init__(self) -> None:
        if isinstance(self.tokens, bool) or self.tokens < 1:
            raise ValueError(f"the cache granularity must be at least 1 token, got {self.tokens!r}")

    @classmethod
    def given(cls, tokens: int, *, detail: str = "--granularity") -> CacheGranularity:
        """The one the user set (``detail``: how, for the report)."""
        return cls(tokens=tokens, origin="given", detail=detail)

    def describe(self) -> str:
        return f"{self.tokens} tokens ({self.detail})"

    def to_json(self) -> dict[str, object]:
        return {"tokens": self.tokens, "origin": self.origin, "detail": self.detail}


def day_of(seconds: float | None) -> str:
    """``2026-12-03`` for a Unix time, ``today`` for none, and what it is for a time no
    calendar holds (a corrupt record's year 33658 is no reason to stop a report)."""
    if seconds is None:
        return "today"
    try:
        return datetime.fromtimestamp(seconds, UTC).date().isoformat()
    except (OverflowError, ValueError, OSError):
        return f"an impossible time ({seconds:g} s)"


def on_day(seconds: float | None) -> str:
    """``on 2026-12-03``, or what the model table was read for when the recording has no
    times (a cassette, a capture, the mock's request log): today's."""
    if seconds is None:
        return "as of today (the recording has no times)"
    return f"on {day_of(seconds)}"


def table_granularity(
    model: str | None, when: float | None = None, *, endpoint: Endpoint = "chat"
) -> CacheGranularity:
    """The model table's granularity for ``model`` at ``when`` (Unix seconds; ``None``: today),
    the table's default for a model it does not know."""
    info = resolve_model(model, endpoint=endpoint) if model else None
    facts = info.cache if info is not None else CacheFacts()
    return CacheGranularity(
        tokens=facts.granularity_at(when),
        origin="model-table",
        detail=f"model table: {model or 'an unknown model'} {on_day(when)}",
    )


def granularity_of_hits(hits: Sequence[int], table: CacheGranularity) -> CacheGranularity:
    """What a trace's non-zero ``hits`` tell, else ``table`` (the model table's).

    The hits tell when every one is a multiple of 128, or of 64 and not all of 128; the table's
    value wins a tie it fits (hits that are all multiples of 128 also fit 64).
    """
    hits = [h for h in hits if h > 0]
    if not hits:
        return table
    fitting = [c for c in _CANDIDATES if all(h % c == 0 for h in hits)]
    if table.tokens in fitting:
        return CacheGranularity(
            tokens=table.tokens,
            origin="usage",
            detail=f"every one of {len(hits)} hit(s) is a multiple of {table.tokens}; "
            f"{table.detail}",
        )
    if fitting:
        return CacheGranularity(
            tokens=fitting[0],
            origin="usage",
            detail=f"every one of {len(hits)} hit(s) is a multiple of {fitting[0]}",
        )
    return table
