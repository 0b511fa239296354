"""What differs between two requests, texts or JSON values: the one wording every report uses.

The sentence that says why two requests differ is the most important message this project
prints: the dev-mode invariant (:func:`dsh_core.diff_requests`), a cassette mismatch, a prefix
cache break found by ``assert_prefix_stable``, the audit and strict replay all word their
differences with the functions here, so one fix reaches every message and the wording cannot
drift between them.

The contract for texts: a difference says **where** the two texts first differ (line and
column) and shows enough of both sides around that point that the differing characters are
visible. Two texts that differ only at the end of a long line (a timestamp appended to a system
prompt, the classic prefix cache killer) never print as the same truncated prefix twice.

Every function takes ``names``: how the two sides are called in the sentence (``expected`` and
``actual`` for the invariant, ``recorded`` and ``request`` for a cassette, ``request #1`` and
``request #2`` for a prefix check). The phrases are:

- ``<where> differs: <left>: <value>, <right>: <value>`` for short values;
- ``<where> differs at line L, column C: <left>: …'context', <right>: …'context'`` for texts
  too long to show whole (``system line L differs at column C: …`` for a system prompt, which
  is compared line by line);
- ``<where>.<key>: only in <side> (<value>)``, ``<where>: <left> has 2 items, <right> has 3``,
  ``<where>: same keys in another order (…)``;
- ``tool 'grep' only in <side>``, ``tool 'read'.description differs: …``, ``tools: order
  differs: …``;
- ``messages: <left> has 3, <right> has 4 (first extra: messages[3] …)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from ._json_text import dumps_canonical

__all__ = [
    "Sides",
    "TextDifference",
    "ToolList",
    "config_differences",
    "count_difference",
    "first_json_difference",
    "locate_text_difference",
    "preview_value",
    "system_difference",
    "text_difference",
    "tools_differences",
]

Sides: TypeAlias = tuple[str, str]
"""How the two compared sides are named in a sentence, left (expected) first."""

_PREVIEW = 60
"""Characters a value preview keeps (a longer one ends with ``…``)."""

_CONTEXT = 32
"""Characters shown on each side of the first difference of two long texts."""


def _preview_repr(text: str, limit: int) -> str:
    """``repr(text)`` cut to ``limit`` characters with ``…``, in O(limit) for a huge text.

    ``repr`` picks one quote for the whole text (``'`` unless the text holds ``'`` and no
    ``"``) and then escapes each character on its own, so the repr of the first ``limit``
    characters plus one probe character that forces the same pick starts with the same
    ``limit - 1`` characters as the repr of the whole text.
    """
    if len(text) <= limit or limit < 1:
        whole = repr(text)
        return whole if len(whole) <= limit else whole[: limit - 1] + "…"
    probe = "'" if "'" in text and '"' not in text else '"'
    return repr(text[:limit] + probe)[: limit - 1] + "…"


def preview_value(value: Any, limit: int = _PREVIEW) -> str:
    """A one-line preview of a JSON value (strings quoted), cut with ``…`` past ``limit``."""
    if isinstance(value, str):
        return _preview_repr(value, limit)
    text = dumps_canonical(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _first_mismatch(a: str, b: str) -> int:
    """The index of the first character where ``a`` and ``b`` differ (``min(len)`` if one is a
    prefix of the other): slice comparisons in growing blocks, then bisection, so a megabyte of
    shared prefix costs a few C-level comparisons, not a Python loop over every character."""
    n = min(len(a), len(b))
    lo, step = 0, 256
    while lo < n:
        hi = min(n, lo + step)
        if a[lo:hi] != b[lo:hi]:
            break
        lo, step = hi, step * 2
    else:
        return n
    while hi - lo > 16:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    while a[lo] == b[lo]:
        lo += 1
    return lo


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDifference:
    """Where two texts first differ, and what each side holds around that point."""

    offset: int
    """0-based index of the first differing character (the shorter text's length when it is a
    prefix of the other)."""
    line: int
    """1-based line of that character (the same in both texts: everything before it is equal)."""
    column: int
    """1-based column of that character in its line."""
    expected: str
    """The left text's excerpt: the differing line, quoted (whole when short, else ``context``
    characters each side of ``column`` with ``…`` where the line goes on; when the texts part
    at this side's line break, the line after it too), and ``(the text ends here)`` when the
    text ends at the difference."""
    actual: str
    """The right text's excerpt, cut the same way."""


def _excerpt(text: str, offset: int, line_start: int, context: int) -> str:
    line_end = text.find("\n", offset)
    if line_end < 0:
        line_end = len(text)
    if line_end == offset < len(text):
        # This side parts from the other at a line break: what matters is the line after it
        # (the other text ended there, or went on differently), so it is shown too.
        line_end = text.find("\n", offset + 1)
        if line_end < 0:
            line_end = len(text)
    if line_end - line_start <= _PREVIEW:
        start, end = line_start, line_end  # a short line is shown whole
    else:
        start, end = max(line_start, offset - context), min(line_end, offset + context)
    # The differing character itself is always shown, even a line break.
    end = max(end, min(offset + 1, len(text)))
    shown = repr(text[start:end])
    if start > line_start:
        shown = "…" + shown
    if end < line_end:
        shown += "…"
    if offset >= len(text):
        shown += " (the text ends here)"
    return shown


def locate_text_difference(
    expected: str, actual: str, *, context: int = _CONTEXT
) -> TextDifference | None:
    """Where two texts first differ, with ``context`` characters of each around it; ``None`` if equal.

    Linear in the shared prefix (compared in C), constant in the rest: only the differing line's
    window is copied and escaped.
    """
    if expected == actual:
        return None
    offset = _first_mismatch(expected, actual)
    line_start = expected.rfind("\n", 0, offset) + 1
    return TextDifference(
        offset=offset,
        line=expected.count("\n", 0, offset) + 1,
        column=offset - line_start + 1,
        expected=_excerpt(expected, offset, line_start, context),
        actual=_excerpt(actual, offset, line_start, context),
    )


def _fits(text: str, limit: int) -> bool:
    return "\n" not in text and len(text) <= limit - 2 and len(repr(text)) <= limit


def text_difference(
    where: str, expected: str, actual: str, names: Sides, *, limit: int = _PREVIEW
) -> str | None:
    """How two texts differ, in one phrase; ``None`` if equal.

    Short one-line texts are shown whole; otherwise the phrase names the line and column of the
    first difference and shows both sides around it (:func:`locate_text_difference`).
    """
    found = locate_text_difference(expected, actual)
    if found is None:
        return None
    left, right = names
    if _fits(expected, limit) and _fits(actual, limit):
        return f"{where} differs: {left}: {expected!r}, {right}: {actual!r}"
    return (
        f"{where} differs at line {found.line}, column {found.column}: "
        f"{left}: {found.expected}, {right}: {found.actual}"
    )


def _line_difference(where: str, expected: str, actual: str, names: Sides) -> str:
    """Two different lines: whole when short, else from the column where they part."""
    left, right = names
    if _fits(expected, _PREVIEW) and _fits(actual, _PREVIEW):
        return f"{where} differs: {left}: {expected!r}, {right}: {actual!r}"
    found = locate_text_difference(expected, actual)
    assert found is not None  # the caller compared the lines
    return (
        f"{where} differs at column {found.column}: "
        f"{left}: {found.expected}, {right}: {found.actual}"
    )


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def system_difference(
    expected: str | None, actual: str | None, names: Sides, *, where: str = "system"
) -> str | None:
    """The first difference of two system prompts, by line; ``None`` if equal (``None`` and
    ``""`` are both "no system prompt").

    ``system line 3 differs: …`` (the column too when the lines are long), or ``system line 3
    only in <side>: …`` when one prompt is the other with lines added at its end.
    """
    if (expected or None) == (actual or None):
        return None
    left, right = names
    a = expected.split("\n") if expected else []
    b = actual.split("\n") if actual else []
    for i, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return _line_difference(f"{where} line {i + 1}", x, y, names)
    # Every shared line is equal, so one prompt has more lines.
    n = min(len(a), len(b))
    side, extra = (right, b[n]) if len(b) > len(a) else (left, a[n])
    return (
        f"{where} line {n + 1} only in {side}: {preview_value(extra)} "
        f"({left} has {_plural(len(a), 'line')}, {right} has {len(b)})"
    )


def _leaf_difference(where: str, x: Any, y: Any, names: Sides) -> str:
    if isinstance(x, str) and isinstance(y, str):
        found = text_difference(where, x, y, names)
        assert found is not None  # the caller compared the values
        return found
    # Not two texts: either two scalars (short) or values of different JSON types, whose
    # previews differ from their first character, so the preview always shows the difference.
    left, right = names
    return f"{where} differs: {left}: {preview_value(x)}, {right}: {preview_value(y)}"


def first_json_difference(where: str, expected: Any, actual: Any, names: Sides) -> str | None:
    """The first path (depth first, in document order) at which two JSON values differ.

    Key order counts (it is part of what a model sees): two objects with the same keys in
    another order differ — but a value that differs is named first (in the left side's key
    order), and "same keys in another order" only when every value is equal. Numbers compare by
    type too (``1`` and ``1.0`` encode differently).
    """
    left, right = names
    stack: list[tuple[str, Any, Any]] = [(where, expected, actual)]
    while stack:
        at, x, y = stack.pop()
        if isinstance(x, Mapping) and isinstance(y, Mapping):
            for key in x:
                if key not in y:
                    return f"{at}.{key}: only in {left} ({preview_value(x[key])})"
            for key in y:
                if key not in x:
                    return f"{at}.{key}: only in {right} ({preview_value(y[key])})"
            differing = next((k for k in x if dumps_canonical(x[k]) != dumps_canonical(y[k])), None)
            if differing is not None:
                stack.append((f"{at}.{differing}", x[differing], y[differing]))
            elif list(x) != list(y):
                return f"{at}: same keys in another order ({left}: {list(x)}, {right}: {list(y)})"
        elif isinstance(x, list) and isinstance(y, list):
            for i, (p, q) in enumerate(zip(x, y, strict=False)):
                if dumps_canonical(p) != dumps_canonical(q):
                    stack.append((f"{at}[{i}]", p, q))
                    break
            else:
                if len(x) != len(y):
                    return f"{at}: {left} has {_plural(len(x), 'item')}, {right} has {len(y)}"
        elif type(x) is not type(y) or x != y:
            return _leaf_difference(at, x, y, names)
    return None


def config_differences(
    expected: Mapping[str, Any],
    actual: Mapping[str, Any],
    names: Sides,
    *,
    label: Callable[[str], str] = lambda key: f"config.{key}",
    keys: Sequence[str] | None = None,
) -> list[str]:
    """One phrase per configuration field that differs (``config.temperature differs: …``).

    ``keys`` limits the comparison (a prefix cache only sees ``model``); ``label`` names a key.
    """
    left, right = names
    out: list[str] = []
    for key in keys if keys is not None else dict.fromkeys([*expected, *actual]):
        if key not in actual and key in expected:
            out.append(f"{label(key)}: only in {left} ({preview_value(expected[key])})")
        elif key not in expected and key in actual:
            out.append(f"{label(key)}: only in {right} ({preview_value(actual[key])})")
        elif key in expected:
            found = first_json_difference(label(key), expected[key], actual[key], names)
            if found is not None:
                out.append(found)
    return out


ToolList: TypeAlias = Sequence[tuple[str, Any]] | str | None
"""Tools to compare: ``(name, schema JSON)`` pairs in request order, a placeholder string
(``"{{tools}}"``), or ``None`` for no tools."""


def _tools_shown(tools: ToolList) -> str:
    if tools is None:
        return "no tools"
    if isinstance(tools, str):
        return f"the placeholder {tools!r}"
    return str([name for name, _ in tools])


def tools_differences(expected: ToolList, actual: ToolList, names: Sides) -> list[str]:
    """How two tool lists differ, by tool name: only on one side, changed, or reordered; a
    placeholder compares as a whole (``tools differ: …: the placeholder '{{tools}}', …``)."""
    left, right = names
    if isinstance(expected, str) or isinstance(actual, str):
        if expected == actual:
            return []
        return [f"tools differ: {left}: {_tools_shown(expected)}, {right}: {_tools_shown(actual)}"]
    # No tools and an empty list mean the same request: name each tool only one side has.
    expected, actual = expected or (), actual or ()
    by_left = dict(expected)
    by_right = dict(actual)
    out = [f"tool {name!r} only in {right}" for name in by_right if name not in by_left]
    out += [f"tool {name!r} only in {left}" for name in by_left if name not in by_right]
    for name, schema in by_left.items():
        if name in by_right:
            found = first_json_difference(f"tool {name!r}", schema, by_right[name], names)
            if found is not None:
                out.append(found)
    if not out and list(by_left) != list(by_right):
        out.append(f"tools: order differs: {left}: {list(by_left)}, {right}: {list(by_right)}")
    return out


def count_difference(
    what: str, expected: int, actual: int, names: Sides, *, at: str, item: Any
) -> str:
    """Two lists of different length that agree on their shared part: how many each has, and
    the first item only one side has (``at`` names it, ``item`` is its JSON or text)."""
    left, right = names
    kind = "first extra" if actual > expected else "first missing"
    return (
        f"{what}: {left} has {expected}, {right} has {actual} ({kind}: {at} {preview_value(item)})"
    )
