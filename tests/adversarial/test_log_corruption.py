"""Corruption: byte flips, dropped, duplicated and garbled newlines, shuffled lines, and every
envelope and payload field replaced by a value of another JSON kind. Each damaged log is a
typed error (nothing on disk changes) or a correct load (exactly the file's records), and the
audit and cache report over it never crash; never a traceback, never a silently changed event.

A seeded sample per real log keeps this to seconds; ``make stress`` runs the same checks on
every field and many more bytes (``tests/adversarial/stress.py``).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.adversarial._logs import (
    Tally,
    apply_field,
    byte_corruptions,
    field_corruptions,
    field_specs,
    judge_corruption,
    real_logs,
)

LOGS = real_logs()
FIELDS_PER_LOG = 6
BYTES_PER_LOG = 4


@pytest.mark.slow
@pytest.mark.parametrize("log", LOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_wrong_typed_fields_are_a_typed_error_or_a_correct_load(log: Path, tmp_path: Path) -> None:
    raw = log.read_bytes()
    every = list(field_specs(raw))
    rng = random.Random(log.name)
    tally = Tally()
    for spec in rng.sample(every, min(FIELDS_PER_LOG, len(every))):
        tally.add(judge_corruption(apply_field(raw, spec), tmp_path / "damaged.jsonl", log.name))
    assert tally.tried == min(FIELDS_PER_LOG, len(every))


@pytest.mark.parametrize("log", LOGS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_byte_damage_is_a_typed_error_or_a_correct_load(log: Path, tmp_path: Path) -> None:
    raw = log.read_bytes()
    tally = Tally()
    for corruption in byte_corruptions(raw, random.Random(log.name), BYTES_PER_LOG):
        tally.add(judge_corruption(corruption, tmp_path / "damaged.jsonl", log.name))
    assert tally.tried == BYTES_PER_LOG


def test_the_first_record_of_a_real_log_with_each_field_of_the_wrong_kind(tmp_path: Path) -> None:
    """Exhaustive on one line: the header and the first event, every field, every kind."""
    raw = LOGS[0].read_bytes()
    first_two = raw[: raw.index(b"\n", raw.index(b"\n") + 1) + 1]
    tally = Tally()
    for corruption in field_corruptions(first_two):
        tally.add(judge_corruption(corruption, tmp_path / "damaged.jsonl", LOGS[0].name))
    assert tally.outcomes.get("typed error", 0) > 0  # the header's fields are all checked
    assert tally.tried > 50
