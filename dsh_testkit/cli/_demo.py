"""``dsh-testkit demo``: the project's main job, end to end, in a few seconds.

It starts the mock DeepSeek on loopback, runs a scripted three-turn agent session with tools
through our loop and the real ``DeepSeekProvider`` over HTTP — with one header change (a tool
added mid-list) and one compaction — writes the session log, audits it and prints the cache
report, then names the log and the HTML report. No key and no network: the mock answers from a
script and its prefix-cache simulator reports usage. ``--live`` runs the same session against
the real API (needs ``DEEPSEEK_API_KEY``; the model improvises instead of following a script).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.rule import Rule

from dsh_core import Agent, AgentOptions, Compactor, Session, Tool, tool
from dsh_core.persistence import write_session
from dsh_core.providers import DeepSeekProvider

__all__ = ["add_demo_arguments", "run_demo"]

FILES = {
    "src/retry.py": "class RetryPolicy:\n    max_attempts = 4\n    base_delay_ms = 500\n",
    "src/client.py": "from retry import RetryPolicy\n\nPOLICY = RetryPolicy()\n",
    "README.md": "Client library. Retries are configured in src/retry.py.\n",
}

PERSONA = "\n".join(
    [
        "You are Ferris, a careful code-reading assistant working in a small repository.",
        "Use the tools to look things up; never invent file contents. Answer in one or two",
        "sentences and name the files you relied on.",
    ]
    + [
        f"House rule {i}: read before you claim, cite the path, keep answers short and exact."
        for i in range(1, 31)
    ]
)

PROMPTS = (
    "Where is the retry policy defined?",
    "How many attempts does it allow, and who uses it?",
    "Summarise what we found in one sentence.",
)


@tool(
    parameters={
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
    },
    concurrency_safe=True,
)
async def find_symbol(args: Any, ctx: Any) -> str:
    """Find which file defines a class or function."""
    name = str(args.get("name", "")) if isinstance(args, dict) else ""
    hits = [
        path for path, text in FILES.items() if f"class {name}" in text or f"def {name}" in text
    ]
    return "\n".join(hits) or f"no definition of {name!r}"


@tool(
    parameters={
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    },
    concurrency_safe=True,
)
async def read_file(args: Any, ctx: Any) -> str:
    """Read a file of the repository."""
    path = str(args.get("path", "")) if isinstance(args, dict) else ""
    return FILES.get(path, f"no such file: {path}")


@tool(
    parameters={
        "type": "object",
        "properties": {"pattern": {"type": "string"}},
        "required": ["pattern"],
    },
    concurrency_safe=True,
)
async def grep(args: Any, ctx: Any) -> str:
    """Search every file for a literal string; returns path:line matches."""
    pattern = str(args.get("pattern", "")) if isinstance(args, dict) else ""
    return (
        "\n".join(
            f"{path}:{n}: {line}"
            for path, text in FILES.items()
            for n, line in enumerate(text.splitlines(), start=1)
            if pattern and pattern in line
        )
        or f"no match for {pattern!r}"
    )


def _script() -> list[Any]:
    from ..mock import Reply, ToolCall

    return [
        # turn 1
        Reply(
            reasoning="I should find where RetryPolicy is defined.",
            tool_calls=(ToolCall(name="find_symbol", arguments='{"name": "RetryPolicy"}'),),
        ),
        Reply(text="The retry policy is the RetryPolicy class in src/retry.py."),
        # turn 2 (the header gained `grep` between find_symbol and read_file)
        Reply(
            reasoning="Read the policy and search for its users, in parallel.",
            tool_calls=(
                ToolCall(name="read_file", arguments='{"path": "src/retry.py"}'),
                ToolCall(name="grep", arguments='{"pattern": "RetryPolicy"}'),
            ),
        ),
        Reply(text="It allows 4 attempts (src/retry.py); src/client.py builds the POLICY from it."),
        # the compaction's one-shot summary call, before turn 3
        Reply(
            text="The user asked about the retry policy: RetryPolicy in src/retry.py allows 4 "
            "attempts with a 500 ms base delay; src/client.py uses it."
        ),
        # turn 3
        Reply(text="RetryPolicy (src/retry.py) allows 4 attempts and is used by src/client.py."),
    ]


@contextmanager
def _target(live: bool, console: Console) -> Iterator[tuple[str, str, str]]:
    """``(base_url, api_key, where)``; a loopback mock unless ``live``."""
    if live:
        from dsh_core.providers.deepseek import API_KEY_ENV, BASE_URL_ENV, DEFAULT_BASE_URL

        key = os.environ.get(API_KEY_ENV)
        if not key:
            raise SystemExit(f"dsh-testkit demo --live needs {API_KEY_ENV} in the environment")

        base = os.environ.get(BASE_URL_ENV) or DEFAULT_BASE_URL
        yield base, key, f"the live DeepSeek API at {base}"
        return
    from ..mock import MockDeepSeek, MockServer

    with MockServer(MockDeepSeek(_script())) as server:
        console.print(f"[dim]mock DeepSeek listening on {server.base_url} (no key, no network)[/]")
        yield server.base_url, "sk-demo-not-a-real-key", f"the mock at {server.base_url}"


async def _session(
    base_url: str, api_key: str, model: str, log_path: Path, console: Console
) -> Session:
    async with DeepSeekProvider(api_key=api_key, base_url=base_url) as provider:
        session = Session.create(f"demo-{int(time.time())}")
        tools: list[Tool] = [find_symbol, read_file]
        with write_session(log_path, session):
            agent = Agent(
                session,
                provider,
                AgentOptions(provider="deepseek", model=model, system=PERSONA, invariants=True),
                tools=tools,
            )
            for turn, prompt in enumerate(PROMPTS, start=1):
                note = ""
                remove_hook = None
                if turn == 2:
                    agent.register_tool(grep)
                    note = "\n        [dim](header change: tool `grep` added mid-list → a request/header-delta)[/]"
                if turn == 3:
                    remove_hook = agent.add_pre_step(Compactor(threshold_tokens=1, keep_last=0))
                    note = "\n        [dim](compaction: the earlier turns are summarised before this step)[/]"
                console.print(f"[bold cyan]turn {turn}[/] [bold]user:[/] {prompt}{note}")
                with console.status(f"turn {turn}: the agent is working…", spinner="dots"):
                    answer = await agent.run(prompt)
                if remove_hook is not None:
                    remove_hook()
                console.print(f"        [bold]assistant:[/] {answer.text.strip()}")
            assert agent.request_invariant is not None
            summaries = sum(1 for e in session.events if e.type == "compact/summary")
            console.print(
                f"[green]✓[/] {agent.request_invariant.checked} conversation requests (+{summaries} "
                "compaction call); each was checked, before dispatch, to equal its reconstruction "
                "from the log"
            )
    return session


def add_demo_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``dsh-testkit demo``."""
    parser.add_argument(
        "--out",
        default="dsh-demo-out",
        help="directory for the session log and the HTML report (default: ./dsh-demo-out)",
    )
    parser.add_argument(
        "--live",
        action="store_true",
        help="run against the real API (needs DEEPSEEK_API_KEY); default: the loopback mock",
    )
    parser.add_argument(
        "--model",
        default=os.environ.get("DSH_E2E_MODEL", "deepseek-v4-flash"),
        help="model name (default: $DSH_E2E_MODEL or deepseek-v4-flash)",
    )


