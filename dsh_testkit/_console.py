"""Terminal and JSON output shared by the commands (audit, cache-report, rebuild, calibrate, …).

Output goes through rich, captured and then written with trailing blanks stripped from every
line, so piped output has no padding noise. Colours follow rich's detection: on for a terminal,
off for a pipe or a file (and whenever ``NO_COLOR`` is set).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, Final

from rich.console import Console, RenderableType
from rich.text import Text

from ._replace_file import replace_file

__all__ = [
    "PIPE_WIDTH",
    "dumps_report_json",
    "emit",
    "make_console",
    "output_report",
    "write_output",
]

PIPE_WIDTH: Final = 120
"""Line width when stdout is not a terminal and ``COLUMNS`` is unset."""

_TRAILING: Final = re.compile(r"(?:[ \t]|\x1b\[[0-9;]*m)+$")
_SGR: Final = re.compile(r"\x1b\[[0-9;]*m")


def make_console(file: IO[str] | None = None) -> Console:
    """A console on ``file`` (default: the current ``sys.stdout``)."""
    out = file if file is not None else sys.stdout
    console = Console(file=out, highlight=False, soft_wrap=False)
    if not console.is_terminal and "COLUMNS" not in os.environ:
        console = Console(file=out, highlight=False, soft_wrap=False, width=PIPE_WIDTH)
    return console


def _strip_line(line: str) -> str:
    # Drop trailing blanks but keep any colour codes among them (a reset must still happen).
    return _TRAILING.sub(lambda m: "".join(_SGR.findall(m.group())), line)


def emit(console: Console, *renderables: RenderableType) -> None:
    """Print ``renderables`` with trailing blanks removed from each line.

    Plain text lines are not wrapped (a path or a message stays greppable on one line; a
    terminal wraps them itself); tables are laid out to the console width.
    """
    with console.capture() as capture:
        for renderable in renderables:
            console.print(renderable, soft_wrap=isinstance(renderable, Text))
    text = "\n".join(_strip_line(line) for line in capture.get().split("\n"))
    console.file.write(text)
    console.file.flush()


def dumps_report_json(document: Any) -> str:
    """A report document as stable JSON text: sorted keys, two-space indent, final newline."""
    return json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def output_report(
    command: str,
    *,
    document: Callable[[], Any],
    renderables: Callable[[], Sequence[RenderableType]],
    html: Callable[[], str],
    html_path: str | None,
    as_json: bool,
    inputs: Sequence[str | os.PathLike[str]] = (),
) -> int:
    """The end of every report command: write the HTML page when asked (and say so on stderr),
    then print the JSON document or the tables. Returns the exit status (2 when the page cannot
    be written, or would replace one of the command's ``inputs``)."""
    if html_path:
        refused = write_output(f"dsh-testkit {command}", html_path, html, inputs=inputs)
        if refused:
            return refused
        print(f"dsh-testkit {command}: wrote the HTML report to {html_path}", file=sys.stderr)
    if as_json:
        sys.stdout.write(dumps_report_json(document()))
    else:
        emit(make_console(), *renderables())
    return 0


def write_output(
    command: str,
    path: str | os.PathLike[str],
    text: Callable[[], str],
    *,
    inputs: Sequence[str | os.PathLike[str]] = (),
) -> int:
    """Write a report file a command was asked for; returns 0, or 2 after one line on stderr.

    A path that is one of the command's ``inputs`` (the same file, by any name) is refused: a
    report never replaces the recording it was made from. The text goes to a temporary file
    beside ``path`` first and takes its place only once whole, so a failure leaves an earlier
    file as it was.
    """
    target = os.fspath(path)
    for source in inputs:
        if _same_file(target, os.fspath(source)):
            print(
                f"{command}: refusing to write the report to {target}: it is the input "
                f"{os.fspath(source)} (choose another file)",
                file=sys.stderr,
            )
            return 2
    try:
        replace_file(Path(target), text(), make_folder=False)  # a report: no folder made
    except OSError as exc:
        print(f"{command}: cannot write {target}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    return 0


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # either does not exist (yet): not the same file
        return os.path.abspath(a) == os.path.abspath(b)
