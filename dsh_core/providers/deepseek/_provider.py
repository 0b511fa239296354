"""The Chat Completions provider: one streaming ``POST /chat/completions`` per call."""

from __future__ import annotations

from ..._request import GenerateOptions
from .._http import EventHandler, Secret, SseProvider
from ._serialize import encode_request
from ._stream import ChunkTranslator

__all__ = ["API_KEY_ENV", "BASE_URL_ENV", "DEFAULT_BASE_URL", "DeepSeekProvider"]

DEFAULT_BASE_URL = "https://api.deepseek.com"
API_KEY_ENV = "DEEPSEEK_API_KEY"
BASE_URL_ENV = "DEEPSEEK_BASE_URL"


class DeepSeekProvider(SseProvider):
    """Streams a DeepSeek Chat Completions call (``POST {base_url}/chat/completions``).

    Implements :class:`dsh_core.Provider`. Exactly one HTTP request per :meth:`stream` call; the
    stream always ends with one ``Finish`` — failures (HTTP errors, transport errors, timeouts,
    truncation, malformed payloads) arrive as ``Finish(kind="error")`` and cancellation through
    ``options.cancel`` as ``Finish(kind="aborted")``; nothing is retried here.

    The API key comes from ``api_key`` or, at each call, the environment variable
    ``DEEPSEEK_API_KEY``; it never appears in ``repr``, failures or exceptions. The base URL comes
    from ``base_url``, else ``DEEPSEEK_BASE_URL``, else ``https://api.deepseek.com``. Pass an
    ``httpx.AsyncClient`` (not closed by the provider) or a ``transport`` for the provider's own
    client (closed by :meth:`aclose`); ``idle_timeout`` bounds each wait for bytes.
    """

    api = "DeepSeek API"
    default_base_url = DEFAULT_BASE_URL
    base_url_env = BASE_URL_ENV
    api_key_env = API_KEY_ENV
    path = "/chat/completions"

    def request_headers(self, options: GenerateOptions, key: Secret) -> dict[str, str]:
        headers = {
            "authorization": f"Bearer {key.reveal()}",
            "content-type": "application/json",
            "accept": "text/event-stream",
        }
        headers.update(self._extra_headers(options))
        return headers

    def encode(self, options: GenerateOptions) -> bytes:
        return encode_request(options)

    def new_handler(self) -> EventHandler:
        return ChunkTranslator().handle_event
