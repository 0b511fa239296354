"""The Cache Explorer in a real Chromium: pages made from real traffic (an openai-SDK agent
against the loopback mock), clicked, filtered and driven by keys, hostile text inert, a
10,000-request trace, and live pages of a real proxy and mock while requests flow."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import pytest

from dsh_testkit.doctor import diagnose
from dsh_testkit.explorer import live_pages, render_html
from dsh_testkit.mock import MockDeepSeek, MockServer
from dsh_testkit.proxy import ProxyServer
from tests.testkit.explorer._scenes import three_killers
from tests.testkit.explorer.conftest import Page
from tests.testkit.explorer.test_page import hostile_bodies

KEY = "sk-explorer-test-key"


def write(tmp_path: Path, report: Any, name: str = "explorer.html") -> Path:
    path = tmp_path / name
    path.write_text(render_html(report), encoding="utf-8")
    return path


def rail(page: Any) -> list[str]:
    """The request numbers the rail shows, in order."""
    return page.locator(".rail-row.req .num").all_inner_texts()


def row(page: Any, number: int) -> Any:
    """The rail's row of request #number."""
    return page.locator(f".rail-row.req[data-index='{number - 1}']")


def selected(page: Any) -> str:
    return page.locator(".rail-row.sel .num").inner_text()


def verdict(page: Any) -> str:
    return page.locator(".verdict").inner_text()


@pytest.fixture(scope="module")
def killers_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write(tmp_path_factory.mktemp("explorer"), diagnose(three_killers()))


def test_three_cache_killers_are_visible_without_reading_text(
    tab: Page, killers_page: Path
) -> None:
    page = tab.open_file(killers_page)
    assert rail(page) == [f"#{n}" for n in range(1, 9)]
    codes = page.locator(".rail-row.req .codes").all_inner_texts()
    assert codes[1] == "volatile-system-text" and codes[4] == "tools-changed"
    assert codes[6] == "history-rewritten" and codes[3] == "extends #3"
    # it opens on the largest loss (#5: 1,152 tokens, the tool list changed)
    assert selected(page) == "#5"
    assert verdict(page).startswith("Lost 1,152 of 1,920 reusable tokens")
    assert "cause: tools-changed" in verdict(page)
    # the first loss, with the characters that changed
    row(page, 2).click()
    assert verdict(page).startswith("Lost 896 of 1,408 reusable tokens")
    assert "cause: volatile-system-text" in verdict(page)
    finding = page.locator(".finding.loss[data-code=volatile-system-text]")
    assert finding.locator(".diff del").inner_text() == "0"
    assert finding.locator(".diff ins").inner_text() == "1"
    assert (
        "Current time: 2026-12-02T17:0" in finding.locator(".diff ins").locator("..").inner_text()
    )
    # the break marker sits at the first divergent token on both prompt bars
    bars = page.locator(".sig .bar")
    assert bars.count() == 2
    for i in range(2):
        assert bars.nth(i).locator(".brk").count() == 1
    assert (
        page.locator(".sig .bar[data-index='1'] .seg.div").get_attribute("data-label") == "system"
    )
    assert tab.problems == []


def test_clicking_a_request_shows_its_diff_and_what_it_was_compared_with(
    tab: Page, killers_page: Path
) -> None:
    page = tab.open_file(killers_page)
    row(page, 5).click()
    assert selected(page) == "#5"
    assert "first difference in tools" in verdict(page)
    assert page.locator(".ab .card.a h3").inner_text() == "A · #4 · the request #5 diverges from"
    inserted = page.locator(".finding[data-code=tools-changed] .diff ins").inner_text()
    assert "grep" in inserted
    assert (
        page.locator(".finding[data-code=tools-changed] .advice")
        .inner_text()
        .startswith("What to do: Offer one fixed tool list")
    )
    row(page, 4).click()
    # what it shares beyond the hit is rounding to the unit, said so (never a contradiction)
    assert verdict(page) == (
        "Lost nothing: extends #3 — all 1,920 reusable tokens were hits. The last 45 tokens it "
        "shares with #3 fall short of a whole 128-token cache unit: hits come in whole units, so "
        "they are read again at the miss price (rounding to the unit, not a loss)."
    )
    assert "below one unit (rounded off)" in page.locator(".card.b .figs").inner_text()
    assert page.locator(".finding").count() == 0
    # a repeated finding says once which requests it covers
    row(page, 3).click()
    also = page.locator(".finding[data-code=volatile-system-text] .also").inner_text()
    assert also.startswith("The same finding on 2 requests (#2–#3")
    page.locator(".finding[data-code=volatile-system-text] .also a").click()
    assert selected(page) == "#2"
    assert page.evaluate("location.hash") == "#r=2"
    assert tab.problems == []


