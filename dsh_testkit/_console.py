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
from typing import IO, Any, Final

from rich.console import Console, RenderableType
from rich.text import Text

__all__ = ["PIPE_WIDTH", "dumps_report_json", "emit", "make_console", "output_report"]

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
) -> int:
    """The end of every report command: write the HTML page when asked (and say so on stderr),
    then print the JSON document or the tables. Returns the exit status (2 when the page cannot
    be written)."""
    if html_path:
        try:
            with open(html_path, "w", encoding="utf-8", newline="\n") as file:
                file.write(html())
        except OSError as exc:
            print(
                f"dsh-testkit {command}: cannot write {html_path}: {exc.strerror or exc}",
                file=sys.stderr,
            )
            return 2
        print(f"dsh-testkit {command}: wrote the HTML report to {html_path}", file=sys.stderr)
    if as_json:
        sys.stdout.write(dumps_report_json(document()))
    else:
        emit(make_console(), *renderables())
    return 0
