"""Structural checks shared by the request parsers, and :class:`WireFormatError`.

The parsers (``deepseek.parse_request``, ``anthropic.parse_request``) read a decoded JSON body the
way the server's deserializer does: every field's type and shape, nothing about the conversation's
meaning. A failure names the JSON path of the offending field (``messages[1].role``) in ``param``
so a mock can answer with the API's own error body.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any, NoReturn

from .._errors import DshError
from .._json import FrozenDict, freeze_json

__all__ = ["WireFormatError"]


class WireFormatError(DshError, ValueError):
    """A wire body or stream payload does not have the documented shape.

    ``param`` is the JSON path of the offending field, e.g. ``messages[1].tool_calls[0].id``
    (``""`` for the body itself).
    """

    def __init__(self, message: str, *, param: str) -> None:
        super().__init__(f"{param}: {message}" if param else message)
        self.param = param
        self.reason = message
        """The message without the path."""


def fail(param: str, message: str) -> NoReturn:
    raise WireFormatError(message, param=param)


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
        fail(param, f"invalid type: {kind_of(value)}, expected an object")
    return value


def need_list(value: object, param: str) -> list[Any]:
    if not isinstance(value, list):
        fail(param, f"invalid type: {kind_of(value)}, expected an array")
    return value


def need_str(value: object, param: str) -> str:
    if not isinstance(value, str):
        fail(param, f"invalid type: {kind_of(value)}, expected a string")
    return value


def need_bool(value: object, param: str) -> bool:
    if not isinstance(value, bool):
        fail(param, f"invalid type: {kind_of(value)}, expected a boolean")
    return value


def need_int(value: object, param: str, *, minimum: int | None = None) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        fail(param, f"invalid type: {kind_of(value)}, expected an integer")
    if minimum is not None and value < minimum:
        fail(param, f"must be at least {minimum}, got {value}")
    return value


def need_number(
    value: object, param: str, *, low: float | None = None, high: float | None = None
) -> float | int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        fail(param, f"invalid type: {kind_of(value)}, expected a number")
    if (low is not None and value < low) or (high is not None and value > high):
        fail(param, f"must be between {low} and {high}, got {value}")
    return value


def need_variant(value: object, param: str, variants: Collection[str]) -> str:
    text = need_str(value, param)
    if text not in variants:
        expected = ", ".join(f"`{v}`" for v in variants)
        fail(param, f"unknown variant `{text}`, expected one of {expected}")
    return text


def required(obj: Mapping[str, Any], key: str, param: str) -> Any:
    if key not in obj:
        fail(child(param, key), f"missing field `{key}`")
    return obj[key]


def optional(obj: Mapping[str, Any], key: str) -> Any:
    """The value of ``key``; ``None`` when absent or JSON ``null`` (serde's ``Option``)."""
    return obj.get(key)


def frozen(value: object, param: str) -> Any:
    """A deeply immutable copy of a JSON value (anything a request body can hold)."""
    return freeze_json(value, path=param or "body")


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
        value = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        fail("", f"the body is not valid JSON: {exc}")
    return need_object(value, "")