def test_the_filter_and_the_keys(tab: Page, killers_page: Path) -> None:
    page = tab.open_file(killers_page)
    page.locator("[data-role=lossy]").click()
    assert rail(page) == ["#2", "#3", "#5", "#7"]
    page.keyboard.press("f")
    assert len(rail(page)) == 8
    page.locator(".rail-list").focus()
    page.keyboard.press("Home")
    assert selected(page) == "#1"
    page.keyboard.press("n")
    page.keyboard.press("n")
    page.keyboard.press("n")
    assert selected(page) == "#5"
    page.keyboard.press("a")
    assert selected(page) == "#4"
    page.keyboard.press("j")
    page.keyboard.press("ArrowDown")
    assert selected(page) == "#6"
    page.keyboard.press("End")
    assert selected(page) == "#8"
    page.keyboard.press("/")
    page.keyboard.type("tools-changed")
    assert rail(page) == ["#5"]
    page.keyboard.press("Escape")
    page.keyboard.press("/")
    page.keyboard.type("#3")
    assert selected(page) == "#3"
    assert tab.problems == []


def test_codes_link_to_the_in_page_glossary_and_the_overview_prices_the_causes(
    tab: Page, killers_page: Path
) -> None:
    page = tab.open_file(killers_page)
    row(page, 2).click()
    page.locator(".finding a.code[data-code=volatile-system-text]").first.click()
    assert page.evaluate("location.hash") == "#code-volatile-system-text"
    entry = page.locator("#code-volatile-system-text")
    assert entry.is_visible()
    assert (
        "docs/guides/cache-doctor.md#volatile-system-text" in page.locator(".glossary").inner_text()
    )
    page.locator("[data-tab=overview]").click()
    rows = page.locator("table.causes tr[data-code]")
    assert rows.evaluate_all("rs => rs.map(r => r.dataset.code)") == [
        "volatile-system-text",
        "tools-changed",
        "history-rewritten",
    ]  # the costliest cause first
    assert rows.first.locator("td").last.inner_text().startswith("$")
    figures = page.locator("[data-role=figures]").inner_text()
    assert "Figures: reported — hits and prompt tokens are the provider's own" in figures
    assert "from the trace's own hits" in page.locator("[data-role=granularity]").inner_text()
    assert "deepseek-v4-flash since 2026-04-24" in page.locator("[data-role=prices]").inner_text()
    rows.first.click()  # filters the rail to that cause (the risk named on #1 included)
    assert rail(page) == ["#1", "#2", "#3"]
    assert tab.problems == []


def test_hostile_text_in_a_trace_is_shown_not_run(tab: Page, tmp_path: Path) -> None:
    page = tab.open_file(write(tmp_path, diagnose(hostile_bodies())))
    assert page.evaluate("window.pwned === undefined")
    assert page.locator("img").count() == 0
    assert page.locator("script").count() == 3
    shown = page.locator(".finding .diff").first.inner_text()
    assert "</script><script>window.pwned=1</script>" in shown
    assert tab.problems == []


@pytest.mark.slow
def test_ten_thousand_requests_open_and_stay_usable(tab: Page, tmp_path: Path) -> None:
    from benchmarks.bench_explorer import trace_of_size

    page = tab.open_file(write(tmp_path, diagnose(trace_of_size(10_000))))
    assert page.locator("#app").get_attribute("data-requests") == "10000"
    assert page.locator(".rail-row").count() < 80  # only the rows in view exist
    page.locator(".rail-list").focus()
    page.keyboard.press("End")
    assert selected(page) == "#10000"
    page.keyboard.press("f")
    assert "requests shown" in page.locator(".rail-tools .count").inner_text()
    page.locator(".rail-list").evaluate("el => { el.scrollTop = el.scrollHeight / 2; }")
    page.wait_for_timeout(50)
    assert 0 < page.locator(".rail-row").count() < 80
    assert tab.problems == []


def ask(client: openai.OpenAI, history: list[dict[str, Any]], text: str) -> None:
    history.append({"role": "user", "content": text})
    reply = client.chat.completions.create(model="deepseek-v4-flash", messages=history)  # type: ignore[arg-type]
    history.append(reply.choices[0].message.model_dump(exclude_none=True))  # reasoning kept


def wait_for_requests(page: Any, count: int) -> None:
    page.wait_for_function(
        "(n) => document.getElementById('app').dataset.requests === String(n)",
        arg=count,
        timeout=10_000,
    )


