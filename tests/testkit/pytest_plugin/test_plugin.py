"""The pytest plugin as a user meets it: entry point, light import, options, markers, help.

Every test runs pytest on a small project with ``pytester``; the plugin is loaded through its
``pytest11`` entry point exactly as in a user's environment.
"""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import entry_points

import pytest

from tests._support import USER_INI, user_project

pytest_plugins = ["pytester"]

KEY = "sk-fake0123456789abcdefABCDEFplugin"
"""A fake key; it must never appear in anything pytest prints."""

INI = USER_INI


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """A user's project: strict pytest settings like ours, no key, no base URL override."""
    return user_project(pytester, monkeypatch, ini=INI)


# ---------------------------------------------------------------------------- registration


def test_the_plugin_is_registered_through_the_pytest11_entry_point() -> None:
    found = [ep for ep in entry_points(group="pytest11") if ep.name == "dsh_testkit"]
    assert [ep.value for ep in found] == ["dsh_testkit.pytest_plugin"]


def test_importing_the_plugin_loads_no_heavy_dependency() -> None:
    heavy = ["vcr", "respx", "syrupy", "hypothesis", "yaml", "dsh_testkit.mock", "dsh_core"]
    code = (
        "import sys, dsh_testkit.pytest_plugin\n"
        f"print(sorted(m for m in {heavy!r} if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "[]"


def test_the_plugin_is_active_in_a_users_run(project: pytest.Pytester) -> None:
    project.makepyfile(
        """
        def test_it(pytestconfig):
            assert pytestconfig.pluginmanager.has_plugin("dsh_testkit")
        """
    )
    project.runpytest().assert_outcomes(passed=1)


def test_the_anthropic_sdk_reaches_the_in_process_mock(project: pytest.Pytester) -> None:
    """``dsh_mock.anthropic_base_url`` as ``dsh_mock_server`` has it: no URL to guess."""
    project.makepyfile(
        """
        import anthropic
        import httpx2
        from dsh_testkit.mock import Reply

        def test_hello(dsh_mock):
            dsh_mock.push(Reply(text="Hi there."))
            client = anthropic.Anthropic(
                base_url=dsh_mock.anthropic_base_url,
                api_key=dsh_mock.api_key,
                http_client=httpx2.Client(transport=dsh_mock.transport("httpx2")),
            )
            message = client.messages.create(
                model="deepseek-v4-flash",
                max_tokens=100,
                messages=[{"role": "user", "content": "hello"}],
            )
            assert [b.text for b in message.content if b.type == "text"] == ["Hi there."]
            assert [r.endpoint for r in dsh_mock.mock.requests] == ["anthropic"]
        """
    )
    project.runpytest().assert_outcomes(passed=1)


# ----------------------------------------------------------------------------- options


def test_help_lists_the_dsh_group_and_every_option(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "300")  # one help text per line
    result = project.runpytest("--help")
    result.stdout.fnmatch_lines(
        [
            "dsh-testkit: mock DeepSeek, cassettes and replay:",
            "  --dsh-record-mode={none,once,new_episodes,all,rewrite,missing}",
            "  *cassette record mode, as in pytest-recording: none (replay only, an unrecorded "
            "request fails), once (record cassettes that do not exist yet), new_episodes *",
            "  *With CI=true every mode but none is refused (see --dsh-record-in-ci)",
            "  --dsh-record-in-ci *allow recording although CI=true (by default a CI run refuses "
            "every record mode but none, whether the flag, the ini, a marker or "
            "dsh_cassette_config asks for it)",
            "  --dsh-block-network *refuse every connection but loopback, in every test and "
            "client library (socket level); the error names the host*",
            "  --dsh-allowed-hosts=HOSTS",
            "  *comma-separated hosts (names, IPs, [*].domain) still reachable under "
            "--dsh-block-network; loopback is always allowed",
            "  --dsh-live *allow live DeepSeek calls: run dsh_live tests and record cassettes from "
            "the live API; the key is read from $DEEPSEEK_API_KEY only and never printed",
            "  --dsh-cassette-dir=DIR",
            "  *directory of cassettes (default: the dsh_cassette_dir ini "
            "option, else a 'cassettes' folder beside each test module)",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "  dsh_record_mode (string):",
            "  *default cassette record mode (--dsh-record-mode overrides it; refused under "
            "CI=true unless --dsh-record-in-ci)",
            "  dsh_block_network (string):",
            "  dsh_allowed_hosts (args):",
            "  dsh_cassette_dir (string):",
            "  *directory of cassettes, relative to the ini file (--dsh-cassette-dir overrides it)",
            "  dsh_rewrite_origin (linelist):",
            "  *origins cassettes file under another, one 'LIVE -> RECORDED' a line *",
        ]
    )


def test_an_unknown_record_mode_is_a_usage_error(project: pytest.Pytester) -> None:
    result = project.runpytest("--dsh-record-mode=sometimes")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "*argument --dsh-record-mode: invalid choice: 'sometimes' (choose from 'none', 'once', "
            "'new_episodes', 'all', 'rewrite', 'missing')"
        ]
    )


