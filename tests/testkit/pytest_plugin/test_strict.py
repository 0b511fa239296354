"""The mock fixtures are strict, like respx: a passing test fails for scripted replies left
unused or requests nobody scripted (with a per-test opt-out); and the plugin's async examples
run under pytest-asyncio or anyio alike, with cassette names free of the runner's suffix."""

from __future__ import annotations

import pytest

# Imported here, not first inside a pytester run: pytester drops the modules a run imported,
# and PyYAML's C extension does not survive being imported a second time.
import yaml

from tests._support import PLAIN_USER_INI, USER_INI, user_project

pytest_plugins = ["pytester"]

INI = PLAIN_USER_INI
ASYNCIO_INI = USER_INI


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    return user_project(pytester, monkeypatch, ini=ASYNCIO_INI)


STRICT = """
import httpx
import pytest
from dsh_testkit.mock import ErrorReply, Reply

BODY = {"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": "Say hi"}]}
AUTH = {"authorization": "Bearer test-key"}


def post(dsh_mock):
    client = httpx.Client(transport=dsh_mock.transport())
    return client.post("https://api.deepseek.com/chat/completions", json=BODY, headers=AUTH)


def test_scripted_and_used(dsh_mock):
    dsh_mock.push(Reply(text="hi"))
    assert post(dsh_mock).json()["choices"][0]["message"]["content"] == "hi"


def test_left_unused(dsh_mock):
    dsh_mock.push(Reply(text="hi"), ErrorReply(status=429))
    post(dsh_mock)


def test_not_scripted(dsh_mock):
    post(dsh_mock)


def test_not_scripted_lenient_call(dsh_mock):
    dsh_mock.lenient()
    post(dsh_mock)


@pytest.mark.dsh_lenient
def test_not_scripted_lenient_marker(dsh_mock):
    dsh_mock.push(Reply(text="never asked"))
    post(dsh_mock)
    post(dsh_mock)


def test_a_responder_scripts_every_request(dsh_mock):
    dsh_mock.respond_with(lambda request: Reply(text=f"echo {request.last_user_text}"))
    assert "echo Say hi" in post(dsh_mock).text


def test_a_failing_test_is_not_also_blamed_on_the_mock(dsh_mock):
    dsh_mock.push(Reply(text="hi"))
    raise AssertionError("the test's own failure")


def test_the_server_is_strict_too(dsh_mock_server):
    dsh_mock_server.mock.push(Reply(text="never asked"))


@pytest.mark.dsh_lenient
def test_the_server_opts_out_with_the_marker(dsh_mock_server):
    dsh_mock_server.mock.push(Reply(text="never asked"))
"""


def test_the_mock_fixtures_fail_unused_and_unscripted_traffic(project: pytest.Pytester) -> None:
    project.makepyfile(test_strict=STRICT)
    result = project.runpytest("-rf")
    result.assert_outcomes(passed=5, failed=4)
    result.stdout.fnmatch_lines(
        [
            "*_ test_left_unused _*",
            "E   *MockNotSatisfied: the mock DeepSeek was not used as scripted (the dsh_mock "
            "fixtures are strict):",
            "*  1 scripted entry was never used:",
            '*    1. {"kind": "http-error", "status": 429}',
            "*Script each request: dsh_mock.route(...).reply(...) answers requests by what they "
            "hold, dsh_mock.push(...) in order (on the server: dsh_mock_server.mock.route(...), "
            ".push(...)); or opt this test out with @pytest.mark.dsh_lenient (or "
            "dsh_mock.lenient() for the in-process mock).",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*_ test_not_scripted _*",
            "*  1 request was not scripted (nothing answered; the client got a 410 "
            "MOCK_SCRIPT_EXHAUSTED, or the default reply):",
            "*    request 1: POST /chat/completions (model deepseek-v4-flash; last message "
            "(user): Say hi)",
            "*      why nothing answered: the script queue is empty",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "FAILED test_strict.py::test_left_unused - *MockNotSatisfied*",
            "FAILED test_strict.py::test_not_scripted - *MockNotSatisfied*",
            "FAILED test_strict.py::test_a_failing_test_is_not_also_blamed_on_the_mock - "
            "AssertionError: the test's own failure",
            "FAILED test_strict.py::test_the_server_is_strict_too - *MockNotSatisfied*",
        ]
    )


