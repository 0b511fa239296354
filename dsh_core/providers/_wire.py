"""Structural checks shared by the request parsers, and :class:`WireFormatError`.

The parsers (``deepseek.parse_request``, ``anthropic.parse_request``) read a decoded JSON body the
way the server's deserializer does: every field's type and shape, nothing about the conversation's
meaning. A failure names the JSON path of the offending field (``messages[1].role``) in ``param``
and says what went wrong as a stable machine ``code`` (:data:`WireErrorCode`), so a mock can
answer with the API's own error body. The tool-name rules (:func:`check_tool_names`) live here
too: both codecs apply them, and nothing else should.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping
from typing import Any, Final, Literal, NoReturn, TypeAlias

from .._errors import DshError, JsonValueError
from .._json import FrozenDict, freeze_json
from .._json_text import loads_json

__all__ = [
    "MAX_TOOLS",
    "MAX_TOOL_NAME_LENGTH",
    "TOOL_NAME_PATTERN",
    "WireErrorCode",
    "WireFormatError",
    "check_tool_count",
    "check_tool_names",
]

WireErrorCode: TypeAlias = Literal[
    "invalid_json",
    "invalid_type",
    "missing_field",
    "unknown_variant",
    "out_of_range",
    "empty",
    "too_many",
    "too_long",
    "pattern_mismatch",
    "duplicate_name",
    "invalid_stream",
]
"""Stable machine codes of :class:`WireFormatError`; the text may change, these do not.

