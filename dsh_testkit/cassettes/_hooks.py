"""The record hooks: what happens to a request and a response on their way into a cassette.

vcrpy runs ``before_record_request`` on every live request (before it is matched, and again
before it is recorded) and on every interaction it loads; ``before_record_response`` on every
response it records or loads. Ours run in this order:

1. the user's hook (``CassetteConfig.before_record_request`` / ``..._response``); ``None`` leaves
   the request out of the cassette (it reaches its target unrecorded) or the response unrecorded;
2. the origin rewrite: the configured ``(live, recorded)`` pairs, then every loopback origin as
   ``http://127.0.0.1`` (:func:`~._config.canonical_origin`);
3. the secret scrubbing (:mod:`dsh_testkit.scrub._scrubber`), last, so nothing a user hook lets through
   escapes it; a response is scrubbed of the credentials of the live request it answers too
   (vcrpy hands a recording's request to the request hook, then its response to the response
   hook: the request hook keeps what the live request presented for that call);
4. volatile headers dropped (:data:`VOLATILE_REQUEST_HEADERS`, :data:`VOLATILE_RESPONSE_HEADERS`).

A loaded cassette whose checksum shows these rules wrote it skips them (the file's bytes are
what they produced).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, Final

from ..scrub._scrubber import Scrubber
from ._config import CassetteConfig, canonical_origin
from ._format import CassettePersister
from ._scrub import (
    NO_SECRETS,
    request_is_clean,
    request_secrets,
    response_is_clean,
    vcr_request,
    vcr_response,
)

__all__ = [
    "VOLATILE_REQUEST_HEADERS",
    "VOLATILE_RESPONSE_HEADERS",
    "OriginRewriter",
    "RecordHooks",
]

VOLATILE_REQUEST_HEADERS: Final = frozenset(
    {
        "accept-encoding",
        "connection",
        "content-length",
        "host",
        "user-agent",
        # W3C Trace Context and Baggage: an instrumented client (OpenTelemetry) sends new ids
        # with every request, so a cassette holding them would differ on every recording
        "traceparent",
        "tracestate",
        "baggage",
    }
)
"""Request headers not stored: they vary by library version, transport or trace, never by the
agent. Headers starting with ``x-stainless-`` (the openai/anthropic SDKs' platform report) go
too."""

VOLATILE_RESPONSE_HEADERS: Final = frozenset(
    {"connection", "content-length", "date", "keep-alive", "transfer-encoding"}
)
"""Response headers not stored: the date changes every recording, the length is of the
recorded bytes (which a parsed JSON body does not keep), and the rest are hop-by-hop framing
of the recording's connection, not of the replay."""


def _is_volatile_request_header(name: str) -> bool:
    lowered = name.lower()
    return lowered in VOLATILE_REQUEST_HEADERS or lowered.startswith("x-stainless-")


def _drop_volatile_request_headers(request: Any) -> Any:
    request.headers = {
        name: value
        for name, value in request.headers.items()
        if not _is_volatile_request_header(name)
    }
    return request


def _drop_volatile_response_headers(response: dict[str, Any]) -> dict[str, Any]:
    response["headers"] = {
        name: values
        for name, values in (response.get("headers") or {}).items()
        if name.lower() not in VOLATILE_RESPONSE_HEADERS
    }
    return response


def _decode_compressed(response: dict[str, Any]) -> dict[str, Any]:
    from vcr.filters import decode_response

    decoded: dict[str, Any] = decode_response(response)
    return decoded


class OriginRewriter:
    """Files requests under another origin: the configured pairs first, then loopback as one."""

    def __init__(self, pairs: tuple[tuple[str, str], ...], *, loopback_as_one: bool) -> None:
        self.loopback_as_one = loopback_as_one
        # With loopback as one, a loopback origin in a pair stands for every loopback origin.
        self.pairs = tuple((self._as_one(live), recorded) for live, recorded in pairs)

    def _as_one(self, uri: str) -> str:
        if self.loopback_as_one:
            canonical = canonical_origin(uri)
            if canonical is not None:
                return canonical
        return uri

    def rewrite_uri(self, uri: str) -> str:
        uri = self._as_one(uri)
        for live, recorded in self.pairs:
            if live != recorded and (uri == live or uri.startswith((live + "/", live + "?"))):
                return recorded + uri[len(live) :]
        return uri

    def applies(self, request: Any) -> bool:
        """Whether :meth:`__call__` would change the request's URL."""
        uri: str = request.uri
        return self.rewrite_uri(uri) != uri

    def __call__(self, request: Any) -> Any:
        request.uri = self.rewrite_uri(request.uri)
        return request


class RecordHooks:
    """The two hooks of one cassette use (see the module docstring).

    ``is_loading()`` tells whether vcrpy is loading the file (then a verified file's
    interactions pass through unchanged).
    """

    def __init__(
        self,
        config: CassetteConfig,
        scrubber: Scrubber,
        persister: CassettePersister,
        is_loading: Callable[[], bool],
    ) -> None:
        self.config = config
        self.scrubber = scrubber
        self.persister = persister
        self.rewriter = OriginRewriter(
            config.rewrite_origin, loopback_as_one=config.loopback_as_one
        )
        self._is_loading = is_loading
        # vcrpy hands each live request to the request hook three times (checking, then
        # playing or recording), once more as the hook's own output: filter it once.
        self._last: list[Any] = [None, None]
        # The credentials of the live request last filtered: what its response is scrubbed of.
        self._answering = NO_SECRETS

    @property
    def has_user_hooks(self) -> bool:
        return (
            self.config.before_record_request is not None
            or self.config.before_record_response is not None
        )

    def uri_filter(self, uri: str) -> str:
        """What the request hook does to a URL (scrub, rewrite), for the exact-bytes fast path."""
        return self.rewriter.rewrite_uri(self.scrubber.url(uri))

    def _loaded_request_is_final(self, request: Any) -> bool:
        """Whether the hooks would leave a loaded request as it is (then they are skipped).

        A cassette written by them needs none of it, and checking costs a fraction of
        scrubbing; a stored request with anything to scrub, a volatile header or an origin to
        rewrite goes through the hooks.
        """
        return (
            not any(_is_volatile_request_header(name) for name in request.headers)
            and not self.rewriter.applies(request)
            and request_is_clean(self.scrubber, request)
        )

    def _loaded_response_is_final(self, response: dict[str, Any]) -> bool:
        names = [name.lower() for name in response.get("headers") or {}]
        return not any(
            name in VOLATILE_RESPONSE_HEADERS or name == "content-encoding" for name in names
        ) and response_is_clean(self.scrubber, response)

    def before_record_request(self, request: Any) -> Any:
        if self._is_loading() and (
            (self.persister.verified and not self.rewriter.applies(request))
            or self._loaded_request_is_final(request)
        ):
            return request  # loading what these hooks wrote: nothing to do again
        live, filtered = self._last
        if request is live or (filtered is not None and request is filtered):
            self._answering = request_secrets(self.scrubber, live)
            return filtered
        self._answering = (
            NO_SECRETS if self._is_loading() else request_secrets(self.scrubber, request)
        )
        filtered = request
        user = self.config.before_record_request
        if user is not None:
            filtered = user(copy.deepcopy(request))  # as vcrpy does: the hook may mutate it
        if filtered is not None:
            filtered = self.rewriter(vcr_request(self.scrubber, filtered))
            filtered = _drop_volatile_request_headers(filtered)
        self._last[:] = [request, filtered]
        return filtered

    def before_record_response(self, response: dict[str, Any]) -> dict[str, Any] | None:
        if self._is_loading() and (
            self.persister.verified or self._loaded_response_is_final(response)
        ):
            return response
        user = self.config.before_record_response
        if user is not None:
            response = user(response)
            if response is None:
                return None
        known, self._answering = self._answering, NO_SECRETS
        response = vcr_response(self.scrubber, _decode_compressed(response), known)
        return _drop_volatile_response_headers(response)
