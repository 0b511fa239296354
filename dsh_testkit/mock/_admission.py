"""Request admission: who is calling, what they sent, and whether the API would take it.

A model request passes four gates, in the API's order: the credential (:func:`caller_key`), the
body as JSON (:func:`decode_body`: the one JSON decode of a request on the mock's path; its value
goes on to the codec, to the request's view and to the request log), the codec's structural check
(``dsh_core.providers.deepseek.parse_request`` / ``anthropic.parse_request``: one wire format,
one parser) and the meaning checks of :mod:`._validate`. What passes becomes a
:class:`~._request.MockRequest` built from the codec's typed request; what fails raises
:class:`Rejection` with the API's own error. Nothing here has state: the facade
(:class:`~dsh_testkit.mock.MockDeepSeek`) owns the queue, the log and the locks.
"""

from __future__ import annotations

import copy
import json
import math
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from dsh_core import JsonValueError, freeze_json
from dsh_core.providers import WireFormatError, resolve_model
from dsh_core.providers import anthropic as anthropic_codec
from dsh_core.providers import deepseek as deepseek_codec
from dsh_core.providers._passback import PassbackRule
from dsh_core.providers._wire import TOOL_NAME_PATTERN, need_object
from dsh_core.providers.anthropic import AnthropicRequest
from dsh_core.providers.deepseek import ChatRequest

from ..scrub._bodies import decode_text
from ..scrub._rules import REDACTED
from ._api_errors import ApiError
from ._plan import HttpRequest
from ._request import MockRequest
from ._validate import ToolFacts, validate_anthropic, validate_chat

__all__ = [
    "MAX_JSON_DEPTH",
    "MODEL_NOT_EXIST",
    "DecodedBody",
    "Rejection",
    "admit",
    "caller_key",
    "credentials",
    "decode_body",
    "redacted_headers",
]

MAX_JSON_DEPTH: Final = 128
"""The deepest nesting of arrays and objects a request body may have. A deeper body is refused
with a 400 before anything parses it recursively (a real chat body nests about 8 deep; a tool
schema a few more)."""

_AUTH_FORMAT: Final = (
    "Authentication Fails (auth header format should be Bearer sk-...)"  # [observed]
)
_AUTH_INVALID: Final = "Authentication Fails, Your api key is invalid"  # [observed], key not echoed
MODEL_NOT_EXIST: Final = "Model Not Exist"  # [observed] docs/wire.md §1.9

_CREDENTIAL_HEADERS: Final = frozenset(
    {
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "x-goog-api-key",
        "x-auth-token",
        "x-access-token",
        "cookie",
    }
)
"""Header names whose whole value is a credential, whatever the scheme (never logged)."""


_CREDENTIAL_PIECES: Final = re.compile(r"[\s;,=]+")
_MIN_SECRET: Final = 8
"""Pieces of a credential header shorter than this are scheme words or names, not secrets."""


class Rejection(Exception):
    """Stop admitting a request: answer it with ``error``."""

    def __init__(self, error: ApiError) -> None:
        super().__init__(error.message)
        self.error = error


def is_credential_header(name: str) -> bool:
    """Whether a header carries a credential: a known name, or one that says key/token/secret."""
    lowered = name.lower()
    return lowered in _CREDENTIAL_HEADERS or any(
        word in lowered for word in ("key", "token", "secret", "password", "auth")
    )


def redacted_headers(request: HttpRequest) -> tuple[tuple[str, str], ...]:
    """The request's header pairs with every credential replaced by ``<REDACTED>`` (a
    credential header keeps its scheme word: ``Bearer <REDACTED>``), as the request log and a
    responder see them."""
    secrets = credentials(request)
    headers = []
    for name, value in request.headers:
        if is_credential_header(name):
            scheme, space, _ = value.strip().partition(" ")
            value = f"{scheme} {REDACTED}" if space and scheme.isalpha() else REDACTED
        else:
            for secret in secrets:
                if secret in value:
                    value = value.replace(secret, REDACTED)
        headers.append((name, value))
    return tuple(headers)


