"""Session persistence: the JSONL store, packed chunk rows, and crash repair.

``load_session`` reads a log (never modifying it), ``open_session`` resumes one and keeps
writing, ``write_session`` stores a new one; :class:`JsonlWriter` is the append-only writer they
share, and each holds the file's exclusive lock while it is open (one writer per log:
:class:`LogLockedError`). The file format is the reference harness's ``session.jsonl`` (header
record, one event or packed chunk row per line), so logs interchange both ways.
"""

from ._header_line import header_line
from ._jsonl import (
    FsyncPolicy,
    JsonlWriter,
    LogLockedError,
    dumps_session,
    open_session,
    write_session,
)
from ._reading import DroppedTail, LoadedLog, load_session, loads_session
from ._repair import TOOL_NOT_STARTED, TOOL_OUTCOME_UNKNOWN

__all__ = [
    "TOOL_NOT_STARTED",
    "TOOL_OUTCOME_UNKNOWN",
    "DroppedTail",
    "FsyncPolicy",
    "JsonlWriter",
    "LoadedLog",
    "LogLockedError",
    "dumps_session",
    "header_line",
    "load_session",
    "loads_session",
    "open_session",
    "write_session",
]
