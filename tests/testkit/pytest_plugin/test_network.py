"""The plugin at pytest-recording's level, as a user runs it: the marker alone, CI's default
mode, the network guard (block all, allowed hosts, the live DeepSeek guard), our flags in
vcrpy's errors, scrub rules from pyproject.toml, and what a test scripts while it replays."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests._support import USER_INI, user_project

pytest_plugins = ["pytester"]

INI = USER_INI


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    return user_project(pytester, monkeypatch, ini=INI)


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return data


# ---------------------------------------------------------------------- the marker alone

MARKER_ONLY = """
import httpx
import pytest

AUTH = {"authorization": "Bearer any"}


@pytest.mark.dsh_cassette
def test_listing():
    # no fixture asked for: the marker alone puts the test under its cassette
    assert httpx.get("https://api.deepseek.com/models", headers=AUTH).status_code == 200


@pytest.mark.dsh_cassette("shared/models")
class TestNamed:
    def test_models(self):
        assert httpx.get("https://api.deepseek.com/models", headers=AUTH).status_code == 200
"""


def test_the_marker_alone_records_and_replays_without_the_fixture(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(test_marker=MARKER_ONLY)
    project.runpytest("--dsh-record-mode=once").assert_outcomes(passed=2)
    own = project.path / "cassettes" / "test_marker" / "test_listing.yaml"
    shared = project.path / "cassettes" / "shared" / "models.yaml"
    assert load(own)["interactions"][0]["request"]["uri"] == "https://api.deepseek.com/models"
    assert len(load(shared)["interactions"]) == 1
    recorded = own.read_bytes()
    project.runpytest().assert_outcomes(passed=2)  # replayed offline
    assert own.read_bytes() == recorded


def test_the_marker_alone_fails_a_replay_with_no_cassette_instead_of_going_live(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(test_marker=MARKER_ONLY)
    result = project.runpytest()
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["CassetteNotFound: cassette */test_listing.yaml does not exist*"])


# ------------------------------------------------------------------------ modes and CI


def test_without_ci_the_ini_record_mode_applies(project: pytest.Pytester) -> None:
    project.makefile(".ini", pytest=INI + "dsh_record_mode = once\n")
    project.makepyfile(test_marker=MARKER_ONLY)
    result = project.runpytest()
    result.stdout.fnmatch_lines(
        ["dsh-testkit: record mode once (record a cassette that does not exist, then replay *"]
    )
    result.assert_outcomes(passed=2)


CI_REFUSAL = (
    "is refused because CI=true: a CI run replays its cassettes and never records them "
    "(recording there would hide a missing or stale cassette behind a fresh recording). Record "
    "on your machine and commit the cassettes; in CI run replay only (leave the record mode out, "
    "or --dsh-record-mode=none), or pass --dsh-record-in-ci to record in CI on purpose"
)


@pytest.mark.parametrize(
    ("ini", "args", "asked_by"),
    [
        ("dsh_record_mode = once\n", (), "dsh_record_mode = once in */pytest.ini"),
        ("", ("--dsh-record-mode=new_episodes",), "--dsh-record-mode=new_episodes (the command *"),
        (
            "addopts = -p no:cacheprovider --dsh-record-mode=once\n",
            (),
            "--dsh-record-mode=once (the command line or addopts)",
        ),
        ("", ("-o", "dsh_record_mode=once"), "-o dsh_record_mode=once (the command line or *"),
    ],
)
@pytest.mark.parametrize("ci", ["true", "1", "yes"])
def test_ci_refuses_every_record_mode_the_flag_or_the_ini_asks_for(
    project: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    ci: str,
    ini: str,
    args: tuple[str, ...],
    asked_by: str,
) -> None:
    text = (
        INI.replace("addopts = --strict-markers -p no:cacheprovider\n", "")
        if "addopts" in ini
        else INI
    )
    project.makefile(".ini", pytest=text + ini)
    monkeypatch.setenv("CI", ci)
    project.makepyfile(test_marker=MARKER_ONLY)
    result = project.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    mode = "new_episodes" if "new_episodes" in asked_by else "once"
    result.stderr.fnmatch_lines([f"ERROR: record mode '{mode}' (asked by {asked_by}) {CI_REFUSAL}"])
    assert not (project.path / "cassettes").exists()  # nothing recorded


def test_ci_refuses_a_record_mode_a_marker_or_the_config_fixture_asks_for(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    project.makeconftest(
        """
        import pytest

        @pytest.fixture
        def dsh_cassette_config():
            return {"record_mode": "new_episodes"}
        """
    )
    project.makepyfile(
        test_asks="""
        import httpx
        import pytest

        AUTH = {"authorization": "Bearer any"}


        @pytest.mark.dsh_cassette(record_mode="once")
        def test_marker():
            httpx.get("https://api.deepseek.com/models", headers=AUTH)


        @pytest.mark.dsh_cassette
        def test_fixture():
            httpx.get("https://api.deepseek.com/models", headers=AUTH)
        """
    )
    result = project.runpytest()
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at setup of test_marker*",
            f"RecordingRefused: record mode 'once' (asked by @pytest.mark.dsh_cassette) {CI_REFUSAL}",
            "*ERROR at setup of test_fixture*",
            "RecordingRefused: record mode 'new_episodes' (asked by the dsh_cassette_config "
            f"fixture) {CI_REFUSAL}",
        ]
    )
    assert not (project.path / "cassettes").exists()
    # the command line's mode wins over the marker's and the fixture's: none replays (and
    # fails, as nothing was recorded), it is not refused
    replay = project.runpytest("--dsh-record-mode=none")
    replay.assert_outcomes(errors=2)
    replay.stdout.fnmatch_lines(["CassetteNotFound: cassette */test_marker.yaml does not exist*"])


def test_ci_records_only_with_record_in_ci(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    project.makepyfile(test_marker=MARKER_ONLY)
    result = project.runpytest("--dsh-record-mode=once", "--dsh-record-in-ci")
    result.stdout.fnmatch_lines(
        [
            "dsh-testkit: record mode once (record a cassette that does not exist, then replay "
            "only) [[]CI=true, recording allowed by --dsh-record-in-ci[]]*"
        ]
    )
    result.assert_outcomes(passed=2)
    replay = project.runpytest()
    replay.stdout.fnmatch_lines(
        ["dsh-testkit: record mode none (replay only) [[]CI=true: recording refused[]]*"]
    )
    replay.assert_outcomes(passed=2)


def test_a_bad_ini_record_mode_is_a_usage_error(project: pytest.Pytester) -> None:
    project.makefile(".ini", pytest=INI + "dsh_record_mode = sometimes\n")
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: dsh_record_mode = 'sometimes' in */pytest.ini is not a record mode; use one "
            "of none, once, new_episodes, all, rewrite"
        ]
    )


# -------------------------------------------------------------------------- the network

CLIENTS = """
import asyncio
import socket
import urllib.request

