"""The repository's cassettes: nothing key-shaped, readable, replayable, reproducible."""

from __future__ import annotations

import re
import subprocess
import sys
from io import StringIO
from pathlib import Path

import pytest

from dsh_core.providers import DeepSeekProvider
from dsh_testkit.cassettes import RecordingRefused, use_cassette
from dsh_testkit.mock import MockDeepSeek, MockServer
from dsh_testkit.scrub import find_secrets
from tools.record_cassettes import LIVE_ORIGIN, SCENARIOS, record_scenarios

ROOT = Path(__file__).resolve().parents[3]
CASSETTES = ROOT / "cassettes"

# The scan's own patterns, independent of the scrubber it checks (deliberately broader).
KEY_SHAPED = [
    re.compile(r"sk-[A-Za-z0-9]{20,}"),
    re.compile(r"sk-ant-[A-Za-z0-9_-]{20,}"),
    re.compile(r"(?i)bearer\s+(?!<REDACTED>)[A-Za-z0-9._~+/-]{20,}"),
    re.compile(r"AKIA[0-9A-Z]{16}"),
    re.compile(r"AIza[0-9A-Za-z_-]{35}"),
    re.compile(r"gh[pousr]_[A-Za-z0-9]{36,}"),
    re.compile(r"eyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}"),
]


RECORDINGS = ROOT / "tests" / "scenarios" / "recordings"
"""The golden suite's recorded logs and wire cassettes: committed too, so scanned too."""


def cassette_files() -> list[Path]:
    return sorted(p for p in CASSETTES.rglob("*") if p.is_file())


def committed_recordings() -> list[Path]:
    return sorted(p for p in [*cassette_files(), *RECORDINGS.rglob("*")] if p.is_file())


def test_the_cassettes_folder_holds_every_scenario() -> None:
    names = {p.stem for p in CASSETTES.glob("*.yaml")}
    assert names == set(SCENARIOS)
    assert (CASSETTES / "README.md").is_file()


