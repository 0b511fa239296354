"""Reading bodies for the scrubber: charsets, compression, and SSE streams as fields.

:mod:`dsh_testkit.scrub._scrubber` scrubs text; this module turns what a body is on the wire into that
text and back, losslessly: the charset a body is read in, a ``Content-Encoding`` undone, and an
event stream cut into events (by the core's one SSE splitter,
:func:`dsh_core.providers._sse.split_events`) whose ``data:`` fields are gathered by JSON path across events (so
a secret streamed a few characters per delta is seen whole).
"""

from __future__ import annotations

import codecs
import gzip
import json
import re
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from .._errors import UnscrubbableBody

__all__ = [
    "Piece",
    "content_type",
    "cut_pieces",
    "data_line",
    "decode_text",
    "decompress",
    "gunzip",
    "rewrite_event",
    "stream_fields",
    "text_encoding",
]

_MAX_DECOMPRESSED: Final = 64 * 2**20
"""A compressed body larger than this once decompressed is refused rather than scrubbed."""


def content_type(headers: Mapping[str, Any]) -> str:
    for name, value in headers.items():
        if name.lower() == "content-type":
            first = value[0] if isinstance(value, list) and value else value
            return str(first or "").lower()
    return ""


_CHARSET: Final = re.compile(r"charset\s*=\s*\"?([A-Za-z0-9_.:\-]+)")


