"""The mock follows the model table's dates: a model id is served only from the day the API
began to serve it, and one requested after its announced retirement is served with a warning
(``retired_models="warn"``, the default) or refused as the API refuses an unknown model
(``"refuse"``). The request's date is ``as_of``, or the machine's clock (docs/wire.md §1.2)."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from dsh_testkit.mock import MockDeepSeek, Reply, ScriptError
from tests._support import USER_INI, user_project

from ._helpers import CHAT, call, chat_body, payload, user

pytest_plugins = ["pytester"]

UNKNOWN = {
    "error": {
        "message": "Model Not Exist",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_request_error",
    }
}
"""What the API answers for a model id it does not serve (docs/wire.md §1.9)."""


def ask(mock: MockDeepSeek, model: str) -> tuple[int, Any]:
    plan = call(mock, CHAT, chat_body(user(), model=model))
    return plan.status, payload(plan)


@pytest.mark.parametrize(
    ("as_of", "served", "unknown"),
    [
        (
            "2025-06-01",
            {"deepseek-chat", "deepseek-reasoner"},
            {"deepseek-v4-flash", "deepseek-flash"},
        ),
        (
            "2026-04-24",
            {"deepseek-chat", "deepseek-v4-flash", "deepseek-v4-pro"},
            {"deepseek-flash"},
        ),
        (
            "2026-09-09T23:59:59Z",
            {"deepseek-v4-flash"},
            {"deepseek-flash", "deepseek-v4-flash-vision-exp"},
        ),
        (
            "2026-09-10",
            {"deepseek-flash", "deepseek-v4-flash-vision-exp", "deepseek-v4-pro"},
            set(),
        ),
    ],
)
def test_a_model_is_served_from_the_day_the_api_began_to_serve_it(
    as_of: str, served: set[str], unknown: set[str]
) -> None:
    mock = MockDeepSeek(as_of=as_of)
    for model in sorted(served):
        assert ask(mock, model)[0] == 200, model
    for model in sorted(unknown):
        assert ask(mock, model) == (400, UNKNOWN), model
        detail = mock.requests[-1].error["detail"]
        assert detail.startswith(f"model {model!r} is served from 2026-")
        assert f"the request's date is {as_of[:10]} (as_of)" in detail
    listed = {m["id"] for m in payload(call(mock, "/models", method="GET"))["data"]}
    assert served <= listed and not (unknown & listed)


def test_a_retired_model_is_served_with_a_warning_by_default() -> None:
    mock = MockDeepSeek([Reply(text="Hi.")], as_of="2026-08-01")
    status, body = ask(mock, "deepseek-chat")
    assert (status, body["model"], body["choices"][0]["message"]["content"]) == (
        200,
        "deepseek-v4-flash",
        "Hi.",
    )
    [warning] = mock.requests[-1].extras["warnings"]
    assert warning.startswith(
        "model 'deepseek-chat' was retired on 2026-07-24 (docs/wire.md §1.2); the request's date "
        "is 2026-08-01 (as_of); use 'deepseek-v4-flash' with \"thinking\": "
        '{"type": "disabled"}. Served as before'
    )
    assert "retired_models='refuse'" in warning
    ask(mock, "deepseek-reasoner")
    [warning] = mock.requests[-1].extras["warnings"]
    assert "use 'deepseek-v4-flash'. Served as before" in warning  # same thinking default
    ask(mock, "deepseek-v4-flash")
    assert "warnings" not in mock.requests[-1].extras


def test_a_retired_model_can_be_refused_as_the_api_refuses_an_unknown_one() -> None:
    mock = MockDeepSeek(as_of="2026-07-24T15:59:00Z", retired_models="refuse")
    assert ask(mock, "deepseek-chat") == (400, UNKNOWN)
    assert (
        "(retired_models='refuse': refused as an unknown model)"
        in (mock.requests[-1].error["detail"])
    )
    listed = {m["id"] for m in payload(call(mock, "/models", method="GET"))["data"]}
    assert listed == {"deepseek-v4-flash", "deepseek-v4-pro"}  # V4.1's names came later
    mock.as_of = "2026-07-24T15:58:59Z"  # a second before the retirement
    assert ask(mock, "deepseek-chat")[0] == 200
    assert "warnings" not in mock.requests[-1].extras


def test_a_reset_restores_the_dates_the_mock_was_built_with() -> None:
    mock = MockDeepSeek(as_of="2026-08-01")
    mock.as_of, mock.retired_models = "2025-06-01", "refuse"
    assert ask(mock, "deepseek-v4-flash") == (400, UNKNOWN)  # not served yet in 2025
    mock.reset()  # as dsh_mock_server is before each test: one test's dates never leak
    assert (mock.as_of, mock.retired_models) == ("2026-08-01T00:00:00Z", "warn")
    assert ask(mock, "deepseek-chat")[0] == 200
    assert mock.requests[-1].extras["warnings"]


def test_without_as_of_the_date_is_the_machines_clock() -> None:
    mock = MockDeepSeek()
    assert mock.as_of is None
    ask(mock, "deepseek-chat")
    today = datetime.now(UTC).date().isoformat()
    [warning] = mock.requests[-1].extras["warnings"]  # this machine's date is after 2026-07-24
    assert f"the request's date is {today} (the machine's clock; set as_of" in warning


def test_created_times_start_at_as_of() -> None:
    mock = MockDeepSeek([Reply(text="a"), Reply(text="b")], as_of="2026-05-01T09:30:00Z")
    assert mock.as_of == "2026-05-01T09:30:00Z"
    first, second = ask(mock, "deepseek-v4-flash")[1], ask(mock, "deepseek-v4-flash")[1]
    start = int(datetime(2026, 5, 1, 9, 30, tzinfo=UTC).timestamp())
    assert (first["created"], second["created"]) == (start, start + 1)
    # without it, a fixed start: recordings stay byte-stable
    assert ask(MockDeepSeek(), "deepseek-v4-flash")[1]["created"] == 1_767_225_600


@pytest.mark.parametrize("bad", ["yesterday", "2026-13-01", 20260501])
def test_a_date_that_is_not_one_is_refused_clearly(bad: Any) -> None:
    with pytest.raises(ScriptError, match=r"asOf: must be"):
        MockDeepSeek(as_of=bad)
    with pytest.raises(ScriptError, match=r"retiredModels: must be 'warn' or 'refuse'"):
        MockDeepSeek(retired_models="ignore")  # type: ignore[arg-type]


def test_a_date_without_a_zone_is_utc() -> None:
    assert MockDeepSeek(as_of="2026-05-01T09:30:00").as_of == "2026-05-01T09:30:00Z"
    assert MockDeepSeek(as_of="2026-05-01T11:30:00+02:00").as_of == "2026-05-01T09:30:00Z"


def test_the_pytest_plugin_shows_the_warning(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    user_project(pytester, monkeypatch, ini=USER_INI)
    pytester.makepyfile(
        """
        import httpx
        from dsh_testkit.mock import Reply


        def test_an_agent_on_a_retired_model(dsh_mock):
            dsh_mock.as_of = "2026-08-01"
            dsh_mock.push(Reply(text="Hi."))
            with httpx.Client(transport=dsh_mock.transport("httpx")) as client:
                reply = client.post(
                    f"{dsh_mock.base_url}/chat/completions",
                    headers={"authorization": f"Bearer {dsh_mock.api_key}"},
                    json={"model": "deepseek-chat", "messages": [{"role": "user", "content": "hi"}]},
                )
            assert reply.status_code == 200
        """
    )
    result = pytester.runpytest_subprocess()
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*dsh-testkit: mock warnings*",
            "*test_an_agent_on_a_retired_model (dsh_mock) request 1: model 'deepseek-chat' was "
            "retired on 2026-07-24*",
        ]
    )


def test_the_ini_dates_every_fixture_mock_and_each_test_starts_from_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    ini = USER_INI + "dsh_as_of = 2026-08-01\ndsh_retired_models = refuse\n"
    user_project(pytester, monkeypatch, ini=ini)
    pytester.makepyfile(
        """
        import httpx

        from dsh_testkit.mock import Reply


        def ask(mock, base_url, api_key, model):
            with httpx.Client(transport=mock.transport("httpx")) as client:
                return client.post(
                    f"{base_url}/chat/completions",
                    headers={"authorization": f"Bearer {api_key}"},
                    json={"model": model, "messages": [{"role": "user", "content": "hi"}]},
                )


        def test_in_process(dsh_mock):
            refused = ask(dsh_mock, dsh_mock.base_url, dsh_mock.api_key, "deepseek-chat")
            assert (refused.status_code, refused.json()["error"]["message"]) == (400, "Model Not Exist")
            assert dsh_mock.mock.as_of == "2026-08-01T00:00:00Z"


        def test_on_loopback_a_test_changes_its_mock(dsh_mock_server):
            dsh_mock_server.mock.retired_models = "warn"
            dsh_mock_server.mock.push(Reply(text="Hi."))
            with httpx.Client() as client:
                reply = client.post(
                    f"{dsh_mock_server.base_url}/chat/completions",
                    headers={"authorization": "Bearer sk-test"},
                    json={"model": "deepseek-chat", "messages": [{"role": "user", "content": "hi"}]},
                )
            assert reply.status_code == 200


        def test_on_loopback_the_next_test_gets_the_ini_again(dsh_mock_server):
            assert dsh_mock_server.mock.retired_models == "refuse"
            with httpx.Client() as client:
                reply = client.post(
                    f"{dsh_mock_server.base_url}/chat/completions",
                    headers={"authorization": "Bearer sk-test"},
                    json={"model": "deepseek-chat", "messages": [{"role": "user", "content": "hi"}]},
                )
            assert reply.status_code == 400
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:randomly")
    result.assert_outcomes(passed=3)


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("dsh_retired_models = ignore", "dsh_retired_models = 'ignore' in * is not warn or refuse"),
        ("dsh_as_of = yesterday", "dsh_as_of = 'yesterday' in * is not a date: asOf: must be*"),
    ],
)
def test_a_bad_ini_date_setting_is_refused_naming_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, line: str, said: str
) -> None:
    user_project(pytester, monkeypatch, ini=USER_INI + line + "\n")
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{said}"])


def test_serve_takes_the_date_and_the_retired_model_setting() -> None:
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "dsh_testkit.cli", "serve", "--port", "0"),
            *("--as-of", "2026-08-01", "--retired-models", "refuse"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        with httpx.Client(base_url=base_url, headers={"authorization": "Bearer sk-x"}) as client:
            refused = client.post(CHAT, json=chat_body(user(), model="deepseek-chat"))
            served = client.post(CHAT, json=chat_body(user(), model="deepseek-v4-flash"))
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()
    assert (refused.status_code, refused.json()) == (400, UNKNOWN)
    assert served.status_code == 200
    assert served.json()["created"] == int(datetime(2026, 8, 1, tzinfo=UTC).timestamp())
