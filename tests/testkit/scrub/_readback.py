"""Every spelling a credential can take, and a judge that reads a credential back from any output.

The judge shares no code with ``dsh_testkit.scrub``: it decodes whatever it meets (backslash
escapes with any number of backslashes, ``\\/``, percent-encoding with and without ``+`` as a
space, HTML references, base64 in either alphabet from each of a run's first four characters,
hex at both nibble offsets, text with NULs between its characters, bytes read as UTF-16 or
UTF-32 at every offset), a few levels deep, and says how it read the secret back. The tests'
property is "the secret cannot be read back", not "the scrubber ran".
"""

from __future__ import annotations

import base64
import binascii
import html
import re
from collections.abc import Callable, Iterator
from urllib.parse import quote, quote_plus, unquote, unquote_plus

__all__ = ["BODY_CHARSETS", "SPELLINGS", "Spelling", "reads_back"]

# ----------------------------------------------------------------------------- spellings


def _u(c: str, upper: bool = False) -> str:
    return ("\\u%04X" if upper else "\\u%04x") % ord(c)


def _every_char_u(t: str, upper: bool = False) -> str:
    return "".join(_u(c, upper) for c in t)


def _one_char_u(t: str, i: int) -> str:
    return t[:i] + _u(t[i]) + t[i + 1 :]


def _base64_inside(t: str, before: int, *, urlsafe: bool = False, pad: bool = True) -> str:
    """``t`` base64-encoded inside a longer byte string: ``before`` bytes ahead of it (0, 1, 2:
    the three alignments of its first byte in a quantum) and five after it."""
    raw = b"P" * before + t.encode() + b"SSSSS"
    encoded = (base64.urlsafe_b64encode if urlsafe else base64.b64encode)(raw).decode()
    return encoded if pad else encoded.rstrip("=")


Spelling = tuple[str, str, Callable[[str], str]]
"""``(name, kind, build)``. ``kind`` says where the spelling stands: ``"json"`` is written as is
inside a JSON string literal of the body (the parser undoes its escapes); ``"text"`` is the
string's value itself (after parsing), a URL query value or a log line."""