- ``invalid_json``: the body (or an event's data) is not JSON, or holds a value JSON cannot carry
  losslessly (``NaN``, an infinity, ``-0.0`` in a kept object, nesting too deep to keep);
- ``invalid_type``: a field has the wrong JSON type (``value`` is the JSON type's name);
- ``missing_field``: a required field is absent;
- ``unknown_variant``: a string outside its allowed values (``value`` is the string);
- ``out_of_range``: a number outside its bounds or not finite (``value``; ``limit`` is the
  bound crossed, ``None`` for a non-finite number);
- ``empty``: an array that must not be empty is (``messages``);
- ``too_many``: an array longer than allowed (``value`` is its length, ``limit`` the maximum),
  e.g. more than :data:`MAX_TOOLS` tools or 16 stop sequences;
- ``too_long``: a string longer than allowed (``value`` is the string, ``limit`` the maximum),
  e.g. a tool name over :data:`MAX_TOOL_NAME_LENGTH` characters;
- ``pattern_mismatch``: a string that does not match its pattern (``value``; the tool-name
  pattern is :data:`TOOL_NAME_PATTERN`);
- ``duplicate_name``: a second tool with the same name (``value`` is the name);
- ``invalid_stream``: a response event out of order (a delta for a block never started, …).
"""


class WireFormatError(DshError, ValueError):
    """A wire body or stream payload does not have the documented shape.

    ``param`` is the JSON path of the offending field, e.g. ``messages[1].tool_calls[0].id``
    (``""`` for the body itself); ``code`` says what is wrong (:data:`WireErrorCode`), ``value``
    and ``limit`` carry the offending value and the bound where the code has them.
    """

    def __init__(
        self,
        message: str,
        *,
        param: str,
        code: WireErrorCode = "invalid_type",
        value: object = None,
        limit: int | float | None = None,
    ) -> None:
        super().__init__(f"{param}: {message}" if param else message)
        self.param = param
        self.reason = message
        """The message without the path."""
        self.code: WireErrorCode = code
        self.value = value
        """The offending value (a name, a length, a number), where the code has one."""
        self.limit = limit
        """The bound that was crossed (``too_many``, ``too_long``, ``out_of_range``)."""


# A traceback names it where users import it from, not this private module.
WireFormatError.__module__ = "dsh_core.providers"


def fail(
    param: str,
    message: str,
    *,
    code: WireErrorCode = "invalid_type",
    value: object = None,
    limit: int | float | None = None,
) -> NoReturn:
    raise WireFormatError(message, param=param, code=code, value=value, limit=limit)


def child(param: str, key: str | int) -> str:
    """``param`` extended by an object key or an array index."""
    if isinstance(key, int):
        return f"{param}[{key}]"
    return f"{param}.{key}" if param else key


def kind_of(value: object) -> str:
    """The JSON name of a value's type, as deserializer messages say it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def need_object(value: object, param: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        fail(param, f"invalid type: {kind_of(value)}, expected an object", value=kind_of(value))
    return value


def need_list(value: object, param: str) -> list[Any]:
    if not isinstance(value, list):
        fail(param, f"invalid type: {kind_of(value)}, expected an array", value=kind_of(value))
    return value


def need_str(value: object, param: str) -> str:
    if not isinstance(value, str):
        fail(param, f"invalid type: {kind_of(value)}, expected a string", value=kind_of(value))
    return value


def need_bool(value: object, param: str) -> bool:
    if not isinstance(value, bool):
        fail(param, f"invalid type: {kind_of(value)}, expected a boolean", value=kind_of(value))
    return value


def need_int(value: object, param: str, *, minimum: int | None = None) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        fail(param, f"invalid type: {kind_of(value)}, expected an integer", value=kind_of(value))
    if minimum is not None and value < minimum:
        fail(
            param,
            f"must be at least {minimum}, got {value}",
            code="out_of_range",
            value=value,
            limit=minimum,
        )
    return value


def need_number(
    value: object, param: str, *, low: float | None = None, high: float | None = None
) -> float | int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        fail(param, f"invalid type: {kind_of(value)}, expected a number", value=kind_of(value))
    if isinstance(value, float) and not math.isfinite(value):
        fail(param, f"must be a finite number, got {value}", code="out_of_range", value=value)
    if (low is not None and value < low) or (high is not None and value > high):
        fail(
            param,
            f"must be between {low} and {high}, got {value}",
            code="out_of_range",
            value=value,
            limit=low if low is not None and value < low else high,
        )
    return value


def need_variant(value: object, param: str, variants: Collection[str]) -> str:
    text = need_str(value, param)
    if text not in variants:
        expected = ", ".join(f"`{v}`" for v in variants)
        fail(
            param,
            f"unknown variant `{text}`, expected one of {expected}",
            code="unknown_variant",
            value=text,
        )
    return text


def required(obj: Mapping[str, Any], key: str, param: str) -> Any:
    if key not in obj:
        fail(child(param, key), f"missing field `{key}`", code="missing_field", value=key)
    return obj[key]


def optional(obj: Mapping[str, Any], key: str) -> Any:
    """The value of ``key``; ``None`` when absent or JSON ``null`` (serde's ``Option``)."""
    return obj.get(key)


def frozen(value: object, param: str) -> Any:
    """A deeply immutable copy of a JSON value (anything a request body can hold).

    A value JSON cannot carry losslessly (a non-finite or negative-zero float, nesting deeper
    than :func:`dsh_core.freeze_json` supports) is ``invalid_json`` at its own path.
    """
    try:
        return freeze_json(value, path=param or "body")
    except JsonValueError as exc:
        reason = str(exc).removeprefix(f"{exc.path}: ")
        fail(exc.path, reason, code="invalid_json")


def extras(obj: Mapping[str, Any], known: Collection[str], param: str) -> FrozenDict:
    """The fields a parser does not model, kept (frozen) so the caller can decide about them."""
    return FrozenDict(
        (key, frozen(value, child(param, key))) for key, value in obj.items() if key not in known
    )


def decode_body(body: bytes | str | Mapping[str, Any]) -> Mapping[str, Any]:
    """A request body as a JSON object (bytes and text are decoded first)."""
    if isinstance(body, Mapping):
        return body
    try:
        # loads_json: NaN/Infinity literals are not JSON, and deep nesting must not overflow.
        value = loads_json(body.decode("utf-8") if isinstance(body, bytes) else body)
    except (ValueError, UnicodeDecodeError) as exc:
        fail("", f"the body is not valid JSON: {exc}", code="invalid_json")
    return need_object(value, "")


MAX_TOOLS: Final = 128
"""The most tools a request may carry (docs/wire.md §1.3)."""
MAX_TOOL_NAME_LENGTH: Final = 128
"""The longest tool name the API accepts."""
TOOL_NAME_PATTERN: Final = "^[a-zA-Z0-9_-]+$"
"""What a tool name may hold, as the API's own error message quotes it."""
_TOOL_NAME: Final = re.compile(TOOL_NAME_PATTERN)


def check_tool_count(count: int, param: str) -> None:
    """Refuse more than :data:`MAX_TOOLS` tools (``too_many``; ``param`` is the tools array)."""
    if count > MAX_TOOLS:
        fail(
            param,
            f"at most {MAX_TOOLS} tools are allowed, got {count}",
            code="too_many",
            value=count,
            limit=MAX_TOOLS,
        )


def check_tool_names(names: list[tuple[str, str]]) -> None:
    """Apply the API's tool-name rules to ``(name, JSON path of the name)`` pairs, in order.

    Raises :class:`WireFormatError` at the first bad name: ``pattern_mismatch`` (empty, or a
    character outside ``[a-zA-Z0-9_-]``), ``too_long`` (over :data:`MAX_TOOL_NAME_LENGTH`) or
    ``duplicate_name`` (a name seen earlier in the list). The count is
    :func:`check_tool_count`'s, checked before anything inside the array.
    """
    seen: set[str] = set()
    for name, where in names:
        if not _TOOL_NAME.match(name):
            fail(
                where,
                f"tool name {name!r} must match {TOOL_NAME_PATTERN}",
                code="pattern_mismatch",
                value=name,
            )
        if len(name) > MAX_TOOL_NAME_LENGTH:
            fail(
                where,
                f"tool name of {len(name)} characters is longer than {MAX_TOOL_NAME_LENGTH}",
                code="too_long",
                value=name,
                limit=MAX_TOOL_NAME_LENGTH,
            )
        if name in seen:
            fail(where, f"duplicate tool name {name!r}", code="duplicate_name", value=name)
        seen.add(name)