import httpx
import httpx2
import pytest
from dsh_testkit.pytest_plugin import NetworkBlocked


def test_httpx():
    with pytest.raises(NetworkBlocked, match="example.org:443") as caught:
        httpx.get("https://example.org/")
    assert caught.value.host == "example.org"


def test_httpx2():
    with pytest.raises(NetworkBlocked, match="example.org"):
        httpx2.get("https://example.org/")


def test_urllib():
    with pytest.raises(NetworkBlocked, match="example.org"):
        urllib.request.urlopen("http://example.org/", timeout=5)


async def test_asyncio_streams():
    with pytest.raises(NetworkBlocked, match="example.org"):
        await asyncio.open_connection("example.org", 80)


def test_raw_socket_to_an_ip():
    with pytest.raises(NetworkBlocked, match="192.0.2.1:80"):
        socket.create_connection(("192.0.2.1", 80), timeout=1)


def test_loopback_stays_open(dsh_mock_server):
    response = httpx.get(f"{dsh_mock_server.base_url}/models", headers={"authorization": "Bearer k"})
    assert response.status_code == 200


def test_a_refusal_fails_a_test_that_does_not_expect_it():
    httpx.get("https://example.org/")
"""


@pytest.mark.slow
def test_block_network_refuses_every_client_naming_the_host(project: pytest.Pytester) -> None:
    project.makepyfile(test_clients=CLIENTS)
    result = project.runpytest("--dsh-block-network", "-rf")
    result.assert_outcomes(passed=6, failed=1)
    result.stdout.fnmatch_lines(
        [
            "dsh-testkit: *; network: blocked but loopback",
            "FAILED test_clients.py::test_a_refusal_fails_a_test_that_does_not_expect_it - "
            "dsh_testkit.pytest_plugin.NetworkBlocked: dsh-testkit refused a connection to "
            "example.org:443: the network is blocked (--dsh-block-network); allow this host "
            "with --dsh-allowed-hosts=example.org*",
        ]
    )


def test_allowed_hosts_let_named_hosts_through(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_allowed="""
        import socket

        import pytest
        from dsh_testkit.pytest_plugin import NetworkBlocked


        def test_allowed_name_is_resolved():
            # allowed: resolution is attempted (and may fail offline), never refused
            try:
                socket.getaddrinfo("example.org", 443)
            except OSError:
                pass


        def test_domain_pattern():
            try:
                socket.getaddrinfo("docs.example.net", 443)
            except OSError:
                pass


        def test_other_hosts_still_refused():
            with pytest.raises(NetworkBlocked, match="example.com"):
                socket.getaddrinfo("example.com", 443)
        """
    )
    result = project.runpytest(
        "--dsh-block-network",
        "--dsh-allowed-hosts=example.org",
        "--dsh-allowed-hosts=*.example.net",
    )
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        ["dsh-testkit: *; network: blocked but loopback and *.example.net, example.org"]
    )


def test_without_the_flag_other_hosts_are_not_refused(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_open="""
        import socket

        def test_resolving_is_not_refused():
            try:
                socket.getaddrinfo("example.org", 443)
            except OSError:
                pass  # offline: the resolver fails, but the guard did not refuse
        """
    )
    project.runpytest().assert_outcomes(passed=1)


LIVE_GUARD = """
import httpx
import openai
import pytest


