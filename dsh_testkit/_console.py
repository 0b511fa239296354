"""Terminal and JSON output shared by the commands (audit, cache-report, rebuild, calibrate, …).

Output goes through rich, captured and then written with trailing blanks stripped from every
line, so piped output has no padding noise. Colours follow rich's detection: on for a terminal,
off for a pipe or a file (and whenever ``NO_COLOR`` is set).

Where no colour is written (a pipe, a file: where large reports go), a table that fits the width
is laid out here as rich lays it out (:func:`plain_table`, the same characters), because rich
measures, wraps and pads every cell of every table through its general machinery: the
cache doctor's report on 10,000 requests spent 60% of its time there (issue 37). A table this
layout does not cover (borders, a title, wrapped cells, …) is left to rich.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO, Any, Final

from rich.cells import cell_len
from rich.console import Console, RenderableType
from rich.table import Table
from rich.text import Text

from ._replace_file import replace_file

__all__ = [
    "PIPE_WIDTH",
    "dumps_report_json",
    "emit",
    "make_console",
    "output_report",
    "plain_table",
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


def emit(console: Console, *renderables: RenderableType, plain_tables: bool = True) -> None:
    """Print ``renderables`` with trailing blanks removed from each line.

    Plain text lines are not wrapped (a path or a message stays greppable on one line; a
    terminal wraps them itself); tables are laid out to the console width (by
    :func:`plain_table` when no colour is written and ``plain_tables``: the same text).
    """
    plain = plain_tables and console.color_system is None
    with console.capture() as capture:
        for renderable in renderables:
            if plain and isinstance(renderable, Table):
                renderable = plain_table(console, renderable) or renderable
            console.print(renderable, soft_wrap=isinstance(renderable, Text))
    text = "\n".join(_strip_line(line) for line in capture.get().split("\n"))
    console.file.write(text)
    console.file.flush()


def plain_table(console: Console, table: Table) -> Text | None:
    """``table`` as the lines rich prints for it on ``console`` when no colour is written, or
    ``None`` when it uses what this layout does not cover (borders, a title or caption, fixed
    widths, cells that are not one line of text, a table wider than the console).

    What it covers is what rich does with a borderless table whose cells fit: each column as
    wide as its widest cell (``rich.cells.cell_len``), padded one space each side (not on the
    outer edges with ``pad_edge=False``), each cell justified left or right in it.
    """
    padding = table.padding
    if (
        table.box is not None
        or table.title is not None
        or table.caption is not None
        or table.show_footer
        or table.show_lines
        or table.leading
        or table.expand
        or table.width is not None
        or table.min_width is not None
        or table.collapse_padding
        or (padding[0], padding[2]) != (0, 0)
        or not table.columns
    ):
        return None
    _, right_pad, _, left_pad = padding
    last = len(table.columns) - 1
    columns: list[list[str]] = []
    pads: list[tuple[int, int]] = []
    rows = len(table.rows)
    for index, column in enumerate(table.columns):
        if (
            column.width is not None
            or column.min_width is not None
            or column.max_width is not None
            or column.ratio is not None
            or column.justify not in ("left", "right")
        ):
            return None
        cells: list[RenderableType] = list(column.cells)
        if len(cells) != rows:
            return None
        if table.show_header:
            cells.insert(0, column.header)
        texts = []
        for cell in cells:
            text = _one_line(console, cell)
            if text is None:
                return None
            texts.append(text)
        columns.append(texts)
        left = 0 if index == 0 and not table.pad_edge else left_pad
        right = 0 if index == last and not table.pad_edge else right_pad
        pads.append((left, right))
    if not columns[0]:
        return None  # neither a header nor a row
    widths = [max(cell_len(text) for text in texts) for texts in columns]
    if sum(max(w + a + b, 1) for w, (a, b) in zip(widths, pads, strict=True)) > console.width:
        return None  # rich wraps or folds cells to fit: its business
    lines = []
    for row in range(len(columns[0])):
        parts = []
        for texts, width, (left, right), column in zip(
            columns, widths, pads, table.columns, strict=True
        ):
            text = texts[row]
            gap = " " * (max(width, 1 - left - right) - cell_len(text))
            cell = gap + text if column.justify == "right" else text + gap
            parts.append(" " * left + cell + " " * right)
        lines.append("".join(parts))
    return Text("\n".join(lines))


def _one_line(console: Console, cell: RenderableType) -> str | None:
    """The plain text rich shows for a table cell, when it is one line it lays out as is."""
    if isinstance(cell, str):
        cell = console.render_str(cell, highlight=False)
    if not isinstance(cell, Text) or cell.justify is not None or cell.overflow is not None:
        return None
    text = cell.plain
    if text != text.strip() or not text.isprintable():
        return None  # rich strips a right-justified cell's blanks; a tab expands, a newline wraps
    return text


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
    dumps: Callable[[Any], str] = dumps_report_json,
    write_document: Callable[[Callable[[str], object]], None] | None = None,
) -> int:
    """The end of every report command: write the HTML page when asked (and say so on stderr),
    then print the JSON document (as ``dumps`` writes it, or in pieces by ``write_document``,
    which is given the writer) or the tables. Returns the exit status (2 when the page cannot
    be written, or would replace one of the command's ``inputs``)."""
    if html_path:
        refused = write_output(f"dsh-testkit {command}", html_path, html, inputs=inputs)
        if refused:
            return refused
        print(f"dsh-testkit {command}: wrote the HTML report to {html_path}", file=sys.stderr)
    if as_json and write_document is not None:
        write_document(sys.stdout.write)
    elif as_json:
        sys.stdout.write(dumps(document()))
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