def test_an_ini_switch_that_is_not_true_or_false_names_the_setting_and_the_file(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = user_project(pytester, monkeypatch, ini=INI + "dsh_block_network = maybe\n")
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*dsh_block_network = 'maybe' in *pytest.ini is not true or false*"]
    )
    project = user_project(pytester, monkeypatch, ini=INI + "dsh_block_network = yes\n")
    project.makepyfile("def test_it(pytestconfig): pass")
    project.runpytest().assert_outcomes(passed=1)


def test_recording_live_without_a_key_is_refused_before_any_test(
    project: pytest.Pytester,
) -> None:
    project.makepyfile("def test_never_runs(): raise AssertionError")
    result = project.runpytest("--dsh-record-mode=new_episodes", "--dsh-live")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --dsh-record-mode=new_episodes with --dsh-live records from the live DeepSeek API "
            "and needs a key in the environment variable DEEPSEEK_API_KEY, which is not set; set "
            "it, or drop --dsh-live to record from the in-process mock"
        ]
    )


@pytest.mark.parametrize(
    ("args", "key", "line"),
    [
        (
            (),
            None,
            "dsh-testkit: record mode none (replay only); cassettes: 'cassettes/' beside each "
            "test module; live calls: off",
        ),
        (
            ("--dsh-record-mode=missing",),
            None,
            "dsh-testkit: record mode new_episodes (record what has no recording), recording "
            "from the mock DeepSeek; cassettes: *; live calls: off",
        ),
        (
            ("--dsh-live",),
            None,
            "dsh-testkit: record mode none (replay only); cassettes: *; live calls: off: "
            "--dsh-live given but $DEEPSEEK_API_KEY is not set",
        ),
        (
            ("--dsh-live", "--dsh-record-mode=rewrite"),
            KEY,
            "dsh-testkit: record mode rewrite (re-record each cassette from scratch), recording "
            "from the live API; cassettes: *; live calls: on (key from $DEEPSEEK_API_KEY)",
        ),
        (
            ("--dsh-cassette-dir=recorded/here",),
            None,
            "dsh-testkit: record mode none (replay only); cassettes: */recorded/here; live calls: off",
        ),
    ],
)
def test_the_report_header_says_what_the_run_will_do(
    project: pytest.Pytester,
    monkeypatch: pytest.MonkeyPatch,
    args: tuple[str, ...],
    key: str | None,
    line: str,
) -> None:
    monkeypatch.delenv("CI", raising=False)  # CI=true forces mode none and says so (tested apart)
    if key is not None:
        monkeypatch.setenv("DEEPSEEK_API_KEY", key)
    project.makepyfile("def test_ok(): pass")
    result = project.runpytest(*args)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([line])
    assert KEY not in result.stdout.str() + result.stderr.str()


# ------------------------------------------------------------------------------ markers


def test_markers_are_registered_with_help(project: pytest.Pytester) -> None:
    result = project.runpytest("--markers")
    result.stdout.fnmatch_lines(
        [
            "@pytest.mark.dsh_cassette(name=None, [*][*]options): put the test under its cassette "
            "(no fixture needed): <cassette dir>/<module>/<test>.yaml, or <cassette dir>/<name>.yaml "
            "when named; options as the dsh_cassette_config fixture's (record_mode, match_on, *)",
            "@pytest.mark.dsh_lenient: the dsh_mock fixtures answer requests nothing scripted with "
            "the default reply and do not fail the test for them or for scripted replies and "
            "routes left unused",
            "@pytest.mark.dsh_mock(assert_all_called=True, assert_all_mocked=True): the dsh_mock "
            "fixtures' strict checks, as respx's router takes them: *",
            "@pytest.mark.dsh_live: the test calls the live DeepSeek API; skipped unless "
            "--dsh-live is given and $DEEPSEEK_API_KEY is set",
        ]
    )


LIVE_TESTS = """
import os
import pytest

@pytest.mark.dsh_live
def test_live():
    assert os.environ["DEEPSEEK_API_KEY"]

@pytest.mark.dsh_live
class TestLive:
    def test_in_class(self):
        pass

def test_offline():
    pass
"""


