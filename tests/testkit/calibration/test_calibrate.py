"""``dsh-testkit calibrate``: the simulator against live usage, run as a user runs it.

Hand-made logs carry usage figures chosen against what the simulator must give, so every
metric is checked against a value computed here by hand; the reference logs check the command
on real traffic (skipped where ../shared/fixtures is absent).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import types
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dsh_core import FrozenDict, ToolSchema, reconstruct_requests
from dsh_core.persistence import load_session
from dsh_core.providers.deepseek import serialize_request
from dsh_testkit.calibration import (
    CalibrationError,
    CalibrationSettings,
    CalibrationSummary,
    RequestCalibration,
    calibrate,
)
from dsh_testkit.prompt._template import PromptRenderer
from dsh_testkit.prompt._tokenizers import HeuristicTokenizer
from tests._support import REFERENCE_LOGS, run_cli
from tests.testkit._report_builders import LogBuilder, header

ROOT = Path(__file__).resolve().parents[3]
G = 128


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return run_cli("calibrate", *args, cwd=cwd)


def _row(
    live_hit: int,
    sim_hit: int,
    *,
    live_unit: str,
    sim_unit: str,
    first: bool = False,
    live_prompt: int = 1000,
    sim_prompt: int = 1000,
    known: bool = True,
    anchors: bool = False,
) -> RequestCalibration:
    return RequestCalibration(
        log="x.jsonl",
        index=0,
        turn=1,
        step=1,
        attempt=0,
        model="deepseek-v4-flash",
        live_prompt_tokens=live_prompt,
        live_hit_tokens=live_hit,
        simulated_prompt_tokens=sim_prompt,
        simulated_hit_tokens=sim_hit,
        simulated_unit=sim_unit,
        live_unit=live_unit,
        header_known=known,
        anchors=anchors,
        first_in_scope=first,
        gap_seconds=None,
    )


def test_summary_metrics_by_hand() -> None:
    rows = [
        # first of its scope: both miss
        _row(0, 0, live_unit="none", sim_unit="none", first=True, sim_prompt=1100),
        # exact, same unit
        _row(896, 896, live_unit="input", sim_unit="input", live_prompt=900, sim_prompt=900),
        # one unit apart, different unit
        _row(1024, 896, live_unit="output", sim_unit="input", live_prompt=1100, sim_prompt=1045),
        # live hit, simulated miss; header anchored at an earlier request
        _row(512, 0, live_unit="common", sim_unit="none", known=False, sim_prompt=950),
    ]
    s = CalibrationSummary.of(rows, granularity=G, logs=1)
    assert s.requests == 4
    assert s.classification_agreement == 0.75  # rows 1-3 agree, row 4 does not
    assert s.exact_hit_match == 0.5  # rows 1 and 2
    assert s.within_one_unit == 0.75  # |1024 - 896| = 128 counts; 512 does not
    assert (s.unit_agreement, s.unit_requests) == (round(1 / 3, 4), 3)  # later rows only
    assert s.hit_tokens_mae == (0 + 0 + 128 + 512) / 4
    # |1100-1000|/1000, 0, |1045-1100|/1100 over the three known headers
    assert s.known_header_prompt_tokens_error == round((0.1 + 0 + 0.05) / 3, 4)
    assert s.known_header_prompt_requests == 3
    # the anchored row: its error after the anchor, |950-1000|/1000
    assert (s.anchored_prompt_tokens_error, s.anchored_prompt_requests) == (0.05, 1)
    # every predicted prompt: the three known headers and the anchored row
    assert (s.prompt_tokens_error, s.prompt_requests) == (round((0.1 + 0.05 + 0.05) / 4, 4), 4)
    # the request that sized an anchor has a measured prompt: in no figure
    anchoring = _row(0, 0, live_unit="none", sim_unit="none", known=False, anchors=True)
    both = CalibrationSummary.of([*rows, anchoring], granularity=G, logs=1)
    assert both.anchored_prompt_requests == 1 and both.known_header_prompt_requests == 3
    assert both.prompt_requests == 4 and both.prompt_tokens_error == s.prompt_tokens_error
    empty = CalibrationSummary.of([], granularity=G, logs=0)
    assert empty.exact_hit_match is None and empty.prompt_tokens_error is None


# -- a hand-made log through the command ------------------------------------------------------

SYSTEM = "\n".join(f"rule {i}: answer precisely and cite the file you read" for i in range(60))


def _log(usages: list[dict[str, Any]], answer: str = "an answer") -> LogBuilder:
    """Single-step turns under one real header, each with the given usage."""
    log = LogBuilder()
    for index, usage in enumerate(usages):
        log.start_turn(f"question {index}: " + "why is the sky blue " * 60)
        event = ("request/header", {"header": header(system=SYSTEM), "reason": "initial"})
        log.step(header_event=event if index == 0 else None, usage_data=usage, text=answer)
        log.end_turn()
    return log


def _prompts(path: Path) -> list[Any]:
    """The prompts the simulator sees: the log's requests on the wire, tokenized."""
    loaded = load_session(path, audit=True)
    renderer = PromptRenderer(HeuristicTokenizer())
    return [
        renderer.render_chat(serialize_request(r.request))
        for r in reconstruct_requests(loaded.events, session_id=loaded.info.id)
    ]


