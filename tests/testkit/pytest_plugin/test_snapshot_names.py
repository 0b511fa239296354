"""Golden files of async tests are named without anyio's ``[asyncio]`` backend parameter: the
same test writes and reads the same golden under pytest-asyncio or anyio, and syrupy neither
reports it unused nor deletes it on ``--snapshot-update``."""

from __future__ import annotations

import pytest

from tests._support import PLAIN_USER_INI, USER_INI, user_project

pytest_plugins = ["pytester"]

INI = PLAIN_USER_INI
ASYNCIO_INI = USER_INI

EXAMPLE = """
import pytest
from dsh_testkit.golden import TranscriptExtension, WireRequestsExtension
from dsh_testkit.mock import Reply

{mark}
async def test_greets(dsh_agent, dsh_mock, snapshot):
    dsh_mock.push(Reply(text="Hello!"))
    agent = dsh_agent(dsh_mock.provider, system="Be terse.")
    await agent.run("Say hi")
    assert agent.session == snapshot.use_extension(TranscriptExtension)
    assert agent.session == snapshot.use_extension(WireRequestsExtension)

{mark}
@pytest.mark.parametrize("who", ["ann"])
async def test_named(dsh_agent, dsh_mock, snapshot, who):
    dsh_mock.push(Reply(text=f"Hi {{who}}"))
    agent = dsh_agent(dsh_mock.provider)
    await agent.run(f"I am {{who}}")
    assert agent.session == snapshot.use_extension(TranscriptExtension)
"""

GOLDENS = [
    "test_greets.requests.jsonc",
    "test_greets.transcript.txt",
    "test_named[ann].transcript.txt",
]


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    return user_project(pytester, monkeypatch, ini=None)


def _goldens(project: pytest.Pytester) -> list[str]:
    return sorted(p.name for p in (project.path / "__snapshots__" / "test_async").iterdir())


def test_anyio_goldens_carry_no_backend_suffix_and_stay_in_use(project: pytest.Pytester) -> None:
    project.makefile(".ini", pytest=INI)
    project.makepyfile(test_async=EXAMPLE.format(mark="@pytest.mark.anyio"))
    args = ("-p", "no:asyncio", "-v")
    written = project.runpytest(*args, "--snapshot-update")
    written.stdout.fnmatch_lines(["*test_greets[[]asyncio[]] PASSED*", "*3 snapshots generated*"])
    written.assert_outcomes(passed=2)
    assert _goldens(project) == GOLDENS
    replayed = project.runpytest(*args)
    replayed.assert_outcomes(passed=2)
    replayed.stdout.fnmatch_lines(["*3 snapshots passed*"])
    replayed.stdout.no_fnmatch_line("*unused*")
    # an update with nothing changed neither rewrites nor deletes a golden
    project.runpytest(*args, "--snapshot-update").assert_outcomes(passed=2)
    assert _goldens(project) == GOLDENS


def test_pytest_asyncio_and_anyio_share_one_golden(project: pytest.Pytester) -> None:
    project.makefile(".ini", pytest=ASYNCIO_INI)
    project.makepyfile(test_async=EXAMPLE.format(mark=""))
    project.runpytest("--snapshot-update").assert_outcomes(passed=2)
    assert _goldens(project) == GOLDENS
    # the same tests under anyio read the goldens pytest-asyncio wrote
    project.makefile(".ini", pytest=INI)
    project.makepyfile(test_async=EXAMPLE.format(mark="@pytest.mark.anyio"))
    result = project.runpytest("-p", "no:asyncio")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*3 snapshots passed*"])
    result.stdout.no_fnmatch_line("*unused*")
    assert _goldens(project) == GOLDENS
