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
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

from ..scrub._spellings import KnownSecrets
from ._errors import TraceError
from ._file import TraceLines, trace_header
from ._model import Exchange, TraceSource
from ._readers._build import scrub_exchange, without_bom
from ._readers._trace_file import add_record, trace_builder

__all__ = ["StreamSummary", "TraceStream"]


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


class TraceStream:
    """A dsh-trace file on disk, read one line at a time (see the module docstring)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self.summary: StreamSummary | None = None
        """The last complete pass's findings (``None`` before one ended)."""

    def read(self) -> Iterator[Exchange]:
        """One pass over the file: its exchanges in order (see the module docstring).
        Raises :class:`TraceError` as :func:`load_trace` does for the same file."""
        known = self.summary
        final = KnownSecrets(known.secrets) if known is not None and known.late else None
        path = self.path
        with open(path, "rb") as file:
            first = without_bom(file.readline())
            header = trace_header(first.rstrip(b"\n"), path=path)
            source = header.get("source")
            builder = trace_builder(
                source if source in ("proxy", "capture", "memory") else "proxy",
                path,
                scrubbed=True,
                keep=False,
            )
            lines = TraceLines(path=path)
            number = 1
            for raw in file:
                number += 1
                torn = not raw.endswith(b"\n")
                record = lines.record(number, raw[:-1] if not torn else raw, torn=torn)
                if record is None:
                    break
                exchange = add_record(builder, number, record, scrubbed=True)
                if exchange is None:
                    continue
                if final is not None and known is not None and exchange.index in known.late:
                    exchange = scrub_exchange(exchange, final, shapes=False)
                yield exchange
        builder.notes[:0] = lines.notes
        summary = StreamSummary(
            source=builder.source,
            path=path,
            count=builder.count,
            notes=builder.final_notes(),
            time_resolution=builder.found_resolution(),
            secrets=builder.secrets,
            late=frozenset(builder.scrubbed_late()),
        )
        if known is not None and (known.count, known.secrets) != (summary.count, summary.secrets):
            raise TraceError("the file changed between two passes over it", path=path)
        self.summary = summary
