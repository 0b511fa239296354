"""Truncation: a log cut at any byte recovers exactly the records complete before the cut, and
resuming it never changes a committed byte (the crash model of the JSONL store)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_core._json_text import dumps_canonical
from dsh_core.persistence import loads_session
from tests.adversarial._logs import RECORDINGS, _expected_events, judge_cut, real_logs, record_ends

LOGS = real_logs()
SMALL = RECORDINGS / "one_tool_call.jsonl"
SMALL_LINES = 8
"""The small log cut at every offset: a real recording's first lines (a header, a user message,
streamed chunks, a tool call), short enough to try every byte in about a second."""


def _small_log() -> bytes:
    raw = SMALL.read_bytes()
    return raw[: record_ends(raw)[SMALL_LINES - 1]]


def test_a_small_real_log_cut_at_every_byte_offset_keeps_every_complete_record() -> None:
    raw = _small_log()
    ends = record_ends(raw)
    header_end = ends[0]
    for cut in range(header_end - 1, len(raw) + 1):
        loaded = loads_session(raw[:cut], audit=True)
        complete = max([end for end in ends if end <= cut], default=0)
        if cut > complete and raw[cut : cut + 1] == b"\n":
            complete = cut  # a whole record that only lacks its newline
        got = [dumps_canonical(e.to_json(), sort_keys=True) for e in loaded.events]
        assert got == _expected_events(raw[:complete]), f"cut at {cut}"
        assert loaded.committed_bytes == complete, f"cut at {cut}"
        assert (loaded.dropped is None) == (complete == cut), f"cut at {cut}"


def test_a_small_real_log_resumes_after_a_cut_near_every_record_boundary(tmp_path: Path) -> None:
    raw = _small_log()
    cuts = sorted({e + d for e in record_ends(raw)[1:] for d in (-1, 0, 1) if e + d <= len(raw)})
    for cut in cuts:
        assert judge_cut(raw, cut, tmp_path / "cut.jsonl", SMALL.name) == "recovered"


@pytest.mark.parametrize("log", LOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_cut_inside_the_header_is_a_typed_error(log: Path, tmp_path: Path) -> None:
    raw = log.read_bytes()
    for cut in (1, raw.index(b"\n") // 2, raw.index(b"\n") - 1):
        assert judge_cut(raw, cut, tmp_path / "cut.jsonl", log.name) == "typed error (header cut)"


@pytest.mark.slow
@settings(max_examples=60)
@given(index=st.integers(0, len(LOGS) - 1), fraction=st.floats(0, 1), seed=st.integers(0, 2**16))
def test_any_real_log_cut_anywhere_recovers_and_resumes(
    tmp_path_factory: pytest.TempPathFactory, index: int, fraction: float, seed: int
) -> None:
    log = LOGS[index]
    raw = log.read_bytes()
    header_end = raw.index(b"\n")
    cut = header_end + round(fraction * (len(raw) - header_end))
    if seed % 3 == 0:  # a third of the cuts land right at a record boundary
        cut = random.Random(seed).choice(record_ends(raw))
    scratch = tmp_path_factory.mktemp("cut") / "cut.jsonl"
    assert judge_cut(raw, cut, scratch, log.name) == "recovered"
