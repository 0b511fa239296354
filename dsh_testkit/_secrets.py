"""Secret scrubbing for everything a cassette stores: URLs, headers and bodies, both ways.

vcrpy runs the record hooks on every live request before matching and again on every
interaction it loads, so each function here is idempotent: scrubbing twice equals scrubbing
once. Text is scrubbed to a fixpoint (a replacement is shorter than what it replaces, so the
loop ends), which makes idempotence hold by construction rather than by care.

Scrubbing is a regular-expression pass over every body, and most bodies hold nothing to
scrub: a cheap pre-check (plain substring searches for what every key pattern starts with)
lets clean text through untouched, and :func:`request_is_clean` / :func:`response_is_clean`
tell the cassette which loaded interactions need the hooks at all (a cassette written by
these hooks needs none; a hand-edited one with a key in it still gets scrubbed).

What counts as a secret:

- the values of credential headers (``Authorization``, ``x-api-key``, ``api-key``, cookies), and
  of credential-named query parameters and JSON keys, whatever their shape;
- key-shaped strings anywhere (``sk-…`` API keys, long bearer tokens, AWS/Google/GitHub/Slack
  keys, JWTs), in any URL, header value or body.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable
from typing import Any, Final
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

__all__ = [
    "REDACTED",
    "SECRET_HEADERS",
    "find_secrets",
    "request_is_clean",
    "response_is_clean",
    "scrub_headers",
    "scrub_json",
    "scrub_text",
    "scrub_url",
    "scrub_vcr_request",
    "scrub_vcr_response",
]

REDACTED: Final = "<REDACTED>"
"""What a secret is replaced with: not key-shaped, and ends every key pattern's character run."""

_URL_REDACTED: Final = "REDACTED"
"""The replacement inside URLs, where ``<`` and ``>`` would need escaping."""

SECRET_HEADERS: Final = frozenset(
    {"authorization", "proxy-authorization", "x-api-key", "api-key", "cookie", "set-cookie"}
)
"""Headers whose values are always replaced, whatever they look like (compared lowercased)."""

_SECRET_NAMES: Final = frozenset(
    {
        "access_token",
        "accesstoken",
        "api-key",
        "api_key",
        "apikey",
        "authorization",
        "client_secret",
        "clientsecret",
        "password",
        "refresh_token",
        "refreshtoken",
        "x-api-key",
    }
)
"""JSON keys and query parameters whose string values are always replaced (compared lowercased)."""

_SECRET_QUERY_NAMES: Final = _SECRET_NAMES | {"key", "secret", "token", "sig", "signature"}
"""Query parameters are credentials more often than JSON keys are (``?key=…`` for Google APIs)."""

# Each alternative is a secret on its own; a bearer scheme keeps its word and loses its token.
_KEY_PATTERN: Final = re.compile(
    r"(?P<bearer>(?i:bearer)\s+)[A-Za-z0-9\-._~+/]{20,}=*"
    r"|(?<![A-Za-z0-9])sk-[A-Za-z0-9_\-]{20,}"
    r"|(?<![A-Za-z0-9])AKIA[0-9A-Z]{16}(?![0-9A-Z])"
    r"|(?<![A-Za-z0-9])AIza[0-9A-Za-z_\-]{35}"
    r"|(?<![A-Za-z0-9])gh[pousr]_[A-Za-z0-9]{36,}"
    r"|(?<![A-Za-z0-9])xox[abprs]-[A-Za-z0-9\-]{10,}"
    r"|(?<![A-Za-z0-9])eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}"
)


_KEY_STARTS: Final = ("sk-", "AKIA", "AIza", "eyJ", "xox", "ghp_", "gho_", "ghu_", "ghs_", "ghr_")
"""What every case-sensitive alternative of the key pattern starts with (``bearer`` aside)."""


def _replace(match: re.Match[str]) -> str:
    bearer = match.group("bearer")
    return f"{bearer}{REDACTED}" if bearer else REDACTED


def _may_hold_key(text: str) -> bool:
    """``False`` only when ``text`` certainly holds nothing key-shaped.

    The key pattern opens each alternative with a lookbehind, which keeps the regex engine from
    skipping ahead: it costs ~90 ns per character. Substring search is ~50× faster, and every
    match starts with one of :data:`_KEY_STARTS` or with ``bearer`` in any case (no character
    outside ``bBeEaArR`` lowercases to those letters or matches them case-insensitively).
    """
    return any(start in text for start in _KEY_STARTS) or "bearer" in text.lower()


def find_secrets(text: str) -> list[str]:
    """The key-shaped substrings of ``text`` (empty when it is clean)."""
    if not _may_hold_key(text):
        return []
    return [m.group(0) for m in _KEY_PATTERN.finditer(text)]


def scrub_text(text: str) -> str:
    """``text`` with every key-shaped substring replaced, to a fixpoint (idempotent)."""
    if not _may_hold_key(text):
        return text
    while True:
        scrubbed = _KEY_PATTERN.sub(_replace, text)
        if scrubbed == text:
            return text
        text = scrubbed


def _is_secret_name(name: str) -> bool:
    return name.lower() in _SECRET_NAMES


def _is_secret_query_name(name: str) -> bool:
    return name.lower() in _SECRET_QUERY_NAMES


def scrub_json(value: Any) -> Any:
    """A copy of a parsed JSON value with secrets replaced (credential keys and key shapes)."""
    if isinstance(value, str):
        return scrub_text(value)
    if isinstance(value, list):
        return [scrub_json(item) for item in value]
    if isinstance(value, dict):
        return {
            key: REDACTED if isinstance(item, str) and _is_secret_name(key) else scrub_json(item)
            for key, item in value.items()
        }
    return value