def test_a_direct_call():
    httpx.get("https://api.deepseek.com/models")


def test_an_sdk_that_swallows_it_into_retries():
    client = openai.OpenAI(api_key="k", base_url="https://api.deepseek.com", max_retries=1)
    with pytest.raises(openai.APIConnectionError):
        client.models.list()


def test_a_caught_refusal():
    try:
        httpx.get("https://api.deepseek.com/models")
    except Exception:
        pass


def test_another_domain_host():
    httpx2 = pytest.importorskip("httpx2")
    httpx2.get("https://platform.deepseek.com/")


def test_offline_work_is_untouched(dsh_mock):
    assert dsh_mock.provider is not None
"""


@pytest.mark.slow
def test_the_live_deepseek_guard_is_on_without_dsh_live(project: pytest.Pytester) -> None:
    project.makepyfile(test_live_guard=LIVE_GUARD)
    result = project.runpytest("-rf")
    result.assert_outcomes(passed=1, failed=4)
    message = (
        "dsh_testkit.pytest_plugin.NetworkBlocked: dsh-testkit refused a connection to "
        "{host}:443: it is the live DeepSeek API, and tests do not call it unless pytest runs "
        "with --dsh-live (and DEEPSEEK_API_KEY)*"
    )
    result.stdout.fnmatch_lines_random(
        [
            f"FAILED test_live_guard.py::{name} - {message.format(host=host)}"
            for name, host in [
                ("test_a_direct_call", "api.deepseek.com"),
                ("test_an_sdk_that_swallows_it_into_retries", "api.deepseek.com"),
                ("test_a_caught_refusal", "api.deepseek.com"),
                ("test_another_domain_host", "platform.deepseek.com"),
            ]
        ]
    )


def test_the_guard_policy_allows_deepseek_with_dsh_live() -> None:
    from dsh_testkit.pytest_plugin._network import NetworkPolicy

    assert NetworkPolicy().refusal("api.deepseek.com") is not None
    # the way out names what a test holding dsh_mock still lacks: its transport
    assert 'dsh_mock.transport("httpx2")' in (NetworkPolicy().refusal("api.deepseek.com") or "")
    assert NetworkPolicy().refusal("API.DeepSeek.com.") is not None
    assert NetworkPolicy(live=True).refusal("api.deepseek.com") is None
    assert NetworkPolicy(live=True, block_all=True).refusal("api.deepseek.com") is None
    assert NetworkPolicy(block_all=True).refusal("localhost") is None
    assert NetworkPolicy(block_all=True).refusal("127.0.0.2") is None
    assert NetworkPolicy(block_all=True).refusal("[::1]") is None
    assert NetworkPolicy(block_all=True).refusal("notdeepseek.com") is not None
    assert NetworkPolicy().refusal("notdeepseek.com") is None


# ------------------------------------------------------------- vcrpy's errors, our flags


def test_vcrpys_errors_name_our_flags_not_vcrpys_options(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # urllib goes through vcrpy's own http.client patch, and so through vcrpy's error
    project.makepyfile(
        test_urllib="""
        import os
        import urllib.request

        import pytest


        @pytest.mark.dsh_cassette
        def test_fetch(dsh_mock_server):
            url = f"{dsh_mock_server.base_url}/models"
            request = urllib.request.Request(url, headers={"authorization": "Bearer k"})
            with urllib.request.urlopen(request) as response:
                assert response.status == 200
            if os.environ.get("SECOND"):
                urllib.request.urlopen(url + "?again=1").read()
        """
    )
    project.runpytest("--dsh-record-mode=once").assert_outcomes(passed=1)
    monkeypatch.setenv("SECOND", "1")
    result = project.runpytest()
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert "CannotOverwriteExistingCassetteException" in text
    assert "--dsh-record-mode=new_episodes" in text
    assert "record_mode='new_episodes'" not in text
    assert "ignore_localhost" not in text


# ------------------------------------------------------------------------- scrub rules

SCRUBBED = """
import httpx
import pytest