def test_the_error_carries_what_was_left_and_what_arrived() -> None:
    import httpx

    from dsh_testkit._errors import MockNotSatisfied
    from dsh_testkit.mock import Reply
    from dsh_testkit.pytest_plugin._support import MockFixture

    mock = MockFixture()
    assert mock.unmet() is None
    mock.push(Reply(text="a"))
    client = httpx.Client(transport=mock.transport())
    for _ in range(3):
        client.post(
            "https://api.deepseek.com/chat/completions",
            json={"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": "x"}]},
            headers={"authorization": "Bearer test-key"},
        )
    mock.push(Reply(text="left"))
    unmet = mock.unmet()
    assert isinstance(unmet, MockNotSatisfied) and isinstance(unmet, AssertionError)
    assert unmet.unscripted == (2, 3)
    assert [e["text"] for e in unmet.unused] == ["left"]
    assert mock.lenient().unmet() is None


# -------------------------------------------------------------------------------- async

ASYNC_EXAMPLE = """
import pytest
from dsh_testkit.mock import Reply

{mark}
async def test_greets(dsh_cassette, dsh_cassette_provider, dsh_agent, dsh_mock):
    if dsh_cassette.recording:
        dsh_mock.push(Reply(text="Hello!"))
    reply = await dsh_agent(dsh_cassette_provider, system="Be terse.").run("Say hi")
    assert reply.text == "Hello!"
"""


@pytest.mark.parametrize(
    ("runner", "ini", "args", "mark"),
    [
        ("pytest-asyncio", ASYNCIO_INI, (), ""),
        ("anyio", INI, ("-p", "no:asyncio"), "@pytest.mark.anyio"),
    ],
    ids=["pytest-asyncio", "anyio"],
)
def test_the_async_example_runs_under_pytest_asyncio_or_anyio(
    project: pytest.Pytester, runner: str, ini: str, args: tuple[str, ...], mark: str
) -> None:
    project.makefile(".ini", pytest=ini)
    if runner == "anyio":
        project.makeconftest(
            """
            import pytest

            @pytest.fixture
            def anyio_backend():
                return "asyncio"
            """
        )
    project.makepyfile(test_async=ASYNC_EXAMPLE.format(mark=mark))
    project.runpytest(*args, "--dsh-record-mode=once").assert_outcomes(passed=1)
    recorded = yaml.safe_load(
        (project.path / "cassettes" / "test_async" / "test_greets.yaml").read_text("utf-8")
    )
    assert recorded["metadata"]["test"] == "test_async.py::test_greets"
    project.runpytest(*args).assert_outcomes(passed=1)
    cassettes = sorted(p.name for p in (project.path / "cassettes" / "test_async").iterdir())
    assert cassettes == ["test_greets.yaml"]


def test_anyios_parametrized_backend_leaves_no_suffix_in_cassette_names(
    project: pytest.Pytester,
) -> None:
    # anyio's own anyio_backend fixture is parametrized: the test id is test_greets[asyncio]
    project.makefile(".ini", pytest=INI)
    project.makepyfile(
        test_async=ASYNC_EXAMPLE.format(mark="@pytest.mark.anyio")
        + """

@pytest.mark.anyio
@pytest.mark.parametrize("who", ["ann"])
async def test_named(dsh_cassette, dsh_cassette_provider, dsh_agent, dsh_mock, who):
    if dsh_cassette.recording:
        dsh_mock.push(Reply(text=f"Hi {who}"))
    reply = await dsh_agent(dsh_cassette_provider).run(f"I am {who}")
    assert reply.text == f"Hi {who}"
"""
    )
    result = project.runpytest("-p", "no:asyncio", "--dsh-record-mode=once", "-v")
    result.stdout.fnmatch_lines(["*test_greets[[]asyncio[]] PASSED*"])
    result.assert_outcomes(passed=2)
    names = sorted(p.name for p in (project.path / "cassettes" / "test_async").iterdir())
    assert names == ["test_greets.yaml", "test_named[ann].yaml"]
    project.runpytest("-p", "no:asyncio").assert_outcomes(passed=2)
