"""The Anthropic-format provider: one streaming ``POST /v1/messages`` per call."""

from __future__ import annotations

from ..._request import GenerateOptions
from .._http import EventHandler, Secret, SseProvider
from ._serialize import encode_request
from ._stream import EventTranslator

__all__ = ["ANTHROPIC_VERSION", "BASE_URL_ENV", "DEFAULT_BASE_URL", "AnthropicProvider"]

DEFAULT_BASE_URL = "https://api.deepseek.com/anthropic"
BASE_URL_ENV = "DEEPSEEK_ANTHROPIC_BASE_URL"
ANTHROPIC_VERSION = "2023-06-01"
"""Sent as ``anthropic-version`` (DeepSeek ignores it; Anthropic-format clients always send it)."""


class AnthropicProvider(SseProvider):
    """Streams a call to DeepSeek's Anthropic-format endpoint (``POST {base_url}/v1/messages``).

    Same contract as :class:`~dsh_core.providers.deepseek.DeepSeekProvider`: one request per
    call, one terminal ``Finish``, failures and cancellation as finishes, the key (``api_key``
    or ``DEEPSEEK_API_KEY``, sent as ``x-api-key``) never shown. Base URL: ``base_url``, else
    ``DEEPSEEK_ANTHROPIC_BASE_URL``, else ``https://api.deepseek.com/anthropic``.
    """

    api = "DeepSeek Anthropic API"
    default_base_url = DEFAULT_BASE_URL
    base_url_env = BASE_URL_ENV
    path = "/v1/messages"

    def request_headers(self, options: GenerateOptions, key: Secret) -> dict[str, str]:
        headers = {
            "x-api-key": key.reveal(),
            "anthropic-version": ANTHROPIC_VERSION,
            "content-type": "application/json",
            "accept": "text/event-stream",
        }
        headers.update(self._extra_headers(options))
        return headers

    def encode(self, options: GenerateOptions) -> bytes:
        return encode_request(options)

    def new_handler(self) -> EventHandler:
        return EventTranslator().handle_event
