"""The cassette file format: versioned YAML whose bodies read like the conversation.

vcrpy hands its serializer a dict of interactions whose bodies are opaque strings; this module
stores them so a diff of a re-recorded cassette reads like a diff of the conversation. Version 2
(written) keeps each body as ONE YAML literal block, which the C YAML loader reads as a single
string, and parses it with the C ``json`` module only when it is needed:

- JSON bodies as laid-out JSON (``body: {json: |  {"model": …}}``): one top-level key a line,
  one element a line of each top-level list (a request's messages, its tools), non-ASCII kept;
  re-emitted compact when replayed;
- ``text/event-stream`` bodies as their text (``body: {sse: |  data: {…}``), one event per line
  and the blank line between events, exactly as the server sent them; replay cuts them into
  events (one stream chunk each) when a response is first played;
- other text as ``{text: …}``, anything else as ``{base64: …}``.

Version 1 (still read, no longer written) stored JSON bodies parsed into YAML nodes and SSE
bodies as lists of events: building ~100,000 YAML nodes per 3 MB made loading 10× slower than
vcrpy's own format (see BENCHMARKS.md §4).

Every file starts with ``format: dsh-cassette`` and ``version``; any other version is refused,
never migrated. Output is deterministic: the pure-Python YAML emitter, insertion-ordered keys,
sorted header names, ``\\n`` line endings and UTF-8 on every machine. The metadata's
``scrubChecksum`` (CRC-32 of the file and the scrub rules it was written under) lets a load skip
re-scrubbing what these rules already wrote; a file edited by hand fails the check and is
scrubbed again as it loads.
"""

from __future__ import annotations

import base64
import gc
import json
import os
import re
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import yaml

from dsh_core.providers._sse import split_events

from .._errors import CassetteError, CassetteFormatError
from .._replace_file import replace_file

__all__ = [
    "CASSETTE_FORMAT",
    "CASSETTE_FORMAT_VERSION",
    "CassettePersister",
    "CassetteSerializer",
    "is_event_stream",
    "response_chunks",
]

CASSETTE_FORMAT: Final = "dsh-cassette"
CASSETTE_FORMAT_VERSION: Final = 2
"""The cassette format version written (version 1 is still read)."""
_READ_VERSIONS: Final = (1, 2)


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


_STYLES: Final[dict[str, tuple[tuple[str, str], bool]]] = {
    "compact": ((",", ":"), False),
    "ascii": ((",", ":"), True),
    "spaced": ((", ", ": "), False),
    "spaced-ascii": ((", ", ": "), True),
}
"""How a JSON payload was written (separators, ``\\u`` escapes); ``compact`` is the default."""


def _render(value: Any, style: str) -> str:
    separators, ascii_only = _STYLES[style]
    return json.dumps(value, ensure_ascii=ascii_only, separators=separators)


def _decode_event(event: Any, where: str) -> str:
    if isinstance(event, Mapping):
        kind = next(iter(event), None)
        value = event.get(kind) if isinstance(kind, str) else None
        style = event.get("style", "compact")
        extra = set(event) - {kind, "style"} if kind == "data" else set(event) - {kind}
        if not extra:
            if kind == "data" and isinstance(value, (dict, list)) and style in _STYLES:
                return f"data: {_render(value, style)}\n\n"
            if kind == "dataText" and isinstance(value, str):
                return f"data: {value}\n\n"
            if kind == "comment" and isinstance(value, str):
                return f": {value}\n\n"
            if kind == "raw" and isinstance(value, str):
                return value
    raise _FormatError(
        f"{where}: an SSE event must be one of {{data: object, style?}}, {{dataText: str}}, "
        f"{{comment: str}} or {{raw: str}}, got {event!r:.80}"
    )


class _FormatError(ValueError):
    """Raised inside (de)serialization; the persister re-raises it with the cassette path (as
    :class:`CassetteFormatError`), the trace reader as a ``TraceError``. A ``ValueError``, as
    every "this file does not read" error of the package is."""


def _content_type(headers: Mapping[str, Any]) -> str:
    for name, value in headers.items():
        if name.lower() == "content-type":
            first = value[0] if isinstance(value, list) and value else value
            return str(first or "").lower()
    return ""


def is_event_stream(headers: Mapping[str, Any]) -> bool:
    """Whether response headers declare a ``text/event-stream`` body."""
    return _content_type(headers).startswith("text/event-stream")


