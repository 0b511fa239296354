"""Model providers: wire-faithful adapters for DeepSeek's two API formats.

- :mod:`dsh_core.providers.deepseek`: Chat Completions (OpenAI-compatible), the default.
- :mod:`dsh_core.providers.anthropic`: DeepSeek's Anthropic-format endpoint (Messages API).

Each is a package along the same seams: request serialization (``serialize_request``,
``encode_request``), request parsing (``parse_request``), response translation (the stream
translator, ``map_usage``, ``classify_http_error``) and the provider class implementing
:class:`dsh_core.Provider`. The codecs are pure public functions the mock DeepSeek reuses.

Shared by both formats and the mock: the model table (:data:`MODELS`, :func:`resolve_model`,
each model's :class:`CacheFacts`) and the one thinking-mode rule (:func:`thinking_enabled`); :class:`WireFormatError` with a stable
``code`` (:data:`WireErrorCode`) for request shapes; SSE framing (:class:`SseParser`; a whole
body: :func:`parse_events`, :func:`split_events`) and encoding (:meth:`SseEvent.encode`,
:meth:`SseEvent.of_json`, :data:`SSE_DONE`).
"""

from ._failures import RETRYABLE_CODES
from ._models import (
    CHAT_TEMPLATES,
    CacheFacts,
    CacheRules,
    ChatTemplate,
    Endpoint,
    UnitVisibility,
    cache_model,
    resolve_model,
    thinking_enabled,
)
from ._passback import PassbackRule, lacks_thinking, missing_reasoning, reasoning_required
from ._prices import PRICE_TABLE, Prices, prices_for
from ._sse import SSE_DONE, SseEvent, SseParser, SseTruncatedError, parse_events, split_events
from ._wire import TOOL_NAME_PATTERN, WireErrorCode, WireFormatError
from .anthropic import AnthropicMessage, AnthropicProvider, AnthropicRequest, EventTranslator
from .deepseek import (
    MODELS,
    ChatMessage,
    ChatRequest,
    ChatTool,
    ChatToolCall,
    ChunkTranslator,
    DeepSeekProvider,
    ModelInfo,
)

__all__ = [
    "CHAT_TEMPLATES",
    "MODELS",
    "PRICE_TABLE",
    "RETRYABLE_CODES",
    "SSE_DONE",
    "TOOL_NAME_PATTERN",
    "AnthropicMessage",
    "AnthropicProvider",
    "AnthropicRequest",
    "CacheFacts",
    "CacheRules",
    "ChatMessage",
    "ChatRequest",
    "ChatTemplate",
    "ChatTool",
    "ChatToolCall",
    "ChunkTranslator",
    "DeepSeekProvider",
    "Endpoint",
    "EventTranslator",
    "ModelInfo",
    "PassbackRule",
    "Prices",
    "SseEvent",
    "SseParser",
    "SseTruncatedError",
    "UnitVisibility",
    "WireErrorCode",
    "WireFormatError",
    "cache_model",
    "lacks_thinking",
    "missing_reasoning",
    "parse_events",
    "prices_for",
    "reasoning_required",
    "resolve_model",
    "split_events",
    "thinking_enabled",
]
