"""A model call's figures as the provider reported them, wherever an instrumentation keeps them.

In this order, the first that has a prompt count wins:

1. **The provider's own usage object**, when the instrumentation keeps it whole: Logfire's
   ``gen_ai.usage.raw`` (and ``response_data.usage`` of its version-1 spans), OpenInference's
   ``output.value`` (the response JSON of the openai SDK; LangChain's ``token_usage``). DeepSeek's
   ``prompt_cache_hit_tokens``, then OpenAI's ``prompt_tokens_details.cached_tokens``, then
   Anthropic's ``cache_read_input_tokens`` give the hit; zeros are kept there.
2. **The attributes** the conventions define: ``gen_ai.usage.input_tokens`` (or OpenInference's
   ``llm.token_count.prompt``) and the cache read ``gen_ai.usage.cache_read.input_tokens``
   (``gen_ai.usage.cache_read_input_tokens`` before the conventions named it,
   ``gen_ai.usage.details.prompt_cache_hit_tokens`` as pydantic-ai passes DeepSeek's figure,
   ``llm.token_count.prompt_details.cache_read``).
3. **A cache read that is not written** means 0 only for the instrumentations known to leave a
   zero out (:data:`OMITS_ZERO_CACHE_READ`); elsewhere it is unknown, and the doctor simulates
   that figure (and says so) rather than count the request as a hit of 0 or leave it out.

The figures keep where they came from (:attr:`TraceUsage.origin`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from ..._model import TraceUsage
from .._fields import is_count
from ._common import SpanNotes
from ._records import OtelSpan

__all__ = ["OMITS_ZERO_CACHE_READ", "raw_usage_figures", "usage_of"]

PROMPT_KEYS: Final = (
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.prompt_tokens",
    "llm.token_count.prompt",
)
COMPLETION_KEYS: Final = (
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.completion_tokens",
    "llm.token_count.completion",
)
HIT_KEYS: Final = (
    "gen_ai.usage.cache_read.input_tokens",  # the semantic conventions
    "gen_ai.usage.cache_read_input_tokens",  # OpenLLMetry before the conventions named it
    "gen_ai.usage.details.prompt_cache_hit_tokens",  # DeepSeek's own, as pydantic-ai passes it
    "llm.token_count.prompt_details.cache_read",  # OpenInference
)

OMITS_ZERO_CACHE_READ: Final = {
    "pydantic-ai": "pydantic-ai writes gen_ai.usage.cache_read.input_tokens only when it is not 0",
    "logfire.openai": (
        "Logfire's openai instrumentation writes gen_ai.usage.cache_read.input_tokens only when "
        "it is not 0"
    ),
}
"""Instrumentation scopes that leave a cache read of zero out: there, a usage without one means
0 (and says so). Everywhere else an absent cache read is unknown."""


def _first(attributes: Mapping[str, Any], keys: Sequence[str]) -> tuple[str, Any] | None:
    for key in keys:
        if key in attributes and attributes[key] is not None:
            return key, attributes[key]
    return None


def _nested(value: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def raw_usage_figures(raw: Any) -> tuple[int, int | None, int | None] | None:
    """(prompt, hit, completion) of a provider's usage object (DeepSeek, OpenAI or Anthropic
    shape); ``None`` when it is not one."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except (ValueError, RecursionError):
            return None
    if not isinstance(raw, Mapping):
        return None
    prompt = raw.get("prompt_tokens")
    completion = raw.get("completion_tokens")
    hit = raw.get("prompt_cache_hit_tokens")
    if hit is None:
        hit = _nested(raw, "prompt_tokens_details", "cached_tokens")
    if prompt is None and is_count(raw.get("input_tokens")):
        # Anthropic: input_tokens counts only what was neither read from nor written to cache
        read = raw.get("cache_read_input_tokens")
        written = raw.get("cache_creation_input_tokens")
        prompt = raw["input_tokens"] + sum(v for v in (read, written) if is_count(v) and v)
        hit = read
        completion = raw.get("output_tokens")
    if not is_count(prompt):
        return None
    assert isinstance(prompt, int)
    return (
        prompt,
        hit if is_count(hit) else None,
        completion if is_count(completion) else None,
    )


def usage_of(
    span: OtelSpan,
    notes: SpanNotes,
    *,
    attributes: Mapping[str, Any] | None = None,
    raw: Any = None,
    raw_origin: str | None = None,
) -> TraceUsage | None:
    """The call's usage (see the module docstring): ``raw`` is the provider's usage object the
    instrumentation kept (``raw_origin`` names where), ``attributes`` the ones to read (the
    span's by default)."""
    attributes = span.attributes if attributes is None else attributes
    from_raw = raw_usage_figures(raw) if raw is not None else None
    found = {
        "prompt": _first(attributes, PROMPT_KEYS),
        "completion": _first(attributes, COMPLETION_KEYS),
        "hit": _first(attributes, HIT_KEYS),
    }
    for pair in found.values():
        if pair is not None and not is_count(pair[1]):
            notes.add(
                "usage-not-count",
                f"a usage attribute is not a token count ({pair[0]} = {pair[1]!r:.40}); the "
                "span's usage was left out",
                span.where,
            )
            return None
    if from_raw is not None:
        prompt, hit, completion = from_raw
        origin = f"{raw_origin}: the provider's own usage"
        if hit is None and found["hit"] is not None:
            hit = found["hit"][1]
            origin = f"{raw_origin}; cache read from {found['hit'][0]}"
        if completion is None and found["completion"] is not None:
            completion = found["completion"][1]
    else:
        if found["prompt"] is None:
            return None
        prompt = found["prompt"][1]
        completion = found["completion"][1] if found["completion"] is not None else None
        if found["hit"] is not None:
            hit = found["hit"][1]
            origin = f"{found['prompt'][0]}, {found['hit'][0]}"
        elif span.scope in OMITS_ZERO_CACHE_READ:
            hit = 0
            origin = f"cache read not written, read as 0: {OMITS_ZERO_CACHE_READ[span.scope]}"
        else:
            hit = None
            origin = f"{found['prompt'][0]}; no cache figure recorded"
    if hit is not None and hit > prompt:
        notes.add(
            "usage-hit-over-prompt",
            "a cache-read count exceeds the input tokens; the cache figure was left out",
            span.where,
        )
        hit = None
    return TraceUsage(
        prompt_tokens=prompt, hit_tokens=hit, completion_tokens=completion, origin=origin
    )
