"""Secrets written in base64 or hex inside a longer text: found by decoding, bounded in cost.

A key pasted into a prompt may arrive base64-encoded (a ``Basic`` credential, a data URL, a
config blob an agent read) or as hex (a dump, a byte string printed by a tool). Its shape is
not visible in the text, so the scrubber decodes the runs that could hold one:

- a **base64 run** is a maximal run of the standard and URL-safe alphabets together
  (``A-Z a-z 0-9 + / - _``), with its ``=`` padding, at least :data:`MIN_BASE64_RUN` characters
  long (the encoding of :data:`MIN_KEY_BYTES`). It is decoded from each of its first four
  characters, so a run that starts mid-quantum (cut by an excerpt, glued to other base64) is
  read at its true alignment too;
- a **hex run** is a maximal run of ``0-9 a-f A-F`` of at least :data:`MIN_HEX_RUN`
  characters, decoded at both nibble offsets.

A run one of whose decodings holds a secret (the caller says what that is) is replaced whole.
Finding runs costs two byte translations and substring searches over the text (C loops, a few
nanoseconds a character); only texts with a long enough run pay for decoding, only those runs
are decoded (in C), and the caller's test runs once over all their decodings together (joined
by a NUL, which no key shape holds) before it runs per run. The credential a request presents needs none of this: its encodings are known
in advance and searched for directly (:class:`~dsh_testkit.scrub._spellings.KnownSecrets`).
"""

from __future__ import annotations

import binascii
from collections.abc import Callable, Iterator
from typing import Final

__all__ = ["MIN_BASE64_RUN", "MIN_HEX_RUN", "encoded_spans", "may_encode"]

MIN_KEY_BYTES: Final = 20
"""The shortest key looked for inside base64 and hex: an AWS access key id (``AKIA`` and 16),
shorter than every ``sk-`` key (23 or more), GitHub, Google and bearer token. (Only a Slack
token of fewer than 20 characters, which the key pattern allows, is not looked for there.) A
shorter bound would decode every URL path: ``com/chat/completions`` is 20 base64 characters."""
MIN_BASE64_RUN: Final = -(-MIN_KEY_BYTES * 4 // 3)
"""Base64 characters that :data:`MIN_KEY_BYTES` bytes take (27)."""
MIN_HEX_RUN: Final = 2 * MIN_KEY_BYTES
"""Hex digits that :data:`MIN_KEY_BYTES` bytes take (40)."""

_BASE64_CHARS: Final = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_"
_HEX_CHARS: Final = b"0123456789abcdefABCDEF"
_BASE64_MARKS: Final = bytes(65 if i in _BASE64_CHARS else 32 for i in range(256))
"""Every base64 character (either alphabet) as ``A``, everything else as a space."""
_HEX_MARKS: Final = bytes(72 if i in _HEX_CHARS else 32 for i in range(256))
"""Every hex digit as ``H``, everything else as a space."""
_BASE64_NEEDLE: Final = b"A" * MIN_BASE64_RUN
_HEX_NEEDLE: Final = b"H" * MIN_HEX_RUN
_TO_STANDARD: Final = str.maketrans("-_", "+/")


def _marked(text: str, marks: bytes) -> bytes:
    # One byte per character: what is not ASCII becomes "?" (neither alphabet holds it).
    return text.encode("ascii", "replace").translate(marks)


def _runs(marked: bytes, needle: bytes) -> Iterator[tuple[int, int]]:
    """The maximal runs of marked characters at least ``len(needle)`` long, in order."""
    at = marked.find(needle)
    while at != -1:
        start = marked.rfind(b" ", 0, at) + 1
        end = marked.find(b" ", at)
        if end == -1:
            end = len(marked)
        yield start, end
        at = marked.find(needle, end)


def may_encode(text: str) -> bool:
    """``False`` only when ``text`` certainly has no base64 or hex run long enough to hold a
    key shape (cheap: a byte translation and a substring search; every hex run is a base64
    run too)."""
    return len(text) >= MIN_BASE64_RUN and _BASE64_NEEDLE in _marked(text, _BASE64_MARKS)


def _base64_decodings(run: str) -> Iterator[str]:
    """``run`` decoded from each of its first four characters (both alphabets read as one),
    each as Latin-1 text (one character per byte, so an ASCII key reads as itself)."""
    standard = run.translate(_TO_STANDARD)
    for skip in range(4):
        piece = standard[skip:]
        piece = piece[: len(piece) - 1] if len(piece) % 4 == 1 else piece
        try:
            data = binascii.a2b_base64(piece + "=" * (-len(piece) % 4))
        except binascii.Error:
            continue
        yield data.decode("latin-1")


def _hex_decodings(run: str) -> Iterator[str]:
    for skip in (0, 1):
        piece = run[skip:]
        piece = piece[: len(piece) - len(piece) % 2]
        yield bytes.fromhex(piece).decode("latin-1")


def encoded_spans(text: str, holds: Callable[[str], bool]) -> list[tuple[int, int]]:
    """The ``(start, end)`` spans of the base64 and hex runs of ``text`` (see the module
    docstring) one of whose decodings ``holds`` a secret, in order, not overlapping."""
    if len(text) < MIN_BASE64_RUN:
        return []
    marked = _marked(text, _BASE64_MARKS)
    if _BASE64_NEEDLE not in marked:
        return []
    runs: list[tuple[int, int, list[str]]] = []
    for start, end in _runs(marked, _BASE64_NEEDLE):
        while end < len(text) and text[end] == "=":
            end += 1  # the padding goes with the run
        runs.append((start, end, list(_base64_decodings(text[start:end].rstrip("=")))))
    if len(text) >= MIN_HEX_RUN and _HEX_NEEDLE in (hexes := _marked(text, _HEX_MARKS)):
        for start, end in _runs(hexes, _HEX_NEEDLE):
            runs.append((start, end, list(_hex_decodings(text[start:end]))))
    if not runs or not holds("\x00".join(d for _, _, found in runs for d in found)):
        return []
    return merge_spans([(s, e) for s, e, found in runs if any(holds(d) for d in found)])


def merge_spans(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """``spans`` sorted, overlapping ones joined (touching ones stay apart: each is replaced on
    its own, so scrubbing twice gives what scrubbing once did)."""
    out: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if out and start < out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out
