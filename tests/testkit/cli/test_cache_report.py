"""``dsh-testkit cache-report`` and ``audit`` over any input, run as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dsh_testkit.doctor import expand_report
from dsh_testkit.traces._file import TraceWriter
from tests._support import run_cli
from tests.testkit.doctor._bodies import SYSTEM, Traffic, assistant, body, system, user

pytestmark = pytest.mark.slow

REFERENCE = Path(__file__).resolve().parents[3].parent / "shared" / "fixtures" / "reference-logs"


def _write(traffic: Traffic, path: Path) -> Path:
    with TraceWriter(path, source="proxy") as writer:
        for exchange in traffic.exchanges:
            writer.append(exchange.to_json())
    return path


def _volatile(tmp_path: Path) -> Path:
    traffic = Traffic()
    history: list[dict[str, Any]] = [user("Start.")]
    answer = None
    for minute in range(3):
        if answer is not None:
            history += [answer, user(f"Step {minute}.")]
        answer = assistant(f"Done {minute}.")
        traffic.add(
            body([system(SYSTEM + f"Time: 10:0{minute}"), *history], tools=None),
            answer=answer,
            hit=0,
        )
    return _write(traffic, tmp_path / "volatile.jsonl")


def test_cache_report_of_a_trace_names_the_cause_once_with_the_requests(tmp_path) -> None:
    result = run_cli("cache-report", str(_volatile(tmp_path)))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "volatile-system-text · requests #2–#3" in out
    assert out.count("volatile-system-text ·") == 1
    assert "cache granularity 128 tokens (model table" in out
    assert "efficiency 0.0 %" in out and "hit rate" in out


def test_the_json_document_is_compact_version_4_with_one_vocabulary(tmp_path) -> None:
    result = run_cli("cache-report", "--json", str(_volatile(tmp_path)))
    assert result.stdout.count("\n") == 1  # one line: the C encoder, no indent
    compact = json.loads(result.stdout)
    assert compact["formatVersion"] == 4 and compact["kind"] == "dsh-testkit/cache-report"
    document = expand_report(compact)
    assert document["formatVersion"] == 3
    assert document["granularity"]["tokens"] == 128 and "unit" not in document
    request = document["conversations"][0]["requests"][1]
    assert {"promptTokens", "hitTokens", "reusableTokens", "lostTokens", "findings"} <= set(request)
    assert request["findings"][0]["severity"] == "loss"
    assert document["savings"]["volatile-system-text"]["requests"] == 2


def test_audit_fails_on_a_loss_and_allow_accepts_it(tmp_path) -> None:
    path = _volatile(tmp_path)
    failing = run_cli("audit", str(path))
    assert failing.returncode == 1
    assert "prefix stability: FAIL (2 finding(s)" in failing.stdout
    allowed = run_cli("audit", "--allow", "volatile-system-text", str(path))
    assert allowed.returncode == 0, allowed.stdout
    assert (
        "prefix stability: ok (0 finding(s) that cost hits or a refusal, 2 note(s)"
        in allowed.stdout
    )
    report = run_cli("cache-report", "--allow", "volatile-system-text", str(path))
    assert "[allowed]" in report.stdout


def test_audit_fails_only_for_what_the_harness_can_fix(tmp_path) -> None:
    # The second request extends the first unchanged, yet missed: the provider's doing (an
    # evicted cache, a mock restarted). Nothing in the harness to fix: listed, and it passes.
    traffic = Traffic()
    first = body([system(SYSTEM), user("Start.")], tools=None)
    traffic.add(first, answer=assistant("Done."), hit=0)
    second = body([system(SYSTEM), user("Start."), assistant("Done."), user("More.")], tools=None)
    traffic.add(second, answer=assistant("Done again."), hit=0)
    path = _write(traffic, tmp_path / "missed.jsonl")
    passing = run_cli("audit", str(path))
    assert passing.returncode == 0, passing.stdout
    assert "provider: ok (0 finding(s) that cost hits or a refusal, 1 the harness cannot fix)" in (
        passing.stdout
    )
    assert "request #2: provider-miss (not fixable: nothing to fix in the requests)" in (
        passing.stdout
    )
    strict = run_cli("audit", "--strict", str(path))
    assert strict.returncode == 1
    assert "provider: FAIL (1 finding(s)" in strict.stdout
    document = json.loads(run_cli("audit", "--json", str(path)).stdout)
    assert document["ok"] is True
    assert document["notFixable"] == [{"conversation": "#1", "index": 1, "code": "provider-miss"}]


def test_an_empty_trace_is_an_error_saying_why(tmp_path) -> None:
    """Nothing to report is not a success: exit status 2 and one line saying why."""
    path = _write(Traffic(), tmp_path / "empty.jsonl")
    result = run_cli("cache-report", str(path))
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        f"dsh-testkit cache-report: {path}: nothing to report: it holds no model requests\n"
    )


def test_a_file_of_no_known_kind_is_refused_naming_the_kinds(tmp_path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("hello\n", encoding="utf-8")
    result = run_cli("cache-report", str(path))
    assert result.returncode == 2
    assert "not a session log or any recognized trace" in result.stderr
    assert "HAR 1.2" in result.stderr and "OpenTelemetry" in result.stderr


def test_prices_are_dated_and_overridable(tmp_path) -> None:
    path = _volatile(tmp_path)
    default = json.loads(run_cli("cache-report", "--json", str(path)).stdout)
    custom = json.loads(
        run_cli("cache-report", "--json", "--price", "hit=1,miss=10,output=20", str(path)).stdout
    )
    assert default["prices"] is None and custom["prices"]["label"] == "--price"
    assert custom["totals"]["cost"] > default["totals"]["cost"]
    bad = run_cli("cache-report", "--price", "hit=x", str(path))
    assert bad.returncode == 2 and "--price" in bad.stderr


def test_the_html_page_is_written(tmp_path) -> None:
    page = tmp_path / "report.html"
    result = run_cli("cache-report", "--html", str(page), str(_volatile(tmp_path)))
    assert result.returncode == 0
    text = page.read_text(encoding="utf-8")
    assert "volatile-system-text" in text and "://" not in text.split("<body", 1)[0]


@pytest.mark.skipif(not REFERENCE.is_dir(), reason="needs ../shared/fixtures/reference-logs")
def test_a_session_log_goes_through_the_same_engine() -> None:
    log = REFERENCE / "compaction-recovery" / "session.jsonl"
    result = run_cli("cache-report", "--json", str(log))
    document = expand_report(json.loads(result.stdout))
    assert document["source"] == "session-log"
    codes = document["causeCounts"]
    # The log holds an attempt the API refused (400: context window) before the compaction.
    assert codes == {"history-rewritten": 1, "request-refused": 1}
    refused = document["conversations"][0]["requests"][1]["findings"][0]
    assert refused["code"] == "request-refused"
    finding = document["conversations"][0]["requests"][2]["findings"][0]
    assert any(line.startswith("log: compaction") for line in finding["evidence"])
