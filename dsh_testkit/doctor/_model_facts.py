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

__all__ = ["cache_granularity", "rules_of", "template_of"]


def _table_granularity(trace: Trace) -> CacheGranularity:
    """The model table's, for the trace's most common model at its earliest time."""
    models = Counter(e.model for e in trace if e.model is not None)
    model = models.most_common(1)[0][0] if models else None
    times = [e.started for e in trace if e.started is not None and e.started > 1e9]
    return table_granularity(model, min(times) if times else None)


def cache_granularity(trace: Trace, given: int | None = None) -> CacheGranularity:
    """The cache granularity for ``trace`` (see the module docstring); ``given`` is the user's."""
    if given is not None:
        return CacheGranularity.given(given)
    hits = [
        e.usage.hit_tokens
        for e in trace
        if e.usage is not None and e.usage.hit_tokens is not None and e.usage.hit_tokens > 0
    ]
    return granularity_of_hits(hits, _table_granularity(trace))


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
