"""Writing a file in place of another, whole and at once, as the file it replaces was.

A cassette or a cache baseline is written to a temporary file beside it and moved over it
(``os.replace``): a reader never sees half a file, and a failed write leaves the old one. The
temporary file ``tempfile.mkstemp`` makes is private (``0600``); the file that takes the old
one's place keeps the old one's permissions, or gets what ``open`` gives a new file (``0666``
less the umask), so a cassette shared through a folder or a mount stays readable. A path that
is a symbolic link is written through: the link's target is replaced, the link stays.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

__all__ = ["file_mode_for", "replace_file"]


def _umask() -> int:
    try:  # Linux says it without changing it
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def file_mode_for(path: Path) -> int:
    """The permissions a file written in place of ``path`` gets: the old file's, else what
    ``open`` gives a new file."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except OSError:
        return 0o666 & ~_umask()


def replace_file(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8, ``\\n`` line ends) as ``path``, atomically; the folder is made
    when missing. ``OSError`` as the system raised it; nothing is left behind on failure."""
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    target.parent.mkdir(parents=True, exist_ok=True)
    mode = file_mode_for(target)
    fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