def test_live_tests_are_skipped_with_a_reason_without_dsh_live(project: pytest.Pytester) -> None:
    project.makepyfile(LIVE_TESTS)
    result = project.runpytest("-rs")
    result.assert_outcomes(passed=1, skipped=2)
    reason = "dsh_live: needs the live DeepSeek API; run with --dsh-live and $DEEPSEEK_API_KEY"
    result.stdout.fnmatch_lines(
        [f"SKIPPED [[]1[]] *.py:4: {reason}", f"SKIPPED [[]1[]] *.py: {reason}"]
    )


def test_live_tests_are_skipped_when_dsh_live_has_no_key(project: pytest.Pytester) -> None:
    project.makepyfile(LIVE_TESTS)
    result = project.runpytest("-rs", "--dsh-live")
    result.assert_outcomes(passed=1, skipped=2)
    reason = "dsh_live: --dsh-live is given but $DEEPSEEK_API_KEY is not set"
    result.stdout.fnmatch_lines(
        [f"SKIPPED [[]1[]] *.py:4: {reason}", f"SKIPPED [[]1[]] *.py: {reason}"]
    )


def test_live_tests_run_with_dsh_live_and_a_key_which_is_never_printed(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", KEY)
    project.makepyfile(LIVE_TESTS)
    result = project.runpytest("-v", "-rA", "--dsh-live")
    result.assert_outcomes(passed=3)
    assert KEY not in result.stdout.str() + result.stderr.str()


def test_a_key_alone_does_not_run_live_tests(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", KEY)
    project.makepyfile(LIVE_TESTS)
    project.runpytest().assert_outcomes(passed=1, skipped=2)


# ----------------------------------------------------------------------------- fixtures


FIRST_LINES = {
    "dsh_mock": "A fresh in-process mock DeepSeek per test: script it with route() and push(), give "
    "clients .provider.",
    "dsh_mock_server [[]session scope[]]": "The mock DeepSeek on a loopback port for the session: "
    ".base_url for any client, .mock.",
    "dsh_scrub": "Your secret-scrub rules for cassettes, from [[]tool.dsh_testkit.scrub[]] in "
    "pyproject.toml.",
    "dsh_cassette_config": "Options for the test's cassette, as pytest-recording's vcr_config: "
    "override it.",
    "dsh_cassette": "Replays (or records) the test's HTTP traffic from "
    "cassettes/<module>/<test>.yaml.",
    "dsh_cassette_provider": "A DeepSeekProvider whose requests replay (or record) through the "
    "test's cassette.",
    "dsh_replay": "dsh_replay(log) makes a provider serving the model calls a recorded session "
    "log made.",
    "dsh_capture": "Captures every request any httpx/httpx2 client sends in the test (.requests, "
    "in order).",
    "dsh_agent": "dsh_agent(provider=None, [*][*]options) makes a dsh_core.Agent with invariants "
    "on, for tests.",
}


def test_pytest_fixtures_shows_one_self_sufficient_line_per_fixture(
    project: pytest.Pytester,
) -> None:
    project.makepyfile("def test_ok(): pass")
    result = project.runpytest("--fixtures")
    lines: list[str] = []
    for name, first in FIRST_LINES.items():
        lines += [f"{name} -- *", f"    {first}", ""]
    result.stdout.fnmatch_lines(lines)
    assert "_dsh_cassette_marker" not in result.stdout.str()  # private: shown with -v only


def test_pytest_fixtures_v_shows_each_whole_docstring(project: pytest.Pytester) -> None:
    project.makepyfile("def test_ok(): pass")
    result = project.runpytest("--fixtures", "-v")
    result.stdout.fnmatch_lines_random(
        [
            "    No sockets, no key, no network.",
            "    Also activated by ``@pytest.mark.dsh_cassette`` alone.",
            "    ``dsh_replay(log, *child_logs, strict=True)``.",
            "_dsh_cassette_marker -- *",
        ]
    )


def test_the_plugin_hands_out_its_types_and_errors_on_first_use() -> None:
    """The fixtures' types and the plugin's errors resolve lazily (importing the plugin stays
    light: test_importing_the_plugin_loads_no_heavy_dependency); the surface as a whole is
    checked in tests/test_public_surface.py."""
    import dsh_testkit._errors as errors
    import dsh_testkit.pytest_plugin as plugin
    from dsh_testkit.pytest_plugin import _support as _pytest_support

    for name in ("AgentFactory", "MockFixture", "ReplayFactory"):
        assert getattr(plugin, name) is getattr(_pytest_support, name)
    for name in ("MockNotSatisfied", "NetworkBlocked"):
        error = getattr(plugin, name)
        assert error is getattr(errors, name)
        assert f"{error.__module__}.{error.__qualname__}" == f"dsh_testkit.pytest_plugin.{name}"
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        _ = plugin.nothing
