"""Session persistence: the JSONL store, packed chunk rows, and crash repair.

``load_session`` reads a log (never modifying it), ``open_session`` resumes one and keeps
writing, ``write_session`` stores a new one; :class:`JsonlWriter` is the append-only writer they
share, and each holds the file's exclusive lock while it is open (one writer per log:
:class:`LogLockedError`). The file format is the reference harness's ``session.jsonl`` (header
record, one event or packed chunk row per line), so logs interchange both ways.
"""

from ._chunk_rows import ChunkRow, expand_chunk_rows, pack_chunk_rows
from ._header_line import HEADER_LINE_FIELDS, header_line
from ._reading import DroppedTail, LoadedLog, load_session, loads_session
from ._repair import TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN, interrupted_turn_closers
from .jsonl import (
    FsyncPolicy,
    JsonlWriter,
    LogLockedError,
    dumps_session,
    open_session,
    write_session,
)

__all__ = [
    "HEADER_LINE_FIELDS",
    "TOOL_NOT_STARTED",
    "TOOL_OUTCOME_UNKNOWN",
    "ChunkRow",
    "DroppedTail",
    "FsyncPolicy",
    "JsonlWriter",
    "LoadedLog",
    "LogLockedError",
    "dumps_session",
    "expand_chunk_rows",
    "header_line",
    "interrupted_turn_closers",
    "load_session",
    "loads_session",
    "open_session",
    "pack_chunk_rows",
    "write_session",
]
