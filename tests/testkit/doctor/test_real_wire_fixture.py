"""The real-wire runs and their labels: the grouping, the labels' integrity, the HAR files.

The recordings (``../shared/fixtures/real-deepseek-wire/``, beside the checkout) are grouped per
recorded test run (:mod:`._real_wire`); ``tests/fixtures/real-wire-labels.json`` labels every
request after the first of a run with the hit tokens it lost and the true cause (the ground truth
of the cache doctor's verdict-accuracy suite). Tests that read the recordings skip, with the
reason, where they are absent; the labels' own consistency is checked everywhere.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from dsh_testkit.doctor import CAUSE_CODES
from dsh_testkit.traces import load_trace
from dsh_testkit.traces._wire import answer_of_text

from ._real_wire import (
    Interaction,
    Run,
    conversation_runs,
    group_runs,
    har_text,
    load_interactions,
    require_wire,
    write_hars,
)

LABELS = Path(__file__).resolve().parents[2] / "fixtures" / "real-wire-labels.json"
CAUSES = frozenset({*CAUSE_CODES, "none"})
"""The cause vocabulary of the labels (the doctor's cause codes, and ``none``)."""
NO_LOSS = frozenset({"none", "below-cache-unit"})


@pytest.fixture(scope="module")
def interactions() -> tuple[Interaction, ...]:
    return load_interactions(require_wire())


@pytest.fixture(scope="module")
def runs(interactions: tuple[Interaction, ...]) -> tuple[Run, ...]:
    return group_runs(interactions)


@pytest.fixture(scope="module")
def labels() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(LABELS.read_text(encoding="utf-8"))
    return document


def usage_of(interaction: Interaction) -> tuple[int, int]:
    """The recorded ``(prompt tokens, hit tokens)`` of an answered request."""
    mime = interaction.response_headers.get("content-type", "")
    assert interaction.response_text is not None
    _, usage = answer_of_text(
        interaction.response_text, "chat", event_stream=True if "event-stream" in mime else None
    )
    assert usage is not None and usage.prompt_tokens is not None
    assert usage.hit_tokens is not None
    return usage.prompt_tokens, usage.hit_tokens


# -- the grouping -------------------------------------------------------------------------------


def test_runs_with_two_requests_or_more_are_the_issues_303_conversations_of_772(
    runs: tuple[Run, ...],
) -> None:
    conversations = conversation_runs(runs)
    assert len(conversations) == 303
    assert sum(len(r.requests) for r in conversations) == 772
    assert sum(len(r.requests) - 1 for r in conversations) == 469
    assert len(runs) == 596  # every stored version of every recorded file


def test_a_run_is_one_blob_in_recorded_order(runs: tuple[Run, ...]) -> None:
    for run in runs:
        assert len({(i.repo, i.path, i.blob, i.commit) for i in run.interactions}) == 1
        positions = [i.position for i in run.interactions]
        assert positions == sorted(set(positions))
        # a cassette holds its exchanges in the order they were sent; the answers' clocks agree
        starts = [i.started for i in run.requests]
        assert starts == sorted(starts), run.id


def test_the_grouping_does_not_depend_on_the_fixtures_order(
    interactions: tuple[Interaction, ...], runs: tuple[Run, ...]
) -> None:
    assert group_runs(reversed(interactions)) == runs


# -- the labels ---------------------------------------------------------------------------------


def test_the_labels_are_consistent(labels: dict[str, Any]) -> None:
    assert labels["formatVersion"] == 1
    cases = labels["cases"]
    ids = [c["id"] for c in cases]
    assert len(ids) == len(set(ids))
    for case in cases:
        assert case["cause"] in CAUSES, case["id"]
        assert set(case["changes"]) <= CAUSES - {"none"}, case["id"]
        assert case["lost"] == max(0, case["reach"] - case["hit"]), case["id"]
        assert case["lost"] == case["lostToChanges"] + case["lostByProvider"], case["id"]
        assert case["reach"] % case["unit"] == 0
        assert (case["lost"] == 0) == (case["cause"] in NO_LOSS), case["id"]
        assert case["notes"].endswith("."), case["id"]
        assert case["id"].startswith(case["run"] + "#")
    counts = labels["counts"]
    assert counts["cases"] == len(cases)
    assert counts["runs"] == len({c["run"] for c in cases})
    assert counts["lost"] == sum(1 for c in cases if c["lost"])
    assert counts["lostTokens"] == sum(c["lost"] for c in cases)
    assert counts["lostVsPrompt"] == sum(1 for c in cases if c["lostVsPrompt"])
    assert counts["causes"] == dict(sorted(Counter(c["cause"] for c in cases).items()))


def test_the_labels_state_the_figures_the_findings_report(labels: dict[str, Any]) -> None:
    # The figures quoted in the findings (and in docs/wire.md): change them together.
    counts = labels["counts"]
    assert (counts["runs"], counts["cases"]) == (303, 469)
    assert (counts["lost"], counts["lostTokens"], counts["lostVsPrompt"]) == (66, 8512, 9)
    lost = Counter(c["cause"] for c in labels["cases"] if c["lost"])
    assert lost == {
        "system-moved": 24,
        "provider-miss": 24,
        "system-changed": 10,
        "tool-args-reserialized": 6,
        "tools-changed": 2,
    }
    assert len(labels["structures"]) == 18


def test_every_later_request_is_labelled_and_every_label_is_in_the_fixture(
    runs: tuple[Run, ...], labels: dict[str, Any]
) -> None:
    later = {
        request.id: (run, position)
        for run in conversation_runs(runs)
        for position, request in enumerate(run.requests, start=1)
        if position > 1
    }
    cases = {c["id"]: c for c in labels["cases"]}
    assert set(cases) == set(later)
    for case_id, case in cases.items():
        run, position = later[case_id]
        assert (case["run"], case["position"], case["previous"]) == (run.id, position, position - 1)
        current, previous = run.requests[position - 1], run.requests[position - 2]
        assert (case["prompt"], case["hit"]) == usage_of(current)
        assert case["prevPrompt"] == usage_of(previous)[0]
        assert case["recorded"] == current.started.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_the_conversation_structures_name_real_runs_and_cover_them(
    runs: tuple[Run, ...], labels: dict[str, Any]
) -> None:
    by_id = {r.id: r for r in conversation_runs(runs)}
    restarts = {c["id"] for c in labels["cases"] if c.get("newConversation")}
    for structure in labels["structures"]:
        run = by_id[structure["run"]]
        positions = [p for conversation in structure["conversations"] for p in conversation]
        assert positions == list(range(1, len(run.requests) + 1))
        for conversation in structure["conversations"][1:]:
            assert f"{run.id}#{run.requests[conversation[0] - 1].position}" in restarts
    assert len(restarts) == sum(len(s["conversations"]) - 1 for s in labels["structures"])


# -- HAR files ----------------------------------------------------------------------------------


def test_each_run_becomes_a_har_the_trace_reader_reads_back(
    runs: tuple[Run, ...], tmp_path: Path
) -> None:
    chosen = conversation_runs(runs)
    paths = write_hars(chosen, tmp_path)
    assert len(paths) == len(chosen)
    for run, path in zip(chosen, paths, strict=True):
        trace = load_trace(path)
        assert len(trace.exchanges) == len(run.requests), path.name
        for exchange, request in zip(trace.exchanges, run.requests, strict=True):
            assert exchange.body == request.body()
            assert exchange.started == request.started.timestamp()
            assert exchange.finished is None  # durations are unknown, not zero
            assert exchange.usage is not None
            assert (exchange.usage.prompt_tokens, exchange.usage.hit_tokens) == usage_of(request)


def test_a_har_is_the_same_bytes_every_time(runs: tuple[Run, ...], tmp_path: Path) -> None:
    run = conversation_runs(runs)[0]
    first = write_hars([run], tmp_path / "a")[0].read_bytes()
    again = write_hars([run], tmp_path / "b")[0].read_bytes()
    assert first == again == har_text(run).encode("utf-8")
    document = json.loads(first)
    entry = document["log"]["entries"][0]
    assert document["log"]["version"] == "1.2"
    assert entry["request"]["postData"]["text"] == run.requests[0].request_text
    assert entry["startedDateTime"].endswith(".000Z")
    assert (entry["time"], entry["timings"]["wait"]) == (-1, -1)