def scrub_url(url: str) -> str:
    """``url`` with credential query parameters, a userinfo password and key shapes replaced."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        user = userinfo.split(":", 1)[0]
        netloc = f"{user}:{_URL_REDACTED}@{host}" if ":" in userinfo else netloc
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        if any(_is_secret_query_name(name) for name, _ in pairs):
            query = urlencode(
                [(name, _URL_REDACTED if _is_secret_query_name(name) else v) for name, v in pairs]
            )
    rebuilt = urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
    return scrub_text(rebuilt).replace(REDACTED, _URL_REDACTED)


def scrub_headers(items: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Header pairs with credential headers replaced and key shapes removed from the rest."""
    return [
        (name, REDACTED if name.lower() in SECRET_HEADERS else scrub_text(value))
        for name, value in items
    ]


def _body_text(body: bytes | str | None) -> str | None:
    """The body as text; ``None`` when empty or binary (nothing text-shaped to scrub)."""
    if body is None or body == b"" or body == "":
        return None
    if isinstance(body, bytes):
        try:
            return body.decode("utf-8")
        except UnicodeDecodeError:
            return None
    return body


def _scrub_body(body: bytes | str | None) -> bytes | str | None:
    """A body with secrets replaced; JSON bodies also lose credential-named values.

    A body with nothing to replace comes back as the same object.
    """
    text = _body_text(body)
    if text is None or _text_is_clean(text):
        return body
    # The key patterns never span a quote or a backslash, so scrubbing JSON or SSE as text keeps
    # it well formed.
    scrubbed = scrub_text(text)
    try:
        parsed = json.loads(scrubbed)
    except ValueError:
        parsed = None
    if isinstance(parsed, (dict, list)):
        cleaned = scrub_json(parsed)
        if cleaned != parsed:
            scrubbed = json.dumps(cleaned, ensure_ascii=False, separators=(",", ":"))
    if scrubbed == text:
        return body
    if isinstance(body, bytes):
        return scrubbed.encode("utf-8")
    return scrubbed


_JSON_NAMES: Final = tuple(f'"{name}"' for name in sorted(_SECRET_NAMES))


def _body_is_clean(body: bytes | str | None) -> bool:
    """``False`` unless :func:`_scrub_body` certainly returns ``body`` unchanged."""
    text = _body_text(body)
    return text is None or _text_is_clean(text)


def _text_is_clean(text: str) -> bool:
    """``False`` unless scrubbing ``text`` as a body certainly changes nothing.

    Conservative: a JSON-looking body is unclean when a credential name appears quoted
    anywhere in it (lowercased, as the scrubber compares names), or when it holds a ``\\u``
    escape, the one way JSON can spell a letter of a key or a name the text does not show.
    """
    if _may_hold_key(text):
        return False
    if text.lstrip()[:1] not in ("{", "["):
        return True  # json.loads cannot give an object or an array: only the text pass applies
    if "\\u" in text:
        return False
    lowered = text.lower()
    return not any(name in lowered for name in _JSON_NAMES)


def _header_is_clean(name: str, value: str) -> bool:
    if name.lower() in SECRET_HEADERS:
        return value == REDACTED
    return not _may_hold_key(value)


def request_is_clean(request: Any) -> bool:
    """Whether :func:`scrub_vcr_request` would change nothing in ``request``.

    ``False`` means "maybe": scrub it. Cheap (substring searches), so a cassette can skip the
    scrub hooks for stored interactions that a scrub already wrote.
    """
    if scrub_url(request.uri) != request.uri:
        return False
    if not all(_header_is_clean(name, value) for name, value in request.headers.items()):
        return False
    return _body_is_clean(request.body)


def response_is_clean(response: dict[str, Any]) -> bool:
    """Whether :func:`scrub_vcr_response` would return a response equal to ``response``."""
    headers: dict[str, list[str]] = response.get("headers") or {}
    for name, values in headers.items():
        if not all(_header_is_clean(name, value) for value in values):
            return False
    body = response.get("body")
    if not isinstance(body, dict):
        return True
    if "string" in body and not _body_is_clean(body["string"]):
        return False
    return all(_body_is_clean(chunk) for chunk in body.get("chunks") or ())


def scrub_vcr_request(request: Any) -> Any:
    """vcrpy ``before_record_request`` hook: a scrubbed copy of ``request`` (never mutates it)."""
    request = copy.deepcopy(request)
    request.uri = scrub_url(request.uri)
    request.headers = dict(scrub_headers(request.headers.items()))
    request.body = _scrub_body(request.body)
    return request


def scrub_vcr_response(response: dict[str, Any]) -> dict[str, Any]:
    """vcrpy ``before_record_response`` hook: a scrubbed copy of a response dict."""
    response = copy.deepcopy(response)
    headers: dict[str, list[str]] = response.get("headers") or {}
    response["headers"] = {
        name: [REDACTED if name.lower() in SECRET_HEADERS else scrub_text(v) for v in values]
        for name, values in headers.items()
    }
    body = response.get("body")
    if isinstance(body, dict) and "string" in body:
        body["string"] = _scrub_body(body["string"])
    if isinstance(body, dict) and body.get("chunks") is not None:
        body["chunks"] = [_scrub_body(chunk) for chunk in body["chunks"]]
    return response
