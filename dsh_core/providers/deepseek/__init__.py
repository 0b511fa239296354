"""DeepSeek Chat Completions (OpenAI-compatible): the wire codec and the streaming provider.

The one place the Chat Completions wire format lives; its pure functions are shared with the mock
DeepSeek. Modules along the format's seams:

- ``_serialize``: :func:`serialize_request` / :func:`encode_request` (``GenerateOptions`` → the
  exact body, byte-stable), :func:`serialize_message`;
- ``_parse``: :func:`parse_request` (a wire body → :class:`ChatRequest`, structure only, raising
  :class:`~dsh_core.providers.WireFormatError` with the JSON path and a code);
- ``_stream``: :class:`ChunkTranslator`, :func:`translate_events`, :func:`translate_stream` (SSE
  payloads → the core's stream chunks), :func:`map_usage`, :func:`classify_http_error`;
- ``_provider``: :class:`DeepSeekProvider`.

The model table (``MODELS``) and :class:`~dsh_core.providers.WireFormatError` live in
:mod:`dsh_core.providers`. Wire facts and their public sources: docs/wire.md §1.
"""

from ._parse import ChatMessage, ChatRequest, ChatTool, ChatToolCall, parse_request
from ._provider import API_KEY_ENV, BASE_URL_ENV, DEFAULT_BASE_URL, DeepSeekProvider
from ._serialize import encode_request, serialize_message, serialize_request
from ._stream import (
    ChunkTranslator,
    classify_http_error,
    map_usage,
    translate_events,
    translate_stream,
)

__all__ = [
    "API_KEY_ENV",
    "BASE_URL_ENV",
    "DEFAULT_BASE_URL",
    "ChatMessage",
    "ChatRequest",
    "ChatTool",
    "ChatToolCall",
    "ChunkTranslator",
    "DeepSeekProvider",
    "classify_http_error",
    "encode_request",
    "map_usage",
    "parse_request",
    "serialize_message",
    "serialize_request",
    "translate_events",
    "translate_stream",
]
