"""The scenario harness: drive the real agent loop against recorded data, render goldens.

A scenario is one file ``test_<name>.py`` holding a :class:`Scenario` named ``<name>`` (how to
drive the loop, and what the mock DeepSeek answers when it is recorded) and a test that calls
the ``golden`` fixture. Its recorded data lives in ``recordings/``:

- ``<name>.jsonl`` (plus ``<name>.1.jsonl``, … for forked child sessions): the session logs the
  recording produced, in our JSONL format, the working directory stored as ``{{cwd}}``. The
  test replays them with ``ReplayProvider(strict=True)``: a harness change that alters any
  request fails at once with the first differing field.
- ``cassettes/scenarios/<name>.yaml`` (``wire=True`` scenarios: wire faults such as HTTP 429 or a stream cut before
  ``[DONE]``): a vcrpy cassette recorded over real HTTP against the loopback mock server. The
  test replays it through ``DeepSeekProvider``, so the wire codec and failure handling run too.

Either way the replayed run must reproduce its recording (same transcript), and the run's
goldens are the transcript and the wire requests. To (re)record after changing a scenario or
the harness::

    .venv/bin/python -m tests.scenarios.record [NAME ...]    # all scenarios without NAME
    .venv/bin/pytest tests/scenarios --snapshot-update       # then review the golden diffs

Runs are deterministic but not artificially so: session ids are fresh UUIDs and times are real
in every run (the goldens' normalization must hide them); message ids come from a seeded
UUID-shaped factory, because strict replay compares them.
"""

from __future__ import annotations

import asyncio
import importlib
import itertools
import json
import os
import pkgutil
import random
import re
import shutil
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsh_core import Agent, AgentOptions, Provider, Session, SessionInfo, Tool
from dsh_core._json_text import dumps_canonical
from dsh_core.persistence import LoadedLog, dumps_session, load_session
from dsh_testkit.golden import render_transcript, render_wire_requests
from dsh_testkit.golden._normalize import Normalizer

SCENARIOS_DIR = Path(__file__).resolve().parent
RECORDINGS = SCENARIOS_DIR / "recordings"
WIRE_CASSETTES = SCENARIOS_DIR.parents[1] / "cassettes" / "scenarios"
"""The wire scenarios' cassettes live with the project's other cassettes (scanned for keys)."""
LIVE_ORIGIN = "https://api.deepseek.com"
"""Cassettes file their requests under the real API's origin, whatever served the recording."""
PROVIDER = "deepseek"
MODEL = "deepseek-v4-flash"