def credentials(request: HttpRequest) -> tuple[str, ...]:
    """Every credential the request presents, longest first, for redaction: the value of each
    credential header (whole, and without its scheme word, e.g. ``Token sk-…`` → ``sk-…``), of
    8 characters or more (the credential headers themselves are redacted whatever their
    length)."""
    found: set[str] = set()
    for name, value in request.headers:
        if not is_credential_header(name):
            continue
        value = value.strip()
        found.add(value)
        found.add(value.partition(" ")[2].strip())
        # the pieces of ``session=…; other=…`` and ``Scheme a, b``: each may be the secret
        found.update(_CREDENTIAL_PIECES.split(value))
    # a shorter value is no key, and replacing it in free text would mangle the text ("k")
    kept = (s for s in found if len(s) >= _MIN_SECRET)
    return tuple(sorted(kept, key=lambda s: (-len(s), s)))


def presented_key(request: HttpRequest, endpoint: str) -> str | None:
    """The API key the way the API reads it: ``Authorization: Bearer <key>``, and on the
    Anthropic-format endpoint also ``x-api-key``. Parsed once per request."""
    auth = request.header("authorization")
    if auth is not None:
        scheme, _, value = auth.strip().partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
    if endpoint == "anthropic":
        header = request.header("x-api-key")
        if header is not None and header.strip():
            return header.strip()
    return None


def caller_key(
    request: HttpRequest, endpoint: str, *, accepted: Collection[str] | None = None
) -> str:
    """The caller's API key, or :class:`Rejection` with the API's 401."""
    key = presented_key(request, endpoint)
    if key is None:
        raise Rejection(ApiError(status=401, message=_AUTH_FORMAT, type="authentication_error"))
    if accepted is not None and key not in accepted:
        raise Rejection(ApiError(status=401, message=_AUTH_INVALID, type="authentication_error"))
    return key


_STRING_OR_BRACKET: Final = re.compile(r'"(?:[^"\\]|\\.)*"?|[\[\]{}]')
"""A JSON string (skipped whole, by the regex engine) or one bracket."""


def json_depth_exceeds(text: str, limit: int) -> bool:
    """Whether the JSON text nests arrays/objects deeper than ``limit``: an iterative scan that
    skips strings, safe and linear on any input (it does not validate)."""
    if text.count("[") + text.count("{") <= limit:
        return False  # too few openings to nest that deep: nearly every real body
    depth = 0
    for match in _STRING_OR_BRACKET.finditer(text):
        char = match.group()
        if char == "[" or char == "{":
            depth += 1
            if depth > limit:
                return True
        elif char == "]" or char == "}":
            depth -= 1
    return False


def _bad_body(detail: str) -> Rejection:
    # axum's wording for a body that is not JSON
    return Rejection(
        ApiError(status=400, message=f"Failed to parse the request body as JSON: {detail}")
    )


@dataclass(frozen=True, slots=True)
class DecodedBody:
    """A request body decoded once: what admission reads and what the request log keeps."""

    value: Any
    """The JSON value (``None`` when the body is not JSON the API takes: see ``refusal``)."""
    refusal: str | None
    """Why the API would not parse it (axum's detail: not UTF-8, not JSON, ``NaN``, too deep),
    ``None`` when it parses."""
    logged: Any
    """What the request log keeps: the JSON value (``NaN`` and all), else the body's text;
    ``None`` for an empty body."""


def _logged_text(text: str) -> Any:
    """The log's reading of a body the API refused before parsing it (not UTF-8: its text with
    replacement characters), parsed when that is JSON, else the text itself."""
    if json_depth_exceeds(text, MAX_JSON_DEPTH):
        return text
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def _logged_refused(raw: bytes, text: str, headers: Mapping[str, Any]) -> Any:
    """The log's reading of a UTF-8 body the API refused (``text``): as it is, unless its
    charset reads it otherwise (a byte order mark, UTF-16 or UTF-32), then that text, parsed
    when it is JSON. A body read the same way is not parsed again."""
    if not raw:
        return None
    read = decode_text(raw, headers)[0]
    return text if read == text else _logged_text(read)


