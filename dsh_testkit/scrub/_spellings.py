"""A secret in other spellings: escapes, percent-encoding, and the credentials a request presents.

:mod:`dsh_testkit.scrub._scrubber` finds secrets by their shape and by the names they are sent under.
A secret can also reach a body or a URL spelled otherwise than it is: percent-encoded
(``sk%2D…``, whole or in part, or twice), written with ``\\uXXXX`` or ``\\xXX`` escapes inside a
string that is itself JSON or code, or, for the credential a client sends in a header, repeated
in the body in any of those spellings (a Basic credential's password once decoded). This module
recognises those spellings:

- :func:`encoded_runs` finds the runs of key and URL characters that hold an escape, and
  :func:`decodings` undoes the escapes (a few levels deep), so a shape or a known value hidden
  behind them is seen; the scrubber replaces such a run whole.
- :class:`KnownSecrets` holds the values a request presents as credentials
  (:func:`header_credentials`: each credential header's value, without its scheme word, a Basic
  credential's ``user:password`` and password, a cookie's values) and removes every spelling of
  them from texts, URLs and parsed JSON (whose escapes the parser already undid; a body in
  UTF-16 or UTF-32 is text once decoded).

A value shorter than :data:`MIN_SECRET` characters is not looked for in texts: it would turn
ordinary words into ``<REDACTED>``; the header that carried it is still never stored.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final
from urllib.parse import quote, quote_plus, unquote, unquote_plus

from ._rules import REDACTED

__all__ = [
    "MIN_SECRET",
    "KnownSecrets",
    "decodings",
    "encoded_runs",
    "header_credentials",
    "may_hide",
]

MIN_SECRET: Final = 8
"""The shortest credential value looked for in texts."""

_ESCAPE: Final = re.compile(r"%[0-9A-Fa-f]{2}|\\u[0-9A-Fa-f]{4}|\\x[0-9A-Fa-f]{2}")
_RUN: Final = re.compile(r"[A-Za-z0-9%\\\-._~+]*")
"""The characters of a run: a key's, a URL-encoded value's, and a backslash escape's. Not ``/``,
``=``, ``&`` or quotes, so a run stays inside one path segment, query value or JSON string."""
_UNESCAPE: Final = re.compile(r"\\u([0-9A-Fa-f]{4})|\\x([0-9A-Fa-f]{2})")
_MAX_LEVELS: Final = 4
"""How many times a run is decoded (a value percent-encoded twice, an escape percent-encoded)."""
_CREDENTIAL_PIECES: Final = re.compile(r"[\s;,=]+")


def may_hide(text: str) -> bool:
    """``False`` only when ``text`` holds no escape a secret could hide behind (substring
    searches first: a JSON line's ``\\n`` escapes alone do not cost a regular-expression
    scan)."""
    return ("%" in text or "\\u" in text or "\\x" in text) and _ESCAPE.search(text) is not None


def encoded_runs(text: str) -> Iterator[tuple[int, int]]:
    """The ``(start, end)`` spans of ``text`` that are runs of key or URL characters holding at
    least one escape (``%XX``, ``\\uXXXX``, ``\\xXX``), in order. Linear in ``len(text)``."""
    position = 0
    while True:
        found = _ESCAPE.search(text, position)
        if found is None:
            return
        at = found.start()
        before = _RUN.match(text[position:at][::-1])
        after = _RUN.match(text, at)
        assert before is not None and after is not None  # a starred class always matches
        yield at - before.end(), after.end()
        end = after.end()
        position = end


def _unescape(match: re.Match[str]) -> str:
    return chr(int(match.group(1) or match.group(2), 16))


def decodings(run: str) -> tuple[str, ...]:
    """``run`` with its escapes undone, level by level (at most :data:`_MAX_LEVELS`): each level
    read with ``+`` kept and with ``+`` as a space (form encoding), every level returned."""
    out: list[str] = []
    for plus in (False, True):
        current = run
        for _ in range(_MAX_LEVELS):
            decoded = _UNESCAPE.sub(_unescape, current) if "\\" in current else current
            if "%" in decoded:
                decoded = unquote_plus(decoded) if plus else unquote(decoded)
            if decoded == current:
                break
            out.append(decoded)
            current = decoded
    return tuple(dict.fromkeys(out))


def hidden(text: str, holds: Callable[[str], bool]) -> list[tuple[int, int]]:
    """The spans of :func:`encoded_runs` one of whose :func:`decodings` ``holds`` a secret."""
    if not may_hide(text):
        return []
    return [
        (start, end)
        for start, end in encoded_runs(text)
        if any(holds(decoded) for decoded in decodings(text[start:end]))
    ]


def replace_spans(text: str, spans: list[tuple[int, int]], replacement: str) -> str:
    if not spans:
        return text
    parts: list[str] = []
    last = 0
    for start, end in spans:
        parts += [text[last:start], replacement]
        last = end
    parts.append(text[last:])
    return "".join(parts)


def header_credentials(
    headers: Iterable[tuple[str, str]], is_credential_header: Callable[[str], bool]
) -> tuple[str, ...]:
    """Every value a request's credential headers present, as it may be repeated elsewhere.

    For each header ``is_credential_header`` names: its value whole, the value without its
    scheme word (``Bearer``, ``Token``, …), the pieces of a cookie or of ``a=b; c=d``, and for a
    ``Basic`` credential its decoded ``user:password`` and password. Values shorter than
    :data:`MIN_SECRET` are left out; longest first.
    """
    found: set[str] = set()
    for name, value in headers:
        if not is_credential_header(name):
            continue
        value = value.strip()
        found.add(value)
        scheme, _, rest = value.partition(" ")
        rest = rest.strip()
        if rest:
            found.add(rest)
        found.update(_CREDENTIAL_PIECES.split(value))
        if scheme.lower() == "basic" and rest:
            try:
                decoded = base64.b64decode(rest + "=" * (-len(rest) % 4), validate=True)
            except (binascii.Error, ValueError):
                continue
            text = decoded.decode("utf-8", "replace")
            found.add(text)
            if ":" in text:
                found.add(text.split(":", 1)[1])
    return tuple(sorted((s for s in found if len(s) >= MIN_SECRET), key=lambda s: (-len(s), s)))


class KnownSecrets:
    """Values known to be secrets (a request's credentials), removed in every spelling.

    Looked for: each value as it is; percent-encoded (``quote`` with and without ``/`` kept,
    ``quote_plus``, upper- and lowercase hex); as a JSON string spells it (escaped quotes and
    backslashes, ``\\uXXXX`` for what is not ASCII); and inside any run of escapes that decodes
    to it (:func:`encoded_runs`), which is then replaced whole.
    """

    __slots__ = ("_spellings", "secrets")

    def __init__(self, secrets: Iterable[str]) -> None:
        self.secrets = tuple(
            sorted({s for s in secrets if len(s) >= MIN_SECRET}, key=lambda s: (-len(s), s))
        )
        spellings: set[str] = set()
        for secret in self.secrets:
            forms = {secret, quote(secret, safe=""), quote(secret), quote_plus(secret)}
            forms |= {json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]}
            forms |= {_lower_hex(form) for form in forms if "%" in form}
            spellings |= forms
        self._spellings = tuple(sorted(spellings, key=lambda s: (-len(s), s)))

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def _holds(self, text: str) -> bool:
        return any(secret in text for secret in self.secrets)

    def in_text(self, text: str) -> bool:
        """Whether ``text`` holds one of the secrets in any spelling."""
        if not self.secrets:
            return False
        if any(spelling in text for spelling in self._spellings):
            return True
        return bool(hidden(text, self._holds))

    def text(self, text: str, replacement: str = REDACTED) -> str:
        """``text`` with every spelling of every secret replaced (idempotent)."""
        if not self.secrets:
            return text
        text = replace_spans(text, hidden(text, self._holds), replacement)
        for spelling in self._spellings:
            if spelling in text:
                text = text.replace(spelling, replacement)
        return text

    def json(self, value: Any, replacement: str = REDACTED) -> Any:
        """A copy of a parsed JSON value (keys included) with :meth:`text` applied to every
        string; iterative, so deep nesting cannot exhaust the stack. The value itself when it
        holds none of the secrets (a copy otherwise)."""
        if not self.secrets:
            return value
        if isinstance(value, str):
            return self.text(value, replacement)
        if not isinstance(value, (list, dict)):
            return value
        try:
            if not self.in_text(json.dumps(value, ensure_ascii=False)):
                return value
        except (TypeError, ValueError):
            pass  # not plain JSON: walk it
        root: list[Any] = [None]
        stack: list[tuple[Any, Any, Any]] = [(root, 0, value)]
        while stack:
            target, key, item = stack.pop()
            if isinstance(item, str):
                target[key] = self.text(item, replacement) if self.in_text(item) else item
            elif isinstance(item, list):
                copy: list[Any] = [None] * len(item)
                target[key] = copy
                stack.extend((copy, i, v) for i, v in enumerate(item))
            elif isinstance(item, dict):
                mapping: dict[Any, Any] = {}
                target[key] = mapping
                for k, v in item.items():
                    new_key = self.text(k, replacement) if isinstance(k, str) else k
                    mapping[new_key] = None
                    stack.append((mapping, new_key, v))
            else:
                target[key] = item
        return root[0]


def _lower_hex(text: str) -> str:
    return re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), text)
