"""The vcrpy record hooks: a request or a response scrubbed as a cassette stores it.

:class:`~dsh_testkit.scrub._scrubber.Scrubber` applies the rules to texts, URLs, headers and bodies;
these functions apply it to vcrpy's records (its ``Request`` object and response dicts), with
what only a whole request knows: the credentials its own headers present
(:func:`request_secrets`), removed in every spelling
(:class:`~dsh_testkit.scrub._spellings.KnownSecrets`) from its URL, headers and body, and from
the answer it got (an answer that repeats what the user pasted). The cassette's record hooks
(``_hooks.py``) call them with the cassette's scrubber.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from .._errors import UnscrubbableBody
from ..scrub._bodies import content_type, decompress
from ..scrub._scrubber import Scrubber
from ..scrub._spellings import KnownSecrets

__all__ = [
    "NO_SECRETS",
    "request_is_clean",
    "request_secrets",
    "response_is_clean",
    "vcr_request",
    "vcr_response",
]

NO_SECRETS: Final = KnownSecrets(())


def request_secrets(scrubber: Scrubber, request: Any) -> KnownSecrets:
    """The credentials ``request``'s own headers present (a vcrpy ``Request``)."""
    return KnownSecrets(scrubber.credentials(dict(request.headers).items()))


def request_is_clean(scrubber: Scrubber, request: Any) -> bool:
    """Whether :meth:`vcr_request` would change nothing in ``request`` ("maybe": scrub it)."""
    if scrubber.url(request.uri) != request.uri:
        return False
    headers = request.headers
    if any(name.lower() == "content-encoding" for name in headers):
        return False
    if not all(scrubber.header_is_clean(name, value) for name, value in headers.items()):
        return False
    known = KnownSecrets(scrubber.credentials(headers.items()))
    if known.in_text(request.uri):
        return False
    return scrubber.body_is_clean(request.body, headers, known)


def response_is_clean(scrubber: Scrubber, response: Mapping[str, Any]) -> bool:
    """Whether :meth:`vcr_response` would return a response equal to ``response``."""
    headers: Mapping[str, list[str]] = response.get("headers") or {}
    for name, values in headers.items():
        if not all(scrubber.header_is_clean(name, value) for value in values):
            return False
    body = response.get("body")
    if not isinstance(body, Mapping):
        return True
    chunks = body.get("chunks")
    if chunks is not None and content_type(headers).startswith("text/event-stream"):
        try:
            events = [c.decode("utf-8") if isinstance(c, bytes) else str(c) for c in chunks]
        except UnicodeDecodeError:
            return False
        return scrubber.stream_is_clean(events)
    if "string" in body and not scrubber.body_is_clean(body["string"], headers):
        return False
    return all(scrubber.body_is_clean(chunk, headers) for chunk in chunks or ())


def vcr_request(scrubber: Scrubber, request: Any) -> Any:
    """vcrpy ``before_record_request`` hook: a scrubbed copy of ``request`` (never mutates
    it). A compressed body is stored decompressed (its ``Content-Encoding`` dropped)."""
    request = copy.deepcopy(request)
    headers = dict(request.headers)
    known = KnownSecrets(scrubber.credentials(headers.items()))
    request.uri = scrubber.url(request.uri, known)
    body = request.body
    encoding_name = next((n for n in headers if n.lower() == "content-encoding"), None)
    if encoding_name is not None:
        body = decompress(body, str(headers.pop(encoding_name)), part="request body")
    request.headers = dict(scrubber.headers(headers.items(), known))
    request.body = scrubber.body(body, request.headers, part="request body", known=known)
    return request


def vcr_response(
    scrubber: Scrubber, original: Mapping[str, Any], known: KnownSecrets = NO_SECRETS
) -> dict[str, Any]:
    """vcrpy ``before_record_response`` hook: a scrubbed copy of a response dict, ``known``
    (the credentials of the request it answers) removed in every spelling too. A body still
    compressed (an encoding vcrpy could not decode) is refused."""
    response: dict[str, Any] = copy.deepcopy(dict(original))
    headers: dict[str, list[str]] = response.get("headers") or {}
    for name, values in headers.items():
        if name.lower() == "content-encoding" and any(
            v.strip().lower() not in ("", "identity") for v in values
        ):
            raise UnscrubbableBody(
                f"the response body is compressed with {', '.join(values)!s}, which cannot "
                "be decoded here to check it for secrets; it is not stored (install the "
                "decoder vcrpy uses for it, or ask the server for gzip)",
                part="response body",
                reason=f"content-encoding {', '.join(values)}",
            )
    response["headers"] = {
        name: [scrubber.header_value(name, v, known) for v in values]
        for name, values in headers.items()
    }
    body = response.get("body")
    if not isinstance(body, dict):
        return response
    chunks = body.get("chunks")
    if chunks is not None and content_type(headers).startswith("text/event-stream"):
        try:
            events = [c.decode("utf-8") if isinstance(c, bytes) else str(c) for c in chunks]
        except UnicodeDecodeError:
            events = None
        if events is not None:
            scrubbed = scrubber.stream(events, known)
            if scrubbed is not events:
                body["chunks"] = [e.encode("utf-8") for e in scrubbed]
                string = body.get("string")
                joined = "".join(scrubbed)
                body["string"] = joined if isinstance(string, str) else joined.encode("utf-8")
            return response
    if "string" in body:
        body["string"] = scrubber.body(body["string"], headers, part="response body", known=known)
    if chunks is not None:
        body["chunks"] = [
            scrubber.body(c, headers, part="response body", known=known) for c in chunks
        ]
    return response
