"""The plugin under pytest-xdist (``-n 2``): each worker its own mock server port, and
cassettes only read while replaying, by several workers at once."""

from __future__ import annotations

import pytest

from tests._support import USER_INI

pytest_plugins = ["pytester"]

INI = USER_INI

CHAT = """
import pytest

@pytest.mark.dsh_lenient
@pytest.mark.dsh_cassette("greeting")
@pytest.mark.parametrize("n", range(4))
async def test_chat(dsh_cassette_provider, dsh_agent, n):
    agent = dsh_agent(dsh_cassette_provider, system="Be terse.")
    await agent.run("Say hi")
    await agent.run("Again")
"""

PORTS = """
import os
from pathlib import Path

import httpx
import pytest

@pytest.mark.parametrize("n", range(4))
def test_port(dsh_mock_server, n):
    response = httpx.get(dsh_mock_server.base_url + "/models", headers={"authorization": "Bearer any"})
    assert response.status_code == 200
    worker = os.environ["PYTEST_XDIST_WORKER"]
    folder = Path(__file__).parent / "ports"
    (folder / f"{worker}-{n}").write_text(str(dsh_mock_server.port), encoding="utf-8")
"""


@pytest.mark.slow
def test_workers_get_their_own_server_and_share_read_only_cassettes(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    monkeypatch.delenv("DEEPSEEK_BASE_URL", raising=False)
    monkeypatch.delenv("CI", raising=False)  # CI=true refuses recording (tested apart)
    pytester.makefile(".ini", pytest=INI)
    pytester.makepyfile(test_chat=CHAT)
    pytester.runpytest("--dsh-record-mode=missing", "-k", "test_chat and 0").assert_outcomes(
        passed=1
    )
    cassettes = pytester.path / "cassettes"
    files = sorted(cassettes.rglob("*"))
    assert [p.name for p in files] == ["greeting.yaml"]
    before = [(p.read_bytes(), p.stat().st_ino, p.stat().st_mtime_ns) for p in files]

    # --dist each runs every test on every worker, so both workers surely start a server
    # (the default scheduler may hand all port tests to one worker).
    pytester.makepyfile(test_a_ports=PORTS)
    (pytester.path / "ports").mkdir()
    result = pytester.runpytest("-n", "2", "--dist", "each")
    result.assert_outcomes(passed=16)
    result.stdout.fnmatch_lines(["created: 2/2 workers"])

    # replay wrote nothing: same files, same bytes, same inodes and times
    assert sorted(cassettes.rglob("*")) == files
    assert [(p.read_bytes(), p.stat().st_ino, p.stat().st_mtime_ns) for p in files] == before

    # one server per worker process, each on its own port
    ports: dict[str, set[str]] = {}
    for path in (pytester.path / "ports").iterdir():
        worker = path.name.split("-")[0]
        ports.setdefault(worker, set()).add(path.read_text(encoding="utf-8"))
    assert sorted(ports) == ["gw0", "gw1"]
    assert all(len(seen) == 1 for seen in ports.values())
    assert ports["gw0"] != ports["gw1"]