def test_the_live_proxy_page_shows_requests_as_they_are_answered(tab: Page) -> None:
    with (
        MockServer(MockDeepSeek()) as upstream,
        ProxyServer(upstream.base_url, pages=live_pages) as proxy,
    ):
        page = tab.open(f"{proxy.base_url}/_dsh/explorer")
        assert (
            page.locator(".empty").inner_text() == "The trace is empty: it holds no model requests."
        )
        client = openai.OpenAI(base_url=proxy.base_url, api_key=KEY)
        history: list[dict[str, Any]] = []
        ask(client, history, "hello")
        wait_for_requests(page, 1)
        assert selected(page) == "#1"  # untouched, the page follows the newest request
        ask(client, history, "and now?")
        wait_for_requests(page, 2)
        assert selected(page) == "#2"
        assert "live" in page.locator("[data-role=live]").inner_text()
        # once the user picks a request, new ones do not take the selection away
        row(page, 1).click()
        ask(client, history, "third")
        wait_for_requests(page, 3)
        assert selected(page) == "#1"
        assert rail(page) == ["#1", "#2", "#3"]
        assert "1 new request(s)" in page.locator("[data-role=toast]").inner_text()
        client.close()
    assert tab.problems == []


def test_the_live_mock_page_shows_its_request_log(tab: Page) -> None:
    with MockServer(MockDeepSeek(), pages=live_pages) as server:
        page = tab.open(f"{server.base_url}/_dsh/explorer")
        client = openai.OpenAI(base_url=server.base_url, api_key=KEY)
        history: list[dict[str, Any]] = []
        ask(client, history, "hello")
        ask(client, history, "more")
        wait_for_requests(page, 2)
        assert rail(page) == ["#1", "#2"]
        assert page.locator(".rail-row.req .codes").first.inner_text() == "first"
        assert "extends #1" in (row(page, 2).get_attribute("title") or "")
        client.close()
    assert tab.problems == []


def side_call_bodies() -> list[dict[str, Any]]:
    """A main line #1 → #2 → #4 → #5 and a compaction side call #3 off #2."""
    system = {"role": "system", "content": "You are terse. " * 200}
    turns = [{"role": "user", "content": "one"}, {"role": "assistant", "content": "ok one"}]
    turns += [{"role": "user", "content": "two"}]
    summarize = {"role": "user", "content": "Summarize the conversation so far."}
    later = [{"role": "assistant", "content": "ok two"}, {"role": "user", "content": "three"}]
    last = [{"role": "assistant", "content": "ok three"}, {"role": "user", "content": "four"}]
    lines = [
        turns[:1],
        turns,
        [*turns, summarize],
        [*turns, *later],
        [*turns, *later, *last],
    ]
    return [{"model": "deepseek-v4-flash", "messages": [system, *m]} for m in lines]


def test_a_side_call_is_a_branch_of_the_request_it_starts_from(tab: Page, tmp_path: Path) -> None:
    report = diagnose(side_call_bodies())
    assert [r.parent for r in report.requests] == [None, 0, 1, 1, 3]
    page = tab.open_file(write(tmp_path, report))
    branches = page.locator(".rail-row.req").evaluate_all(
        "rows => rows.map(r => [r.querySelector('.num').textContent, !!r.querySelector('.branch'),"
        " r.firstElementChild.style.width])"
    )
    assert branches == [
        ["#1", False, "0px"],
        ["#2", False, "0px"],
        ["#3", True, "12px"],
        ["#4", False, "0px"],
        ["#5", False, "0px"],
    ]
    row(page, 4).click()
    assert page.locator(".ab .card.a h3").inner_text() == "A · #2 · the request #4 extends"
    assert tab.problems == []


def test_the_page_expands_the_compact_report_to_exactly_the_full_one(
    tab: Page, tmp_path: Path
) -> None:
    """The page embeds and polls the compact document (formatVersion 4); its script expands it
    to what ``DoctorReport.to_json`` says, value for value, in a real Chromium."""
    from importlib import resources

    from dsh_testkit.doctor import compact_report

    core = resources.files("dsh_testkit.explorer").joinpath("js/core.js").read_text("utf-8")
    page = tab.page
    page.goto("about:blank")
    expand = '(doc) => {\n"use strict";\n' + core + "\nreturn expandReport(doc);\n}"
    reports = [
        diagnose(three_killers()),
        diagnose(hostile_bodies()),
        diagnose(side_call_bodies()),
    ]
    assert any(c.groups for r in reports for c in r.conversations)
    for report in reports:
        assert page.evaluate(expand, compact_report(report)) == report.to_json()
        full = report.to_json()
        assert page.evaluate(expand, full) == full
    assert tab.problems == []