@pytest.mark.parametrize("path", committed_recordings(), ids=lambda p: str(p.relative_to(ROOT)))
def test_nothing_key_shaped_is_committed(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    found = [m.group(0)[:12] + "…" for pattern in KEY_SHAPED for m in pattern.finditer(text)]
    found += [s[:12] + "…" for s in find_secrets(text)]
    assert not found, f"{path.relative_to(ROOT)} holds key-shaped strings (shown cut): {found}"


def test_the_scan_catches_what_it_is_for() -> None:
    leaked = "authorization: Bearer " + "a1" * 20 + "\nkey: sk-" + "Zz9" * 10
    assert sum(1 for pattern in KEY_SHAPED if pattern.search(leaked)) == 2


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_each_cassette_replays_with_its_scenario_and_is_fully_played(name: str) -> None:
    path = CASSETTES / f"{name}.yaml"
    with use_cassette(path) as cassette:
        async with DeepSeekProvider(
            api_key="sk-replay-needs-no-key", base_url=LIVE_ORIGIN
        ) as provider:
            transcript = await SCENARIOS[name].run(provider)
    assert cassette.play_count == cassette.recorded == len(transcript.calls)
    assert "loopback mock server" in cassette.metadata["recordedAgainst"]
    assert cassette.metadata["scenario"] == name


async def test_scenarios_replay_what_they_are_named_for() -> None:
    async def run(name: str) -> list[str]:
        with use_cassette(CASSETTES / f"{name}.yaml"):
            async with DeepSeekProvider(api_key="k", base_url=LIVE_ORIGIN) as provider:
                transcript = await SCENARIOS[name].run(provider)
        kinds = []
        for _, chunks in transcript.calls:
            finish = chunks[-1]
            failure = finish.reason.failure  # type: ignore[union-attr]
            kinds.append(finish.reason.kind + (f":{failure.code}" if failure else ""))  # type: ignore[union-attr]
        return kinds

    assert await run("plain-chat") == ["stop"]
    assert await run("one-tool-call") == ["tool-calls", "stop"]
    assert await run("parallel-tool-calls") == ["tool-calls", "stop"]
    rate_limited = await run("rate-limit-retry")
    assert (
        len(rate_limited) == 2
        and rate_limited[0].startswith("error:")
        and rate_limited[1] == "stop"
    )
    assert await run("eof-without-done") == ["error:STREAM_CLOSED"]


async def test_cassettes_are_reproducible_from_the_mock(tmp_path: Path) -> None:
    out = StringIO()
    written = await record_scenarios(tmp_path, live=False, out=out)
    assert len(written) == len(SCENARIOS)
    volatile = re.compile(
        r"^\s*x-ds-trace-id: .*$", re.MULTILINE
    )  # the mock's trace ids are random
    for path in written:
        fresh = volatile.sub("", path.read_text(encoding="utf-8"))
        committed = volatile.sub("", (CASSETTES / path.name).read_text(encoding="utf-8"))
        assert fresh == committed, (
            f"cassettes/{path.name} is out of date with the provider or the mock; re-record it: "
            "python -m tools.record_cassettes record-mock cassettes"
        )


# ------------------------------------------------------------------------------- record-live


def test_record_live_refuses_without_a_key(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    result = subprocess.run(
        [sys.executable, "-m", "tools.record_cassettes", "record-live", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert (
        "record-live needs a DeepSeek API key in the environment variable DEEPSEEK_API_KEY"
        in result.stderr
    )
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


async def test_record_live_records_against_the_configured_endpoint_and_never_shows_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    key = "sk-" + "LiveKey123" * 3
    out = StringIO()
    with MockServer(MockDeepSeek(seed=0)) as server:
        base_url = server.base_url
        written = await record_scenarios(
            tmp_path,
            live=True,
            env={"DEEPSEEK_API_KEY": key, "DEEPSEEK_BASE_URL": base_url},
            out=out,
        )
    assert sorted(p.stem for p in written) == sorted(n for n, s in SCENARIOS.items() if s.live)
    report = out.getvalue()
    assert "skip rate-limit-retry: a fault the live API cannot be made to produce" in report
    captured = capsys.readouterr()
    for text in (
        report,
        captured.out,
        captured.err,
        *(p.read_text(encoding="utf-8") for p in written),
    ):
        assert key not in text
    first = written[0].read_text(encoding="utf-8")
    assert f"recordedAgainst: the live DeepSeek API at {base_url}" in first
    assert f"uri: {LIVE_ORIGIN}/chat/completions" in first


async def test_recording_refuses_unknown_scenarios(tmp_path: Path) -> None:
    with pytest.raises(RecordingRefused, match="unknown scenario\\(s\\) nope; known: plain-chat"):
        await record_scenarios(tmp_path, live=False, names=["nope"])


def test_the_command_line_reports_refusals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tools.record_cassettes import main

    assert main(["record-mock", str(tmp_path), "nope"]) == 2
    assert "error: unknown scenario(s) nope" in capsys.readouterr().err
    assert main(["record-mock", str(tmp_path), "plain-chat"]) == 0
    assert (tmp_path / "plain-chat.yaml").is_file()


async def test_a_provider_change_fails_replay_naming_the_changed_field() -> None:
    from dsh_testkit.cassettes import CassetteMismatch
    from tools.record_cassettes import _converse

    with pytest.raises(CassetteMismatch) as caught, use_cassette(CASSETTES / "plain-chat.yaml"):
        async with DeepSeekProvider(api_key="k", base_url=LIVE_ORIGIN) as provider:
            await _converse(provider, "Say goodbye.", tools=False)
    assert caught.value.index == 0 and caught.value.closest_index == 0
    assert caught.value.diff == (
        "messages[1].content differs: recorded: 'Say hello.', request: 'Say goodbye.'",
    )
