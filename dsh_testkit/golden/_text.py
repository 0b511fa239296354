"""How the transcript writes text: JSON strings for short or invisible-bearing text, literal
blocks otherwise, no line ending in whitespace."""

from __future__ import annotations

import json
import re
from typing import Any, Final

from dsh_core import (
    TokenUsage,
)

_LEGEND: Final = (
    "# normalized: ids → {{kind-n}} in first-seen order · times dropped · "
    "working directory → {{cwd}} · other UUIDs → {{uuid-n}}"
)
_INLINE_LIMIT: Final = 72
"""Longer text goes in a literal block."""
_SNIPPET: Final = 48
"""Characters of a message quoted in a request's message list."""
_COMPACT_JSON_LIMIT: Final = 100
_UNSAFE: Final = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u200b-\u200f\u2028\u2029\u2060\ufeff]")
"""Characters never written raw: controls (tab included), invisible and line-separating ones."""
_UNSAFE_IN_JSON: Final = re.compile("[\x7f-\x9f\u200b-\u200f\u2028\u2029\u2060\ufeff]")
"""What ``json.dumps(ensure_ascii=False)`` leaves raw among :data:`_UNSAFE`."""


# ---------------------------------------------------------------------------------------------
# Text helpers


def _quote(text: str) -> str:
    """``text`` as a JSON string, with invisible characters escaped too."""
    raw = json.dumps(text, ensure_ascii=False)
    return _UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", raw)


def _compact(value: Any) -> str:
    raw = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return _UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", raw)


def _pretty(value: Any) -> str:
    raw = json.dumps(value, ensure_ascii=False, indent=2)
    return _UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", raw)


def _block_safe(text: str) -> bool:
    """Whether ``text`` reads back unambiguously from a literal block."""
    if _UNSAFE.search(text):
        return False
    return all(line == line.rstrip() for line in text.split("\n"))


def _value_lines(key: str, text: str) -> list[str]:
    """``key: "text"`` or ``key: |`` + the lines (relative indentation 2)."""
    inline = "\n" not in text and len(text) <= _INLINE_LIMIT
    if inline or not _block_safe(text):
        return [f"{key}: {_quote(text)}"]
    body, chomp = (text[:-1], "|") if text.endswith("\n") else (text, "|-")
    if body == "" or body.endswith("\n"):
        return [f"{key}: {_quote(text)}"]  # several final newlines: a block cannot say how many
    return [f"{key}: {chomp}", *(f"  {line}" if line else "" for line in body.split("\n"))]


def _snippet(text: str) -> str:
    first = text.split("\n", 1)[0]
    if first == text and len(text) <= _SNIPPET:
        return _quote(text)
    return _quote(first[:_SNIPPET] + "…")


def _inline_raw(text: str) -> str:
    """Raw when it is one safe line without outer whitespace (tool arguments), else quoted."""
    if text and "\n" not in text and _block_safe(text) and text == text.strip():
        return text
    return _quote(text)


def _usage_line(usage: TokenUsage) -> str:
    if usage.cache_read_tokens is None and usage.cache_write_tokens is None:
        split = f"miss {usage.input_tokens} (no cache figures)"
    else:
        parts = [f"cache hit {usage.cache_read_tokens or 0}", f"miss {usage.input_tokens}"]
        if usage.cache_write_tokens is not None:
            parts.append(f"cache write {usage.cache_write_tokens}")
        split = " + ".join(parts)
    line = f"usage: prompt {usage.prompt_tokens} = {split} · output {usage.output_tokens}"
    if usage.reasoning_tokens is not None:
        line += f" (reasoning {usage.reasoning_tokens})"
    return line
