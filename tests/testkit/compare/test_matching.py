"""How ``compare`` pairs the scenarios of two runs: declared id, conversation key, path."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dsh_testkit.compare import compare_runs
from dsh_testkit.traces import TraceError
from tests.testkit._report_builders import LogBuilder, snapshot, usage
from tests.testkit.compare._traces import conversation, write

ROOT = Path(__file__).resolve().parents[3]


def session_log(path: Path, session_id: str) -> Path:
    log = LogBuilder(session_id)
    log.start_turn("first question")
    log.step(header_event=snapshot("initial"), usage_data=usage(1000, 0))
    log.end_turn()
    return log.write(path)


def names(result: object) -> list[tuple[str, str]]:
    return [(s.name, s.matched_by) for s in result.scenarios]  # type: ignore[attr-defined]


def test_folders_pair_by_path_skipping_hidden_and_unknown_files(tmp_path: Path) -> None:
    for side in ("base", "new"):
        write(tmp_path / side / "b.jsonl", conversation("hi", "more"))
        write(tmp_path / side / "nested" / "a.jsonl", conversation("yo", "again"))
        write(tmp_path / side / ".hidden" / "c.jsonl", conversation("never read"))
        write(tmp_path / side / ".d.jsonl", conversation("never read"))
    (tmp_path / "new" / "README.md").write_text("# notes\n", encoding="utf-8")
    result = compare_runs(tmp_path / "base", tmp_path / "new")
    assert names(result) == [("b.jsonl", "path"), ("nested/a.jsonl", "path")]
    assert result.verdict == "identical"
    assert result.new.traces == 2
    assert result.new.skipped == ("README.md",)
    assert result.notes == ("new: 1 file(s) of no known kind skipped (README.md)",)


def test_a_declared_id_follows_a_renamed_file(tmp_path: Path) -> None:
    write(tmp_path / "base" / "old_name.jsonl", conversation("hi", "more"), scenario="t.py::test_x")
    write(tmp_path / "new" / "new_name.jsonl", conversation("hi", "more"), scenario="t.py::test_x")
    # A file that took the old name but records another test is not its match.
    write(tmp_path / "new" / "old_name.jsonl", conversation("other"), scenario="t.py::test_y")
    result = compare_runs(tmp_path / "base", tmp_path / "new")
    assert names(result) == [("t.py::test_x", "id")]
    assert [a.name for a in result.added] == ["t.py::test_y"]
    assert result.removed == ()
    assert result.verdict == "benign"  # nothing got worse, but the runs are not the same
    assert result.exit_status == 0


def test_an_id_or_key_that_is_not_unique_falls_through_to_the_path(tmp_path: Path) -> None:
    # Every cassette of a suite may carry one session id; ids can collide too.
    for side in ("base", "new"):
        write(tmp_path / side / "a.jsonl", conversation("a"), scenario="same", key="shared")
        write(tmp_path / side / "b.jsonl", conversation("b"), scenario="same", key="shared")
    result = compare_runs(tmp_path / "base", tmp_path / "new")
    assert names(result) == [("a.jsonl", "path"), ("b.jsonl", "path")]
    assert result.verdict == "identical"


def test_a_unique_conversation_key_pairs_renamed_session_logs(tmp_path: Path) -> None:
    for side, name in (("base", "one.jsonl"), ("new", "renamed.jsonl")):
        (tmp_path / side).mkdir()
        session_log(tmp_path / side / name, "session-42")
    result = compare_runs(tmp_path / "base", tmp_path / "new")
    assert names(result) == [("session-42", "conversation")]
    assert result.scenarios[0].verdict == "identical"


def test_session_logs_with_random_ids_pair_by_path(tmp_path: Path) -> None:
    for side, session in (("base", "run-1f3a"), ("new", "run-9c2e")):
        (tmp_path / side).mkdir()
        session_log(tmp_path / side / "session.jsonl", session)
    result = compare_runs(tmp_path / "base", tmp_path / "new")
    assert names(result) == [("session.jsonl", "path")]


def test_a_cassette_pairs_by_its_metadata_scenario(tmp_path: Path) -> None:
    (tmp_path / "base").mkdir()
    (tmp_path / "new").mkdir()
    shutil.copy(ROOT / "cassettes" / "plain-chat.yaml", tmp_path / "base" / "plain-chat.yaml")
    shutil.copy(ROOT / "cassettes" / "plain-chat.yaml", tmp_path / "new" / "renamed.yaml")
    shutil.copy(ROOT / "cassettes" / "one-tool-call.yaml", tmp_path / "new" / "one-tool-call.yaml")
    result = compare_runs(tmp_path / "base", tmp_path / "new")
    assert names(result) == [("plain-chat", "id")]
    assert result.scenarios[0].verdict == "identical"
    assert [a.name for a in result.added] == ["one-tool-call"]


def test_a_recording_of_many_conversations_is_one_scenario_per_key(tmp_path: Path) -> None:
    a, b = conversation("alpha", "beta"), conversation("gamma", "delta")
    loose = conversation("no key here")
    base = write(
        tmp_path / "base.jsonl",
        [a[0], b[0], loose[0], a[1], b[1]],
        key=["test-a", "test-b", None, "test-a", "test-b"],
    )
    # The new run interleaves them differently, and test-b's second request changed.
    changed = conversation("gamma", "DELTA")
    new = write(
        tmp_path / "new.jsonl",
        [b[0], a[0], changed[1], a[1], loose[0]],
        key=["test-b", "test-a", "test-b", "test-a", None],
    )
    result = compare_runs(base, new)
    # Each is called by what it is (its key), never by a run's file name.
    by_name = {s.name: s for s in result.scenarios}
    assert sorted(by_name) == ["(no key)", "test-a", "test-b"]
    assert by_name["test-a"].matched_by == "conversation"
    assert by_name["test-a"].verdict == "identical"
    assert by_name["(no key)"].matched_by == "path"
    changed_b = by_name["test-b"]
    assert changed_b.first_change is not None
    assert changed_b.first_change.request == 2
    assert changed_b.first_change.differences == (
        "messages[3].content differs: base: 'delta', new: 'DELTA'",
    )


def test_two_single_files_pair_whatever_their_names(tmp_path: Path) -> None:
    base = write(tmp_path / "yesterday.jsonl", conversation("hi"), scenario="x")
    new = write(tmp_path / "today.jsonl", conversation("hi"), scenario="y")
    result = compare_runs(base, new)
    assert names(result) == [("x", "file")]  # the base's (committed) name, not the artifact's
    assert result.verdict == "identical"


def test_objects_compare_too(tmp_path: Path) -> None:
    from dsh_testkit.traces import load_trace

    path = write(tmp_path / "a.jsonl", conversation("hi", "more"))
    result = compare_runs(load_trace(path), path)
    assert result.verdict == "identical"


def test_a_file_of_no_known_kind_given_alone_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("hello\n", encoding="utf-8")
    with pytest.raises(TraceError, match="not a session log or any recognized trace"):
        compare_runs(other, other)
