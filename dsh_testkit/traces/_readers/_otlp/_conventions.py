"""The conventions' registry: one reader per way instrumentations describe a model call.

For each span, :data:`CONVENTIONS` is asked in order; the first that claims it reads it (from
the span, and the log records joined to it). The order puts the specific before the general:
an OpenInference span in its GenAI mode also carries ``gen_ai.*`` attributes, but its
``gen_ai.request.model`` is the response's; a LlamaIndex span under OpenLLMetry carries GenAI
attributes that lost its tool calls, which its LlamaIndex objects still hold.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from . import _genai, _llamaindex, _logfire, _openinference
from ._common import ModelCall, SpanNotes, operation_of
from ._records import OtelLog, OtelSpan

__all__ = ["CONVENTIONS", "Convention", "skipped_label"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Convention:
    """One way of describing a model call."""

    name: str
    description: str
    """What it is and who writes it, for documentation and notes."""
    claims: Callable[[OtelSpan, Sequence[OtelLog]], bool]
    """Whether the span (with its joined log records) is described this way."""
    read: Callable[[OtelSpan, SpanNotes, Sequence[OtelLog]], ModelCall | None]
    """The call (``None``: not a call after all, noted); raises ``Unreadable`` when the span is
    a call whose request cannot be rebuilt."""


def _attributes(span: OtelSpan, logs: Sequence[OtelLog]) -> bool:
    return operation_of(span) is not None and "gen_ai.input.messages" in span.attributes


def _indexed(span: OtelSpan, logs: Sequence[OtelLog]) -> bool:
    return operation_of(span) is not None and any(
        key.startswith("gen_ai.prompt.") for key in span.attributes
    )


def _span_events(span: OtelSpan, logs: Sequence[OtelLog]) -> bool:
    return operation_of(span) is not None and _genai.has_message_events(span)


def _log_events(span: OtelSpan, logs: Sequence[OtelLog]) -> bool:
    return operation_of(span) is not None and _genai.has_log_events(logs)


CONVENTIONS: Final[tuple[Convention, ...]] = (
    Convention(
        name="openinference",
        description="OpenInference (openinference-instrumentation-openai, -langchain, "
        "-llama-index, …): llm.input_messages.N.*, llm.token_count.*",
        claims=lambda span, logs: _openinference.claims(span),
        read=_openinference.read,
    ),
    Convention(
        name="logfire",
        description="Logfire's openai instrumentation (scope logfire.openai): GenAI attributes "
        "or request_data / response_data (version 1), gen_ai.usage.raw, streamed calls in two "
        "spans",
        claims=lambda span, logs: _logfire.claims(span),
        read=_logfire.read,
    ),
    Convention(
        name="llamaindex",
        description="LlamaIndex under OpenLLMetry: traceloop.entity.input / output (the GenAI "
        "attributes there lose tool calls)",
        claims=lambda span, logs: _llamaindex.claims(span),
        read=_llamaindex.read,
    ),
    Convention(
        name="genai",
        description="the GenAI conventions' attributes: gen_ai.input.messages / "
        "output.messages, gen_ai.system_instructions, gen_ai.tool.definitions (pydantic-ai, "
        "OpenLLMetry ≥ 0.54, openai-v2 SPAN_ONLY, the OpenAI Agents SDK bridge)",
        claims=_attributes,
        read=_genai.read_attributes,
    ),
    Convention(
        name="genai-indexed",
        description="the indexed attributes OpenLLMetry wrote before 0.54: gen_ai.prompt.N.*, "
        "gen_ai.completion.N.*, llm.request.functions.N.*",
        claims=_indexed,
        read=_genai.read_indexed,
    ),
    Convention(
        name="genai-span-events",
        description="the GenAI message events as span events (gen_ai.user.message, …, "
        "gen_ai.choice; Azure AI Inference)",
        claims=_span_events,
        read=_genai.read_span_events,
    ),
    Convention(
        name="genai-log-events",
        description="the GenAI message events as log records joined to the span by trace and "
        "span id (openai-v2 with content capture, OpenLLMetry use_attributes=False), or one "
        "gen_ai.client.inference.operation.details record per call",
        claims=_log_events,
        read=_genai.read_log_events,
    ),
)
"""Every convention, in the order they are asked."""


def skipped_label(span: OtelSpan) -> str:
    """What a span no convention claims is, for the note that counts them."""
    kind = span.attributes.get("openinference.span.kind")
    if isinstance(kind, str):
        return f"of OpenInference kind {kind!r}"
    operation = span.attributes.get("gen_ai.operation.name")
    if isinstance(operation, str):
        return f"with gen_ai.operation.name {operation!r}"
    kind = span.attributes.get("traceloop.span.kind")
    if isinstance(kind, str):
        return f"of OpenLLMetry kind {kind!r}"
    return "without gen_ai.operation.name"
