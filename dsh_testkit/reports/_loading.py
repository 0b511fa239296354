"""Loading a log for a report: sidecars, the "not a session log" verdict, and the readable prefix.

Every report command (audit, cache-report, rebuild) reads its log here, so they agree on three
things:

- **sidecars**: a normalized log's placeholders are filled from ``--sidecars DIR`` or, by
  default, from the sidecar files found beside the log (:class:`dsh_core.Sidecars`);
- **not a session log**: a file whose first record is not a session header the reference
  harness's reader would accept (not JSON, not ``{"type":"session",…}``, no integer
  ``version``, no ``id`` or ``createdAt``, or no header at all) is refused with one line
  (:class:`NotASessionLogError`; the commands exit 2). A log of another format version is
  refused the same way, with the loader's "upgrade" message;
- **the readable prefix**: a log whose body breaks at some line (a seq gap left by trimming, a
  malformed event) is still a log; :func:`readable_prefix` loads the events before that line
  so the audit can report them beside the violation.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Literal, TypeAlias

from dsh_core import CorruptLogError, SidecarError, Sidecars, UnsupportedVersionError
from dsh_core.persistence import LoadedLog, load_session, loads_session

from .._errors import TestkitError

__all__ = [
    "NotASessionLogError",
    "SidecarOption",
    "add_sidecar_arguments",
    "load_log",
    "readable_prefix",
    "refusal",
    "sidecar_option",
]

SidecarOption: TypeAlias = "Sidecars | Literal['auto'] | None"
"""``"auto"``: the sidecars beside the log; a :class:`Sidecars`; ``None``: fill nothing."""


class NotASessionLogError(TestkitError, ValueError):
    """The file is not a session log (or not one this build reads): ``.path``, ``.reason``."""

    def __init__(self, reason: str, *, path: str) -> None:
        super().__init__(f"not a session log: {reason}")
        self.reason = reason
        self.path = path


def _header_line(path: str) -> int | None:
    """The 1-based line of the first non-blank line (the session header's), if any."""
    with open(path, "rb") as file:
        for number, line in enumerate(file, start=1):
            if line.strip(b" \t\r\n"):
                return number
    return None


def load_log(path: str | os.PathLike[str], *, sidecars: SidecarOption = "auto") -> LoadedLog:
    """Load ``path`` in audit mode, placeholders filled from ``sidecars``.

    Raises :class:`NotASessionLogError` when the header record is missing or invalid,
    :class:`CorruptLogError` when the body breaks (``.line`` says where), :class:`OSError` when
    the file cannot be read, :class:`dsh_core.SidecarError` when a sidecar does not fit.
    """
    name = os.fspath(path)
    try:
        return load_session(name, audit=True, fill=sidecars)
    except UnsupportedVersionError as exc:
        raise NotASessionLogError(_without_path(exc, name), path=name) from exc
    except CorruptLogError as exc:
        header = _header_line(name)
        if header is None or (exc.seq is None and exc.line in (None, header)):
            raise NotASessionLogError(_without_path(exc, name), path=name) from exc
        raise


def _without_path(exc: CorruptLogError, name: str) -> str:
    text = str(exc)
    for prefix in (f"{name}:", f"{exc.path}:"):
        if text.startswith(prefix):
            text = text[len(prefix) :].lstrip()
    # The loader's advice about damaged lines inside a log does not apply to its first line.
    text = text.split(". Only an unfinished last line")[0]
    return " ".join(text.split())


def readable_prefix(
    path: str | os.PathLike[str], line: int, *, sidecars: SidecarOption = "auto"
) -> LoadedLog | None:
    """The log made of the lines before ``line`` (``None`` when even that does not read)."""
    name = os.fspath(path)
    with open(name, "rb") as file:
        raw = file.read()
    cut = 0
    for _ in range(line - 1):
        newline = raw.find(b"\n", cut)
        if newline < 0:
            return None
        cut = newline + 1
    try:
        loaded = loads_session(raw[:cut], audit=True, path=name)
        if sidecars == "auto":
            sidecars = Sidecars.for_log(name)
        return loaded if sidecars is None or sidecars.empty else sidecars.fill(loaded)
    except CorruptLogError:
        return None


def add_sidecar_arguments(parser: argparse.ArgumentParser) -> None:
    """``--sidecars DIR`` / ``--no-sidecars``: how a normalized log's placeholders are filled."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--sidecars",
        metavar="DIR",
        help=(
            "fill {{system}}, {{tools}} and {{messagePrefix}} placeholders from the sidecar files "
            "in DIR (system-prompt.expected.md, tool-schemas.expected.json, "
            "message-prefix.expected.json); default: the sidecars beside the log, if any"
        ),
    )
    group.add_argument(
        "--no-sidecars",
        action="store_true",
        help="do not fill placeholders, even when sidecar files lie beside the log",
    )


def sidecar_option(args: argparse.Namespace) -> SidecarOption:
    """The sidecars the parsed ``--sidecars`` / ``--no-sidecars`` ask for (may raise
    :class:`SidecarError`)."""
    if getattr(args, "no_sidecars", False):
        return None
    directory = getattr(args, "sidecars", None)
    if directory is None:
        return "auto"
    if not os.path.isdir(directory):
        raise SidecarError(f"--sidecars {directory}: not a directory", path=directory)
    return Sidecars.from_dir(directory, log_name=os.path.basename(args.log))


def refusal(command: str, args: argparse.Namespace, exc: Exception) -> int:
    """Print the one-line refusal of a log (exit status 2) for the errors every report shares;
    re-raise anything else."""
    if isinstance(exc, NotASessionLogError):
        print(f"dsh-testkit {command}: {args.log}: {exc}", file=sys.stderr)
    elif isinstance(exc, SidecarError):
        print(f"dsh-testkit {command}: sidecars: {exc}", file=sys.stderr)
    elif isinstance(exc, OSError):
        print(
            f"dsh-testkit {command}: cannot read {args.log}: {exc.strerror or exc}", file=sys.stderr
        )
    else:
        raise exc
    return 2
