"""DeepSeek's Anthropic-format endpoint (Messages API): the wire codec and the streaming provider.

``POST {base}/v1/messages`` with base ``https://api.deepseek.com/anthropic`` (docs/wire.md §3,
§4). Same shape as :mod:`dsh_core.providers.deepseek`:

- ``_serialize``: :func:`serialize_request` / :func:`encode_request` (pure, byte-stable),
  :func:`serialize_message`, :func:`tool_input`;
- ``_parse``: :func:`parse_request` (structure only, raising
  :class:`~dsh_core.providers.WireFormatError` with the JSON path and a code);
- ``_stream``: :class:`EventTranslator` (the named SSE events ``message_start`` …
  ``message_stop``, ``ping``, ``error`` → stream chunks), :func:`translate_events`,
  :func:`translate_stream`, :func:`map_usage` (``cache_read_input_tokens`` →
  ``cache_read_tokens``), :func:`classify_http_error`;
- ``_provider``: :class:`AnthropicProvider`.
"""

from ._parse import AnthropicMessage, AnthropicRequest, parse_request
from ._provider import ANTHROPIC_VERSION, BASE_URL_ENV, DEFAULT_BASE_URL, AnthropicProvider
from ._serialize import (
    DEFAULT_MAX_TOKENS,
    encode_request,
    serialize_message,
    serialize_request,
    tool_input,
)
from ._stream import (
    EventTranslator,
    classify_http_error,
    map_usage,
    translate_events,
    translate_stream,
)

__all__ = [
    "ANTHROPIC_VERSION",
    "BASE_URL_ENV",
    "DEFAULT_BASE_URL",
    "DEFAULT_MAX_TOKENS",
    "AnthropicMessage",
    "AnthropicProvider",
    "AnthropicRequest",
    "EventTranslator",
    "classify_http_error",
    "encode_request",
    "map_usage",
    "parse_request",
    "serialize_message",
    "serialize_request",
    "tool_input",
    "translate_events",
    "translate_stream",
]
