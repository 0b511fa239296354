"""Reading bodies for the scrubber: charsets, compression, and SSE streams as fields.

:mod:`dsh_testkit._secrets` scrubs text; this module turns what a body is on the wire into that
text and back, losslessly: the charset a body is read in, a ``Content-Encoding`` undone, and an
event stream cut into events whose ``data:`` fields are gathered by JSON path across events (so
a secret streamed a few characters per delta is seen whole).
"""

from __future__ import annotations

import codecs
import gzip
import json
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from ._errors import UnscrubbableBody

__all__ = [
    "Piece",
    "content_type",
    "cut_pieces",
    "data_line",
    "decompress",
    "gunzip",
    "rewrite_event",
    "split_events",
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


def text_encoding(body: bytes, headers: Mapping[str, Any]) -> str:
    """How to read ``body`` as text, losslessly: UTF-8 when it is, else the ``Content-Type``
    charset when it decodes, else Latin-1 (every byte is a character, and the ASCII of a key
    stays visible)."""
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        pass
    else:
        return "utf-8"
    match = _CHARSET.search(content_type(headers))
    if match is not None:
        try:
            name = codecs.lookup(match.group(1)).name
            if body.decode(name).encode(name) == body:
                return name
        except (LookupError, UnicodeError):
            pass
    if body[:2] in (b"\xff\xfe", b"\xfe\xff"):
        try:
            if body.decode("utf-16").encode("utf-16") == body:
                return "utf-16"
        except UnicodeError:
            pass
    return "latin-1"


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

_EVENT_END: Final = re.compile(r"\r\n\r\n|\n\n|\r\r")


def split_events(text: str) -> list[str]:
    """An SSE body cut into events, each with its terminating blank line (the last may lack it).

    ``"".join(split_events(text)) == text`` always holds.
    """
    events: list[str] = []
    start = 0
    for match in _EVENT_END.finditer(text):
        events.append(text[start : match.end()])
        start = match.end()
    if start < len(text):
        events.append(text[start:])
    return events


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
