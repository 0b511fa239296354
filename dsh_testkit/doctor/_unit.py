"""The cache unit (and the template), said once: taken from the trace's hits, else the model table, else the user.

DeepSeek reports hits in whole units: 64 tokens in V3-era traffic, 128 since the V4 models
(docs/wire.md §2.2–§2.3). A trace's own usage tells which when its hits allow it (every non-zero
hit a multiple of 128 — or of 64 and not all of 128); otherwise the model table gives the unit
for the trace's model at the trace's date; ``--unit-tokens`` overrides both. The report states
the unit and where it came from.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final, Literal

from dsh_core.providers import CacheFacts, resolve_model
from dsh_core.providers._models import CacheRules, ChatTemplate

from ..traces import Exchange, Trace

__all__ = ["CacheUnit", "cache_unit", "day_of", "on_day", "rules_of", "template_of"]

_CANDIDATES: Final = (128, 64)


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheUnit:
    """The unit the doctor rounds to, and why."""

    tokens: int
    origin: Literal["usage", "model-table", "given"]
    """``usage``: the trace's hits; ``model-table``: the model and date; ``given``: the user."""
    detail: str
    """Where exactly it came from, for the report (``every one of 57 hits is a multiple of
    128``)."""

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


def _table_unit(trace: Trace) -> tuple[int, str]:
    models = Counter(e.model for e in trace if e.model is not None)
    model = models.most_common(1)[0][0] if models else None
    times = [e.started for e in trace if e.started is not None and e.started > 1e9]
    when = min(times) if times else None
    info = resolve_model(model) if model is not None else None
    facts = info.cache if info is not None else CacheFacts()
    tokens = facts.granularity_at(when)
    return tokens, f"model table: {model or 'an unknown model'} {on_day(when)}"


def cache_unit(trace: Trace, given: int | None = None) -> CacheUnit:
    """The cache unit for ``trace`` (see the module docstring)."""
    if given is not None:
        if given < 1:
            raise ValueError(f"the cache unit must be at least 1 token, got {given}")
        return CacheUnit(tokens=given, origin="given", detail="--unit-tokens")
    hits = [
        e.usage.hit_tokens
        for e in trace
        if e.usage is not None and e.usage.hit_tokens is not None and e.usage.hit_tokens > 0
    ]
    table, where = _table_unit(trace)
    if hits:
        fitting = [c for c in _CANDIDATES if all(h % c == 0 for h in hits)]
        if table in fitting:
            return CacheUnit(
                tokens=table,
                origin="usage",
                detail=f"every one of {len(hits)} hit(s) is a multiple of {table}; {where}",
            )
        if fitting:
            return CacheUnit(
                tokens=fitting[0],
                origin="usage",
                detail=f"every one of {len(hits)} hit(s) is a multiple of {fitting[0]}",
            )
    return CacheUnit(tokens=table, origin="model-table", detail=where)


def _facts(exchange: Exchange) -> CacheFacts:
    model = exchange.model
    info = resolve_model(model, endpoint=exchange.endpoint) if model else None
    return info.cache if info is not None else CacheFacts()


def rules_of(exchange: Exchange) -> CacheRules:
    """The caching rules the service applied to ``exchange`` (model table, by date; today's
    without a date): ``2024``, any repeated prefix hits in storage units; ``2026``, only whole
    units ending at request boundaries."""
    return _facts(exchange).rules_at(exchange.started)


def template_of(exchange: Exchange) -> ChatTemplate:
    """The chat template the service rendered ``exchange`` with: its model's at its date, from
    the model table (today's when the trace has no times)."""
    return _facts(exchange).template_at(exchange.started)