def decode_body(raw: bytes, headers: Mapping[str, Any]) -> DecodedBody:
    """The body decoded once. The API refuses a body that is not UTF-8, not JSON, holds
    ``NaN``/``Infinity`` (not JSON), or nests deeper than :data:`MAX_JSON_DEPTH`; the log keeps
    every body, parsed where it parses (``NaN`` included), else as text, read in its charset
    (``headers``: a UTF-16 or UTF-32 body is its text, not bytes with NULs between them)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        # The API stops at the bytes; the log reads what it can (the only parse of this body).
        logged = _logged_text(decode_text(raw, headers)[0])
        return DecodedBody(value=None, refusal=f"invalid UTF-8 at byte {exc.start}", logged=logged)
    if json_depth_exceeds(text, MAX_JSON_DEPTH):
        return DecodedBody(
            value=None,
            refusal=f"nesting deeper than {MAX_JSON_DEPTH} levels",
            logged=_logged_refused(raw, text, headers),
        )
    constants: list[str] = []

    def constant(name: str) -> float:
        constants.append(name)  # NaN, Infinity, -Infinity: not JSON to the API, kept by the log
        return float(name)

    try:
        value = json.JSONDecoder(parse_constant=constant).decode(text)
    except (ValueError, RecursionError) as exc:
        # A constant before the error is where the API's parser stopped.
        detail = f"{constants[0]} is not a valid JSON number" if constants else str(exc)
        return DecodedBody(value=None, refusal=detail, logged=_logged_refused(raw, text, headers))
    if constants:
        return DecodedBody(
            value=None, refusal=f"{constants[0]} is not a valid JSON number", logged=value
        )
    return DecodedBody(value=value, refusal=None, logged=value)


def _normalize_numbers(value: Any) -> Any:
    """``-0.0`` as ``0.0`` and floats checked finite (depth is bounded already): every number
    the codec sees survives a JSON round trip. ``value`` itself is left as sent (the request
    log keeps it): a copy is normalized, and only when it holds a ``-0.0``."""
    stack: list[Any] = [value]
    negative_zero = False
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                raise _bad_body("a number is out of range")
            if item == 0.0 and math.copysign(1.0, item) < 0:
                negative_zero = True
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    if not negative_zero:
        return value
    root: list[Any] = [copy.deepcopy(value)]
    places: list[tuple[Any, Any]] = [(root, 0)]
    while places:
        container, key = places.pop()
        item = container[key]
        if isinstance(item, float) and item == 0.0:
            container[key] = 0.0
        elif isinstance(item, dict):
            places.extend((item, k) for k in item)
        elif isinstance(item, list):
            places.extend((item, i) for i in range(len(item)))
    return root[0]


def _wire_error(exc: WireFormatError) -> ApiError:
    """The API's answer to a codec refusal. The tool rules have the API's own wording (quoted
    from real answers where observed); everything else is the deserializer's sentence."""
    param = exc.param
    if exc.code == "pattern_mismatch" and _is_tool_name(param):
        return _bad_param(  # [observed]
            f"Invalid '{param}': string does not match pattern. Expected a string that "
            f"matches the pattern '{TOOL_NAME_PATTERN}'.",
            param,
        )
    if exc.code == "too_long" and _is_tool_name(param):
        return _bad_param(
            f"Invalid '{param}': string too long. Expected a string with maximum length "
            f"{exc.limit}, but got a string with length {len(str(exc.value))} instead.",
            param,
        )
    if exc.code == "too_many" and param == "tools":
        return _bad_param(
            f"Invalid 'tools': array too long. Expected an array with maximum length "
            f"{exc.limit}, but got an array with length {exc.value} instead.",
            "tools",
        )
    if exc.code == "duplicate_name" and _is_tool_name(param):
        return _bad_param(f"Invalid 'tools': duplicate function name '{exc.value}'.", "tools")
    return ApiError(
        status=400,
        message=f"Failed to deserialize the JSON body into the target type: {exc}",
        param=exc.param or None,
    )


