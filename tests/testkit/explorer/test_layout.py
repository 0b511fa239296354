"""The Cache Explorer's layout in a real Chromium at common laptop widths: a request's cards
keep their figures in rows of four, none broken over two lines, and the rail shows each
conversation's whole summary, shortening a long conversation key instead."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from dsh_testkit.doctor import diagnose
from dsh_testkit.explorer import render_html
from dsh_testkit.mock import MockDeepSeek, MockHandler, Reply
from dsh_testkit.traces import trace_of
from tests.testkit.explorer.conftest import Page

LONG_KEY = "planner-subagent-7f3c2a9e-41d2-4b8a"


def _big_conversation() -> MockDeepSeek:
    """A conversation with a long key and five-digit figures: a long system prompt that gains a
    timestamp at request #4, so that request loses every reusable token."""
    mock = MockDeepSeek()
    rules = "Rule: read the file before you answer, and quote it exactly. " * 1500
    messages: list[dict[str, Any]] = [{"role": "system", "content": rules}]
    headers = {"authorization": "Bearer sk-layout", "x-dsh-conversation": LONG_KEY}
    with httpx.Client(
        transport=httpx.MockTransport(MockHandler(mock)),
        base_url="https://api.deepseek.com",
        headers=headers,
    ) as client:
        for turn in range(1, 6):
            if turn == 4:
                messages[0] = {"role": "system", "content": f"Now: 17:0{turn}\n{rules}"}
            messages.append({"role": "user", "content": f"Question {turn}? " * 40})
            mock.push(Reply(text=f"Answer {turn}. " * 30))
            response = client.post(
                "/chat/completions",
                json={
                    "model": "deepseek-v4-flash",
                    "messages": messages,
                    "thinking": {"type": "disabled"},
                },
            )
            assert response.status_code == 200, response.text
            messages.append(response.json()["choices"][0]["message"])
    return mock


@pytest.fixture(scope="module")
def big_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("layout") / "explorer.html"
    path.write_text(render_html(diagnose(trace_of(_big_conversation()))), encoding="utf-8")
    return path


FIGURE_ROWS = """() => [...document.querySelectorAll('.ab .card .figs')].map(figs => {
  const cells = [...figs.children].map(cell => ({
    text: cell.innerText.replace('\\n', ' | '),
    top: Math.round(cell.getBoundingClientRect().top),
    lines: [...cell.children].map(part => part.getClientRects().length),
  }));
  return {cells, overflows: figs.scrollWidth > figs.clientWidth + 1};
})"""

RAIL_SUMMARIES = """() => [...document.querySelectorAll('.rail-row.conv')].map(row => {
  const [key, meta] = [row.children[1], row.querySelector('.meta')];
  return {
    meta: meta.innerText,
    metaCut: meta.scrollWidth > meta.clientWidth + 1,
    keyCut: key.scrollWidth > key.clientWidth + 1,
    keyEllipsis: getComputedStyle(key).textOverflow,
  };
})"""


@pytest.mark.parametrize("width", [1280, 1100, 1440])
def test_the_cards_keep_four_figures_to_a_row_unbroken(
    tab: Page, big_page: Path, width: int
) -> None:
    tab.page.set_viewport_size({"width": width, "height": 900})
    page = tab.open_file(big_page)
    # request #4: both cards, 13 figures (its tokens below one unit, rounded off, among them)
    page.locator(".rail-row.req[data-index='3']").click()
    cards = page.evaluate(FIGURE_ROWS)
    assert [len(card["cells"]) for card in cards] == [4, 9]
    assert cards[1]["cells"][-1]["text"].endswith("below one unit (rounded off)")
    for card in cards:
        assert not card["overflows"]
        for cell in card["cells"]:
            assert cell["lines"] == [1, 1], cell  # the figure and its label, one line each
        tops = [cell["top"] for cell in card["cells"]]
        assert tops == sorted(tops)
        rows = [tops[i : i + 4] for i in range(0, len(tops), 4)]
        assert all(len(set(row)) == 1 for row in rows), card  # four figures to a row
        assert len({row[0] for row in rows}) == len(rows)
    assert re.match(r"\d\d,\d{3} \| prompt tokens", cards[1]["cells"][0]["text"])  # wide figures
    assert tab.problems == []


@pytest.mark.parametrize("width", [1280, 1100])
def test_the_rail_shows_each_conversation_summary_whole(
    tab: Page, big_page: Path, width: int
) -> None:
    tab.page.set_viewport_size({"width": width, "height": 900})
    page = tab.open_file(big_page)
    [summary] = page.evaluate(RAIL_SUMMARIES)
    assert summary["meta"].startswith("5 req · eff ")
    assert " · lost " in summary["meta"]
    assert not summary["metaCut"], summary
    assert summary["keyCut"] and summary["keyEllipsis"] == "ellipsis"  # the key gives way
    assert tab.problems == []
