"""12. The Cache Explorer: page size and write time grow linearly; the page opens and stays
responsive at 10,000 requests; a live proxy page shows a new request within a second.

The trace is section 9's synthetic proxy trace (conversations of 20 requests, ten interleaved,
one in ten with a timestamp in its system prompt), diagnosed once per size; what is timed is
what ``cache-report --html`` adds: rendering the page (``render_html``) and writing it. Sizes
and times at N and N/2 requests, their ratios the linearity figures. With Chromium installed
(``/usr/bin/chromium``, driven by Playwright), also: the time from navigation to a page ready
to use (the rail and the first request drawn) at N requests; the time for a key press (End:
select the last request, redraw the rail, the chart and the request view) measured in the page;
and, for a live ``dsh-testkit proxy`` page, the time from the client holding a new answer to
its row in the page's rail (polled every 0.4 s).
"""

from __future__ import annotations

import gc
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tools.explorer_screenshots import CHROMIUM, CHROMIUM_ARGS

from ._common import Figure, Section, median

__all__ = ["run", "trace_of_size"]

REQUESTS = 10_000
QUICK_REQUESTS = 200
ROUNDS = 7
QUICK_ROUNDS = 1
LIVE_SAMPLES = 12
QUICK_LIVE_SAMPLES = 2
GOAL_RATIO = 2.2


def trace_of_size(total: int) -> Any:
    """Section 9's synthetic proxy trace of ``total`` requests, as a ``Trace``."""
    from dsh_testkit.traces import loads_trace

    from .bench_traces import _records

    lines = ['{"format":"dsh-trace","version":1,"source":"proxy"}']
    lines += [json.dumps(record, separators=(",", ":")) for record in _records(total)]
    return loads_trace("\n".join(lines) + "\n", path="synthetic.trace")


def _write_once(report: Any, path: Path) -> tuple[float, int]:
    from dsh_testkit.explorer import render_html

    gc.collect()
    start = time.perf_counter()
    page = render_html(report)
    with path.open("w", encoding="utf-8", newline="\n") as file:
        file.write(page)
    return time.perf_counter() - start, path.stat().st_size


def _browser_figures(page_path: Path, total: int) -> list[Figure]:
    """Open the page in Chromium: time to ready, and a key press's redraw (median of 5)."""
    from playwright.sync_api import sync_playwright

    figures: list[Figure] = []
    with tempfile.TemporaryDirectory() as profile, sync_playwright() as driver:
        context = driver.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, args=list(CHROMIUM_ARGS), headless=True
        )
        try:
            page = context.new_page()
            opened = []
            for _ in range(3):
                start = time.perf_counter()
                page.goto(page_path.as_uri())
                page.wait_for_selector("#app[data-state=ready]", timeout=120_000)
                opened.append(time.perf_counter() - start)
            rows = page.locator(".rail-row").count()
            figures.append(
                Figure(
                    label=f"open the page, {total:,} requests (to ready)",
                    value=median(opened) * 1000,
                    unit="ms",
                    note=f"median of 3; {rows} rail rows in the DOM (virtualised)",
                )
            )
            presses = []
            for key in ("End", "Home", "End", "Home", "End"):
                presses.append(
                    page.evaluate(
                        """(key) => { const t = performance.now();
                        document.dispatchEvent(new KeyboardEvent('keydown', {key, bubbles: true}));
                        return performance.now() - t; }""",
                        key,
                    )
                )
            figures.append(
                Figure(
                    label=f"a key press (End / Home: select, redraw), {total:,} requests",
                    value=median(presses),
                    unit="ms",
                    note="median of 5, timed in the page",
                )
            )
        finally:
            context.close()
    return figures


