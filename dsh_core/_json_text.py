"""JSON text in and out, iteratively (no recursion, memory linear in the value): the canonical
dumps that every stored byte goes through, and the depth-limited loader."""

from __future__ import annotations

import json
import math
import re
import sys
from typing import Any, Final, NoReturn

from ._errors import JsonValueError

__all__ = [
    "MAX_JSON_DEPTH",
    "dumps_canonical",
    "loads_json",
]

MAX_JSON_DEPTH: Final = 32_768
"""How deep arrays and objects may nest in a value :func:`freeze_json` accepts (``[]`` is depth 1).

Far deeper than any real payload (20,000-deep values store and load), shallow enough that a
hostile document is refused after at most this many levels, in memory linear in the depth."""

_ENCODE_STR = json.encoder.encode_basestring


def _dumps_iterative(value: Any, sort_keys: bool) -> str:
    out: list[str] = []
    # Stack of pending work: strings to emit, or values to encode.
    work: list[tuple[bool, Any]] = [(False, value)]
    while work:
        is_text, item = work.pop()
        if is_text:
            out.append(item)
            continue
        if item is None:
            out.append("null")
        elif item is True:
            out.append("true")
        elif item is False:
            out.append("false")
        elif isinstance(item, str):
            out.append(_ENCODE_STR(item))
        elif isinstance(item, int):
            out.append(int.__repr__(item))
        elif isinstance(item, float):
            if not math.isfinite(item):  # as json.dumps(allow_nan=False) does
                raise ValueError(f"Out of range float values are not JSON compliant: {item!r}")
            out.append(float.__repr__(item))
        elif isinstance(item, dict):
            keys = sorted(item) if sort_keys else list(item)
            pending: list[tuple[bool, Any]] = [(True, "{")]
            for i, key in enumerate(keys):
                if i:
                    pending.append((True, ","))
                pending.append((True, _ENCODE_STR(key) + ":"))
                pending.append((False, item[key]))
            pending.append((True, "}"))
            work.extend(reversed(pending))
        elif isinstance(item, (list, tuple)):
            pending = [(True, "[")]
            for i, child in enumerate(item):
                if i:
                    pending.append((True, ","))
                pending.append((False, child))
            pending.append((True, "]"))
            work.extend(reversed(pending))
        else:
            raise TypeError(f"Object of type {type(item).__name__} is not JSON serializable")
    return "".join(out)


def dumps_canonical(value: Any, *, sort_keys: bool = False) -> str:
    """Compact JSON text (``,`` / ``:`` separators, UTF-8, no ASCII escaping).

    Key order is kept by default: a request's key order is part of what the model sees. Pass
    ``sort_keys=True`` for order-insensitive comparisons (cassette matching).
    """
    try:
        return json.dumps(
            value, separators=(",", ":"), ensure_ascii=False, sort_keys=sort_keys, allow_nan=False
        )
    except RecursionError:
        return _dumps_iterative(value, sort_keys)


_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?")
_WS = re.compile(r"[ \t\n\r]*")


def _loads_iterative(text: str, max_depth: int | None = None) -> Any:
    scanstring = json.decoder.scanstring  # type: ignore[attr-defined]
    pos = _WS.match(text, 0).end()  # type: ignore[union-attr]
    # Each frame: (container, pending key or None)
    stack: list[list[Any]] = []
    result: Any = None
    have_result = False

    def fail(msg: str) -> NoReturn:
        raise json.JSONDecodeError(msg, text, pos)

    while True:
        # Parse one value at pos.
        ch = text[pos : pos + 1]
        value: Any
        opened = False
        if max_depth is not None and ch in "{[" and ch and len(stack) >= max_depth:
            raise _text_too_deep(max_depth, pos)
        if ch == "{":
            pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
            if text[pos : pos + 1] == "}":
                value = {}
                pos += 1
            else:
                if text[pos : pos + 1] != '"':
                    fail("Expecting property name enclosed in double quotes")
                key, pos = scanstring(text, pos + 1)
                pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
                if text[pos : pos + 1] != ":":
                    fail("Expecting ':' delimiter")
                pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
                stack.append([{}, key])
                opened = True
        elif ch == "[":
            pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
            if text[pos : pos + 1] == "]":
                value = []
                pos += 1
            else:
                stack.append([[], None])
                opened = True
        elif ch == '"':
            value, pos = scanstring(text, pos + 1)
        elif text.startswith("null", pos):
            value, pos = None, pos + 4
        elif text.startswith("true", pos):
            value, pos = True, pos + 4
        elif text.startswith("false", pos):
            value, pos = False, pos + 5
        else:
            m = _NUMBER.match(text, pos)
            if not m:
                fail("Expecting value")
            num = m.group(0)
            value = float(num) if (m.group(1) or m.group(2)) else int(num)
            pos = m.end()
        if opened:
            continue
        # Attach the value and close finished containers.
        while True:
            if not stack:
                result, have_result = value, True
                break
            frame = stack[-1]
            container = frame[0]
            if isinstance(container, dict):
                container[frame[1]] = value
            else:
                container.append(value)
            pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
            sep = text[pos : pos + 1]
            if sep == ",":
                pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
                if isinstance(container, dict):
                    if text[pos : pos + 1] != '"':
                        fail("Expecting property name enclosed in double quotes")
                    key, pos = scanstring(text, pos + 1)
                    pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
                    if text[pos : pos + 1] != ":":
                        fail("Expecting ':' delimiter")
                    pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
                    frame[1] = key
                break
            closer = "}" if isinstance(container, dict) else "]"
            if sep != closer:
                fail(f"Expecting ',' or '{closer}'")
            pos += 1
            stack.pop()
            value = container
        if have_result:
            break
    pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
    if pos != len(text):
        fail("Extra data")
    return result


def _text_too_deep(max_depth: int, pos: int) -> JsonValueError:
    return JsonValueError(
        f"arrays and objects nest deeper than {max_depth} levels (the limit) by character {pos}",
        path="JSON text",
    )


def _value_depth(value: Any) -> int:
    """How deep the containers of a plain parsed container nest (iterative)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:  # only containers are pushed
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return deepest


def loads_json(text: str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse JSON text into plain values; deep nesting does not hit the recursion limit.

    Raises ``json.JSONDecodeError`` (a ``ValueError``) on malformed text. Non-finite number
    literals (``NaN``, ``Infinity``), which are not JSON, are refused. Text whose arrays and
    objects nest deeper than ``max_depth`` levels raises :class:`JsonValueError` (also a
    ``ValueError``) as soon as the parser gets there: time and memory stay bounded by the limit,
    however deep the text goes.
    """

    def refuse_constant(name: str) -> NoReturn:
        raise json.JSONDecodeError(f"{name} is not a JSON value", text, text.find(name))

    try:
        value = json.loads(text, parse_constant=refuse_constant)
    except RecursionError:
        return _loads_iterative(text, max_depth)
    # The C parser gives up (RecursionError) before the recursion limit, so only a limit below
    # it needs a look at what was parsed.
    if (
        max_depth < sys.getrecursionlimit()
        and isinstance(value, (dict, list))
        and _value_depth(value) > max_depth
    ):
        raise JsonValueError(
            f"arrays and objects nest deeper than {max_depth} levels (the limit)",
            path="JSON text",
        )
    return value
