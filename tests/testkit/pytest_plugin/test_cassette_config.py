"""Cassette options as a pytest-recording user writes them (``dsh_cassette_config``, the marker's
keys, the ini's origin rewrite), recording through the loopback mock server and replaying on
another port, what the cassette says it was recorded against, and a missing cassette reported
once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

# Imported here, not first inside a pytester run: pytester drops the modules a run imported, and
# a second run's fresh openai/httpx2 classes would then meet the first run's in the plugin's
# cassette stubs (the replayed answer's stream fails httpx2's isinstance check).
import openai  # noqa: F401
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


THROUGH_THE_SERVER = """
import openai
import pytest
from dsh_testkit.mock import Reply


@pytest.mark.dsh_cassette
def test_greets(dsh_mock_server, dsh_cassette):
    if dsh_cassette.recording:
        dsh_mock_server.mock.route(last_user="hi").reply(text="Hello from the mock server.")
    with openai.OpenAI(base_url=dsh_mock_server.base_url, api_key="sk-test", max_retries=0) as client:
        reply = client.chat.completions.create(
            model="deepseek-v4-flash", messages=[{"role": "user", "content": "hi"}]
        )
    assert reply.choices[0].message.content == "Hello from the mock server."
"""


def test_a_recording_through_the_mock_server_replays_on_another_port(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(test_server=THROUGH_THE_SERVER)
    project.runpytest("--dsh-record-mode=once").assert_outcomes(passed=1)
    cassette = project.path / "cassettes" / "test_server" / "test_greets.yaml"
    data = load(cassette)
    assert data["interactions"][0]["request"]["uri"] == "http://127.0.0.1/chat/completions"
    assert data["metadata"]["recordedAgainst"] == (
        "the mock DeepSeek on loopback (dsh_testkit.mock, seed 0) through the dsh_mock_server "
        "fixture (filed under http://127.0.0.1), not the live API; record live with --dsh-live "
        "and DEEPSEEK_API_KEY"
    )
    recorded = cassette.read_bytes()
    # every run starts the server on a new free port; the replay does not care
    project.runpytest().assert_outcomes(passed=1)
    project.runpytest("-p", "no:randomly").assert_outcomes(passed=1)
    assert cassette.read_bytes() == recorded
    # re-recorded from scratch on yet another port: byte-identical
    project.runpytest("--dsh-record-mode=rewrite").assert_outcomes(passed=1)
    assert cassette.read_text(encoding="utf-8") == recorded.decode("utf-8")  # a diff if not


def test_the_in_process_mock_is_named_as_what_the_recording_came_from(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(
        test_inprocess="""
        import httpx
        import pytest
        from dsh_testkit.mock import Reply

        @pytest.mark.dsh_cassette
        def test_it(dsh_mock):
            dsh_mock.push(Reply(text="hi"))
            httpx.post("https://api.deepseek.com/chat/completions",
                       headers={"authorization": "Bearer k"},
                       json={"model": "deepseek-v4-flash",
                             "messages": [{"role": "user", "content": "hi"}]})
        """
    )
    project.runpytest("--dsh-record-mode=once").assert_outcomes(passed=1)
    data = load(project.path / "cassettes" / "test_inprocess" / "test_it.yaml")
    assert data["metadata"]["recordedAgainst"].startswith(
        "the in-process mock DeepSeek (dsh_testkit.mock, seed 0) through the dsh_mock fixture,"
    )


def test_a_missing_cassette_is_reported_once(project: pytest.Pytester) -> None:
    project.makepyfile(test_server=THROUGH_THE_SERVER)
    result = project.runpytest()
    result.assert_outcomes(errors=1)
    out = result.stdout.str()
    assert out.count("does not exist and mode 'none' replays only") == 2  # error + summary line
    assert "During handling of the above exception" not in out
    result.stdout.fnmatch_lines(
        ["CassetteNotFound: cassette */cassettes/test_server/test_greets.yaml does not exist *"]
    )


CONFIGURED = """
import httpx
import pytest

AUTH = {"authorization": "Bearer any"}
URL = "https://api.deepseek.com/chat/completions"


def body(request_id, text="hi"):
    return {"model": "deepseek-v4-flash", "metadata": {"request_id": request_id},
            "messages": [{"role": "user", "content": text}]}