_BOMS: Final = (
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xef\xbb\xbf", "utf-8"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)
"""Byte order marks, UTF-32's before UTF-16's (``FF FE 00 00`` starts with ``FF FE``)."""


def _lossless(body: bytes, codec: str) -> str | None:
    try:
        text = body.decode(codec)
    except (LookupError, UnicodeError):
        return None
    return text if text.encode(codec) == body else None


def decode_text(
    body: bytes, headers: Mapping[str, Any], holds: Callable[[str], bool] | None = None
) -> tuple[str, str, bytes]:
    """``body`` as text, losslessly: ``(text, codec, bom)`` with ``bom + text.encode(codec) ==
    body``.

    A byte order mark (UTF-8, UTF-16 or UTF-32, either order) is taken off the text, so a JSON
    body reads as JSON; then UTF-16 or UTF-32 without a mark when the first bytes' zeros say so
    (as JSON's own detection reads them: the first character is ASCII; such bytes are valid
    UTF-8 too, but UTF-8 text hardly ever holds zero bytes); then UTF-8 when the bytes are; the
    ``Content-Type`` charset when it decodes; else Latin-1, which keeps every byte (and the
    ASCII of a key visible). ``holds(text)`` says whether a text holds a secret: binary data that
    happens to read as UTF-16 is read as Latin-1 instead when only that view shows one.
    """
    for bom, codec in _BOMS:
        if body.startswith(bom):
            text = _lossless(body[len(bom) :], codec)
            if text is not None:
                return text, codec, bom
    if b"\x00" in body[:4]:  # UTF-8 text hardly ever holds a zero byte; UTF-16's ASCII does
        codec = json.detect_encoding(body)
        text = _lossless(body, codec) if codec != "utf-8" else None
        if text is not None and not (
            holds is not None and holds(body.decode("latin-1")) and not holds(text)
        ):
            return text, codec, b""
    text = _lossless(body, "utf-8")
    if text is not None:
        return text, "utf-8", b""
    match = _CHARSET.search(content_type(headers))
    if match is not None:
        try:
            codec = codecs.lookup(match.group(1)).name
        except LookupError:
            codec = ""
        text = _lossless(body, codec) if codec else None
        if text is not None:
            return text, codec, b""
    return body.decode("latin-1"), "latin-1", b""


def text_encoding(body: bytes, headers: Mapping[str, Any]) -> str:
    """The codec :func:`decode_text` reads ``body`` with."""
    return decode_text(body, headers)[1]


def gunzip(body: bytes) -> bytes:
    out = zlib.decompressobj(wbits=47)  # gzip or zlib header, detected
    data = out.decompress(body, _MAX_DECOMPRESSED)
    if out.unconsumed_tail:
        raise ValueError(f"larger than {_MAX_DECOMPRESSED} bytes once decompressed")
    return data


def decompress(body: Any, encoding: str, *, part: str) -> Any:
    """``body`` decoded from its ``Content-Encoding`` (innermost last, as HTTP lists them)."""
    if body is None or body in (b"", ""):
        return body
    data = body if isinstance(body, bytes) else str(body).encode("latin-1")
    for coding in reversed([c.strip().lower() for c in encoding.split(",") if c.strip()]):
        try:
            if coding in ("gzip", "x-gzip"):
                data = gzip.decompress(data)
            elif coding == "deflate":
                try:
                    data = zlib.decompress(data)
                except zlib.error:
                    data = zlib.decompress(data, -zlib.MAX_WBITS)
            elif coding != "identity":
                raise UnscrubbableBody(
                    f"the {part} is compressed with {coding!r}, which cannot be decoded here to "
                    "check it for secrets; it is not stored (send it uncompressed, gzip or "
                    "deflate)",
                    part=part,
                    reason=f"content-encoding {coding}",
                )
        except (OSError, EOFError, zlib.error) as exc:
            raise UnscrubbableBody(
                f"the {part} says Content-Encoding: {encoding} but does not decode ({exc}); it "
                "cannot be checked for secrets, so it is not stored",
                part=part,
                reason=f"undecodable {coding}",
            ) from None
    return data


# -------------------------------------------------------------------------------- streams
# (cut into events by the core's SSE splitter, dsh_core.providers._sse.split_events)


@dataclass(frozen=True, slots=True)
class Piece:
    event: int
    path: tuple[str | int, ...]
    text: str


_TEXT_PATH: Final = ("<data>",)
"""The field path of a ``data:`` line that is not JSON (its text is the field)."""


def data_line(event: str) -> tuple[int, int] | None:
    """Where the payload of an event's single ``data:`` line starts and ends, if it has one."""
    position = 0
    found: tuple[int, int] | None = None
    for line in event.splitlines(keepends=True):
        content = line.rstrip("\r\n")
        if content.startswith("data:"):
            if found is not None:
                return None  # several data lines: concatenated by the client, kept as they are
            start = position + 5 + (1 if content[5:6] == " " else 0)
            found = (start, position + len(content))
        position += len(line)
    return found


def _leaves(
    value: Any, path: tuple[str | int, ...], out: list[tuple[tuple[str | int, ...], str]]
) -> None:
    if isinstance(value, str):
        out.append((path, value))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _leaves(item, (*path, i), out)
    elif isinstance(value, dict):
        for key, item in value.items():
            _leaves(item, (*path, key), out)


def stream_fields(events: list[str]) -> dict[tuple[str | int, ...], list[Piece]]:
    """The string fields of a stream's ``data:`` payloads, by JSON path, in stream order."""
    fields: dict[tuple[str | int, ...], list[Piece]] = {}
    for index, event in enumerate(events):
        span = data_line(event)
        if span is None:
            continue
        payload = event[span[0] : span[1]]
        leaves: list[tuple[tuple[str | int, ...], str]] = []
        if payload[:1] in ("{", "["):
            try:
                _leaves(json.loads(payload), (), leaves)
            except ValueError:
                leaves = [(_TEXT_PATH, payload)]
        else:
            leaves = [(_TEXT_PATH, payload)]
        for path, text in leaves:
            fields.setdefault(path, []).append(Piece(index, path, text))
    return fields


def _set_path(value: Any, path: tuple[str | int, ...], new: str) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    value[head] = _set_path(value[head], rest, new)
    return value


def rewrite_event(event: str, changes: dict[tuple[str | int, ...], str]) -> str:
    span = data_line(event)
    assert span is not None  # the event had the fields that changed
    payload = event[span[0] : span[1]]
    if _TEXT_PATH in changes:
        new_payload = changes[_TEXT_PATH]
    else:
        value = json.loads(payload)
        for path, text in changes.items():
            value = _set_path(value, path, text)
        new_payload = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return event[: span[0]] + new_payload + event[span[1] :]


def cut_pieces(pieces: list[str], matches: list[tuple[int, int, str]]) -> list[str]:
    """Each piece's new text once every match (``start, end, replacement`` in the pieces'
    concatenation) is removed from the pieces it spans; the piece where a match starts keeps
    its replacement. Overlapping matches: the first one wins (the caller passes again)."""
    kept: list[tuple[int, int, str]] = []
    for start, end, replacement in sorted(matches):
        if not kept or start >= kept[-1][1]:
            kept.append((start, end, replacement))
    out = []
    offset = 0
    for text in pieces:
        p_start, p_end = offset, offset + len(text)
        offset = p_end
        result = []
        cursor = p_start
        for start, end, replacement in kept:
            if end <= p_start or start >= p_end:
                continue
            result.append(text[cursor - p_start : max(start, p_start) - p_start])
            if p_start <= start:
                result.append(replacement)
            cursor = min(end, p_end)
        result.append(text[cursor - p_start :])
        out.append("".join(result))
    return out
