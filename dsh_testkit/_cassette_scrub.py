"""Secret scrubbing for everything a cassette stores: URLs, headers and bodies, both ways.

vcrpy runs the record hooks on every live request before matching and again on every
interaction it loads, so each function here is idempotent: scrubbing twice equals scrubbing
once. Text is scrubbed to a fixpoint (a replacement is shorter than what it replaces, so the
loop ends), which makes idempotence hold by construction rather than by care.

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


def _replace(match: re.Match[str]) -> str:
    bearer = match.group("bearer")
    return f"{bearer}{REDACTED}" if bearer else REDACTED


def find_secrets(text: str) -> list[str]:
    """The key-shaped substrings of ``text`` (empty when it is clean)."""
    return [m.group(0) for m in _KEY_PATTERN.finditer(text)]


def scrub_text(text: str) -> str:
    """``text`` with every key-shaped substring replaced, to a fixpoint (idempotent)."""
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


def _scrub_body(body: bytes | str | None) -> bytes | str | None:
    """A body with secrets replaced; JSON bodies also lose credential-named values."""
    if body is None or body == b"" or body == "":
        return body
    if isinstance(body, bytes):
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            return body  # binary: nothing text-shaped to scrub
    else:
        text = body
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
    if isinstance(body, bytes):
        return scrubbed.encode("utf-8")
    return scrubbed


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
