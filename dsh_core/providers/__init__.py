"""Model providers: wire-faithful adapters for DeepSeek's two API formats.

- :mod:`dsh_core.providers.deepseek`: Chat Completions (OpenAI-compatible), the default.
- :mod:`dsh_core.providers.anthropic`: DeepSeek's Anthropic-format endpoint (Messages API).

Each module holds its wire codec as pure public functions (``serialize_request``,
``encode_request``, ``parse_request``, the stream translator, ``map_usage``,
``classify_http_error``) that the mock DeepSeek reuses, and a provider class implementing
:class:`dsh_core.Provider`. :class:`SseParser` frames both formats' event streams.
"""

from ._failures import RETRYABLE_CODES
from ._sse import SseEvent, SseParser, SseTruncatedError
from ._wire import WireFormatError
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
    "AnthropicMessage",
    "AnthropicProvider",
    "AnthropicRequest",
    "ChatMessage",
    "ChatRequest",
    "ChatTool",
    "ChatToolCall",
    "ChunkTranslator",
    "DeepSeekProvider",
    "EventTranslator",
    "ModelInfo",
    "SseEvent",
    "SseParser",
    "SseTruncatedError",
    "WireFormatError",
]