def _usage(prompt: int, hit: int) -> dict[str, Any]:
    return {"inputTokens": prompt - hit, "outputTokens": 3, "cacheReadTokens": hit}


def test_a_hand_made_log_gives_the_figures_computed_by_hand(tmp_path: Path) -> None:
    draft = _log([_usage(10, 0)] * 3).write(tmp_path / "draft.jsonl")
    prompts = _prompts(draft)
    p0, p1, p2 = (p.prompt_tokens for p in prompts)
    # Each request extends the previous one; the log's clock stands still (in 1970: the
    # service's first period, output-end units visible ~1.45 s after the reply), so the previous
    # reply's output-end unit is not visible yet and the input-end unit hits.
    sim1 = prompts[0].input_end // G * G
    sim2 = prompts[1].input_end // G * G
    assert 0 < sim1 < sim2
    # live: request 0 misses (agrees), request 1 hits exactly, request 2 misses (disagrees);
    # prompt tokens: exact, +10 %, exact
    live_prompts = (p0, round(p1 * 1.1), p2)
    usages = [_usage(live_prompts[0], 0), _usage(live_prompts[1], sim1), _usage(p2, 0)]
    path = _log(usages).write(tmp_path / "session.jsonl")
    result = _cli(str(path), "--json", "--tokenizer", "heuristic")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["kind"] == "dsh-testkit/calibrate" and doc["formatVersion"] == 1
    rows = doc["perRequest"]
    assert [(r["liveHitTokens"], r["simulatedHitTokens"]) for r in rows] == [
        (0, 0),
        (sim1, sim1),
        (0, sim2),
    ]
    assert [r["simulatedPromptTokens"] for r in rows] == [p0, p1, p2]
    assert [r["livePromptTokens"] for r in rows] == list(live_prompts)
    assert [(r["liveUnit"], r["simulatedUnit"]) for r in rows] == [
        ("none", "none"),
        ("input", "input"),
        ("none", "input"),
    ]
    assert all(r["headerKnown"] for r in rows)
    assert doc["requests"] == 3
    assert doc["classification_agreement"] == round(2 / 3, 4)
    assert doc["exact_hit_match"] == round(2 / 3, 4)
    assert doc["within_one_unit"] == round(2 / 3, 4)  # sim2 is more than one unit
    assert doc["unit_agreement"] == 0.5  # of the two later requests
    assert doc["hit_tokens_mae"] == round(sim2 / 3, 2)
    expected_error = abs(p1 - live_prompts[1]) / live_prompts[1] / 3
    assert doc["prompt_tokens_error"] == round(expected_error, 4)
    assert doc["known_header_prompt_tokens_error"] == doc["prompt_tokens_error"]
    assert (doc["anchored_prompt_tokens_error"], doc["anchored_prompt_requests"]) == (None, 0)
    assert doc["skipped"] == [] and doc["notes"] == []


