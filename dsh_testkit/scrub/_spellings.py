"""A secret in other spellings: escapes, percent-encoding, HTML entities, base64, hex, and the
credentials a request presents.

:mod:`dsh_testkit.scrub._scrubber` finds secrets by their shape and by the names they are sent under.
A secret can also reach a body or a URL spelled otherwise than it is: percent-encoded
(``sk%2D…``, whole or in part, or twice), written with ``\\uXXXX`` or ``\\xXX`` escapes inside a
string that is itself JSON or code (one backslash or several: escapes one JSON level down), as
HTML character references (``&#x73;``, ``&#115;``, ``&lowbar;``), or, for the credential a
client sends in a header, repeated in the body in any of those spellings, or base64-encoded or
hex-encoded inside a longer text. This module recognises those spellings:

- :func:`encoded_runs` finds the runs of key and URL characters that hold an escape, and
  :func:`decodings` undoes the escapes (a few levels deep), so a shape or a known value hidden
  behind them is seen; the scrubber replaces such a run whole.
- :class:`KnownSecrets` holds the values a request presents as credentials
  (:func:`header_credentials`: each credential header's value, without its scheme word, a Basic
  credential's ``user:password`` and password, a cookie's values) and removes every spelling of
  them from texts, URLs and parsed JSON. Being known, a value's encodings are computed once and
  searched for as plain substrings: its base64 at each of the three byte alignments it can take
  inside a longer base64 text, in both alphabets (what a decoder at any offset would read back
  of it), and its hex in either case; a base64 or hex run holding one is replaced whole.

A value shorter than :data:`MIN_SECRET` characters is not looked for in texts: it would turn
ordinary words into ``<REDACTED>``; the header that carried it is still never stored. A value
holding ``<REDACTED>`` is what an earlier scrubbing left, not a secret.
"""

from __future__ import annotations

import base64
import binascii
import functools
import html
import json
import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Final
from urllib.parse import quote, quote_plus, unquote, unquote_plus

from ._encoded import merge_spans
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

_ESCAPE: Final = re.compile(
    r"%[0-9A-Fa-f]{2}"
    r"|\\u[0-9A-Fa-f]{4}|\\x[0-9A-Fa-f]{2}|\\/"
    r"|&#[0-9]{1,7};?|&#[xX][0-9A-Fa-f]{1,6};?|&[A-Za-z][A-Za-z0-9]{1,31};"
)
"""One escape: ``%XX``, ``\\uXXXX``, ``\\xXX``, ``\\/`` (the backslash may be doubled: the text of
a JSON string inside a JSON string), or an HTML character reference (numeric or named)."""
_RUN_CHARS: Final = r"A-Za-z0-9%\\\-._~+#;"
"""The characters of a run: a key's, a URL-encoded value's, a backslash escape's and an HTML
reference's (``&`` only where it starts a whole reference: ``&amp;#115;`` is one run, ``a&b=c``
two). Not ``/``, ``=``, quotes or spaces, so a run stays inside one path segment, query value or
JSON string."""


