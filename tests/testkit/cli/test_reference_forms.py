"""The reference harness's log forms and the verdicts on files that are not complete logs, through
``dsh-testkit audit | cache-report | rebuild`` run as a user runs them (a subprocess).

Fixtures are hand-written in ``tests/fixtures/reference-forms/`` with the reference's field names:
``message-prefix/`` (a ``messagePrefix`` placeholder, tools as a list of names, pin sidecars),
``plugin-compaction/`` (a compaction checkpoint with no ``compaction/*`` event), and
``not-logs/`` (one file per verdict of docs/reference-logs.md §2).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_testkit.doctor import expand_report
from dsh_testkit.reports import audit_file
from tests._support import REFERENCE_LOGS

FORMS = Path(__file__).resolve().parents[2] / "fixtures" / "reference-forms"
PREFIX = FORMS / "message-prefix" / "session.jsonl"
COMPACTION = FORMS / "plugin-compaction" / "session.jsonl"
NOT_LOGS = FORMS / "not-logs"


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "DEEPSEEK_API_KEY"}
    return subprocess.run(
        [sys.executable, "-m", "dsh_testkit.cli", *map(str, args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


# --------------------------------------------------------------------------------------------
# §1: forms the reference harness writes


def test_a_log_with_a_message_prefix_and_tool_names_audits_cleanly_with_the_changes_named() -> None:
    run = cli("audit", "--json", "--no-sidecars", PREFIX)
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(run.stdout)
    assert report["ok"] and report["violations"] == []
    change = report["headerTimeline"][1]
    assert change["reason"] == "change"
    assert change["changes"] == ["tool 'job_kill' added", "tools reordered (cordis_run, job_list)"]
    assert report["requests"][1]["differences"][0] == "header: tool 'job_kill' added"


def test_with_its_sidecars_the_audit_sees_the_real_prompt_change() -> None:
    report = audit_file(PREFIX)  # sidecars beside the log are picked up by default
    assert report.ok
    changes = report.header_timeline[1].changes
    assert changes[0] == "system: 1 line inserted after line 2"
    assert "tool 'job_kill' added" in changes
    named = audit_file(PREFIX, sidecars=None).header_timeline[0].header
    assert "system {{system}}" in named and "2 tools (names only)" in named


def test_a_prefix_change_is_named_in_the_audit(tmp_path: Path) -> None:
    lines = PREFIX.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[16] = lines[16].replace('"messagePrefix":["{{messagePrefix}}"]', '"messagePrefix":[]')
    path = tmp_path / "session.jsonl"
    path.write_text("".join(lines), encoding="utf-8")
    report = audit_file(path, sidecars=None)
    assert report.ok
    assert "messagePrefix: 1 message → 0 messages" in report.header_timeline[1].changes


def test_a_compaction_checkpoint_without_compaction_events_is_attributed_to_compaction() -> None:
    run = cli("audit", "--json", COMPACTION)
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads(run.stdout)
    (rewrite,) = report["rewrites"]
    assert rewrite["kind"] == "compaction" and rewrite["explainedBy"] == 10
    assert rewrite["description"] == (
        "compaction (checkpoint of compaction c-1): user/message at seq 10 replaced seq 3"
    )
    report2 = expand_report(json.loads(cli("cache-report", "--json", COMPACTION).stdout))
    second = report2["conversations"][0]["requests"][1]
    [finding] = second["findings"]
    assert (finding["code"], finding["severity"]) == ("history-rewritten", "loss")
    assert finding["where"] == "messages[2].content line 1 column 1"
    assert finding["evidence"][-1] == f"log: {rewrite['description']}"
    assert finding["lostTokens"] == second["lostTokens"] > 0


def test_a_checkpoint_inside_its_bracket_is_explained_by_the_bracket(tmp_path: Path) -> None:
    lines = COMPACTION.read_text(encoding="utf-8").splitlines(keepends=True)
    # Renumber nothing: turn the tool/call before the checkpoint into the bracket's start.
    lines[10] = (
        '{"type":"compaction/start","seq":9,"time":1785000000010,"data":{"compactionId":"c-1",'
        '"turn":1}}\n'
    )
    path = tmp_path / "session.jsonl"
    path.write_text("".join(lines), encoding="utf-8")
    rewrites = audit_file(path).rewrites
    assert [(r.kind, r.explained_by) for r in rewrites] == [("compaction", 9)]


# --------------------------------------------------------------------------------------------
# §2: files that are not complete logs


@pytest.mark.parametrize(
    ("command", "name", "reason"),
    [
        (command, "no-version.jsonl", "line 1: session header version must be an integer, got None")
        for command in ("audit", "cache-report", "rebuild")
    ]
    # audit and cache-report read a file whose first line is no session record as a trace.
    + [("rebuild", "not-jsonl.jsonl", "line 1: the session header is not valid JSON")]
    # The reference reader's load boundary refuses these too.
    + [
        (
            command,
            "message-without-id.jsonl",
            "user/message at seq 2 lacks an identified message",
        )
        for command in ("audit", "rebuild")
    ]
    + [
        (
            command,
            "seq-gap.jsonl",
            "seq gap at line 7 (seq 87 where seq 5 was expected) with a completed turn after it",
        )
        for command in ("audit", "cache-report")
    ],
)
def test_a_file_without_a_session_header_is_not_a_session_log(
    command: str, name: str, reason: str
) -> None:
    run = cli(command, NOT_LOGS / name)
    assert run.returncode == 2
    assert run.stdout == ""
    (line,) = run.stderr.splitlines()
    assert line.startswith(f"dsh-testkit {command}: {NOT_LOGS / name}: not a session log: {reason}")
    assert "Traceback" not in run.stderr


def test_an_empty_file_is_not_a_session_log(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_text("\n\n", encoding="utf-8")
    run = cli("rebuild", tmp_path / "empty.jsonl")
    assert run.returncode == 2 and "not a session log: empty log" in run.stderr


@pytest.mark.parametrize(
    ("name", "code", "fragment", "requests"),
    [
        (
            "chunks-without-step.jsonl",
            "log-invariant",
            "names turn 1 step 1, but no step is open",
            0,
        ),
        ("request-without-header.jsonl", "reconstruct", "has no request header in the log", 0),
        ("seq-gap-open-turn.jsonl", "unreadable", "seq 87 where seq 5 was expected", 1),
    ],
)
def test_a_trimmed_log_is_audited_with_the_violation_named(
    name: str, code: str, fragment: str, requests: int
) -> None:
    run = cli("audit", "--json", NOT_LOGS / name)
    assert run.returncode == 1, run.stderr
    assert "Traceback" not in run.stderr
    report = json.loads(run.stdout)
    assert [v["code"] for v in report["violations"]] == [code]
    assert fragment in report["violations"][0]["message"]
    assert len(report["requests"]) == requests


def test_the_audit_goes_on_after_a_recoverable_violation(tmp_path: Path) -> None:
    """A request with no header, then a good one: the violation named, the later one rebuilt."""
    base = (NOT_LOGS / "request-without-header.jsonl").read_text(encoding="utf-8").splitlines()
    header = (
        '{"type":"request/header","seq":10,"time":8,"data":{"header":{"config":{"provider":'
        '"deepseek-official","model":"deepseek-v4-flash"}},"reason":"initial"}}'
    )
    turn2 = [
        '{"type":"turn/start","seq":8,"time":8,"data":{"turn":2}}',
        '{"type":"step/start","seq":9,"time":8,"data":{"turn":2,"step":1}}',
        header,
        '{"type":"assistant/chunk","seq":11,"time":9,"data":{"turn":2,"step":1,"chunk":{"type":'
        '"finish","reason":{"kind":"stop"}}}}',
        '{"type":"step/end","seq":12,"time":9,"data":{"turn":2,"step":1}}',
        '{"type":"turn/end","seq":13,"time":9,"data":{"turn":2,"reason":{"kind":"completed"}}}',
    ]
    path = tmp_path / "session.jsonl"
    path.write_text("\n".join([*base, *turn2]) + "\n", encoding="utf-8")
    report = audit_file(path)
    assert [(v.code, v.seq) for v in report.violations] == [("reconstruct", 3)]
    (request,) = report.requests
    assert (request.turn, request.message_count) == (2, 2)  # the first turn's prompt and reply


def test_a_seq_gap_in_an_open_turn_keeps_the_events_before_it() -> None:
    report = audit_file(NOT_LOGS / "seq-gap-open-turn.jsonl")
    assert report.event_count == 5
    assert any("does not read from line 7 on" in n for n in report.notes)


# --------------------------------------------------------------------------------------------
# §3: dsh-testkit rebuild


def test_rebuild_prints_one_summary_per_request() -> None:
    run = cli("rebuild", PREFIX)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0] == "session {{sessionId}} · 23 events · 2 requests"
    assert lines[1].startswith("#1 turn 1 step 1 try 0 · boundary seq 4 · ")
    assert "system 2 lines · 2 tools · prefix 1 · 1 message · reply 'No jobs.'" in lines[1]
    assert lines[2].endswith("usage in 40 · out 4 · cache read 768")


def test_rebuild_wire_prints_the_exact_bodies() -> None:
    run = cli("rebuild", "--wire", "--json", PREFIX)
    assert run.returncode == 0, run.stderr
    document = json.loads(run.stdout)
    assert document["kind"] == "dsh-testkit/rebuild" and document["errors"] == []
    first = document["requests"][0]
    body = json.loads(first["wireText"])
    assert list(body) == ["model", "messages", "stream", "stream_options", "tools"]
    assert body == first["wire"]
    assert body["messages"][1]["content"] == "<skills>job_list, cordis_run</skills>"
    assert first["usage"] == {"inputTokens": 812, "outputTokens": 3, "cacheReadTokens": 0}
    assert first["reply"]["content"] == [{"type": "text", "text": "No jobs."}]
    anthropic = json.loads(cli("rebuild", "--wire", "--json", "--api", "anthropic", PREFIX).stdout)
    assert anthropic["requests"][0]["wire"]["system"] == "You are a job runner.\nBe brief."


def test_rebuild_wire_names_the_unfilled_placeholder_and_fails() -> None:
    run = cli("rebuild", "--wire", "--no-sidecars", PREFIX)
    assert run.returncode == 1
    assert (
        "cannot render the wire body: the request's system prompt is the placeholder " in run.stdout
    )
    document = json.loads(cli("rebuild", "--wire", "--json", "--no-sidecars", PREFIX).stdout)
    assert document["requests"][0]["wireError"]["placeholder"] == "{{system}}"
    assert document["requests"][0]["wire"] is None


@pytest.mark.slow
def test_sidecars_from_another_directory(tmp_path: Path) -> None:
    log = tmp_path / "log" / "session.jsonl"
    log.parent.mkdir()
    shutil.copy(PREFIX, log)
    assert cli("rebuild", "--wire", log).returncode == 1  # nothing beside it
    run = cli("rebuild", "--wire", "--sidecars", PREFIX.parent, log)
    assert run.returncode == 0, run.stdout + run.stderr
    bad = cli("rebuild", "--sidecars", tmp_path / "missing", log)
    assert bad.returncode == 2 and "sidecars: --sidecars" in bad.stderr
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "tool-schemas.expected.json").write_text("{", encoding="utf-8")
    broken = cli("audit", "--sidecars", tmp_path / "broken", log)
    assert broken.returncode == 2
    assert "tool-schemas.expected.json is not valid JSON" in broken.stderr


def test_the_reference_logs_rebuild_and_keep_auditing_cleanly() -> None:
    if not REFERENCE_LOGS.is_dir():
        pytest.skip(f"reference logs not found at {REFERENCE_LOGS}")
    for path in sorted(REFERENCE_LOGS.glob("*/*.jsonl")):
        assert audit_file(path).ok, path
    pin = REFERENCE_LOGS / "code-mode-turn" / "session.jsonl"
    run = cli("rebuild", "--wire", pin)
    assert run.returncode == 0, run.stdout + run.stderr
    assert '"role": "system"' in run.stdout and "{{system}}" not in run.stdout


@pytest.mark.slow
def test_fill_replaces_inline_placeholders_from_the_command_line() -> None:
    run = cli(
        "rebuild",
        "--wire",
        "--json",
        "--fill",
        "cwd=/home/me",
        "--fill",
        "{{sessionId}}=s-9",
        PREFIX,
    )
    assert run.returncode == 0, run.stderr
    document = json.loads(run.stdout)
    assert document["session"]["id"] == "s-9"
    body = document["requests"][0]["wire"]
    assert body["messages"][2]["content"] == "List the jobs in /home/me/workspace."
    bad = cli("rebuild", "--fill", "cwd", PREFIX)
    assert bad.returncode == 2
    assert bad.stderr.strip() == (
        "dsh-testkit rebuild: sidecars: --fill 'cwd': expected NAME=VALUE, e.g. cwd=/home/me/project"
    )