Drive = Callable[[Provider, "Run"], Awaitable[Sequence[Session]]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """One recorded conversation through the agent loop."""

    name: str
    """The recordings' file stem; equals the test module's name without ``test_``."""
    description: str
    drive: Drive
    """Runs the loop over ``provider`` and returns the sessions, primary first, then children."""
    script: Callable[[], Sequence[Any]]
    """The mock DeepSeek's answers when recording (``dsh_testkit.mock`` ``Reply``/``ErrorReply``)."""
    wire: bool = False
    """Replay through ``DeepSeekProvider`` and a cassette instead of ``ReplayProvider``."""


class Run:
    """What a scenario's ``drive`` builds its agents from: the same in recording and replay."""

    def __init__(self, scenario: Scenario, tmp: Path) -> None:
        self.scenario = scenario
        self.tmp = tmp
        """A private directory that lives as long as the run (for session files)."""
        self.cwd = os.getcwd()
        seeded = random.Random(f"dsh-scenario:{scenario.name}")
        self.new_id: Callable[[], str] = lambda: str(
            uuid.UUID(int=seeded.getrandbits(128), version=4)
        )
        """The agents' message-id factory: UUID-shaped, seeded, the same sequence every run."""
        self.delays: list[float] = []
        """Every retry backoff the loop asked to sleep (seconds); nobody really waits."""

    async def sleep(self, seconds: float) -> None:
        self.delays.append(seconds)
        await asyncio.sleep(0)

    def session(self) -> Session:
        """A new session with a fresh random id, in this run's working directory."""
        session_id = str(uuid.uuid4())
        info = SessionInfo(id=session_id, created_at=int(time.time() * 1000), cwd=self.cwd)
        return Session.create(session_id, info=info)

    def options(self, **overrides: Any) -> AgentOptions:
        base: dict[str, Any] = {
            "provider": PROVIDER,
            "model": MODEL,
            "invariants": True,
            "id_factory": self.new_id,
            "sleep": self.sleep,
            "random": lambda: 0.5,
        }
        base.update(overrides)
        return AgentOptions(**base)

    def agent(
        self, session: Session, provider: Provider, *, tools: Iterable[Tool] = (), **options: Any
    ) -> Agent:
        return Agent(session, provider, self.options(**options), tools=tools)


# ---------------------------------------------------------------------------------------------
# Recordings


def recording_paths(name: str) -> list[Path]:
    """``<name>.jsonl`` then ``<name>.1.jsonl``, ``<name>.2.jsonl``, … as far as they go."""
    paths = [RECORDINGS / f"{name}.jsonl"]
    for index in itertools.count(1):
        child = RECORDINGS / f"{name}.{index}.jsonl"
        if not child.is_file():
            break
        paths.append(child)
    return paths


def cassette_path(name: str) -> Path:
    return WIRE_CASSETTES / f"{name}.yaml"


def load_recordings(name: str) -> list[LoadedLog]:
    paths = recording_paths(name)
    if not paths[0].is_file():
        raise FileNotFoundError(
            f"scenario {name!r} has no recording at {paths[0]}; record it with "
            f"python -m tests.scenarios.record {name}"
        )
    return [load_session(path) for path in paths]


def storage_bytes(session: Session, cwd: str, *, origin: str | None = None) -> bytes:
    """A session as a recording file: our JSONL, the working directory stored as ``{{cwd}}``
    and, for a wire recording, the mock server's ``origin`` as the live API's (as the cassette
    files it)."""
    normalizer = Normalizer(cwd=cwd)

    def rewrite(text: str) -> str:
        text = normalizer.cwd(text)
        return text.replace(origin, LIVE_ORIGIN) if origin else text

    def tokenized(value: Any) -> Any:
        if isinstance(value, str):
            return rewrite(value)
        if isinstance(value, dict):
            return {rewrite(k): tokenized(v) for k, v in value.items()}
        if isinstance(value, list):
            return [tokenized(v) for v in value]
        return value

    lines = dumps_session(session.info, session.events).decode("utf-8").splitlines()
    return "".join(dumps_canonical(tokenized(json.loads(line))) + "\n" for line in lines).encode(
        "utf-8"
    )


# ---------------------------------------------------------------------------------------------
# Replay (what the tests run)


async def _drive(scenario: Scenario, provider: Provider, tmp: Path) -> list[Session]:
    return list(await scenario.drive(provider, Run(scenario, tmp)))


def _run(scenario: Scenario, provider: Provider) -> list[Session]:
    with tempfile.TemporaryDirectory(prefix="dsh-scenario-") as tmp:
        return asyncio.run(_drive(scenario, provider, Path(tmp)))


async def _drive_wire(scenario: Scenario, tmp: Path) -> list[Session]:
    from dsh_core.providers import DeepSeekProvider

    async with DeepSeekProvider(api_key="sk-scenario-replay", base_url=LIVE_ORIGIN) as provider:
        return await _drive(scenario, provider, tmp)


def replay(scenario: Scenario) -> list[Session]:
    """Run ``scenario`` against its recorded data; check the run reproduces the recording."""
    recorded = load_recordings(scenario.name)
    if scenario.wire:
        from dsh_testkit.cassettes import use_cassette

        with (
            use_cassette(cassette_path(scenario.name), mode="none"),
            tempfile.TemporaryDirectory(prefix="dsh-scenario-") as tmp,
        ):
            sessions = asyncio.run(_drive_wire(scenario, Path(tmp)))
    else:
        from dsh_testkit.replay import ReplayProvider

        provider = ReplayProvider(*recorded, strict=True)
        sessions = _run(scenario, provider)
        provider.assert_consumed()
    expected, actual = render_transcript(recorded), render_transcript(sessions)
    if expected != actual:
        import difflib

        diff = "\n".join(
            difflib.unified_diff(
                expected.splitlines(), actual.splitlines(), "recording", "this run", lineterm=""
            )
        )
        raise AssertionError(
            f"scenario {scenario.name!r}: the replayed run no longer reproduces its recording "
            f"(no request changed, but what was logged did). Re-record it with python -m "
            f"tests.scenarios.record {scenario.name} if the change is intended:\n{diff}"
        )
    return sessions


# ---------------------------------------------------------------------------------------------
# Recording (python -m tests.scenarios.record)


def discover() -> dict[str, Scenario]:
    """Every scenario of this directory, by name (each ``test_*.py`` with a ``SCENARIO``)."""
    found: dict[str, Scenario] = {}
    for module in pkgutil.iter_modules([str(SCENARIOS_DIR)]):
        if not module.name.startswith("test_"):
            continue
        loaded = importlib.import_module(f"{__package__}.{module.name}")
        scenario = getattr(loaded, "SCENARIO", None)
        if isinstance(scenario, Scenario):
            found[scenario.name] = scenario
    return dict(sorted(found.items()))


async def _record_logs(scenario: Scenario, tmp: Path) -> list[Session]:
    from dsh_core.providers import DeepSeekProvider
    from dsh_testkit.mock import MockDeepSeek, mock_transport

    mock = MockDeepSeek(list(scenario.script()), seed=0)
    async with DeepSeekProvider(
        api_key="sk-scenario-recording", transport=mock_transport(mock)
    ) as provider:
        sessions = await _drive(scenario, provider, tmp)
    _check_script_used(scenario, mock.pending)
    return sessions


async def _record_wire(scenario: Scenario, tmp: Path) -> tuple[list[Session], str, Path]:
    from dsh_core.providers import DeepSeekProvider
    from dsh_testkit.cassettes import use_cassette
    from dsh_testkit.mock import MockDeepSeek, MockServer

    metadata = {
        "scenario": scenario.name,
        "description": scenario.description,
        "recordedAgainst": "the loopback mock server (dsh_testkit.mock.MockServer, seed 0) by "
        "python -m tests.scenarios.record",
    }
    cassette = tmp / cassette_path(scenario.name).name
    with MockServer(MockDeepSeek(list(scenario.script()), seed=0)) as server:
        with use_cassette(
            cassette,
            mode="rewrite",
            metadata=metadata,
            rewrite_origin=(server.base_url, LIVE_ORIGIN),
        ):
            async with DeepSeekProvider(
                api_key="sk-scenario-recording", base_url=server.base_url
            ) as provider:
                sessions = await _drive(scenario, provider, tmp)
        _check_script_used(scenario, server.mock.pending)
        return sessions, server.base_url, cassette


def _check_script_used(scenario: Scenario, pending: Sequence[Any]) -> None:
    if pending:
        raise RuntimeError(
            f"scenario {scenario.name!r} left {len(pending)} mock answer(s) unused: the drive "
            "made fewer model calls than its script plans; fix the script or the drive"
        )


_VOLATILE_CASSETTE_LINE = re.compile(
    r"^\s*(x-deepseek-harness-session-id|scrubChecksum): .*$", re.MULTILINE
)
"""Lines that change with every recording: the session id, and the checksum over the file."""


def _same_recording(scenario: Scenario, sessions: Sequence[Session], cassette: Path | None) -> bool:
    """Whether a fresh recording says nothing the committed one does not (only ids and times
    differ): then the committed files are kept, so re-recording causes no churn."""
    try:
        existing = load_recordings(scenario.name)
    except FileNotFoundError:
        return False
    if len(existing) != len(sessions):
        return False
    for loaded in existing:  # a file in an older storage form is rewritten in the current one
        assert loaded.path is not None
        if Path(loaded.path).read_bytes() != dumps_session(loaded.info, loaded.events):
            return False
    same = render_transcript(existing) == render_transcript(sessions) and render_wire_requests(
        existing
    ) == render_wire_requests(sessions)
    if same and cassette is not None:
        committed = cassette_path(scenario.name)
        same = committed.is_file() and _VOLATILE_CASSETTE_LINE.sub(
            "", committed.read_text(encoding="utf-8")
        ) == _VOLATILE_CASSETTE_LINE.sub("", cassette.read_text(encoding="utf-8"))
    return same


def record(scenario: Scenario) -> list[Path]:
    """Record ``scenario`` against the mock DeepSeek and write its recordings.

    Returns the files written; none when the fresh recording differs from the committed one
    only in ids and times (the committed files are kept as they are).
    """
    RECORDINGS.mkdir(exist_ok=True)
    origin: str | None = None
    cassette: Path | None = None
    with tempfile.TemporaryDirectory(prefix="dsh-scenario-") as tmp:
        if scenario.wire:
            sessions, origin, cassette = asyncio.run(_record_wire(scenario, Path(tmp)))
        else:
            sessions = asyncio.run(_record_logs(scenario, Path(tmp)))
        if _same_recording(scenario, sessions, cassette):
            return []
        written: list[Path] = []
        if cassette is not None:
            WIRE_CASSETTES.mkdir(parents=True, exist_ok=True)
            written.append(Path(shutil.copyfile(cassette, cassette_path(scenario.name))))
    cwd = os.getcwd()
    for stale in recording_paths(scenario.name)[1:]:
        stale.unlink()
    for index, session in enumerate(sessions):
        name = f"{scenario.name}.jsonl" if index == 0 else f"{scenario.name}.{index}.jsonl"
        path = RECORDINGS / name
        path.write_bytes(storage_bytes(session, cwd, origin=origin))
        written.append(path)
    return written
