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
            ".push(...)); mark what may go unused optional (route(..., optional=True), "
            "Reply(..., optional=True)); or relax this test with "
            "@pytest.mark.dsh_mock(assert_all_called=False) / (assert_all_mocked=False), or "
            "@pytest.mark.dsh_lenient for both (dsh_mock.lenient() for the in-process mock).",
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


# ------------------------------------------------------------- strictness where wanted

STRICTNESS = """
import httpx
import pytest
from dsh_testkit.mock import ErrorReply, Reply

BODY = {"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": "Say hi"}]}
AUTH = {"authorization": "Bearer test-key"}


def post(client_of):
    with httpx.Client(transport=client_of.transport()) as client:
        return client.post("https://api.deepseek.com/chat/completions", json=BODY, headers=AUTH)


def test_an_optional_route_may_go_uncalled(dsh_mock):
    dsh_mock.route(last_user="title", optional=True).reply(text="A title")
    dsh_mock.route(last_user="hi").reply(text="hello")
    assert post(dsh_mock).json()["choices"][0]["message"]["content"] == "hello"


def test_a_required_route_beside_it_still_fails(dsh_mock):
    dsh_mock.route(last_user="title", optional=True).reply(text="A title")
    dsh_mock.route(last_user="weather").reply(text="sunny")
    dsh_mock.route(last_user="hi").reply(text="hello")
    post(dsh_mock)


def test_an_optional_reply_may_go_unused(dsh_mock):
    dsh_mock.push(Reply(text="hi"), ErrorReply(status=429, optional=True))
    post(dsh_mock)


def test_optional_answers_of_a_route_may_go_unused(dsh_mock):
    dsh_mock.route(last_user="hi").respond(Reply(text="one"), Reply(text="two", optional=True))
    post(dsh_mock)


@pytest.mark.dsh_mock(assert_all_called=False)
def test_the_marker_lets_routes_go_unused(dsh_mock):
    dsh_mock.route(last_user="weather").reply(text="sunny")
    dsh_mock.push(Reply(text="hi"), Reply(text="never asked"))
    post(dsh_mock)


@pytest.mark.dsh_mock(assert_all_called=False)
def test_but_still_refuses_what_nothing_scripted(dsh_mock):
    assert post(dsh_mock).status_code == 410  # refused at the call, and the test fails


@pytest.mark.dsh_mock(assert_all_mocked=False)
def test_the_marker_lets_the_default_reply_answer(dsh_mock):
    assert post(dsh_mock).status_code == 200


@pytest.mark.dsh_mock(assert_all_mocked=False)
def test_but_still_asks_for_every_route(dsh_mock):
    dsh_mock.route(last_user="weather").reply(text="sunny")
    post(dsh_mock)


@pytest.mark.dsh_mock(assert_all_called=False)
def test_the_server_takes_the_marker_too(dsh_mock_server):
    dsh_mock_server.mock.route(last_user="weather").reply(text="sunny")


@pytest.mark.dsh_mock(assert_all_mocked=False)
def test_the_server_answers_unscripted_requests_under_the_marker(dsh_mock_server):
    with httpx.Client(base_url=dsh_mock_server.base_url) as client:
        assert client.post("/chat/completions", json=BODY, headers=AUTH).status_code == 200


def test_the_fixture_switches_one_check_at_a_time(dsh_mock):
    dsh_mock.assert_all_called = False
    dsh_mock.route(last_user="weather").reply(text="sunny")
    dsh_mock.push(Reply(text="hi"))
    post(dsh_mock)


@pytest.mark.dsh_mock(assert_all_calld=False)
def test_a_misspelt_option(dsh_mock):
    pass
"""


def test_strictness_per_route_per_reply_and_per_check(project: pytest.Pytester) -> None:
    project.makepyfile(test_strictness=STRICTNESS)
    result = project.runpytest("-rfE")
    result.assert_outcomes(passed=8, failed=3, errors=1)
    result.stdout.fnmatch_lines(
        [
            "FAILED test_strictness.py::test_a_required_route_beside_it_still_fails - *",
            "FAILED test_strictness.py::test_but_still_refuses_what_nothing_scripted - *",
            "FAILED test_strictness.py::test_but_still_asks_for_every_route - *",
        ],
        consecutive=False,
    )
    out = result.stdout.str()
    assert "route 2 (last user message contains 'weather') was never matched" in out
    assert "route 1 (last user message contains 'title')" not in out
    assert "takes only keyword arguments assert_all_called, assert_all_mocked" in out
    assert "got assert_all_calld" in out


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