def _live_figure(samples: int) -> Figure:
    """A live proxy page: from the client holding an answer to the page showing its row."""
    import httpx
    from playwright.sync_api import sync_playwright

    from dsh_testkit.explorer import live_pages
    from dsh_testkit.mock import MockDeepSeek, MockServer
    from dsh_testkit.proxy import ProxyServer

    waits: list[float] = []
    with (
        tempfile.TemporaryDirectory() as profile,
        MockServer(MockDeepSeek()) as upstream,
        ProxyServer(upstream.base_url, pages=live_pages) as proxy,
        httpx.Client(base_url=proxy.base_url, timeout=30) as client,
        sync_playwright() as driver,
    ):
        context = driver.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, args=list(CHROMIUM_ARGS), headless=True
        )
        try:
            page = context.new_page()
            page.goto(f"{proxy.base_url}/_dsh/explorer")
            page.wait_for_selector("#app[data-state=ready]")
            history: list[dict[str, str]] = []
            for n in range(samples):
                history.append({"role": "user", "content": f"question {n}"})
                answer = client.post(
                    "/chat/completions",
                    headers={"authorization": "Bearer sk-bench"},
                    json={"model": "deepseek-v4-flash", "messages": history},
                )
                answered = time.perf_counter()
                history.append(answer.json()["choices"][0]["message"])
                page.wait_for_function(
                    "(n) => document.getElementById('app').dataset.requests === String(n)",
                    arg=n + 1,
                    timeout=10_000,
                    polling=10,
                )
                waits.append(time.perf_counter() - answered)
        finally:
            context.close()
    return Figure(
        label="live proxy page: an answer to its row in the rail",
        value=median(waits) * 1000,
        unit="ms",
        goal="≤ 1,000 ms",
        ok=max(waits) <= 1.0,
        note=f"median of {samples}; max {max(waits) * 1000:.0f} ms; polled every 400 ms",
    )


def run(quick: bool) -> Section:
    from dsh_testkit.doctor import diagnose

    total = QUICK_REQUESTS if quick else REQUESTS
    rounds = QUICK_ROUNDS if quick else ROUNDS
    section = Section(
        key="explorer",
        title="The Cache Explorer",
        method=(
            f"Section 9's synthetic proxy trace at {total:,} and {total // 2:,} requests, "
            "diagnosed once per size; timed: `render_html` and writing the page (what "
            f"`cache-report --html` adds to the report), {rounds} round(s) alternating the "
            "sizes, medians; page size in bytes. With Chromium (Playwright, the system's "
            "browser): navigation to a page ready to use (median of 3), one key press's "
            "redraw timed in the page (median of 5), and a live proxy page's delay from an "
            "answer to its row."
        ),
    )
    reports = {n: diagnose(trace_of_size(n)) for n in (total, total // 2)}
    with tempfile.TemporaryDirectory() as tmp:
        paths = {n: Path(tmp) / f"explorer-{n}.html" for n in reports}
        times: dict[int, list[float]] = {n: [] for n in reports}
        sizes: dict[int, int] = {}
        for round_number in range(rounds):
            order = sorted(reports) if round_number % 2 else sorted(reports, reverse=True)
            for n in order:
                seconds, sizes[n] = _write_once(reports[n], paths[n])
                times[n].append(seconds)
        big, half = total, total // 2
        paired = [b / h for b, h in zip(times[big], times[half], strict=True) if h]
        ratio = statistics.median(paired) if paired else None
        section.figures += [
            Figure(
                label=f"page size, {big:,} requests",
                value=float(sizes[big]),
                unit="bytes",
                note=f"{half:,} requests: {sizes[half]:,} bytes; "
                f"{sizes[big] / big:,.0f} bytes per request",
            ),
            Figure(
                label=f"size({big:,}) / size({half:,})",
                value=sizes[big] / sizes[half],
                unit="×",
                goal=f"linear (≤ {GOAL_RATIO})",
                ok=sizes[big] / sizes[half] <= GOAL_RATIO,
            ),
            Figure(
                label=f"write the page, {big:,} requests",
                value=median(times[big]) * 1000,
                unit="ms",
                note=f"{half:,} requests: {median(times[half]) * 1000:,.0f} ms",
            ),
            Figure(
                label=f"t({big:,}) / t({half:,}) (write)",
                value=ratio,
                unit="×",
                goal=f"linear (≤ {GOAL_RATIO})",
                ok=None if ratio is None else ratio <= GOAL_RATIO,
            ),
        ]
        if shutil.which(CHROMIUM) is None:
            section.notes.append(
                "Chromium is not installed (apt-get install chromium): the browser figures "
                "were not measured."
            )
        else:
            section.figures += _browser_figures(paths[big], big)
            section.figures.append(_live_figure(QUICK_LIVE_SAMPLES if quick else LIVE_SAMPLES))
    return section


if __name__ == "__main__":
    print(json.dumps(run("--quick" in sys.argv).to_json()))
