"""The text report leads with the summary and the largest losses; every request's row is there
when asked (``full``, ``cache-report --all``) or when the report is small.

The corpus is a team's day in miniature: six conversations whose system prompt carries the time
(one cause, found in six conversations: said once, with its evidence once), one whose tools
change mid-way, one the provider missed, one with a refused request, and two that lost nothing.
What the summary must say was written down before the first run: the refusal first, then the
volatile system prompt (the largest loss, summed over its conversations), then the others by the
tokens they lost.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from dsh_testkit.doctor import DoctorReport, diagnose, report_text
from dsh_testkit.doctor import _render as render_module
from tests._support import run_cli

from ._bodies import SYSTEM, TOOLS, Traffic, assistant, body, floor, system, tokens_before, user

EXTRA_TOOL = {
    "type": "function",
    "function": {
        "name": "write_file",
        "description": "Write a text file.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
}


def _conversation(
    traffic: Traffic,
    key: str,
    *,
    steps: int = 4,
    volatile: bool = False,
    tools_change_at: int | None = None,
    missed_at: int | None = None,
    refused_at: int | None = None,
) -> None:
    messages = [user(f"{key}: what does the module do?")]
    for step in range(steps):
        text = f"{SYSTEM}\nNow: 2026-12-07T10:0{step}:00Z" if volatile else SYSTEM
        tools = (
            [*TOOLS, EXTRA_TOOL]
            if tools_change_at is not None and step >= tools_change_at
            else TOOLS
        )
        request = body([system(text), *messages], tools=tools)
        if step == refused_at:
            traffic.add(request, status=400, error="invalid request", conversation=key)
        reusable = floor(tokens_before(request, len(messages) - 1)) if step else 0
        lost_here = volatile or step in (tools_change_at, missed_at)
        answer = assistant(f"{key}: answer {step}")
        traffic.add(request, answer=answer, hit=0 if lost_here else reusable, conversation=key)
        messages = [*messages, answer, user(f"{key}: and then {step}?")]


def _day() -> DoctorReport:
    traffic = Traffic()
    for i in range(6):
        _conversation(traffic, f"vol-{i}", volatile=True)
    _conversation(traffic, "tools", steps=6, tools_change_at=3)
    _conversation(traffic, "missed", missed_at=2)
    _conversation(traffic, "refused", refused_at=2)
    _conversation(traffic, "calm-1")
    _conversation(traffic, "calm-2")
    return diagnose(traffic.trace())


@pytest.fixture(scope="module")
def day() -> DoctorReport:
    return _day()


_TABLE = re.compile(r"^ *# +compared with +prompt", re.MULTILINE)
"""A conversation's table of requests: its header row."""

_HEAD = re.compile(r"^  (loss|refusal|note)\s+(\S+) · (.*?)(?: · ([\d,]+) tokens lost)?$")


def _heads(text: str) -> list[tuple[str, str, str, int]]:
    """The largest losses' heads: (severity, code, where, tokens lost)."""
    section = text.split("\nlargest losses", 1)[1].split("\n\n", 1)[0]
    heads = []
    for line in section.splitlines()[1:]:
        found = _HEAD.match(line)
        if found:
            severity, code, where, lost = found.groups()
            heads.append((severity, code, where, int((lost or "0").replace(",", ""))))
    return heads


def test_the_summary_comes_first_and_the_largest_losses_in_order(day: DoctorReport) -> None:
    text = report_text(day, full=False)
    order = [
        text.index("  all efficiency"),
        text.index("what fixing each cause would save"),
        text.index("\nlargest losses"),
        text.index("\nconversations that lost most"),
        text.index("\nlegend"),
    ]
    assert order == sorted(order)
    heads = _heads(text)
    assert [code for _, code, _, _ in heads][:2] == ["request-refused", "volatile-system-text"]
    losses = [lost for severity, _, _, lost in heads if severity == "loss"]
    assert losses == sorted(losses, reverse=True) and losses[0] > 0
    assert {code for _, code, _, _ in heads} >= {"tools-changed", "provider-miss"}
    # the volatile prompt: one cause over six conversations, its evidence said once
    volatile = next(h for h in heads if h[1] == "volatile-system-text")
    assert "in 6 conversations (vol-0, vol-1, vol-2, …)" in volatile[2]
    assert text.count("Now: 2026-12-07T10:00:00Z") == 1
    # no request's row without --all
    assert not _TABLE.search(text)
    assert "cache-report --all" in text


def test_every_lost_token_is_in_the_largest_losses_when_all_are_shown(day: DoctorReport) -> None:
    heads = _heads(report_text(day, full=False, top=1000))
    savings = day.savings()
    by_code: dict[str, int] = {}
    for severity, code, _, lost in heads:
        if severity == "loss":
            by_code[code] = by_code.get(code, 0) + lost
    assert by_code == {code: entry["lostTokens"] for code, entry in savings.items()}