def run_demo(args: argparse.Namespace) -> int:
    """Run the demo; returns the exit status (0 when the audit finds nothing wrong)."""
    from .._console import emit, make_console
    from ..doctor import diagnose
    from ..doctor._render import render_report
    from ..explorer import render_html
    from ..reports import audit_file
    from ..reports._audit_render import render_audit

    console = make_console()
    out = Path(args.out)
    log_path = out / "session.jsonl"
    html_path = out / "cache-report.html"
    kept = (
        out
        if out.exists() and not out.is_dir()
        else _not_the_demos(log_path, b'{"type":"session","version":0,"id":"demo-')
        or _not_the_demos(
            html_path, b"<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        )
    )
    if kept is not None:
        print(
            f"dsh-testkit demo: {kept} is not what an earlier demo wrote; the demo replaces only "
            "its own files (choose another --out)",
            file=sys.stderr,
        )
        return 2
    out.mkdir(parents=True, exist_ok=True)
    if log_path.exists():
        log_path.unlink()  # a fresh run, not an append to the previous demo's log
    console.print(
        Panel.fit(
            "A scripted three-turn agent session with tools, one header change and one "
            "compaction,\nthen an audit of its log and a cache report.",
            title="dsh-testkit demo",
        )
    )
    started = time.perf_counter()
    with _target(args.live, console) as (base_url, api_key, where):
        console.print(f"[dim]talking to {where} with model {args.model}[/]")
        asyncio.run(_session(base_url, api_key, args.model, log_path, console))

    console.print(Rule("audit"))
    audit = audit_file(log_path)
    emit(console, *render_audit(audit))
    console.print(Rule("cache report"))
    report = diagnose(log_path)
    emit(console, *render_report(report))
    html_path.write_text(render_html(report), encoding="utf-8")
    console.print(Rule())
    console.print(f"session log:  {log_path}")
    console.print(f"cache report: {html_path}")
    console.print(f"[dim]done in {time.perf_counter() - started:.1f}s[/]")
    if not audit.ok:
        print("dsh-testkit demo: the audit found violations", file=sys.stderr)
        return 1
    return 0


def _not_the_demos(path: Path, start: bytes) -> Path | None:
    """``path`` when it exists and does not start as the demo writes it (someone else's file,
    which the demo must not replace); ``None`` otherwise."""
    try:
        with path.open("rb") as file:
            head = file.read(len(start))
    except FileNotFoundError:
        return None
    except OSError:
        return path
    return None if head == start else path