def _encode_body(body: Any, headers: Mapping[str, Any], *, sse: bool) -> dict[str, Any] | None:
    """A body in format 2: one literal block per body (see the module docstring)."""
    if body is None or body in (b"", ""):
        return None
    if isinstance(body, bytes):
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError:
            return {"base64": base64.b64encode(body).decode("ascii")}
    else:
        text = str(body)
    if sse and is_event_stream(headers):
        return {"sse": text}
    try:
        parsed = json.loads(text)
    except ValueError:
        return {"text": text}
    return {"json": _pretty(parsed)}


def _inline(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def _pretty(value: Any) -> str:
    """JSON laid out for diffs: one top-level key a line, and one element a line of each
    top-level list (a chat request's messages and tools: a changed message is a changed line).
    Deeper values stay on their line, so a 100-message request is ~100 lines, not ~500."""

    def listed(items: list[Any], indent: str) -> str:
        if not items:
            return "[]"
        inner = ",\n".join(f"{indent}  {_inline(item)}" for item in items)
        return f"[\n{inner}\n{indent}]"

    if isinstance(value, dict) and value:
        lines = []
        for key, item in value.items():
            shown = listed(item, "  ") if isinstance(item, list) else _inline(item)
            lines.append(f"  {_inline(key)}: {shown}")
        return "{\n" + ",\n".join(lines) + "\n}\n"
    if isinstance(value, list):
        return listed(value, "") + "\n"
    return _inline(value) + "\n"


def _decode_body_v2(
    body: Any, where: str, *, response: bool
) -> tuple[str | bytes | None, list[bytes] | None]:
    """A format-2 body as vcrpy holds it: request JSON kept pretty (matching parses it once,
    lazily), response JSON compact (what the client reads), SSE as its text."""
    if body is None:
        return None, None
    if isinstance(body, Mapping) and len(body) == 1:
        ((kind, value),) = body.items()
        if isinstance(value, str):
            if kind == "json":
                if not response:
                    return value, None
                try:
                    return _compact(json.loads(value)), None
                except ValueError:
                    raise _FormatError(f"{where}.json: not valid JSON") from None
            if kind in ("text", "sse"):
                return value, None
            if kind == "base64":
                return base64.b64decode(value), None
    raise _FormatError(
        f"{where}: a body must be one of {{json: str}}, {{text: str}}, {{base64: str}} or "
        f"{{sse: str}}, got {body!r:.80}"
    )


def _decode_body(body: Any, where: str) -> tuple[str | bytes | None, list[bytes] | None]:
    """The body text and, for SSE, its events as separate byte chunks."""
    if body is None:
        return None, None
    if isinstance(body, Mapping) and len(body) == 1:
        ((kind, value),) = body.items()
        if kind == "json":
            return _compact(value), None
        if kind == "text" and isinstance(value, str):
            return value, None
        if kind == "base64" and isinstance(value, str):
            return base64.b64decode(value), None
        if kind == "sse" and isinstance(value, list):
            events = [_decode_event(e, f"{where}.sse[{i}]") for i, e in enumerate(value)]
            return "".join(events), [e.encode("utf-8") for e in events]
    raise _FormatError(
        f"{where}: a body must be one of {{json: …}}, {{text: str}}, {{base64: str}} or "
        f"{{sse: [events]}}, got {body!r:.80}"
    )


def _single(values: Any) -> Any:
    return values[0] if isinstance(values, list) and len(values) == 1 else values


def _sorted_headers(headers: Mapping[str, Any]) -> dict[str, Any]:
    """Lowercased, sorted names; a single value as a string, repeated values as a list."""
    return {name.lower(): _single(headers[name]) for name in sorted(headers, key=str.lower)}


def response_chunks(response: Mapping[str, Any]) -> list[bytes]:
    """The byte chunks a replayed response delivers: one per SSE event, else the whole body.

    An SSE body's events are cut and encoded when the response is first played, and kept on
    the response (``body["chunks"]``) for the next play.
    """
    body = response.get("body") or {}
    chunks = body.get("chunks")
    if chunks is not None:
        return [c if isinstance(c, bytes) else str(c).encode("utf-8") for c in chunks]
    built = _response_chunks(response)
    if isinstance(body, dict) and len(built) > 1:
        body["chunks"] = built
    return built


def _response_chunks(response: Mapping[str, Any]) -> list[bytes]:
    body = response.get("body") or {}
    string = body.get("string")
    if string is None or string in (b"", ""):
        return []
    data = string if isinstance(string, bytes) else str(string).encode("utf-8")
    if is_event_stream(response.get("headers") or {}):
        try:
            return [e.encode("utf-8") for e in split_events(data.decode("utf-8"))]
        except UnicodeDecodeError:
            pass
    return [data]


# --------------------------------------------------------------------------------------------
# YAML with literal blocks and one-line SSE events


class _Flow(dict[str, Any]):
    """A mapping emitted in flow style (one SSE event per line)."""


class _Dumper(yaml.SafeDumper):
    """The pure-Python emitter: the same bytes on every machine, with or without libyaml.

    Never an anchor or an alias, even for a value met twice (a header list two interactions
    share): the loader refuses aliases (:func:`_load_yaml`)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


_YAML_BREAKS: Final = frozenset("\r\x85\u2028\u2029")
"""Characters YAML reads as line breaks: a string holding one is written double-quoted (with
escapes), because a plain, single-quoted or literal scalar would fold it on load."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style: str | None = None
    if not _YAML_BREAKS.isdisjoint(value):
        style = '"'
    elif "\n" in value:
        style = "|"
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


def _represent_flow(dumper: yaml.SafeDumper, value: _Flow) -> yaml.Node:
    return dumper.represent_mapping("tag:yaml.org,2002:map", value.items(), flow_style=True)


_Dumper.add_representer(str, _represent_str)
_Dumper.add_representer(_Flow, _represent_flow)


def _dump_yaml(data: Any) -> str:
    text: str = yaml.dump(
        data,
        Dumper=_Dumper,
        sort_keys=False,
        allow_unicode=True,
        default_flow_style=False,
        width=2**30,
        indent=2,
    )
    return text


_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _NoAliasLoader(_BaseLoader):  # type: ignore[misc]  # CSafeLoader has no stubs
    """The safe loader (C when libyaml is there), refusing aliases.

    An alias repeats a whole node: a 234 KB file of ``- *I`` aliases to one 200 KB interaction
    expands to gigabytes once each interaction is decoded. The writer never emits one (see
    :class:`_Dumper`), so a cassette that holds one is refused. A node met a second time while
    constructing is an alias (anchors are composed into one shared node)."""

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        if node in self.constructed_objects:
            mark = node.start_mark
            raise _FormatError(
                f"a YAML alias repeats the node at line {mark.line + 1}, column "
                f"{mark.column + 1}: dsh cassettes never hold aliases (each one copies a whole "
                "node: a small file could expand to gigabytes); record the cassette again"
            )
        return super().construct_object(node, deep)


def _load_yaml(text: str | bytes) -> Any:
    # Without an anchor (``&``) there can be no alias: the plain loader, at full speed. With
    # one, the checking loader (its Python hook costs ~10 % on a node-heavy version 1 file).
    anchored = b"&" in text if isinstance(text, bytes) else "&" in text
    loader = _NoAliasLoader if anchored else _BaseLoader
    # A cassette's parsed JSON bodies make ~100,000 YAML nodes per 3 MB, all kept alive until
    # the document is built: the cyclic collector would rescan that growing heap again and
    # again for garbage that is not there (half the load time). It runs after the load instead.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return yaml.load(text, Loader=loader)
    finally:
        if collecting:
            gc.enable()


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """A YAML error in one line: what and where (not the quoted snippet of the file)."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem:
        mark = exc.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        context = f"{exc.context}: " if exc.context else ""
        return f"{context}{exc.problem}{where}"
    return " ".join(str(exc).split())


class CassetteSerializer:
    """vcrpy serializer: vcrpy's interaction dict ⇄ the dsh-cassette YAML document."""

    @staticmethod
    def serialize(data: Mapping[str, Any]) -> str:
        interactions = []
        for interaction in data.get("interactions") or []:
            request = interaction["request"]
            response = interaction["response"]
            req_headers = request.get("headers") or {}
            resp_headers = response.get("headers") or {}
            req_out: dict[str, Any] = {
                "method": request["method"],
                "uri": request["uri"],
                "headers": _sorted_headers(req_headers),
            }
            req_body = _encode_body(request.get("body"), req_headers, sse=False)
            if req_body is not None:
                req_out["body"] = req_body
            status = response.get("status") or {}
            resp_out: dict[str, Any] = {
                "status": _Flow({"code": status.get("code"), "message": status.get("message")}),
                "headers": _sorted_headers(resp_headers),
            }
            resp_body = _encode_body(
                (response.get("body") or {}).get("string"), resp_headers, sse=True
            )
            if resp_body is not None:
                resp_out["body"] = resp_body
            interactions.append({"request": req_out, "response": resp_out})
        document: dict[str, Any] = {"format": CASSETTE_FORMAT, "version": CASSETTE_FORMAT_VERSION}
        if data.get("metadata"):
            document["metadata"] = dict(data["metadata"])
        document["interactions"] = interactions
        return _dump_yaml(document)

    @staticmethod
    def deserialize(text: str | bytes) -> dict[str, Any]:
        try:
            document = _load_yaml(text)
        except yaml.YAMLError as exc:
            raise _FormatError(f"not valid YAML: {_yaml_problem(exc)}") from None
        except RecursionError:
            raise _FormatError("not valid YAML: nested too deeply") from None
        if not isinstance(document, Mapping) or document.get("format") != CASSETTE_FORMAT:
            raise _FormatError(
                f"not a dsh cassette (no 'format: {CASSETTE_FORMAT}' at the top); "
                "delete it and record it again"
            )
        version = document.get("version")
        if version not in _READ_VERSIONS:
            raise _FormatError(
                f"cassette format version {version!r}; this dsh-testkit reads versions "
                f"{', '.join(map(str, _READ_VERSIONS))} (cassettes are re-recorded, never "
                "migrated): delete it and record it again (pytest --dsh-record-mode=once, "
                "or use_cassette(..., mode='once'))"
            )
        raw = document.get("interactions")
        if not isinstance(raw, list):
            raise _FormatError(f"'interactions' must be a list, not {type(raw).__name__}")
        interactions = []
        for i, interaction in enumerate(raw):
            where = f"interactions[{i}]"
            try:
                if not isinstance(interaction, Mapping):
                    raise _FormatError(
                        f"{where}: an interaction must be a mapping with request and response, "
                        f"not {type(interaction).__name__}"
                    )
                request = interaction["request"]
                response = interaction["response"]
                for part, value in (("request", request), ("response", response)):
                    if not isinstance(value, Mapping):
                        raise _FormatError(
                            f"{where}.{part} must be a mapping, not {type(value).__name__}"
                        )
                if version == 1:
                    req_body, _ = _decode_body(request.get("body"), f"{where}.request.body")
                    resp_body, chunks = _decode_body(response.get("body"), f"{where}.response.body")
                else:
                    req_body, _ = _decode_body_v2(
                        request.get("body"), f"{where}.request.body", response=False
                    )
                    resp_body, chunks = _decode_body_v2(
                        response.get("body"), f"{where}.response.body", response=True
                    )
                out_request = {
                    "method": str(request["method"]),
                    "uri": str(request["uri"]),
                    "body": req_body,
                    "headers": {k: [v] for k, v in (request.get("headers") or {}).items()},
                }
                status = response["status"]
                out_response: dict[str, Any] = {
                    "status": {"code": int(status["code"]), "message": status.get("message")},
                    "headers": {
                        k: list(v) if isinstance(v, list) else [v]
                        for k, v in (response.get("headers") or {}).items()
                    },
                    "body": {"string": resp_body if resp_body is not None else b""},
                }
                if chunks is not None:
                    out_response["body"]["chunks"] = chunks
            except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
                if isinstance(exc, _FormatError):
                    raise
                raise _FormatError(
                    f"{where}: malformed interaction ({type(exc).__name__}: {exc!s:.200})"
                ) from None
            interactions.append({"request": out_request, "response": out_response})
        out: dict[str, Any] = {"interactions": interactions}
        metadata = document.get("metadata")
        if metadata:
            if not isinstance(metadata, Mapping):
                raise _FormatError(f"'metadata' must be a mapping, not {type(metadata).__name__}")
            out["metadata"] = dict(metadata)
        return out


_CHECKSUM_KEY: Final = "scrubChecksum"
_CHECKSUM_PLACEHOLDER: Final = "crc32:--------"
_CHECKSUM_LINE: Final = re.compile(rf"^  {_CHECKSUM_KEY}: (crc32:[0-9a-f]{{8}})$", re.MULTILINE)


def _checksum(text: str, fingerprint: str) -> str:
    """The checksum of a cassette's text (its own checksum line holding the placeholder)."""
    crc = zlib.crc32(text.encode("utf-8"), zlib.crc32(fingerprint.encode("utf-8") + b"\n"))
    return f"crc32:{crc:08x}"


def _checksum_bytes(raw: bytes, start: int, end: int, fingerprint: str) -> str:
    """:func:`_checksum` of a file's bytes whose checksum value sits at ``raw[start:end]``
    (computed around it, without copying the file)."""
    view = memoryview(raw)
    crc = zlib.crc32(fingerprint.encode("utf-8") + b"\n")
    crc = zlib.crc32(view[:start], crc)
    crc = zlib.crc32(_CHECKSUM_PLACEHOLDER.encode("ascii"), crc)
    crc = zlib.crc32(view[end:], crc)
    return f"crc32:{crc:08x}"


class CassettePersister:
    """vcrpy persister: UTF-8, ``\\n`` line endings, atomic writes, errors naming the file.

    ``metadata`` is merged into the cassette's metadata on every save (the recorder's note on
    what was recorded against); ``loaded_metadata`` is what the file held when it was read.
    ``fingerprint`` names the scrub rules in force: every save records a checksum of the file
    under them, and :attr:`verified` tells whether a loaded file still matches its checksum
    (then nothing in it needs scrubbing again).
    """

    def __init__(self, metadata: Mapping[str, Any] | None = None, *, fingerprint: str = "") -> None:
        self.metadata = dict(metadata or {})
        self.loaded_metadata: dict[str, Any] = {}
        self.fingerprint = fingerprint
        self.verified = False
        """The loaded file is as these scrub rules wrote it (its checksum matches)."""

    def load_cassette(self, cassette_path: str | os.PathLike[str], serializer: Any) -> Any:
        from vcr.persisters.filesystem import CassetteNotFoundError
        from vcr.serialize import deserialize

        path = Path(cassette_path)
        if not path.is_file():
            raise CassetteNotFoundError()
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise CassetteError(
                f"cannot read cassette {path}: {exc.strerror or exc}", path=str(path)
            ) from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise CassetteFormatError(
                f"cassette {path} is not UTF-8 text", path=str(path)
            ) from None
        if not text or text.isspace():  # (no stripped copy of a 3 MB file)
            raise CassetteNotFoundError()
        try:
            # The bytes, checked UTF-8 above: the C YAML reader takes them as they are, where a
            # str is first encoded back to UTF-8 (a copy of the whole file).
            loaded = deserialize(raw, serializer)
        except _FormatError as exc:
            raise CassetteFormatError(f"cassette {path}: {exc}", path=str(path)) from None
        if len(loaded) == 3:
            self.loaded_metadata = dict(loaded[2])
            self.loaded_metadata.pop(_CHECKSUM_KEY, None)
        # The metadata (and its checksum line) comes before the interactions.
        head_end = text.find("\ninteractions:")
        match = _CHECKSUM_LINE.search(text, 0, head_end if head_end >= 0 else len(text))
        if match is not None:
            start = len(text[: match.start(1)].encode("utf-8"))
            end = start + len(match.group(1))
            self.verified = match.group(1) == _checksum_bytes(raw, start, end, self.fingerprint)
        return loaded

    def save_cassette(
        self, cassette_path: str | os.PathLike[str], cassette_dict: dict[str, Any], serializer: Any
    ) -> None:
        from vcr.serialize import serialize

        path = Path(cassette_path)
        metadata = {**self.loaded_metadata, **dict(cassette_dict.get("metadata") or {})}
        metadata.update(self.metadata)
        metadata.pop(_CHECKSUM_KEY, None)
        metadata[_CHECKSUM_KEY] = _CHECKSUM_PLACEHOLDER
        text = serialize({**cassette_dict, "metadata": metadata}, serializer)
        line = f"  {_CHECKSUM_KEY}: {_CHECKSUM_PLACEHOLDER}\n"
        if line in text:  # our serializer; another one (vcrpy's own) is simply not sealed
            sealed = f"  {_CHECKSUM_KEY}: {_checksum(text, self.fingerprint)}\n"
            text = text.replace(line, sealed, 1)
        try:
            replace_file(path, text)
        except OSError as exc:  # the file left as it was; the cassette's path named
            raise CassetteError(
                f"cannot write cassette {path}: {exc.strerror or exc}", path=str(path)
            ) from None