def test_top_bounds_both_lists(day: DoctorReport) -> None:
    text = report_text(day, full=False, top=2)
    assert len(_heads(text)) == 2
    assert re.search(r"largest losses \(2 of \d+ causes\)", text)
    rows = text.split("\nconversations that lost most", 1)[1].split("\n\n", 1)[0].splitlines()
    assert "(2 of 9)" in rows[0]  # six volatile, tools, missed, refused
    lost = [int(re.split(r" {2,}", row)[-2].replace(",", "")) for row in rows[2:]]
    assert len(lost) == 2 and lost == sorted(lost, reverse=True)
    quiet = report_text(day, full=False, top=0)
    assert "largest losses" not in quiet and "conversations that lost most" not in quiet
    assert "  all efficiency" in quiet


def test_every_request_with_full_and_the_causes_named_once(day: DoctorReport) -> None:
    text = report_text(day, full=True)
    for c in day.conversations:
        assert f"\nconversation {c.key} · {len(c.requests)} request(s)" in text
    assert len(_TABLE.findall(text)) == len(day.conversations)
    # the ranking names each cause in one line; its evidence is said in its conversation
    assert text.index("\nlargest losses") < text.index("\nconversation vol-0")
    assert "conversations that lost most" not in text


def test_a_small_report_shows_every_request_and_a_large_one_its_summary(
    day: DoctorReport, monkeypatch: pytest.MonkeyPatch
) -> None:
    requests = sum(len(c.requests) for c in day.conversations)
    assert requests <= render_module.DETAIL_REQUESTS
    assert report_text(day) == report_text(day, full=True)
    monkeypatch.setattr(render_module, "DETAIL_REQUESTS", requests - 1)
    assert report_text(day) == report_text(day, full=False)


def test_one_conversation_in_full_is_not_said_twice() -> None:
    traffic = Traffic()
    _conversation(traffic, "alone", volatile=True)
    text = report_text(diagnose(traffic.trace()))
    assert "largest losses" not in text
    assert text.count("loss    volatile-system-text ·") == 1


def test_nothing_lost_says_so() -> None:
    traffic = Traffic()
    _conversation(traffic, "calm")
    _conversation(traffic, "calm-too")
    text = report_text(diagnose(traffic.trace()), full=False)
    assert "no finding cost a cache hit or got a request refused" in text
    assert "conversations that lost most" not in text


def test_the_command_line_chooses(tmp_path: Path) -> None:
    traffic = Traffic()
    for i in range(3):
        _conversation(traffic, f"vol-{i}", volatile=True)
    path = tmp_path / "day.trace"
    lines = ['{"format":"dsh-trace","version":1,"source":"proxy"}']
    for e in traffic.exchanges:
        assert e.usage is not None
        record = {
            "index": e.index,
            "endpoint": "chat",
            "url": "https://api.deepseek.com/chat/completions",
            "conversation": e.conversation,
            "status": e.status,
            "request": e.body,
            "response": e.response,
            "usage": {"promptTokens": e.usage.prompt_tokens, "hitTokens": e.usage.hit_tokens},
        }
        lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    default = run_cli("cache-report", str(path))
    assert default.returncode == 0, default.stderr
    assert len(_TABLE.findall(default.stdout)) == 3  # 12 requests: every row
    summary = run_cli("cache-report", "--no-all", "--top", "1", str(path))
    assert summary.returncode == 0, summary.stderr
    assert not _TABLE.search(summary.stdout)
    assert "largest losses" in summary.stdout and "(1 of 3)" in summary.stdout
    every = run_cli("cache-report", "--all", str(path))
    assert every.stdout == default.stdout
    assert run_cli("cache-report", "--full", str(path)).stdout == default.stdout
    assert run_cli("cache-report", "--no-full", "--top", "1", str(path)).stdout == summary.stdout
    bad = run_cli("cache-report", "--top", "-1", str(path))
    assert bad.returncode == 2 and "--top must be 0 or more" in bad.stderr


def test_keys_are_shown_as_written_never_as_markup() -> None:
    """Conversation keys come from the recording (session ids, headers, OpenTelemetry ids):
    rich must print them, not read them as its markup (``[/]`` alone crashed it)."""
    traffic = Traffic()
    keys = ["[/]", "[bold]x[/]", "job[/tmp/a]", "sess-[red]"]
    for key in keys:
        _conversation(traffic, key, volatile=True)
    report = diagnose(traffic.trace())
    for full in (False, True):
        text = report_text(report, full=full)
        for key in keys:
            assert key in text, (full, key)


def test_the_summary_counts_the_notes_and_orders_savings_by_tokens(day: DoctorReport) -> None:
    text = report_text(day, full=False)
    notes = {
        code for r in day.requests for f in r.findings if f.severity == "note" for code in [f.code]
    }
    assert notes, "the corpus must hold notes"
    line = next(line for line in text.splitlines() if line.startswith("notes (no tokens lost): "))
    for code in notes:
        count = sum(
            1 for r in day.requests for f in r.findings if f.code == code and f.severity == "note"
        )
        assert f"{code} on {count:,}" in line
    saving = text.split("what fixing each cause would save\n", 1)[1].split("\n\n", 1)[0]
    tokens = [
        int(found.group(1).replace(",", ""))
        for row in saving.splitlines()
        if (found := re.search(r": ([\d,]+) tokens", row))
    ]
    assert len(tokens) == len(day.savings()) and tokens == sorted(tokens, reverse=True)
