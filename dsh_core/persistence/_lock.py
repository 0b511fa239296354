"""One writer per log: the exclusive lock every session-file writer holds while it is open.

Two writers appending to one file interleave or overwrite each other's lines and both return
normally, so the loss is silent. Every writer takes ``fcntl.flock(LOCK_EX | LOCK_NB)`` on its
open file (released when the file closes); a second writer, in this process or another, gets
:class:`LogLockedError` instead. Readers take no lock. Windows has no ``flock``: there the lock
is not taken and one writer per log is the caller's duty.
"""

from __future__ import annotations

import contextlib
import io
import sys

from .._errors import DshError

__all__ = ["LogLockedError", "lock_for_writing", "open_new"]


class LogLockedError(DshError):
    """Another writer holds the session file (``.path``): a log has one writer at a time."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


# A traceback names it where users import it from, not this private module.
LogLockedError.__module__ = "dsh_core.persistence"


if sys.platform == "win32":  # pragma: no cover - no flock on Windows: the lock is the caller's duty

    def _try_lock(fd: int) -> bool:
        return True

else:
    import fcntl

    def _try_lock(fd: int) -> bool:
        """Take the exclusive advisory lock on an open file; False when another holder has it.

        ``flock`` locks belong to the open file description, so a second ``open`` of the same
        path conflicts even within one process, and closing the file releases the lock.
        """
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True


def lock_for_writing(file: io.FileIO, name: str) -> None:
    if not _try_lock(file.fileno()):
        raise LogLockedError(
            f"{name} is already open for writing by another writer (in this process or "
            "another): a session log has one writer at a time. Close the other writer "
            "(JsonlWriter.close) before opening it again",
            path=name,
        )


def open_new(name: str, *, overwrite: bool) -> io.FileIO:
    """Open a file to write a new log into, without truncating it yet: an existing file is
    truncated only once its lock is held, so overwriting never pulls a log from under its
    writer."""
    if not overwrite:
        return open(name, "xb", buffering=0)
    while True:
        try:
            return open(name, "r+b", buffering=0)
        except FileNotFoundError:
            with contextlib.suppress(FileExistsError):  # created meanwhile: open that one
                return open(name, "xb", buffering=0)