def _run_patterns(chars: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """A run of ``chars`` (a regular-expression class body) and HTML references, read forwards
    from an escape and backwards (on the reversed text) to where it starts."""
    forward = (
        r"(?:&#[0-9]{1,7};?|&#[xX][0-9A-Fa-f]{1,6};?|&[A-Za-z][A-Za-z0-9]{1,31};|[" + chars + "])*"
    )
    backward = (
        r"(?:;?[0-9]{1,7}#&|;?[0-9A-Fa-f]{1,6}[xX]#&|;[A-Za-z0-9]{0,30}[A-Za-z]&|[" + chars + "])*"
    )
    return re.compile(forward), re.compile(backward)


_RUN: Final = _run_patterns(_RUN_CHARS)
_UNESCAPE: Final = re.compile(r"\\+u([0-9A-Fa-f]{4})|\\+x([0-9A-Fa-f]{2})|\\+(/)")
_MAX_LEVELS: Final = 4
"""How many times a run is decoded (a value percent-encoded twice, an escape percent-encoded)."""
_CREDENTIAL_PIECES: Final = re.compile(r"[\s;,=]+")


def may_hide(text: str) -> bool:
    """``False`` only when ``text`` holds no escape a secret could hide behind (substring
    searches first: a JSON line's ``\\n`` escapes alone do not cost a regular-expression
    scan)."""
    return (
        "%" in text
        or "\\u" in text
        or "\\x" in text
        or "\\/" in text
        or "&#" in text
        or ("&" in text and ";" in text)
    ) and _ESCAPE.search(text) is not None


def encoded_runs(
    text: str, run: tuple[re.Pattern[str], re.Pattern[str]] = _RUN
) -> Iterator[tuple[int, int]]:
    """The ``(start, end)`` spans of ``text`` that are runs of key or URL characters (``run``)
    holding at least one escape (``%XX``, ``\\uXXXX``, ``\\xXX``, ``&#NN;``, ``&name;``), in
    order. Linear in ``len(text)``."""
    position = 0
    while True:
        found = _ESCAPE.search(text, position)
        if found is None:
            return
        at = found.start()
        before = run[1].match(text[position:at][::-1])
        after = run[0].match(text, found.end())
        assert before is not None and after is not None  # a starred class always matches
        end = after.end()
        while end > found.end() and text[end - 1] == "\\":
            end -= 1  # a backslash at the end escapes what follows (a JSON quote): not ours
        yield at - before.end(), end
        position = end


def _unescape(match: re.Match[str]) -> str:
    if match.group(3):
        return "/"
    return chr(int(match.group(1) or match.group(2), 16))


@functools.lru_cache(maxsize=512)
def decodings(run: str) -> tuple[str, ...]:
    """``run`` with its escapes undone, level by level (at most :data:`_MAX_LEVELS`): backslash
    escapes, HTML references, then percent-encoding, each level read with ``+`` kept and with
    ``+`` as a space (form encoding); every level returned. Cached: the shape rule and the
    known-secret rule read the same runs of a text, often twice (a check, then the scrub)."""
    out: list[str] = []
    for plus in (False, True):
        current = run
        for _ in range(_MAX_LEVELS):
            decoded = _UNESCAPE.sub(_unescape, current) if "\\" in current else current
            if "&" in decoded:
                decoded = html.unescape(decoded)
            if "%" in decoded:
                decoded = unquote_plus(decoded) if plus else unquote(decoded)
            if decoded == current:
                break
            out.append(decoded)
            current = decoded
    return tuple(dict.fromkeys(out))


def hidden(
    text: str,
    holds: Callable[[str], bool],
    run: tuple[re.Pattern[str], re.Pattern[str]] = _RUN,
) -> list[tuple[int, int]]:
    """The spans of :func:`encoded_runs` one of whose :func:`decodings` ``holds`` a secret."""
    if not may_hide(text):
        return []
    return [
        (start, end)
        for start, end in encoded_runs(text, run)
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


_TO_URLSAFE: Final = str.maketrans("+/", "-_")
_BASE64_STANDARD: Final = re.compile(r"[A-Za-z0-9+/]")
_BASE64_URLSAFE: Final = re.compile(r"[A-Za-z0-9_\-]")
_HEX_DIGIT: Final = re.compile(r"[0-9A-Fa-f]")


def base64_cores(data: bytes) -> set[str]:
    """What base64 shows of ``data`` wherever it stands in a longer byte string: for each of
    its three alignments to a base64 quantum, the characters that only ``data``'s bits decide
    (the first and last character it shares with its neighbours left out), in the standard and
    the URL-safe alphabet. A decoder reading ``data`` back from any base64 text reads one of
    them there."""
    cores: set[str] = set()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + data).decode("ascii")
        first = -(-8 * offset // 6)
        last = 8 * (offset + len(data)) // 6
        core = encoded[first:last]
        cores |= {core, core.translate(_TO_URLSAFE)}
    return cores


def _extend(text: str, start: int, end: int, alphabet: re.Pattern[str]) -> tuple[int, int]:
    """``start, end`` grown over the characters of ``alphabet`` on both sides (and ``=``
    padding after a base64 run): the whole run an encoded secret stands in."""
    while start > 0 and alphabet.match(text, start - 1):
        start -= 1
    while end < len(text) and alphabet.match(text, end):
        end += 1
    if alphabet is not _HEX_DIGIT:
        while end < len(text) and text[end] == "=":
            end += 1
    return start, end


def _occurrences(text: str, needle: str) -> Iterator[int]:
    at = text.find(needle)
    while at != -1:
        yield at
        at = text.find(needle, at + 1)


class KnownSecrets:
    """Values known to be secrets (a request's credentials), removed in every spelling.

    Looked for: each value as it is; percent-encoded (``quote`` with and without ``/`` kept,
    ``quote_plus``, upper- and lowercase hex); as a JSON string spells it (escaped quotes and
    backslashes, ``\\uXXXX`` for what is not ASCII); inside any run of escapes that decodes to
    it (:func:`encoded_runs`: backslash escapes, HTML references, percent-encoding, a few levels
    deep), which is then replaced whole; and base64- or hex-encoded (:func:`base64_cores`, its
    UTF-8 bytes in hex, lower- or uppercase), the base64 or hex run around it replaced whole.

    A value that holds another one is not looked for itself: every spelling of it holds a
    spelling of the shorter one, whose removal leaves it unreadable.
    """

    __slots__ = ("_base64", "_hex", "_plain", "_run", "_spellings", "secrets")

    def __init__(self, secrets: Iterable[str]) -> None:
        self.secrets = _longest_first(
            s for s in secrets if len(s) >= MIN_SECRET and REDACTED not in s
        )
        forms = _forms(self.secrets)
        self._spellings, self._base64, self._hex, self._plain, self._run = forms
        """The spellings looked for as they are; the base64 cores and hex forms (replaced with
        the run around them); what a decoded text is searched for (the values, their base64
        and hex); the characters of a run of escapes (a key's and a URL's, and the values' own:
        a credential with ``/`` or ``=`` in it, escaped in part, is one run)."""

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def _holds(self, text: str) -> bool:
        return any(form in text for form in self._plain)

    def in_text(self, text: str) -> bool:
        """Whether ``text`` holds one of the secrets in any spelling."""
        if not self.secrets:
            return False
        if any(spelling in text for spelling in self._spellings):
            return True
        if any(form in text for form in self._base64) or any(h in text for h in self._hex):
            return True
        return bool(hidden(text, self._holds, self._run))

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where ``text`` spells a secret: ``(start, end)`` spans to replace, sorted and merged
        (a run of escapes, a base64 or hex run, or the spelling itself)."""
        if not self.secrets:
            return []
        found = list(hidden(text, self._holds, self._run))
        for spelling in self._spellings:
            found += [(at, at + len(spelling)) for at in _occurrences(text, spelling)]
        for core in self._base64:
            alphabet = _BASE64_URLSAFE if ("-" in core or "_" in core) else _BASE64_STANDARD
            found += [
                _extend(text, at, at + len(core), alphabet) for at in _occurrences(text, core)
            ]
        for digits in self._hex:
            found += [
                _extend(text, at, at + len(digits), _HEX_DIGIT) for at in _occurrences(text, digits)
            ]
        return merge_spans(found)

    def text(self, text: str, replacement: str = REDACTED) -> str:
        """``text`` with every spelling of every secret replaced (idempotent)."""
        if not self.secrets or not self.in_text(text):
            return text
        for _ in range(_MAX_LEVELS):
            spans = self.spans(text)
            if not spans:
                break
            text = replace_spans(text, spans, replacement)
        return text

    def json(self, value: Any, replacement: str = REDACTED) -> Any:
        """A copy of a parsed JSON value (keys included) with :meth:`text` applied to every
        string; iterative, so deep nesting cannot exhaust the stack. The value itself when it
        holds none of the secrets (a copy otherwise).

        The quick check reads the value's JSON text: every spelling reads the same there (an
        escape's backslash doubled is still an escape, :data:`_UNESCAPE`), so a value whose text
        holds no spelling holds none in any string."""
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
                target[key] = self.text(item, replacement)
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


_Forms = tuple[
    tuple[str, ...],
    tuple[str, ...],
    tuple[str, ...],
    tuple[str, ...],
    tuple[re.Pattern[str], re.Pattern[str]],
]


@functools.lru_cache(maxsize=64)
def _forms(secrets: tuple[str, ...]) -> _Forms:
    """What :class:`KnownSecrets` searches for, computed once per set of credentials (a client
    sends the same one with every request)."""
    least = [s for s in secrets if not any(o != s and o in s for o in secrets)]
    spellings: set[str] = set()
    encoded: set[str] = set()
    hexes: set[str] = set()
    for secret in least:
        forms = {secret, quote(secret, safe=""), quote(secret), quote_plus(secret)}
        forms |= {json.dumps(secret)[1:-1], json.dumps(secret, ensure_ascii=False)[1:-1]}
        forms |= {_lower_hex(form) for form in forms if "%" in form}
        spellings |= forms
        data = secret.encode("utf-8", "surrogatepass")
        encoded |= base64_cores(data)
        hexes |= {data.hex(), data.hex().upper()}
    extra = sorted({c for s in least for c in s if not c.isspace() and c not in "\"'\\"})
    return (
        _longest_first(spellings),
        _longest_first(encoded),
        _longest_first(hexes),
        _longest_first({*least, *encoded, *hexes}),
        _run_patterns(_RUN_CHARS + re.escape("".join(extra))),
    )


def _longest_first(items: Iterable[str]) -> tuple[str, ...]:
    return tuple(sorted(set(items), key=lambda s: (-len(s), s)))


def _lower_hex(text: str) -> str:
    return re.sub(r"%[0-9A-F]{2}", lambda m: m.group(0).lower(), text)
