"""What the model table says about a trace's traffic: its cache granularity, rules and template.

DeepSeek reports hits in whole cache units: 64 tokens in V3-era traffic, 128 since the V4 models
(docs/wire.md §2.2–§2.3). A trace's own usage tells which when its hits allow it (every non-zero
hit a multiple of 128 — or of 64 and not all of 128); otherwise the model table gives the
granularity for the trace's model at the trace's date; ``--granularity`` overrides both. The
report states the granularity and where it came from (one
:class:`~dsh_testkit.prompt._granularity.CacheGranularity`, the simulator's setting too).
"""

from __future__ import annotations

from collections import Counter

from dsh_core.providers import CacheFacts, resolve_model
from dsh_core.providers._models import CacheRules, ChatTemplate

from ..prompt._granularity import CacheGranularity, granularity_of_hits, table_granularity
from ..traces import Exchange, Trace

__all__ = ["GranularityTally", "cache_granularity", "rules_of", "template_of"]


class GranularityTally:
    """What :func:`cache_granularity` reads of a trace, gathered one exchange at a time (a
    trace read as a stream is never held whole)."""

    __slots__ = ("earliest", "hits", "models")

    def __init__(self) -> None:
        self.hits: list[int] = []
        """Every non-zero reported hit, in order."""
        self.models: Counter[str] = Counter()
        self.earliest: float | None = None
        """The earliest start that is a date (after 2001)."""

    def add(self, exchange: Exchange) -> None:
        usage = exchange.usage
        if usage is not None and usage.hit_tokens is not None and usage.hit_tokens > 0:
            self.hits.append(usage.hit_tokens)
        if exchange.model is not None:
            self.models[exchange.model] += 1
        started = exchange.started
        if started is not None and started > 1e9:
            self.earliest = started if self.earliest is None else min(self.earliest, started)

    def granularity(self, given: int | None = None) -> CacheGranularity:
        """The cache granularity (see the module docstring); ``given`` is the user's."""
        if given is not None:
            return CacheGranularity.given(given)
        # The model table's, for the trace's most common model at its earliest time.
        model = self.models.most_common(1)[0][0] if self.models else None
        return granularity_of_hits(self.hits, table_granularity(model, self.earliest))


def cache_granularity(trace: Trace, given: int | None = None) -> CacheGranularity:
    """The cache granularity for ``trace`` (see the module docstring); ``given`` is the user's."""
    if given is not None:
        return CacheGranularity.given(given)
    tally = GranularityTally()
    for exchange in trace:
        tally.add(exchange)
    return tally.granularity()


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
