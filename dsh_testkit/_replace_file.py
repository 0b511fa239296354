"""Writing a file in place of another, whole and at once, as the file it replaces was.

A cassette, a cache baseline or a report file is written to a temporary file beside it and
moved over it (``os.replace``): a reader never sees half a file, and a failed write leaves the
old one. The temporary file ``tempfile.mkstemp`` makes is private (``0600``); the file that
takes the old one's place keeps the old one's permissions, or gets what ``open`` gives a new
file (``0666`` less the umask), so a cassette shared through a folder or a mount stays
readable. A path that is a symbolic link is written through: the link's target is replaced,
the link stays.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["file_mode_for", "replace_file", "replacing"]


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


@contextmanager
def replacing(path: Path, *, make_folder: bool = True) -> Iterator[Path]:
    """A temporary file beside ``path`` (its folder made when missing, with ``make_folder``) to
    write; when the block
    ends normally it takes ``path``'s place with ``path``'s permissions, else it is removed and
    ``path`` is left as it was. ``OSError`` as the system raised it."""
    target = Path(os.path.realpath(path)) if path.is_symlink() else path
    if make_folder:
        target.parent.mkdir(parents=True, exist_ok=True)
    mode = file_mode_for(target)
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    os.close(fd)
    temporary = Path(name)
    try:
        yield temporary
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def replace_file(path: Path, text: str, *, make_folder: bool = True) -> None:
    """Write ``text`` (UTF-8, ``\\n`` line ends) as ``path``, whole and at once (:func:`replacing`)."""
    with replacing(path, make_folder=make_folder) as temporary:
        temporary.write_text(text, encoding="utf-8", newline="\n")
