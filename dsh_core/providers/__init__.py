"""Model providers: wire-faithful adapters for DeepSeek's two API formats.

- :mod:`dsh_core.providers.deepseek`: Chat Completions (OpenAI-compatible), the default.
- :mod:`dsh_core.providers.anthropic`: DeepSeek's Anthropic-format endpoint (Messages API).

Each is a package along the same seams: request serialization (``serialize_request``,
``encode_request``), request parsing (``parse_request``), response translation (the stream
translator, ``map_usage``, ``classify_http_error``) and the provider class implementing
:class:`dsh_core.Provider`. The codecs are pure public functions the mock DeepSeek reuses.

Shared by both formats: the model table (:data:`MODELS`, :func:`resolve_model`, each model's
:class:`ModelInfo` and :class:`CacheFacts`), the prices (:data:`PRICE_TABLE`,
:func:`prices_for`), the one thinking-mode rule (:func:`thinking_enabled`) and the one
reasoning pass-back rule (:func:`lacks_thinking`); :class:`WireFormatError` with a stable
``code`` (:data:`WireErrorCode`) for request shapes, and :class:`SseTruncatedError` for an event
stream cut inside an event. The SSE framing both providers and the mock share is ``_sse``
(``SseParser``; a whole body: ``parse_events``, ``split_events``).
"""

from ._models import MODELS, CacheFacts, ModelInfo, UnitVisibility, resolve_model, thinking_enabled
from ._passback import lacks_thinking
from ._prices import PRICE_TABLE, Prices, prices_for
from ._sse import SseTruncatedError
from ._wire import WireErrorCode, WireFormatError
from .anthropic import AnthropicProvider
from .deepseek import DeepSeekProvider

__all__ = [
    "MODELS",
    "PRICE_TABLE",
    "AnthropicProvider",
    "CacheFacts",
    "DeepSeekProvider",
    "ModelInfo",
    "Prices",
    "SseTruncatedError",
    "UnitVisibility",
    "WireErrorCode",
    "WireFormatError",
    "lacks_thinking",
    "prices_for",
    "resolve_model",
    "thinking_enabled",
]
