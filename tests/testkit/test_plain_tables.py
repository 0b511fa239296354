"""Tables laid out without rich's machinery where no colour is written: the same bytes.

:func:`dsh_testkit._console.plain_table` lays out a borderless table as rich would; ``emit``
uses it on a console that writes no colour. The law: ``emit`` writes exactly what rich writes,
for any table (when the layout does not cover one, rich lays it out) and for the cache doctor's
report of any traffic.
"""

from __future__ import annotations

import io

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.table import Table
from rich.text import Text

from dsh_testkit._console import emit, plain_table
from dsh_testkit.doctor import diagnose
from dsh_testkit.doctor._render import render_report
from tests.testkit.doctor._bodies import Traffic, assistant, body, system, user


def _written(width: int, renderables: list[object], *, plain: bool) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, highlight=False, soft_wrap=False, width=width)
    assert console.color_system is None  # a file: no colour
    emit(console, *renderables, plain_tables=plain)  # type: ignore[arg-type]
    return buffer.getvalue()


GOOD_TEXT = st.one_of(
    st.sampled_from(
        [
            "",
            "1,234",
            "–",
            "—",
            "99.5 %",
            "departs from #3",
            "volatile-system-text, tools-changed · notes: echo",
            "[bold]markup[/bold]",  # a str cell is markup: rich shows "markup"
            "[not a tag",
            ":thumbs_up: emoji code",
            "宽字符 wide",
        ]
    ),
    st.text(st.characters(categories=("L", "N", "P", "S", "Zs")), max_size=12),
)
ODD_TEXT = st.sampled_from(["  leading blanks", "trailing blanks  ", "tab\there", "two\nlines"])
# one cell in ~40 rich must lay out itself (a table holds up to 42)
CELL_TEXT = st.integers(0, 40).flatmap(
    lambda n: ODD_TEXT if n == 0 else st.just("x" * 70) if n == 1 else GOOD_TEXT
)
CELL = st.one_of(CELL_TEXT, CELL_TEXT.map(Text), CELL_TEXT.map(lambda s: Text(s, style="red")))


@st.composite
def tables(draw: st.DrawFn) -> Table:
    table = Table(
        box=None,
        pad_edge=draw(st.booleans()),
        header_style="bold",
        show_edge=False,
        show_header=draw(st.booleans()),
        title=draw(st.sampled_from([None] * 9 + ["a title"])),
    )
    count = draw(st.integers(1, 6))
    for _ in range(count):
        table.add_column(
            draw(CELL_TEXT),
            justify=draw(st.sampled_from(["left", "right"] * 4 + ["center"])),
            overflow=draw(st.sampled_from(["fold", "ellipsis"])),
        )
    for _ in range(draw(st.integers(0, 6))):
        table.add_row(*(draw(CELL) for _ in range(count)))
    return table


@given(tables(), st.integers(10, 200))
def test_any_table_is_written_as_rich_writes_it(table: Table, width: int) -> None:
    probe = Console(file=io.StringIO(), width=width)
    event("laid out here" if plain_table(probe, table) is not None else "left to rich")
    text = Text("a line before")
    assert _written(width, [text, table, text], plain=True) == _written(
        width, [text, table, text], plain=False
    )


KEYS = st.sampled_from([None, None, "session-a", "会話-b"])


@st.composite
def traffic(draw: st.DrawFn) -> Traffic:
    """Conversations that extend, change their system prompt, get refused, repeat."""
    out = Traffic()
    histories: dict[int, list[dict[str, object]]] = {}
    for step in range(draw(st.integers(1, 14))):
        which = draw(st.integers(0, 2))
        history = histories.setdefault(which, [user(f"task {which}: " + "explain the code " * 8)])
        action = draw(st.sampled_from(["extend", "extend", "system", "refused", "repeat"]))
        prompt = f"You are agent {which}. " + "Follow the rules. " * draw(st.integers(1, 30))
        if action == "system":
            prompt += f" Time: 2026-12-0{step % 9 + 1}"
        request = body([system(prompt), *history])
        out.add(
            request,
            answer=assistant(f"answer {step}"),
            hit=draw(st.one_of(st.none(), st.integers(0, 5).map(lambda n: n * 128))),
            status=400 if action == "refused" else 200,
            started=1_780_000_000.0 + step,
            conversation=draw(KEYS),
        )
        if action != "repeat":
            history += [
                assistant(f"answer {step}"),
                user(f"next {step} " * draw(st.integers(1, 9))),
            ]
    return out


@pytest.mark.slow  # a fixed-size search: each example diagnoses its traffic
@settings(max_examples=40, deadline=None)
@given(traffic(), st.sampled_from([60, 80, 120, 200]))
def test_the_doctor_report_is_the_same_text(made: Traffic, width: int) -> None:
    renderables = render_report(diagnose(made.trace()))
    tables = [r for r in renderables if isinstance(r, Table)]
    probe = Console(file=io.StringIO(), width=width)
    event(f"{sum(plain_table(probe, t) is not None for t in tables)}/{len(tables)} laid out here")
    assert _written(width, list(renderables), plain=True) == _written(
        width, list(renderables), plain=False
    )


def test_a_report_table_that_fits_is_laid_out_here() -> None:
    made = Traffic()
    request = body([system("rules"), user("hello")])
    made.add(request, answer=assistant("hi"), hit=0)
    made.add(body([system("rules"), user("hello"), assistant("hi"), user("more")]), hit=0)
    tables = [r for r in render_report(diagnose(made.trace())) if isinstance(r, Table)]
    assert tables
    probe = Console(file=io.StringIO(), width=120)
    plain = plain_table(probe, tables[0])
    assert plain is not None
    assert plain.plain.splitlines()[0].split() == [
        "#",
        "compared",
        "with",
        "prompt",
        "hit",
        "hit",
        "%",
        "reusable",
        "lost",
        "causes",
    ]
    assert plain_table(Console(file=io.StringIO(), width=20), tables[0]) is None  # too narrow