def test_with_time_between_reply_and_request_the_output_unit_hits(tmp_path: Path) -> None:
    """In the service's first period (this log's 1970 clock) output-end units became visible
    about 1.45 s after the reply: a log whose next request comes two seconds later reuses the
    whole previous exchange."""
    log = _log([_usage(10, 0)] * 2, answer="a long answer, " * 80)
    events = list(log.events)
    path = log.write(tmp_path / "session.jsonl")
    text = path.read_text(encoding="utf-8").splitlines()
    # Re-time the events: the second turn starts 2 s after the first ends.
    second = next(e.seq for e in events if e.type == "turn/start" and e.data["turn"] == 2)
    lines = [text[0]]
    for line in text[1:]:
        record = json.loads(line)
        record["time"] = 1000 * (2 if record["seq"] >= second else 0)
        lines.append(json.dumps(record))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = calibrate([path], settings=CalibrationSettings(tokenizer="heuristic"))
    second_row = report.requests[1]
    assert second_row.simulated_unit == "output"
    assert second_row.gap_seconds == 2.0
    # the whole first exchange (its prompt and its reply) is reused, past its input end
    prompts = _prompts(path)
    assert second_row.simulated_hit_tokens == prompts[1].output_ends[0] // G * G
    assert second_row.simulated_hit_tokens > prompts[0].input_end // G * G


def test_logs_without_cache_figures_are_listed_and_skipped(tmp_path: Path) -> None:
    folder = tmp_path / "logs"
    folder.mkdir()
    _log([{"inputTokens": 100, "outputTokens": 3}] * 2).write(folder / "no-cache.jsonl")
    (folder / "notes.jsonl").write_text('{"not": "a session"}\n', encoding="utf-8")
    result = _cli(str(folder), "--tokenizer", "heuristic")
    assert result.returncode == 1  # nothing to compare
    assert "skipped no-cache.jsonl: no request with live cache figures" in result.stdout
    assert "skipped notes.jsonl: neither a session log nor a trace" in result.stdout
    assert "0 requests from 0 logs (2 skipped)" in result.stdout


