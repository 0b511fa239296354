"""Screenshots of the Cache Explorer for the docs, taken by the system's Chromium.

``make docs`` calls :func:`screenshots` (from ``docs/_hooks.py``): a small agent talks to the
loopback mock and loses cache hits three ways — a timestamp in its system prompt, a tool
inserted mid-list, its history truncated — the cache doctor diagnoses the mock's request log,
and the page ``cache-report --html`` would write is opened in Chromium (driven by Playwright,
offline flags) and photographed. Without Chromium (``/usr/bin/chromium``) or Playwright it
returns nothing, and the guide says how to get the pictures.

``python -m tools.explorer_screenshots DIR`` writes the PNG files and the page into DIR.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

import httpx

__all__ = ["CHROMIUM", "SHOTS", "chromium_available", "sample_report", "screenshots"]

CHROMIUM: Final = "/usr/bin/chromium"
CHROMIUM_ARGS: Final = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
"""Headless and offline: without these Chromium waits on network lookups."""

RULES: Final = "\n".join(
    f"Rule {i}: read the file before answering, and cite its path." for i in range(1, 31)
)
NOTES: Final = " ".join(f"Note {i}: quote the file exactly." for i in range(40))


def _tool(name: str, description: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }


def _run_agent(base_url: str) -> None:
    """Eight requests of a careless agent: requests #2–#3 carry a new timestamp in the system
    prompt, #5 a tool inserted mid-list, #7 a truncated history."""
    tools = [_tool("read_file", "Read a file."), _tool("list_dir", "List a directory.")]
    history: list[dict[str, Any]] = []
    with httpx.Client(base_url=base_url, timeout=30) as client:
        for request in range(8):
            if request % 2 == 0:
                history.append({"role": "user", "content": f"Question {request // 2}. {NOTES}"})
            if request == 6:
                history = history[-2:]
            system = f"{RULES}\nCurrent time: 2026-12-02T17:0{min(request, 2)}:00Z"
            offered = tools if request < 4 else [tools[0], _tool("grep", "Search."), tools[1]]
            answer = client.post(
                "/chat/completions",
                headers={"authorization": "Bearer sk-docs-screenshots"},
                json={
                    "model": "deepseek-v4-flash",
                    "messages": [{"role": "system", "content": system}, *history],
                    "tools": offered,
                },
            )
            answer.raise_for_status()
            message = answer.json()["choices"][0]["message"]
            history.append({k: v for k, v in message.items() if v is not None})
            for call in message.get("tool_calls") or ():
                history.append({"role": "tool", "tool_call_id": call["id"], "content": "text"})


def sample_report() -> Any:
    """The cache doctor's report of the careless agent's traffic (real loopback HTTP)."""
    from dsh_testkit.doctor import diagnose
    from dsh_testkit.mock import MockDeepSeek, MockServer, Reply, ToolCall

    call = ToolCall(name="read_file", arguments='{"path": "src/retry.py"}')
    script = [Reply(reasoning="Let me read it.", tool_calls=(call,)), Reply(text="It retries.")]
    mock = MockDeepSeek(script * 4, passback="off")
    with MockServer(mock) as server:
        _run_agent(server.base_url)
    return diagnose(mock)


def _select(number: int) -> Callable[[Any], None]:
    def act(page: Any) -> None:
        page.locator(f".rail-row.req[data-index='{number - 1}']").click()

    return act


def _tab(name: str) -> Callable[[Any], None]:
    def act(page: Any) -> None:
        page.locator(f"[data-tab={name}]").click()

    return act


SHOTS: Final[Mapping[str, tuple[str, Callable[[Any], None]]]] = {
    "request.png": ("request #2: the timestamp that changed, character by character", _select(2)),
    "tools.png": ("request #5: a tool inserted mid-list", _select(5)),
    "overview.png": (
        "the overview: cost, causes and what fixing each would save",
        _tab("overview"),
    ),
}
"""File name → (caption, what to do on the page before the picture)."""


def chromium_available() -> bool:
    if shutil.which(CHROMIUM) is None:
        return False
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return False
    return True


def screenshots() -> dict[str, bytes]:
    """PNG bytes of each of :data:`SHOTS` (empty without Chromium or Playwright)."""
    if not chromium_available():
        return {}
    from playwright.sync_api import sync_playwright

    from dsh_testkit.explorer import render_html

    out: dict[str, bytes] = {}
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as driver:
        page_path = Path(tmp) / "explorer.html"
        page_path.write_text(render_html(sample_report()), encoding="utf-8")
        context = driver.chromium.launch_persistent_context(
            str(Path(tmp) / "profile"),
            executable_path=CHROMIUM,
            args=list(CHROMIUM_ARGS),
            headless=True,
            viewport={"width": 1360, "height": 860},
            color_scheme="light",
        )
        try:
            for name, (_, act) in SHOTS.items():
                page = context.new_page()
                page.goto(page_path.as_uri())
                page.wait_for_selector("#app[data-state=ready]")
                act(page)
                out[name] = page.screenshot()
                page.close()
        finally:
            context.close()
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m tools.explorer_screenshots DIR", file=sys.stderr)
        return 2
    target = Path(argv[0])
    target.mkdir(parents=True, exist_ok=True)
    shots = screenshots()
    if not shots:
        print(f"no screenshots: Chromium ({CHROMIUM}) or playwright is missing", file=sys.stderr)
        return 1
    for name, data in shots.items():
        (target / name).write_bytes(data)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