@pytest.fixture
def dsh_cassette_config():
    def drop_the_trace(request):
        request.headers.pop("x-trace", None)
        return request

    def keep_no_cookies(response):
        response["headers"].pop("x-ds-trace-id", None)
        return response

    return {
        "ignore_json_paths": ["metadata.request_id"],
        "before_record_request": drop_the_trace,
        "before_record_response": keep_no_cookies,
        "filter_headers": ["x-team"],
    }


@pytest.mark.dsh_cassette
@pytest.mark.dsh_lenient
def test_volatile_fields(request):
    stamp = request.config.getoption("--basetemp") or "run"
    headers = {**AUTH, "x-trace": "t-123", "x-team": "team-secret-value"}
    answer = httpx.post(URL, headers=headers, json=body(f"id-{id(request)}"))
    assert answer.status_code == 200


@pytest.mark.dsh_cassette(match_on=["method", "path"], allow_playback_repeats=True)
@pytest.mark.dsh_lenient
def test_marker_options(dsh_cassette):
    texts = ["one"] if dsh_cassette.recording else ["one", "two", "three"]
    for text in texts:  # replayed: three requests, one recording, matched on method and path
        assert httpx.post(URL, headers=AUTH, json=body("x", text)).status_code == 200


@pytest.mark.dsh_cassette(rewrite_origin={"https://gateway.example.test": "https://api.deepseek.com"})
@pytest.mark.dsh_lenient
def test_origin_rewrite(dsh_mock):
    answer = httpx.post("https://gateway.example.test/chat/completions", headers=AUTH,
                        json=body("x"))
    assert answer.status_code == 200
"""


def test_the_config_fixture_and_the_marker_shape_recording_and_matching(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(test_configured=CONFIGURED)
    project.runpytest("--dsh-record-mode=once").assert_outcomes(passed=3)
    folder = project.path / "cassettes" / "test_configured"
    volatile = load(folder / "test_volatile_fields.yaml")
    [interaction] = volatile["interactions"]
    headers = interaction["request"]["headers"]
    assert "x-trace" not in headers  # the user's before_record_request
    assert headers["x-team"] == "<REDACTED>"  # filter_headers, added to the scrub rules
    assert "x-ds-trace-id" not in interaction["response"]["headers"]  # before_record_response
    assert '"request_id": "id-' in interaction["request"]["body"]["json"]  # still recorded
    repeats = load(folder / "test_marker_options.yaml")
    assert len(repeats["interactions"]) == 1  # replayed for three requests (same method, path)
    rewritten = load(folder / "test_origin_rewrite.yaml")
    assert rewritten["interactions"][0]["request"]["uri"] == (
        "https://api.deepseek.com/chat/completions"
    )
    # replay: the request id differs every run (ignored), the bodies differ (not matched on)
    project.runpytest().assert_outcomes(passed=3)


def test_the_ini_rewrites_origins_and_refuses_a_bad_line(project: pytest.Pytester) -> None:
    project.makefile(
        ".ini",
        pytest=INI
        + "dsh_rewrite_origin =\n    https://gateway.example.test -> https://api.deepseek.com\n",
    )
    project.makepyfile(
        test_gateway="""
        import httpx
        import pytest

        @pytest.mark.dsh_cassette
        @pytest.mark.dsh_lenient
        def test_it():
            assert httpx.get("https://gateway.example.test/models", headers={"authorization": "Bearer k"}).status_code == 200
        """
    )
    project.runpytest("--dsh-record-mode=once").assert_outcomes(passed=1)
    data = load(project.path / "cassettes" / "test_gateway" / "test_it.yaml")
    assert data["interactions"][0]["request"]["uri"] == "https://api.deepseek.com/models"
    project.runpytest().assert_outcomes(passed=1)
    project.makefile(".ini", pytest=INI + "dsh_rewrite_origin = gateway => api\n")
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: dsh_rewrite_origin: 'gateway => api' is not 'LIVE -> RECORDED' (two origins, *"]
    )


def test_a_bad_config_fixture_fails_at_setup_naming_the_key(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_bad="""
        import pytest

        @pytest.fixture
        def dsh_cassette_config():
            return {"match_requests_on": ["method"]}

        def test_it(dsh_cassette):
            pass
        """
    )
    result = project.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "CassetteConfigError: the dsh_cassette_config fixture: unknown option(s) "
            "match_requests_on; known: allow_playback_repeats, *"
        ]
    )
