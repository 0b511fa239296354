"""A trace file read as a stream: one line at a time, nothing kept, as many passes as asked.

:func:`~dsh_testkit.traces.load_trace` holds a whole trace: every exchange, parsed. A day of
production traffic does not fit that way (a million requests of the benchmark's shape are 3 GB of
JSON lines, ten times that parsed). :class:`TraceStream` reads a dsh-trace file (what
``dsh-testkit proxy`` writes) line by line through the same code the whole-file reader runs (the
line parser with its shared history, the record reader, the builder that checks figures and
scrubs credentials), keeping only what a later line needs: the current tip of each
conversation's history (:mod:`._shared_history`), the credentials named so far, the notes.

Two facts about a whole trace are known only at its end: the credentials any exchange names (a
credential named by a later exchange is scrubbed from the earlier ones too) and the notes.
:meth:`TraceStream.read` is a pass; :attr:`TraceStream.summary` is what the last complete pass
found, and a pass made after one has ended gives every exchange exactly as ``load_trace`` gives it
(the late credentials scrubbed). A first pass gives the exchanges as read; whether any of them
lacks a late scrub is :attr:`StreamSummary.late` (nearly always empty: our writer scrubs each
record as it writes it).

A file compressed with zstd or gzip (a rotated, shipped trace) is decompressed as it is read
(:class:`~._compression.DecompressingReader`, the same bytes and the same torn-tail note as the
whole-file reading); every pass decompresses it again.
"""

from __future__ import annotations

import io
import os
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

from ..scrub._spellings import KnownSecrets
from ._compression import DecompressingReader, compression_of
from ._errors import TraceError
from ._file import TraceLines, trace_header
from ._model import Exchange, TraceSource
from ._readers._build import scrub_exchange, without_bom
from ._readers._trace_file import add_record, trace_builder

__all__ = ["StreamSummary", "TraceStream"]

_BUFFER = 1 << 20
"""Decompressed bytes buffered at a time for a compressed file's lines."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StreamSummary:
    """What a complete pass over a trace file found."""

    source: TraceSource
    path: str
    count: int
    """Exchanges (model requests) in the file."""
    notes: tuple[str, ...]
    """The trace's notes, as :attr:`Trace.notes` (torn tail, figures left out, skipped lines)."""
    time_resolution: float | None
    secrets: tuple[str, ...]
    """Every credential the exchanges name, in order."""
    late: frozenset[int]
    """Exchanges read before a credential they may hold was named (scrubbed on a later pass)."""
    size: int
    """Bytes read (a later pass reads these and no more)."""
    crc: int
    """Their CRC-32 (a later pass must read the same bytes)."""
    identity: tuple[int, int]
    """The file's device and inode."""
    torn: str | None = None
    """What a torn last frame or member of a compressed file cost (the first pass's note)."""


class TraceStream:
    """A dsh-trace file on disk, read one line at a time (see the module docstring)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self.summary: StreamSummary | None = None
        """The last complete pass's findings (``None`` before one ended)."""

    def read(self) -> Iterator[Exchange]:
        """One pass over the file: its exchanges in order (see the module docstring).
        Raises :class:`TraceError` as :func:`load_trace` does for the same file.

        A later pass reads the bytes the first one read and no more: a file the proxy is still
        appending to is read as it was when the first pass ended (a line it was writing then is
        the unfinished last line, dropped with a note, in every pass). A file whose bytes up to
        there changed, or that is another file by then, is a :class:`TraceError`."""
        known = self.summary
        final = KnownSecrets(known.secrets) if known is not None and known.late else None
        path = self.path
        with open(path, "rb") as plain:
            identity = _identity(plain)
            compression = compression_of(plain.peek(8)[:8])
            unpacked = (
                DecompressingReader(plain, compression, path=path)
                if compression is not None
                else None
            )
            file = io.BufferedReader(unpacked, _BUFFER) if unpacked is not None else plain
            stop = known.size if known is not None else None
            raw_first = file.readline()
            if stop is not None:
                raw_first = raw_first[:stop]
            offset = len(raw_first)
            crc = zlib.crc32(raw_first)
            header = trace_header(without_bom(raw_first).rstrip(b"\n"), path=path)
            source = header.get("source")
            builder = trace_builder(
                source if source in ("proxy", "capture", "memory") else "proxy",
                path,
                scrubbed=True,
                keep=False,
            )
            lines = TraceLines(path=path)
            number = 1
            failed: TraceError | None = None
            for raw in file:
                if stop is not None and offset >= stop:
                    break
                if stop is not None and offset + len(raw) > stop:
                    raw = raw[: stop - offset]
                offset += len(raw)
                crc = zlib.crc32(raw, crc)
                number += 1
                torn = not raw.endswith(b"\n")
                record = lines.record(number, raw[:-1] if not torn else raw, torn=torn)
                if record is None:
                    break
                if failed is not None:
                    continue  # every line is parsed first, as the whole-file reader does
                try:
                    exchange = add_record(builder, number, record, scrubbed=True)
                except TraceError as exc:
                    failed = exc
                    continue
                if exchange is None:
                    continue
                if final is not None and known is not None and exchange.index in known.late:
                    exchange = scrub_exchange(exchange, final, shapes=False)
                yield exchange
            if failed is not None:
                raise failed
        if known is not None and (identity, offset, crc) != (known.identity, known.size, known.crc):
            raise TraceError("the file changed between two passes over it", path=path)
        builder.notes[:0] = lines.notes
        # what a torn compressed tail cost, first, as read_recording's note is; a later pass
        # stops at the first one's last byte, before any end it would see
        cut = known.torn if known is not None else (unpacked.note if unpacked else None)
        self.summary = StreamSummary(
            source=builder.source,
            path=path,
            count=builder.count,
            notes=(cut, *builder.final_notes()) if cut else builder.final_notes(),
            torn=cut,
            time_resolution=builder.found_resolution(),
            secrets=builder.secrets,
            late=frozenset(builder.scrubbed_late()),
            size=offset,
            crc=crc,
            identity=identity,
        )


def _identity(file: IO[bytes]) -> tuple[int, int]:
    """Which file this is (device and inode): another file at the same path is not it."""
    status = os.fstat(file.fileno())
    return status.st_dev, status.st_ino