SPELLINGS: list[Spelling] = [
    ("raw", "text", lambda t: t),
    ("json-u-all", "json", _every_char_u),
    ("json-u-all-upper", "json", lambda t: _every_char_u(t, upper=True)),
    ("json-u-first", "json", lambda t: _one_char_u(t, 0)),
    ("json-u-middle", "json", lambda t: _one_char_u(t, len(t) // 2)),
    ("json-u-last", "json", lambda t: _one_char_u(t, len(t) - 1)),
    (
        "json-u-every-other",
        "json",
        lambda t: "".join(_u(c) if i % 2 else c for i, c in enumerate(t)),
    ),
    ("json-in-json-u-all", "json", lambda t: _every_char_u(t).replace("\\", "\\\\")),
    ("json-slash-escape", "json", lambda t: t.replace("/", "\\/")),
    ("text-u-all", "text", _every_char_u),
    ("text-x-all", "text", lambda t: "".join(f"\\x{ord(c):02x}" for c in t)),
    ("text-double-backslash-u", "text", lambda t: _every_char_u(t).replace("\\", "\\\\")),
    ("percent-all", "text", lambda t: "".join(f"%{b:02X}" for b in t.encode())),
    ("percent-all-lower", "text", lambda t: "".join(f"%{b:02x}" for b in t.encode())),
    ("percent-quote", "text", lambda t: quote(t, safe="")),
    ("percent-twice", "text", lambda t: quote("".join(f"%{b:02X}" for b in t.encode()), safe="")),
    ("percent-one", "text", lambda t: t[:3] + f"%{ord(t[3]):02X}" + t[4:]),
    ("form-plus", "text", quote_plus),
    ("base64-standard-0", "text", lambda t: _base64_inside(t, 0)),
    ("base64-standard-1", "text", lambda t: _base64_inside(t, 1)),
    ("base64-standard-2", "text", lambda t: _base64_inside(t, 2)),
    ("base64-standard-1-unpadded", "text", lambda t: _base64_inside(t, 1, pad=False)),
    ("base64-urlsafe-0", "text", lambda t: _base64_inside(t, 0, urlsafe=True)),
    ("base64-urlsafe-1", "text", lambda t: _base64_inside(t, 1, urlsafe=True)),
    ("base64-urlsafe-2-unpadded", "text", lambda t: _base64_inside(t, 2, urlsafe=True, pad=False)),
    ("base64-alone", "text", lambda t: base64.b64encode(t.encode()).decode()),
    ("base64-alone-unpadded", "text", lambda t: base64.b64encode(t.encode()).decode().rstrip("=")),
    (
        "basic-credential",
        "text",
        lambda t: "Basic " + base64.b64encode(b"me:" + t.encode()).decode(),
    ),
    ("hex-lower", "text", lambda t: t.encode().hex()),
    ("hex-upper", "text", lambda t: t.encode().hex().upper()),
    ("hex-odd-offset", "text", lambda t: "a" + t.encode().hex() + "f"),
    ("html-hex-references", "text", lambda t: "".join(f"&#x{ord(c):x};" for c in t)),
    ("html-decimal-references", "text", lambda t: "".join(f"&#{ord(c)};" for c in t)),
    ("html-amp-wrapped", "text", lambda t: "".join(f"&amp;#{ord(c)};" for c in t)),
]
"""Spellings of a secret inside one string. Whole-body spellings (UTF-16 and UTF-32 bodies) are
the transport's: see :data:`BODY_CHARSETS`."""

BODY_CHARSETS = ("utf-8", "utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le")

# ----------------------------------------------------------------------------------- judge

_BASE64_RUN = re.compile(r"[A-Za-z0-9+/_\-]{12,}")
_HEX_RUN = re.compile(r"[0-9a-fA-F]{16,}")
_ANY_ESCAPE = re.compile(r"\\+[ux/]|%[0-9a-fA-F]{2}|&")
_BACKSLASHED = re.compile(r"\\+u([0-9a-fA-F]{4})|\\+x([0-9a-fA-F]{2})|\\+(/)")


def _unescaped(text: str) -> str:
    def one(match: re.Match[str]) -> str:
        if match.group(3):
            return "/"
        return chr(int(match.group(1) or match.group(2), 16))

    text = _BACKSLASHED.sub(one, text)
    if "&" in text:
        text = html.unescape(text)
    if "%" in text:
        text = unquote(text)
    return text


def _from_base64(text: str) -> Iterator[str]:
    for match in _BASE64_RUN.finditer(text):
        run = match.group(0).replace("-", "+").replace("_", "/")
        for skip in range(4):
            piece = run[skip:]
            piece = piece[: len(piece) - 1] if len(piece) % 4 == 1 else piece
            try:
                data = base64.b64decode(piece + "=" * (-len(piece) % 4), validate=True)
            except (binascii.Error, ValueError):
                continue
            yield data.decode("latin-1")


def _from_hex(text: str) -> Iterator[str]:
    for match in _HEX_RUN.finditer(text):
        for skip in (0, 1):
            piece = match.group(0)[skip:]
            yield bytes.fromhex(piece[: len(piece) - len(piece) % 2]).decode("latin-1")


def _readings(text: str, levels: int = 4) -> Iterator[tuple[str, str]]:
    """``(how, text)`` for ``text`` and everything it decodes to, ``levels`` deep."""
    frontier = [("as is", text)]
    seen: set[str] = set()
    for _ in range(levels):
        following: list[tuple[str, str]] = []
        for how, current in frontier:
            if current in seen:
                continue
            seen.add(current)
            yield how, current
            if _ANY_ESCAPE.search(current):
                following.append((how + " > unescaped", _unescaped(current)))
                if "+" in current and "%" in current:
                    following.append((how + " > form", unquote_plus(current)))
            if "\x00" in current:
                following.append((how + " > NULs dropped", current.replace("\x00", "")))
            following += [(how + " > base64", d) for d in _from_base64(current)]
            following += [(how + " > hex", d) for d in _from_hex(current)]
        frontier = following


def reads_back(secret: str, data: str | bytes) -> str | None:
    """How ``secret`` can be read back from ``data`` (``None``: it cannot)."""
    texts: list[tuple[str, str]] = []
    if isinstance(data, bytes):
        texts.append(("utf-8", data.decode("utf-8", "replace")))
        for codec, width in (
            ("utf-16-le", 2),
            ("utf-16-be", 2),
            ("utf-32-le", 4),
            ("utf-32-be", 4),
        ):
            for skip in range(width):
                texts.append((f"{codec}+{skip}", data[skip:].decode(codec, "ignore")))
    else:
        texts.append(("text", data))
    for label, text in texts:
        for how, reading in _readings(text):
            if secret in reading:
                return f"{label}: {how}"
    return None
