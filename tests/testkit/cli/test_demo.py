"""``dsh-testkit demo | audit | cache-report``, run as a user runs them: as a subprocess."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_core.persistence import load_session
from dsh_testkit.doctor import expand_report


def _cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    run_env = {k: v for k, v in os.environ.items() if k != "DEEPSEEK_API_KEY"}
    run_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "dsh_testkit.cli", *args],
        cwd=cwd,
        env=run_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def demo_run(
    tmp_path_factory: pytest.TempPathFactory,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    cwd = tmp_path_factory.mktemp("demo")
    return _cli("demo", "--out", "out", cwd=cwd, env={"COLUMNS": "100"}), cwd / "out"


def test_demo_runs_offline_and_names_its_outputs(
    demo_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    result, out = demo_run
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert any("mock DeepSeek listening on http://127.0.0.1:" in line for line in lines)
    assert "audit: OK, no violations" in result.stdout
    assert "all efficiency 97.0 % (4,096 of 4,224 reusable)" in result.stdout
    assert lines[-3].startswith("session log:") and lines[-3].endswith("session.jsonl")
    assert lines[-2].startswith("cache report:") and lines[-2].endswith("cache-report.html")
    html = (out / "cache-report.html").read_text(encoding="utf-8")
    assert html.startswith("<!DOCTYPE html>") and "tools-changed" in html
    # self-contained: nothing is fetched
    assert "src=" not in html and "<link" not in html and "https://" not in html


def test_demo_log_has_the_header_change_and_the_compaction(
    demo_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    _, out = demo_run
    types = [e.type for e in load_session(out / "session.jsonl").events]
    assert types.count("request/header") == 1
    assert types.count("request/header-delta") == 1
    assert types.count("compact/summary") == 1
    assert types.count("turn/start") == types.count("turn/end") == 3


def test_audit_and_cache_report_of_the_demo_log(
    demo_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    _, out = demo_run
    audit = _cli("audit", "session.jsonl", "--json", cwd=out)
    assert audit.returncode == 0, audit.stderr
    document = json.loads(audit.stdout)
    assert document["ok"] is True and document["kind"] == "dsh-testkit/audit"
    assert len(document["requests"]) == 5
    requests = document["requests"]
    assert [r["extendsPrevious"] for r in requests[1:]] == [True, False, True, False]
    assert requests[2]["differences"] == ["header: tool 'grep' added"]
    report = _cli("cache-report", "session.jsonl", "--json", cwd=out)
    assert report.returncode == 0, report.stderr
    [conversation] = expand_report(json.loads(report.stdout))["conversations"]
    per_request = conversation["requests"]
    assert [r["index"] for r in per_request] == [0, 1, 2, 3, 4]
    # the header delta (a tool inserted mid-list) explains request 3's loss
    [finding] = per_request[2]["findings"]
    assert (finding["code"], finding["severity"]) == ("tools-changed", "loss")
    [delta] = [e for e in load_session(out / "session.jsonl").events if e.type.endswith("-delta")]
    assert finding["evidence"][-1] == (
        f"log: request/header-delta at seq {delta.seq}: tool 'grep' added"
    )
    assert finding["lostTokens"] == per_request[2]["lostTokens"] > 0
    # pure extensions read the cache and lose nothing
    for extension in (per_request[1], per_request[3]):
        assert extension["relation"] == "extends" and extension["findings"] == []
        assert extension["hitTokens"] == extension["reusableTokens"] > 0


def test_the_compaction_of_the_demo_log_is_a_rewrite_that_cost_nothing(
    demo_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    """The compaction shrank the prompt below what the system prompt and tools already hit:
    request 5 is compared with request 4, the rewrite is named with the log's compaction event,
    and it cost nothing."""
    _, out = demo_run
    report = _cli("cache-report", "session.jsonl", "--json", cwd=out)
    fifth = expand_report(json.loads(report.stdout))["conversations"][0]["requests"][4]
    assert (fifth["parent"], fifth["relation"], fifth["lostTokens"]) == (3, "diverges", 0)
    assert fifth["hitTokens"] == fifth["reusableTokens"] > 0
    [finding] = fifth["findings"]
    assert (finding["code"], finding["severity"]) == ("history-rewritten", "note")
    assert re.fullmatch(
        r"log: compaction: user/message at seq \d+ replaced seqs 1\.\.\d+", finding["evidence"][-1]
    )


def test_audit_fails_on_a_corrupt_log(tmp_path: Path) -> None:
    log = tmp_path / "broken.jsonl"
    log.write_text(
        '{"type":"session","version":0,"id":"s","createdAt":0}\n'
        '{"type":"turn/start","seq":0,"time":0,"data":{"turn":1}}\n'
        "this line is not JSON\n"
        '{"type":"turn/end","seq":1,"time":0,"data":{"turn":1,"reason":{"kind":"completed"}}}\n',
        encoding="utf-8",
    )
    result = _cli("audit", str(log), cwd=tmp_path)
    assert result.returncode == 1
    assert "line 3" in result.stdout + result.stderr


def test_demo_live_refuses_without_a_key(tmp_path: Path) -> None:
    result = _cli("demo", "--live", "--out", "out", cwd=tmp_path)
    assert result.returncode != 0
    assert "DEEPSEEK_API_KEY" in result.stderr


def test_the_readme_shows_what_the_demo_prints(
    demo_run: tuple[subprocess.CompletedProcess[str], Path],
) -> None:
    """The README's first screen is the demo's real output (ports and session ids aside)."""
    result, _ = demo_run
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")
    block = readme.split("```\nmock DeepSeek listening", 1)[1].split("```", 1)[0]
    varying = re.compile(
        r"127\.0\.0\.1:\d+|demo-\d+|done in [\d.]+s|dsh-demo-out/|out/|on \d{4}-\d{2}-\d{2}\)"
    )
    shown = [varying.sub("…", line).rstrip() for line in block.splitlines()[1:] if line.strip()]
    printed = {varying.sub("…", line).rstrip() for line in result.stdout.splitlines()}
    missing = [line for line in shown if line not in printed]
    assert not missing, missing


def test_the_demo_replaces_only_its_own_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dsh_testkit.cli import main

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "session.jsonl").write_text("my precious log\n", encoding="utf-8")
    assert main(["demo", "--out", str(mine)]) == 2
    assert capsys.readouterr().err == (
        f"dsh-testkit demo: {mine / 'session.jsonl'} is not what an earlier demo wrote; the "
        "demo replaces only its own files (choose another --out)\n"
    )
    assert (mine / "session.jsonl").read_text(encoding="utf-8") == "my precious log\n"
    a_file = tmp_path / "a-file"
    a_file.write_text("x\n", encoding="utf-8")
    assert main(["demo", "--out", str(a_file)]) == 2
    assert "a-file is not what an earlier demo wrote" in capsys.readouterr().err
    assert a_file.read_text(encoding="utf-8") == "x\n"
    # its own earlier output it does replace: a second run starts a fresh log
    out = tmp_path / "out"
    assert main(["demo", "--out", str(out)]) == 0
    first = (out / "session.jsonl").read_bytes()
    assert main(["demo", "--out", str(out)]) == 0
    assert (out / "session.jsonl").read_bytes().count(b'"type":"session"') == 1
    assert first.startswith(b'{"type":"session","version":0,"id":"demo-')
