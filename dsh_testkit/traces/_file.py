"""The trace file: what ``dsh-testkit proxy`` and :meth:`RequestCapture.save` write.

JSON Lines, UTF-8, ``\\n`` endings. The first line is the header ``{"format": "dsh-trace",
"version": 1, "source": "proxy" | "capture" | …}`` (and ``"scenario"``, the test or scenario the
file records, when the writer was given one: the pytest cache baseline writes the test's node
id, which ``dsh-testkit compare`` matches runs by); every further line is one exchange
(:meth:`Exchange.to_json`: ``index``, ``endpoint``, ``url``, ``conversation``, ``started``,
``firstByte``, ``finished``, ``status``, ``request``, ``response``, ``usage``), appended and
flushed as soon as the exchange completes, so a crash loses at most the exchange in flight; an
unfinished last line is dropped on reading with a note. Captures add ``headers`` (credentials
redacted) and ``requestText`` when the body bytes are not the compact JSON of ``request``.
Credentials never reach the file: the writer scrubs every string that looks like a key.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from types import TracebackType
from typing import IO, Any, Final, Self

from dsh_core import loads_json

from .._secrets import _may_hold_key, scrub_json
from ._errors import TraceError

__all__ = [
    "TRACE_FORMAT",
    "TRACE_FORMAT_VERSION",
    "TraceWriter",
    "encode_record",
    "read_trace_lines",
]

TRACE_FORMAT: Final = "dsh-trace"
TRACE_FORMAT_VERSION: Final = 1
"""The one trace file version written and read; another version is refused."""


_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def _line(record: Mapping[str, Any]) -> str:
    return _ENCODER.encode(scrub_json(record)) + "\n"


def encode_record(record: Mapping[str, Any]) -> str:
    """An exchange record as one line of the file (compact JSON, no newline), not scrubbed."""
    return _ENCODER.encode(record)


class TraceWriter:
    """Appends exchanges to a trace file, one flushed line each (crash-safe).

    ``fsync=True`` also syncs every line to disk (survives a machine crash, costs a syscall).
    ``scenario`` names what the file records (a test's node id) in its header.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        source: str,
        fsync: bool = False,
        scenario: str | None = None,
    ) -> None:
        self.path = os.fspath(path)
        self._fsync = fsync
        self._file: IO[str] = open(self.path, "w", encoding="utf-8", newline="\n")  # noqa: SIM115 - closed by close()
        header = {"format": TRACE_FORMAT, "version": TRACE_FORMAT_VERSION, "source": source}
        if scenario is not None:
            header["scenario"] = scenario
        self._write(header)

    def _write(self, record: Mapping[str, Any]) -> None:
        self._file.write(_line(record))
        self._file.flush()
        if self._fsync:
            os.fsync(self._file.fileno())

    def append(self, record: Mapping[str, Any], *, scrubbed: bool = False) -> None:
        """Write one exchange record and flush it; scrubbed first unless ``scrubbed`` says the
        caller did it already."""
        if scrubbed:
            self.append_encoded(_ENCODER.encode(record))
            return
        self._write(record)

    def append_encoded(self, line: str) -> None:
        """Write one exchange the caller scrubbed and encoded as compact JSON (one line, no
        newline: :func:`encode_record`), and flush it."""
        self._file.write(line + "\n")
        self._file.flush()
        if self._fsync:
            os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def read_trace_lines(
    text: str, *, path: str | None = None
) -> tuple[Mapping[str, Any], Iterator[tuple[int, Mapping[str, Any]]], list[str]]:
    """The header, the records (with their line numbers) and notes of a trace file's text.

    Raises :class:`TraceError` for another format or version, or a bad line before the last.
    """
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    try:
        header = loads_json(lines[0]) if lines else None
    except ValueError:
        header = None
    if not isinstance(header, Mapping) or header.get("format") != TRACE_FORMAT:
        raise TraceError("not a dsh-trace file (no format header on line 1)", path=path)
    if header.get("version") != TRACE_FORMAT_VERSION:
        raise TraceError(
            f"trace format version {header.get('version')!r}; this dsh-testkit reads version "
            f"{TRACE_FORMAT_VERSION}",
            path=path,
        )
    notes: list[str] = []
    records: list[tuple[int, Mapping[str, Any]]] = []
    for number, line in enumerate(lines[1:], start=2):
        try:
            record = loads_json(line)
        except ValueError:
            if number == len(lines) and not text.endswith("\n"):
                notes.append(
                    f"an unfinished last line (line {number}, {len(line)} characters) was "
                    "dropped: the recording stopped while writing it"
                )
                break
            raise TraceError(f"line {number} is not JSON", path=path) from None
        if not isinstance(record, dict):
            raise TraceError(f"line {number} is not a JSON object", path=path)
        if not _may_hold_key(line):
            record["_mayHoldKey"] = False  # the reader may skip scrubbing this record
        records.append((number, record))
    return header, iter(records), notes
