"""Model providers: wire-faithful adapters for DeepSeek's two API formats.

- :mod:`dsh_core.providers.deepseek`: Chat Completions (OpenAI-compatible), the default.
- :mod:`dsh_core.providers.anthropic`: DeepSeek's Anthropic-format endpoint (Messages API).

Each module holds its wire codec as pure public functions (``serialize_request``,
``encode_request``, ``parse_request``, the stream translator, ``map_usage``,
``classify_http_error``) that the mock DeepSeek reuses, and a provider class implementing
:class:`dsh_core.Provider`. :class:`SseParser` frames both formats' event streams.

The model table (:data:`MODELS`, :func:`resolve_model`) and the one thinking-mode rule
(:func:`thinking_enabled`) are shared by both formats and the mock. Request-shape failures are
:class:`WireFormatError` with a stable ``code`` (:data:`WireErrorCode`).
"""

from ._failures import RETRYABLE_CODES
from ._models import Endpoint, resolve_model, thinking_enabled
from ._sse import SseEvent, SseParser, SseTruncatedError
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
    "MODELS",
    "RETRYABLE_CODES",
    "TOOL_NAME_PATTERN",
    "AnthropicMessage",
    "AnthropicProvider",
    "AnthropicRequest",
    "ChatMessage",
    "ChatRequest",
    "ChatTool",
    "ChatToolCall",
    "ChunkTranslator",
    "DeepSeekProvider",
    "Endpoint",
    "EventTranslator",
    "ModelInfo",
    "SseEvent",
    "SseParser",
    "SseTruncatedError",
    "WireErrorCode",
    "WireFormatError",
    "resolve_model",
    "thinking_enabled",
]