@pytest.mark.dsh_lenient
@pytest.mark.dsh_cassette
def test_team_call():
    httpx.post(
        "https://api.deepseek.com/chat/completions",
        headers={
            "authorization": "Bearer any",
            "x-org-passphrase": "opaque-team-secret",
            "x-team-token": "team-token-value",
        },
        json={"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": "PIN-4242"}]},
    )
"""


def test_scrub_rules_come_from_pyproject(project: pytest.Pytester) -> None:
    project.makepyprojecttoml(
        """
        [tool.dsh_testkit.scrub]
        headers = ["x-org-passphrase"]
        patterns = ["PIN-\\\\d{4}"]
        """
    )
    project.makepyfile(test_scrubbed=SCRUBBED)
    project.runpytest("--dsh-record-mode=once").assert_outcomes(passed=1)
    text = (project.path / "cassettes" / "test_scrubbed" / "test_team_call.yaml").read_text(
        encoding="utf-8"
    )
    for secret in ("opaque-team-secret", "team-token-value", "PIN-4242"):
        assert secret not in text
    assert "x-org-passphrase: <REDACTED>" in text and "x-team-token: <REDACTED>" in text
    project.runpytest().assert_outcomes(passed=1)  # the scrubbed request still matches


def test_scrub_rules_can_be_added_in_a_conftest(project: pytest.Pytester) -> None:
    project.makeconftest(
        """
        import pytest
        from dsh_testkit.scrub import ScrubRules


        @pytest.fixture
        def dsh_scrub(dsh_scrub):
            return dsh_scrub.merged(
                ScrubRules(headers=frozenset({"x-org-passphrase"}), patterns=("PIN-[0-9]+",))
            )
        """
    )
    project.makepyfile(test_scrubbed=SCRUBBED)
    project.runpytest("--dsh-record-mode=once").assert_outcomes(passed=1)
    text = (project.path / "cassettes" / "test_scrubbed" / "test_team_call.yaml").read_text(
        encoding="utf-8"
    )
    assert "opaque-team-secret" not in text and "PIN-4242" not in text


def test_a_bad_scrub_table_fails_naming_the_file_and_rule(project: pytest.Pytester) -> None:
    project.makepyprojecttoml(
        """
        [tool.dsh_testkit.scrub]
        patterns = ["("]
        """
    )
    project.makepyfile(test_scrubbed=SCRUBBED)
    result = project.runpytest("--dsh-record-mode=once")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "ScrubRuleError: */pyproject.toml [[]tool.dsh_testkit.scrub[]]: scrub pattern '(' "
            "is not a regular expression: *"
        ]
    )
    assert not (project.path / "cassettes").exists()


# ------------------------------------------------------------ record vs replay intent

INTENT = """
import httpx
from dsh_testkit.mock import Reply