@pytest.mark.slow
def test_a_missing_path_is_a_clear_error(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    result = _cli(str(missing))
    assert result.returncode == 2
    assert f"no such file or folder: {missing}" in result.stderr
    with pytest.raises(CalibrationError) as caught:
        calibrate([missing])
    assert caught.value.path == str(missing)


def test_unreadable_sidecars_name_the_file(tmp_path: Path) -> None:
    path = _log([_usage(10, 0)]).write(tmp_path / "session.jsonl")
    (tmp_path / "system-prompt.expected.md").write_text("S\n", encoding="utf-8")
    (tmp_path / "tool-schemas.expected.json").write_text("[not json", encoding="utf-8")
    result = _cli(str(path), "--tokenizer", "heuristic")
    assert result.returncode == 2
    assert "tool-schemas.expected.json" in result.stderr and "do not read" in result.stderr


# -- the reference logs -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    if not REFERENCE_LOGS.is_dir():
        pytest.skip(f"reference logs not found at {REFERENCE_LOGS}")
    result = _cli(str(REFERENCE_LOGS), "--json")
    assert result.returncode == 0, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


@pytest.mark.slow
def test_reference_logs_compare_every_request_with_live_cache_figures(
    reference: dict[str, Any],
) -> None:
    rows = reference["perRequest"]
    # 13 requests carry live figures; the forked subagent's first one is a copy of its
    # parent's (the seed of its log): simulated to warm its cache, not compared
    assert reference["requests"] == len(rows) == 12
    assert ("subagent-fork-in-process/session.1.jsonl", 0) not in {
        (r["log"], r["index"]) for r in rows
    }
    assert ("subagent-fork-in-process/session.1.jsonl", 1) in {(r["log"], r["index"]) for r in rows}
    assert reference["logs"] == 6
    skipped = {s["log"]: s["reason"] for s in reference["skipped"]}
    assert set(skipped) == {
        f"{name}/session.jsonl"
        for name in (
            "cancel",
            "compaction-recovery",
            "empty-response-retry",
            "error-finish",
            "max-tokens-continue",
            "parallel-tool-calls",
        )
    }
    assert all("no request with live cache figures" in r for r in skipped.values())
    by_key = {(r["log"], r["index"]): r for r in rows}
    # live figures come from the log: multi-turn's second request read 2816 of 2880 from cache
    second = by_key[("multi-turn/session.jsonl", 1)]
    assert (second["livePromptTokens"], second["liveHitTokens"]) == (2880, 2816)
    # ... and the simulator reuses the first request's input-end unit, as the API did
    assert (second["simulatedHitTokens"], second["simulatedUnit"]) == (2816, "input")
    # the placeholder header is anchored on the first request: its prompt size is the live one
    first = by_key[("multi-turn/session.jsonl", 0)]
    assert first["simulatedPromptTokens"] == first["livePromptTokens"] == 2864
    assert not first["headerKnown"]
    for name in (
        "classification_agreement",
        "exact_hit_match",
        "within_one_unit",
        "unit_agreement",
    ):
        assert 0.0 <= reference[name] <= 1.0, name
    assert reference["exact_hit_match"] == round(
        sum(r["liveHitTokens"] == r["simulatedHitTokens"] for r in rows) / 12, 4
    )


def test_reference_logs_meet_the_exact_match_and_prompt_targets(
    reference: dict[str, Any],
) -> None:
    """The calibrated defaults on the reference logs, real tokenizer: at least 80 % exact
    hit-token matches and 90 % unit agreement, predicted prompt sizes within 5 % (every
    reference header is anchored: the one sidecar is of another recording)."""
    assert reference["exact_hit_match"] >= 0.8
    assert reference["unit_agreement"] >= 0.9
    assert reference["anchored_prompt_requests"] >= 5
    assert reference["anchored_prompt_tokens_error"] <= 0.05
    assert reference["known_header_prompt_requests"] == 0
    assert reference["prompt_tokens_error"] == reference["anchored_prompt_tokens_error"]
    # gaps measured on each stream's own clock: packed-chunks' reply streamed on 2026-07-06,
    # when output-end units became reusable about 1.45 s after the reply's last chunk; its
    # tool step comes 0.93 s after it: the input-end unit is reused, as live; the forked
    # parent's second step comes 1.97 s after: the output-end unit, as live
    by_key = {(r["log"], r["index"]): r for r in reference["perRequest"]}
    packed = by_key[("packed-chunks/session.jsonl", 1)]
    assert packed["gapSeconds"] == pytest.approx(0.928)
    assert packed["simulatedUnit"] == packed["liveUnit"] == "input"
    assert packed["simulatedHitTokens"] == packed["liveHitTokens"] == 2816
    fork = by_key[("subagent-fork-in-process/session.jsonl", 2)]
    assert fork["gapSeconds"] == pytest.approx(1.969)
    assert fork["simulatedUnit"] == fork["liveUnit"] == "output"
    assert fork["simulatedHitTokens"] == fork["liveHitTokens"] == 3072


def test_a_stale_sidecar_is_anchored_with_a_note(reference: dict[str, Any]) -> None:
    """code-mode-turn's sidecar prompt alone is longer than the live prompt it was recorded
    with, so it cannot be that recording's header."""
    assert any(
        n.startswith("code-mode-turn/session.jsonl: the sidecars' system prompt")
        for n in reference["notes"]
    )
    rows = [r for r in reference["perRequest"] if r["log"] == "code-mode-turn/session.jsonl"]
    assert rows and not any(r["headerKnown"] for r in rows)


def test_folder_scope_shares_one_simulator_between_parent_and_subagent(tmp_path: Path) -> None:
    if not REFERENCE_LOGS.is_dir():
        pytest.skip(f"reference logs not found at {REFERENCE_LOGS}")
    folder = REFERENCE_LOGS / "subagent-fork-in-process"
    settings = CalibrationSettings(tokenizer="heuristic")
    per_log = calibrate([folder], settings=settings)
    per_folder = calibrate([folder], settings=settings, scope="folder")
    # the subagent's log starts with a copy of its parent's first request (its seed): compared
    # in neither scope; per log it warms the subagent's own simulator
    assert per_log.summary.requests == per_folder.summary.requests == 4
    keys = [(r.log, r.index) for r in per_folder.requests]
    assert ("session.1.jsonl", 0) not in keys and ("session.1.jsonl", 1) in keys
    # per folder one simulator: only the parent's first request meets an empty cache, and the
    # parent's real first request is compared as such (the copy does not come first)
    assert [(r.log, r.index) for r in per_folder.requests if r.first_in_scope] == [
        ("session.jsonl", 0)
    ]
    child = next(r for r in per_folder.requests if r.log == "session.1.jsonl")
    # the subagent reuses the input-end unit of the parent's first request, as live
    assert child.simulated_hit_tokens == child.live_hit_tokens == 2816
    assert child.simulated_unit == child.live_unit == "input"
    # interleaved by time: the child's request comes between the parent's second and third
    assert keys == [
        ("session.jsonl", 0),
        ("session.jsonl", 1),
        ("session.1.jsonl", 1),
        ("session.jsonl", 2),
    ]
    # without its parent's log, the subagent's seed warms the folder's simulator itself
    alone = tmp_path / "child"
    alone.mkdir()
    shutil.copy(folder / "session.1.jsonl", alone / "session.1.jsonl")
    only = calibrate([alone], settings=settings, scope="folder")
    assert [(r.log, r.index, r.simulated_hit_tokens) for r in only.requests] == [
        ("session.1.jsonl", 1, 2816)
    ]


def test_the_table_and_summary_print(tmp_path: Path) -> None:
    if not REFERENCE_LOGS.is_dir():
        pytest.skip(f"reference logs not found at {REFERENCE_LOGS}")
    result = _cli(str(REFERENCE_LOGS / "multi-turn"), "--tokenizer", "heuristic")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Per request: live vs simulated" in out
    assert "2 requests from 1 logs (0 skipped)" in out
    assert "exact hit-token match" in out and "unit agreement (later)" in out
    assert "* header anchored" in out


def test_the_calibration_package_exports_exactly_its_all() -> None:
    import dsh_testkit.calibration as package

    public = {
        name
        for name, value in vars(package).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert set(package.__all__) == public
    assert package.__all__ == sorted(package.__all__, key=lambda n: (not n.isupper(), n))


def test_sidecars_from_another_folder_give_the_real_header(tmp_path: Path) -> None:
    """A log stored with header placeholders: ``--sidecars DIR`` supplies the real system
    prompt and tools, so prompt tokens are predicted, not anchored."""
    log = LogBuilder()
    log.start_turn("question: " + "why is the sky blue " * 20)
    event = (
        "request/header",
        {"header": {**header(), "system": "{{system}}", "tools": "{{tools}}"}, "reason": "initial"},
    )
    log.step(header_event=event, usage_data=_usage(5000, 0))
    log.end_turn()
    folder = tmp_path / "scenario"
    folder.mkdir()
    path = log.write(folder / "session.jsonl")
    sidecars = tmp_path / "sidecars" / "scenario"
    sidecars.mkdir(parents=True)
    (sidecars / "system-prompt.expected.md").write_text(SYSTEM + "\n", encoding="utf-8")
    tool = {"name": "grep", "description": "search files", "parameters": {"type": "object"}}
    (sidecars / "tool-schemas.expected.json").write_text(
        json.dumps({"initial": [tool], "changes": []}), encoding="utf-8"
    )
    anchored = calibrate([path], settings=CalibrationSettings(tokenizer="heuristic"))
    assert not anchored.requests[0].header_known
    assert anchored.requests[0].simulated_prompt_tokens == 5000  # sized from the live prompt
    known = calibrate(
        [path],
        settings=CalibrationSettings(tokenizer="heuristic"),
        sidecars=[tmp_path / "sidecars"],
    )
    row = known.requests[0]
    assert row.header_known
    loaded = load_session(path, audit=True)
    (rebuilt,) = reconstruct_requests(loaded.events, session_id=loaded.info.id)
    real = replace(
        rebuilt.request,
        system=SYSTEM,
        tools=(
            ToolSchema(
                name="grep", description="search files", parameters=FrozenDict(type="object")
            ),
        ),
    )
    expected = PromptRenderer(HeuristicTokenizer()).render_chat(serialize_request(real))
    assert row.simulated_prompt_tokens == expected.prompt_tokens
    assert known.summary.prompt_tokens_error == round(abs(expected.prompt_tokens - 5000) / 5000, 4)


def _retimed(path: Path, times: dict[int, int]) -> None:
    """Set the time (ms) of the events at the given seqs; others keep theirs."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out = [lines[0]]
    for line in lines[1:]:
        record = json.loads(line)
        if record["seq"] in times:
            record["time"] = times[record["seq"]]
        out.append(json.dumps(record))
    path.write_text("\n".join(out) + "\n", encoding="utf-8")


@pytest.mark.parametrize(
    ("unknown_gap", "unit"), [(None, "output"), (5.0, "output"), (0.0, "input"), (1.0, "input")]
)
def test_when_two_requests_are_of_different_runs_the_gap_is_unknown(
    tmp_path: Path, unknown_gap: float | None, unit: str
) -> None:
    """Stored logs mix recording runs: here the second request's events are stamped days
    before the first reply. The gap is then ``unknown_gap``; by default long enough for every
    unit to be visible (the output-end unit's 1.45 s of the log's period included)."""
    log = _log([_usage(10, 0)] * 2, answer="a long answer, " * 80)
    events = list(log.events)
    path = log.write(tmp_path / "session.jsonl")
    second_turn = next(e.seq for e in events if e.type == "turn/start" and e.data["turn"] == 2)
    day = 86_400_000
    times = {e.seq: 3 * day for e in events if e.seq < second_turn}
    times.update({e.seq: day for e in events if e.seq >= second_turn})
    _retimed(path, times)
    settings = CalibrationSettings(tokenizer="heuristic", unknown_gap=unknown_gap)
    second = calibrate([path], settings=settings).requests[1]
    assert second.gap_seconds is None
    assert second.simulated_unit == unit


JULY_2026_MS = 1_785_000_000_000  # 2026-07-25: the service's current period


@pytest.mark.parametrize(
    ("start_ms", "gap_ms", "unit"),
    [(0, 800, "input"), (0, 1500, "output"), (JULY_2026_MS, 800, "output")],
)
def test_a_reply_ends_at_its_last_chunk_on_its_own_clock(
    tmp_path: Path, start_ms: int, gap_ms: int, unit: str
) -> None:
    """The reply's end is its stream's last chunk; chunks and messages stamped by another
    recording run (days away) are left out, so the gap to the next request is measured on one
    clock. In the service's first period (a 1970 clock here) 0.8 s leaves the output-end unit
    invisible (it took ~1.45 s), 1.5 s does not; recorded in late July 2026, 0.8 s reuses it."""
    log = _log([_usage(10, 0)] * 2, answer="a long answer, " * 80)
    events = list(log.events)
    path = log.write(tmp_path / "session.jsonl")
    second_turn = next(e.seq for e in events if e.type == "turn/start" and e.data["turn"] == 2)
    first_chunks = [e.seq for e in events if e.type == "assistant/chunk" and e.seq < second_turn]
    later_run = start_ms + 40 * 86_400_000
    times = {e.seq: later_run for e in events}  # every other event: another run
    for offset, seq in enumerate(first_chunks):
        times[seq] = start_ms + 10_000 + 100 * offset  # the first stream, 100 ms a chunk
    stray = first_chunks[-1]
    times[stray] = later_run  # a chunk of the other run does not end the stream
    last = max(times[seq] for seq in first_chunks if seq != stray)
    second_first = next(
        e.seq for e in events if e.type == "assistant/chunk" and e.seq > second_turn
    )
    times[second_first] = last + gap_ms
    _retimed(path, times)
    second = calibrate([path], settings=CalibrationSettings(tokenizer="heuristic")).requests[1]
    assert second.gap_seconds == pytest.approx(gap_ms / 1000)
    assert second.simulated_unit == unit


def test_a_log_whose_only_live_figures_are_its_seed_is_skipped(tmp_path: Path) -> None:
    """The subagent's log cut after its seed (a copy of its parent's first request): nothing
    of its own to compare, so it is skipped with the reason, not counted."""
    if not REFERENCE_LOGS.is_dir():
        pytest.skip(f"reference logs not found at {REFERENCE_LOGS}")
    lines = (REFERENCE_LOGS / "subagent-fork-in-process" / "session.1.jsonl").read_text(
        encoding="utf-8"
    )
    kept: list[str] = []
    for line in lines.splitlines(keepends=True):
        kept.append(line)
        if json.loads(line)["type"] == "session/end-seed":
            break
    assert len(kept) < len(lines.splitlines())
    path = tmp_path / "session.1.jsonl"
    path.write_text("".join(kept), encoding="utf-8")
    report = calibrate([path], settings=CalibrationSettings(tokenizer="heuristic"))
    assert report.requests == ()
    assert [s.reason for s in report.skipped] == [
        "only its seed (its parent's requests) carries live cache figures"
    ]
