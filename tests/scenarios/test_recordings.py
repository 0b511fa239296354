"""Guards over the scenario inventory: every scenario has its recordings, nothing is orphaned,
and recordings are stored in canonical, machine-independent form."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_core import Session, SessionInfo
from dsh_core.persistence import dumps_session, load_session
from dsh_testkit.golden import render_transcript

from . import _harness
from ._harness import RECORDINGS, SCENARIOS_DIR, cassette_path, discover, recording_paths

SCENARIOS = discover()
NOT_SCENARIOS = {"test_goldens_stable", "test_recordings"}


def test_every_scenario_module_defines_a_scenario_named_after_it() -> None:
    modules = {p.stem for p in SCENARIOS_DIR.glob("test_*.py")} - NOT_SCENARIOS
    assert {f"test_{name}" for name in SCENARIOS} == modules
    assert len(SCENARIOS) >= 16


def test_every_recording_belongs_to_a_scenario() -> None:
    logs: set[str] = set()
    cassettes: set[str] = set()
    for name, scenario in SCENARIOS.items():
        logs.update(p.name for p in recording_paths(name))
        if scenario.wire:
            cassettes.add(cassette_path(name).name)
            assert cassette_path(name).is_file(), cassette_path(name)
    assert {p.name for p in RECORDINGS.iterdir()} == logs
    assert {p.name for p in cassette_path("x").parent.iterdir()} == cassettes


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_recordings_are_present_canonical_and_cwd_free(name: str) -> None:
    paths = recording_paths(name)
    assert paths[0].is_file(), f"record it: python -m tests.scenarios.record {name}"
    if SCENARIOS[name].wire:
        assert cassette_path(name).is_file()
    checkout = str(SCENARIOS_DIR.parents[1])
    for path in paths:
        raw = path.read_bytes()
        loaded = load_session(path)
        # the canonical bytes of what it holds (a re-recording diff shows only real changes)
        assert raw == dumps_session(loaded.info, loaded.events)
        assert loaded.info.cwd == "{{cwd}}"
        assert checkout not in raw.decode("utf-8")
        assert not re.search(r"https?://(127\.0\.0\.1|localhost)", raw.decode("utf-8"))


def test_child_recordings_are_forks_of_the_primary() -> None:
    checked: list[str] = []
    for name in SCENARIOS:
        paths = recording_paths(name)
        primary = load_session(paths[0])
        for child_path in paths[1:]:
            child = load_session(child_path)
            assert child.info.parent_session == primary.info.id
            assert child.info.seed_length is not None and child.info.seed_length > 0
            seed = child.events[: child.info.seed_length]
            assert len(seed) == child.info.seed_length
            assert [e.to_json() for e in seed] == [e.to_json() for e in primary.events[: len(seed)]]
            checked.append(child_path.name)
    # the loops above pass vacuously when no child recording is found
    assert "fork.1.jsonl" in checked


def test_cassettes_hold_no_key_and_name_the_live_origin() -> None:
    for name, scenario in SCENARIOS.items():
        if not scenario.wire:
            continue
        text = cassette_path(name).read_text(encoding="utf-8")
        assert "sk-scenario" not in text
        assert "https://api.deepseek.com/chat/completions" in text
        assert f"scenario: {name}\n" in text


@pytest.mark.parametrize("name", ["plain_chat", "retry_after_429"])
def test_re_recording_reproduces_the_goldens_and_is_kept_when_unchanged(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario = SCENARIOS[name]
    committed = render_transcript(_harness.load_recordings(name))
    monkeypatch.setattr(_harness, "RECORDINGS", tmp_path)
    monkeypatch.setattr(_harness, "WIRE_CASSETTES", tmp_path)
    written = _harness.record(scenario)
    assert {p.name for p in written} == {p.name for p in recording_paths(name)} | (
        {f"{name}.yaml"} if scenario.wire else set()
    )
    assert all(p.parent == tmp_path for p in written)
    # the fresh recording replays to the very transcript of the committed one (its golden)
    assert render_transcript(_harness.replay(scenario)) == committed
    # recording again changes only ids and times: nothing is rewritten
    before = {p: p.read_bytes() for p in tmp_path.iterdir()}
    assert _harness.record(scenario) == []
    assert {p: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_storage_form_tokenizes_the_cwd_and_the_recording_origin(tmp_path: Path) -> None:
    session = Session.create("s", info=SessionInfo(id="s", created_at=0, cwd=str(tmp_path)))
    session.append("note/x", {f"{tmp_path}/k": "see http://127.0.0.1:4321/chat"}, ignorable=True)
    text = _harness.storage_bytes(session, str(tmp_path), origin="http://127.0.0.1:4321")
    assert str(tmp_path) not in text.decode("utf-8")
    assert b'"cwd":"{{cwd}}"' in text
    assert b'{"{{cwd}}/k":"see https://api.deepseek.com/chat"}' in text


def test_the_record_command_refuses_unknown_scenarios() -> None:
    run = subprocess.run(
        [sys.executable, "-m", "tests.scenarios.record", "no_such_scenario"],
        cwd=SCENARIOS_DIR.parents[1],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode == 2
    assert "unknown scenario(s) no_such_scenario" in run.stderr