def _is_tool_name(param: str) -> bool:
    return param.startswith("tools[") and param.endswith(("].function.name", "].name"))


def _bad_param(message: str, param: str) -> ApiError:
    return ApiError(status=400, message=message, param=param)


def _last_user(parsed: ChatRequest | AnthropicRequest) -> tuple[str, bool]:
    """``(text of the last user message, whether the conversation ends with tool results)``."""
    if isinstance(parsed, ChatRequest):
        after_tool = parsed.messages[-1].role == "tool"
        for message in reversed(parsed.messages):
            if message.role == "user":
                return message.text, after_tool
        return "", after_tool
    last = parsed.messages[-1]
    after_tool = last.role == "user" and any(b["type"] == "tool_result" for b in last.blocks)
    for anthropic_message in reversed(parsed.messages):
        if anthropic_message.role == "user":
            text = "".join(str(b["text"]) for b in anthropic_message.blocks if b["type"] == "text")
            return text, after_tool
    return "", after_tool


def admit(
    request: HttpRequest,
    endpoint: Literal["chat", "anthropic"],
    *,
    body: DecodedBody,
    seq: int,
    passback: PassbackRule,
) -> MockRequest:
    """Parse and validate a model request (after :func:`caller_key`) from its ``body`` as
    :func:`decode_body` decoded it (the request's bytes are not decoded again)."""
    if body.refusal is not None:
        raise _bad_body(body.refusal)
    raw = body.value
    if not isinstance(raw, Mapping):
        # The codec's own check of a body's top level, in its words, on the decoded value.
        try:
            need_object(raw, "")
        except WireFormatError as exc:
            raise Rejection(_wire_error(exc)) from None
        raise Rejection(_wire_error(WireFormatError("expected a JSON object", param="")))
    try:
        frozen: Mapping[str, Any] = freeze_json(_normalize_numbers(raw), path="body")
    except JsonValueError as exc:
        raise _bad_body(str(exc)) from None
    parsed: ChatRequest | AnthropicRequest
    try:
        if endpoint == "chat":
            parsed = deepseek_codec.parse_request(frozen)
        else:
            parsed = anthropic_codec.parse_request(frozen)
    except WireFormatError as exc:
        raise Rejection(_wire_error(exc)) from None
    info = resolve_model(parsed.model, endpoint=endpoint)
    if info is None:
        raise Rejection(ApiError(status=400, message=MODEL_NOT_EXIST))
    facts: ToolFacts
    user_id: str | None
    if isinstance(parsed, ChatRequest):
        thinking = parsed.thinking_on
        facts, error = validate_chat(
            parsed, thinking=thinking, max_output_tokens=info.max_output_tokens, passback=passback
        )
        user_id = parsed.user_id
    else:
        thinking = parsed.thinking_on
        facts, error = validate_anthropic(
            parsed, thinking=thinking, max_output_tokens=info.max_output_tokens
        )
        metadata_user = None if parsed.metadata is None else parsed.metadata.get("user_id")
        user_id = metadata_user if isinstance(metadata_user, str) else None
    if error is not None:
        raise Rejection(error)
    last_text, after_tool = _last_user(parsed)
    return MockRequest(
        seq=seq,
        endpoint=endpoint,
        path=request.path,
        body=frozen,
        parsed=parsed,
        model=parsed.model,
        stream=bool(parsed.stream),
        thinking=thinking,
        tools=facts,
        user_id=user_id,
        last_user_text=last_text,
        after_tool_result=after_tool,
        headers=redacted_headers(request),
    )