def test_scripted_for_recording(dsh_cassette, dsh_mock):
    assert dsh_mock.replaying == (not dsh_cassette.recording)
    dsh_mock.push(Reply(text="Hello!"))  # used when recording, ignored in replay
    body = {"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": "hi"}]}
    response = httpx.post(
        "https://api.deepseek.com/chat/completions",
        headers={"authorization": "Bearer k"},
        json=body,
    )
    assert response.json()["choices"][0]["message"]["content"] == "Hello!"


def test_scripted_only_when_recording(dsh_cassette, dsh_mock):
    if dsh_cassette.recording:
        dsh_mock.push(Reply(text="Hi!"))
    body = {"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": "hey"}]}
    response = httpx.post(
        "https://api.deepseek.com/chat/completions",
        headers={"authorization": "Bearer k"},
        json=body,
    )
    assert response.json()["choices"][0]["message"]["content"] == "Hi!"
"""


def test_a_script_pushed_while_replaying_is_reported_visibly(project: pytest.Pytester) -> None:
    project.makepyfile(test_intent=INTENT)
    recording = project.runpytest("--dsh-record-mode=once")
    recording.assert_outcomes(passed=2)
    assert "mock scripts not used in replay" not in recording.stdout.str()
    replay = project.runpytest()
    replay.assert_outcomes(passed=2)
    replay.stdout.fnmatch_lines(
        [
            "*dsh-testkit: mock scripts not used in replay*",
            "These tests scripted a mock while their cassette replayed*",
            "  test_intent.py::test_scripted_for_recording: 1 scripted answer not used (cassette "
            "test_scripted_for_recording.yaml replayed)",
        ]
    )
    assert "test_scripted_only_when_recording:" not in replay.stdout.str()


def test_the_ini_file_can_block_the_network_and_allow_hosts(project: pytest.Pytester) -> None:
    project.makefile(
        ".ini",
        pytest=INI + "dsh_block_network = true\ndsh_allowed_hosts = example.org *.example.net\n",
    )
    project.makepyfile(
        test_ini="""
        import socket

        import pytest
        from dsh_testkit.pytest_plugin import NetworkBlocked


        def test_refused():
            with pytest.raises(NetworkBlocked, match="--dsh-allowed-hosts=example.com"):
                socket.getaddrinfo("example.com", 443)


        def test_allowed():
            try:
                socket.getaddrinfo("a.example.net", 443)
            except OSError:
                pass  # offline: resolution fails, but it was not refused
        """
    )
    result = project.runpytest()
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        ["dsh-testkit: *; network: blocked but loopback and *.example.net, example.org"]
    )
