"""Time as precise as the trace, and the cache granularity said once (from the hits, the model table
or the user, with where it came from)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from dsh_core.providers._models import cache_model
from dsh_testkit.doctor import cache_granularity, diagnose
from dsh_testkit.prompt import CacheKey, PrefixCacheSimulator
from dsh_testkit.prompt._granularity import table_granularity
from dsh_testkit.traces import Trace, TraceUsage

from ._bodies import (
    SYSTEM,
    Traffic,
    assistant,
    body,
    floor,
    system,
    tokens_before,
    tool_result,
    user,
)

JULY_1 = datetime(2026, 7, 1, 12, tzinfo=UTC).timestamp()
"""When the output-end unit still needed about 1.45 s to become usable (docs/fidelity.md)."""


def _tool_step(*, gap: float, resolution: float | None, when: float = JULY_1) -> Trace:
    """Two steps of a tool turn; the second misses the first answer's unit."""
    thought = "Read the file, then answer with its first line. " * 10
    first = body([system(SYSTEM), user("Read a.txt")])
    answer = assistant(reasoning=thought, calls=[("c1", "read_file", '{"path": "a.txt"}')])
    second = body([system(SYSTEM), user("Read a.txt"), answer, tool_result("c1", "alpha")])
    traffic = Traffic(time_resolution=resolution)
    traffic.add(first, answer=answer, hit=0, started=when, finished=when + 2.0)
    input_end = floor(tokens_before(second, 2))
    traffic.add(second, hit=input_end, started=when + 2.0 + gap, finished=when + 4.0 + gap)
    return traffic.trace()


def test_a_short_gap_known_to_the_millisecond_is_not_yet_persisted() -> None:
    diagnosis = diagnose(_tool_step(gap=0.4, resolution=0.001)).requests[1]
    [finding] = diagnosis.findings
    assert finding.code == "not-yet-persisted"
    assert "0.400 s" in finding.detail and finding.lost_tokens == diagnosis.lost_tokens > 0


def test_no_timing_verdict_when_times_are_whole_seconds() -> None:
    [finding] = diagnose(_tool_step(gap=0.0, resolution=1.0)).requests[1].findings
    assert finding.code == "provider-miss"
    assert "only known to 1 s" in finding.detail


def test_no_timing_verdict_where_the_service_has_no_delay() -> None:
    after = datetime(2026, 8, 1, tzinfo=UTC).timestamp()
    [finding] = diagnose(_tool_step(gap=0.2, resolution=0.001, when=after)).requests[1].findings
    assert finding.code == "provider-miss"


def test_the_trace_readers_know_their_resolution(tmp_path) -> None:
    from dsh_testkit.traces import load_trace

    har = tmp_path / "a.har"
    har.write_text(
        '{"log": {"entries": [{"startedDateTime": "2026-05-01T10:00:01Z", "time": 1200,'
        ' "request": {"method": "POST", "url": "https://api.deepseek.com/chat/completions",'
        ' "postData": {"text": "{\\"model\\": \\"deepseek-chat\\", \\"messages\\": []}"}},'
        ' "response": {"status": 200, "content": {"text": "{}"}}}]}}',
        encoding="utf-8",
    )
    assert load_trace(har).time_resolution == 1.0


def _with_hits(
    hits: list[int], *, model: str = "deepseek-chat", when: float | None = None
) -> Trace:
    traffic = Traffic()
    for i, hit in enumerate(hits):
        traffic.add(body([user(f"q{i}")], model=model, tools=None), hit=hit, started=when)
    trace = traffic.trace()
    return replace(
        trace,
        exchanges=tuple(
            replace(e, usage=TraceUsage(prompt_tokens=5000, hit_tokens=h))
            for e, h in zip(trace.exchanges, hits, strict=True)
        ),
    )


def test_the_granularity_comes_from_the_hits_when_they_tell_it() -> None:
    granularity = cache_granularity(_with_hits([0, 192, 448]))
    assert (granularity.tokens, granularity.origin) == (64, "usage")
    assert "multiple of 64" in granularity.detail


def test_hits_consistent_with_the_model_tables_granularity_keep_it() -> None:
    may_2026 = datetime(2026, 5, 10, tzinfo=UTC).timestamp()
    granularity = cache_granularity(
        _with_hits([256, 1280], model="deepseek-v4-flash", when=may_2026)
    )
    assert (granularity.tokens, granularity.origin) == (128, "usage")


def test_without_hits_the_model_table_decides_by_date() -> None:
    march_2025 = datetime(2025, 3, 1, tzinfo=UTC).timestamp()
    old = cache_granularity(_with_hits([0, 0], when=march_2025))
    assert (old.tokens, old.origin) == (64, "model-table")
    assert "2025-03-01" in old.detail
    assert cache_granularity(_with_hits([0])).tokens == 128


def test_the_user_overrides_the_granularity_and_the_report_says_so() -> None:
    report = diagnose(_with_hits([0, 128]), granularity=256)
    assert report.granularity.tokens == 256 and report.granularity.origin == "given"
    assert report.to_json()["granularity"] == {
        "tokens": 256,
        "origin": "given",
        "detail": "--granularity",
    }
    with pytest.raises(ValueError, match="at least 1"):
        cache_granularity(_with_hits([0]), 0)


def test_the_doctor_and_the_simulator_read_one_granularity_from_the_model_table() -> None:
    """One concept, one rule: the granularity the doctor's simulated figures round to is the
    simulator's for the same model, from the same model-table lookup."""
    march_2025 = datetime(2025, 3, 1, tzinfo=UTC).timestamp()
    old = table_granularity("deepseek-chat", march_2025)
    assert (old.tokens, old.origin) == (64, "model-table")
    today = table_granularity("deepseek-chat")
    simulator = PrefixCacheSimulator()
    key = CacheKey(account="a", model=cache_model("deepseek-chat"))
    assert simulator.granularity_for(key) == today.tokens == 128
    assert PrefixCacheSimulator(granularity=64).granularity_for(key) == 64
    report = diagnose(_with_hits([0, 0], when=march_2025), simulate=True)
    assert report.granularity == old
    assert all(r.hit_tokens is None or r.hit_tokens % 64 == 0 for r in report.requests)


def test_the_old_unit_tokens_flag_still_works_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dsh_testkit.cli import main
    from tests.testkit._report_builders import initial_two_turns

    path = initial_two_turns().write(tmp_path / "log.jsonl")
    assert main(["cache-report", str(path), "--json", "--unit-tokens", "256"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["granularity"]["tokens"] == 256
    assert "--unit-tokens is now spelled --granularity" in captured.err
    assert main(["cache-report", str(path), "--json", "--granularity", "256"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["granularity"]["tokens"] == 256
    assert captured.err == ""


def test_money_and_days_are_said_for_any_figure_a_record_holds() -> None:
    from dsh_testkit.doctor._report import money
    from dsh_testkit.prompt._granularity import day_of, on_day

    assert [money(v) for v in (0.0000176, 0.00098, 0, 1234.5, -0.0000176)] == [
        "$0.0000176",
        "$0.000980",
        "$0.00",
        "$1,234.50",
        "-$0.0000176",
    ]
    assert money(None) == money(float("nan")) == money(float("inf")) == "–"
    assert day_of(1796320703.9) == "2026-12-03"
    assert day_of(None) == "today"
    assert day_of(10.0**15) == "an impossible time (1e+15 s)"
    # the granularity's origin in a report: a recording without times says so ("on today" read oddly)
    assert on_day(1796320703.9) == "on 2026-12-03"
    assert on_day(None) == "as of today (the recording has no times)"
