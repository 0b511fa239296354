"""The options and the one-line refusal every command that reads a session log shares (audit,
rebuild, cache-report): ``--sidecars`` / ``--no-sidecars`` / ``--fill``, and exit status 2 for a
file that is not a session log, unreadable, or whose sidecars are."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace

from dsh_core import FrozenDict, SidecarError, Sidecars

from ..reports import NotASessionLogError
from ..reports._loading import SidecarOption

__all__ = ["add_sidecar_arguments", "refusal", "sidecar_option"]


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
    parser.add_argument(
        "--fill",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help=(
            "replace an inline placeholder in every string of the log, e.g. "
            "--fill cwd=/home/me/project for {{cwd}} (repeatable)"
        ),
    )


def sidecar_option(args: argparse.Namespace) -> SidecarOption:
    """The sidecars the parsed ``--sidecars`` / ``--no-sidecars`` ask for (may raise
    :class:`SidecarError`)."""
    values: dict[str, str] = {}
    for item in getattr(args, "fill", None) or ():
        name, sep, value = item.partition("=")
        name = name.strip().removeprefix("{{").removesuffix("}}")
        if not sep or not name:
            raise SidecarError(f"--fill {item!r}: expected NAME=VALUE, e.g. cwd=/home/me/project")
        values["{{" + name + "}}"] = value
    if getattr(args, "no_sidecars", False):
        return Sidecars(values=FrozenDict(values)) if values else None
    directory = getattr(args, "sidecars", None)
    if directory is None:
        if not values:
            return "auto"
        return replace(Sidecars.for_log(args.log), values=FrozenDict(values))
    if not os.path.isdir(directory):
        raise SidecarError(f"--sidecars {directory}: not a directory", path=directory)
    return Sidecars.from_dir(directory, log_name=os.path.basename(args.log), values=values)


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
