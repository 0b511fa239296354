"""The plugin's cassette fixtures as a user runs them: every record mode, the file-naming rules,
the failure output of a mismatch, and replay under pytest-xdist."""

from __future__ import annotations

import inspect
import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from dsh_testkit.mock import MockDeepSeek, MockServer
from tests._support import USER_INI, patch_depth, user_project

pytest_plugins = ["pytester"]

KEY = "sk-fake0123456789abcdefABCDEFplugin"
"""A fake live key; it must never reach a cassette or pytest's output."""

INI = USER_INI

CHAT = '''
import pytest
from dsh_testkit.mock import Reply

SYSTEM = "{system}"


async def test_chat(request, dsh_cassette_provider, dsh_agent, dsh_mock):
    """One turn through an agent; in replay the mock is never asked."""
    dsh_mock.push(Reply(text="Hello!"))
    agent = dsh_agent(dsh_cassette_provider, system=SYSTEM)
    reply = await agent.run("Say hi")
    assert reply.text == "Hello!"
    assert len(dsh_mock.requests) == (0 if dsh_mock.replaying else 1)
'''


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    return user_project(pytester, monkeypatch, ini=INI)


def chat(project: pytest.Pytester, system: str = "Be terse.") -> Path:
    return project.makepyfile(test_chat=CHAT.format(system=system))


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return data


# -------------------------------------------------------------------------- record, replay


def test_recording_from_the_mock_then_replaying_the_cassette(project: pytest.Pytester) -> None:
    chat(project)
    project.runpytest("--dsh-record-mode=missing").assert_outcomes(passed=1)
    cassette = project.path / "cassettes" / "test_chat" / "test_chat.yaml"
    data = load(cassette)
    assert data["format"] == "dsh-cassette"
    assert data["metadata"]["test"] == "test_chat.py::test_chat"
    assert data["metadata"]["recordedAgainst"].startswith("the in-process mock DeepSeek")
    [interaction] = data["interactions"]
    assert interaction["request"]["uri"] == "https://api.deepseek.com/chat/completions"
    assert interaction["request"]["headers"]["authorization"] == "<REDACTED>"
    assert json.loads(interaction["request"]["body"]["json"])["messages"][0] == {
        "role": "system",
        "content": "Be terse.",
    }
    recorded = cassette.read_bytes()
    stat = cassette.stat()

    project.runpytest().assert_outcomes(passed=1)  # replay (the default mode)
    assert cassette.read_bytes() == recorded
    assert (cassette.stat().st_ino, cassette.stat().st_mtime_ns) == (stat.st_ino, stat.st_mtime_ns)


def test_replaying_without_a_cassette_fails_at_setup_saying_how_to_record(
    project: pytest.Pytester,
) -> None:
    chat(project)
    result = project.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at setup of test_chat*",
            "CassetteNotFound: cassette */cassettes/test_chat/test_chat.yaml does not exist and "
            "mode 'none' replays only (live network blocked); record it with mode='once' "
            "(pytest --dsh-record-mode=once)",
        ]
    )
    assert not (project.path / "cassettes").exists()


def test_an_unreadable_cassette_fails_at_setup_naming_the_file(project: pytest.Pytester) -> None:
    chat(project)
    cassette = project.path / "cassettes" / "test_chat" / "test_chat.yaml"
    cassette.parent.mkdir(parents=True)
    cassette.write_text("format: dsh-cassette\nversion: 99\ninteractions: []\n", encoding="utf-8")
    result = project.runpytest()
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(
        ["*ERROR at setup of test_chat*", "CassetteFormatError: cassette */test_chat.yaml: *"]
    )


def test_a_changed_request_fails_with_the_closest_recording_and_what_differs(
    project: pytest.Pytester,
) -> None:
    chat(project)
    project.runpytest("--dsh-record-mode=missing").assert_outcomes(passed=1)
    chat(project, system="Be terse!")
    result = project.runpytest("-rf")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "E   *CassetteMismatch: cassette */cassettes/test_chat/test_chat.yaml has no recording "
            "for request #1: POST https://api.deepseek.com/chat/completions",
            "E   *Closest recording: interaction #1, POST https://api.deepseek.com/chat/completions; "
            "what differs (recorded → request), in order:",
            "E   *  system line 1 differs: recorded: 'Be terse.', request: 'Be terse!'",
            "E   *What to do: if the change is intended, re-record the cassette from scratch "
            "(pytest --dsh-record-mode=rewrite) or add the new request to it (pytest "
            "--dsh-record-mode=new_episodes); otherwise fix the code that builds the request.",
        ]
    )
    result.stdout.fnmatch_lines(
        ["FAILED test_chat.py::test_chat - dsh_testkit.cassettes.CassetteMismatch: cassette *"]
    )


@pytest.mark.slow
def test_each_record_mode_means_what_it_means_in_pytest_recording(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.makepyfile(
        test_turns="""
        import os

        import pytest

        @pytest.mark.dsh_lenient  # recorded from the mock's default replies
        async def test_turns(dsh_cassette_provider, dsh_agent):
            agent = dsh_agent(dsh_cassette_provider)
            for prompt in os.environ["PROMPTS"].split(","):
                await agent.run(prompt)
        """
    )
    cassette = project.path / "cassettes" / "test_turns" / "test_turns.yaml"

    def run(prompts: str, *args: str) -> list[str]:
        monkeypatch.setenv("PROMPTS", prompts)
        project.runpytest(*args).assert_outcomes(passed=1)
        data = load(cassette)
        return [
            json.loads(i["request"]["body"]["json"])["messages"][-1]["content"]
            for i in data["interactions"]
        ]

    assert run("one", "--dsh-record-mode=once") == ["one"]  # no cassette yet: recorded
    first = load(cassette)["interactions"][0]
    assert run("one", "--dsh-record-mode=once") == ["one"]  # replayed, file untouched
    monkeypatch.setenv("PROMPTS", "one,two")
    project.runpytest("--dsh-record-mode=once").assert_outcomes(failed=1)  # once: no new ones
    assert run("one,two", "--dsh-record-mode=new_episodes") == ["one", "two"]
    assert load(cassette)["interactions"][0] == first
    assert run("one,two", "--dsh-record-mode=missing") == ["one", "two"]  # the old name
    assert run("one,two") == ["one", "two"]
    # all: nothing replayed, every request recorded again, the others kept
    assert run("three", "--dsh-record-mode=all") == ["one", "two", "three"]
    assert run("four", "--dsh-record-mode=rewrite") == ["four"]  # from scratch


def test_a_failing_test_records_nothing(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_fails="""
        import pytest

        @pytest.mark.dsh_lenient  # the default reply answers
        async def test_fails(dsh_cassette_provider, dsh_agent):
            await dsh_agent(dsh_cassette_provider).run("Say hi")
            assert False, "the test's own failure"
        """
    )
    result = project.runpytest("--dsh-record-mode=missing")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["E   *AssertionError: the test's own failure"])
    assert "CassetteMismatch" not in result.stdout.str()
    assert not (project.path / "cassettes").exists()


def test_a_test_failing_the_mocks_strict_check_keeps_the_good_cassette(
    project: pytest.Pytester,
) -> None:
    """A test whose body passes but whose mock was not used as scripted fails after the body
    (MockNotSatisfied): a failing test all the same, so re-recording leaves the good cassette."""
    project.makepyfile(
        test_reask="""
        import os
        import httpx
        import pytest

        BODY = {"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": "hi"}]}

        @pytest.mark.dsh_cassette
        def test_reask(dsh_mock, dsh_cassette):
            if dsh_cassette.recording:
                dsh_mock.route(last_user="hi").reply(text=os.environ["ANSWER"])
                if os.environ.get("BROKEN"):
                    dsh_mock.route(last_user="never asked").reply(text="unused")
            httpx.post("https://api.deepseek.com/chat/completions", json=BODY,
                       headers={"authorization": "Bearer test-key"})
        """
    )
    cassette = project.path / "cassettes" / "test_reask" / "test_reask.yaml"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ANSWER", "good answer")
        project.runpytest("--dsh-record-mode=once").assert_outcomes(passed=1)
        good = cassette.read_bytes()
        assert b"good answer" in good
        patch.setenv("ANSWER", "BAD answer")
        patch.setenv("BROKEN", "1")
        result = project.runpytest("--dsh-record-mode=rewrite")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*MockNotSatisfied*"])
    assert cassette.read_bytes() == good


def test_a_mismatch_never_prints_a_key_from_the_request(project: pytest.Pytester) -> None:
    """The mismatch names what differs with keys redacted; the traceback pytest prints must not
    show the raw body either (it printed the cassette's frame arguments)."""
    key = "sk-FAKE" + "5a4b3c2d1e0f9a8b7c6d" + "5e4f3a2b1c0d"
    project.makepyfile(
        test_keyed="""
        import os
        import httpx
        import pytest

        @pytest.mark.dsh_cassette
        def test_keyed(dsh_mock, dsh_cassette):
            if dsh_cassette.recording:
                dsh_mock.route().reply(text="ok")
            body = {"model": "deepseek-v4-flash",
                     "messages": [{"role": "user", "content": os.environ["PROMPT"]}]}
            httpx.post("https://api.deepseek.com/chat/completions", json=body,
                       headers={"authorization": "Bearer test-key"})
        """
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PROMPT", "hi")
        project.runpytest("--dsh-record-mode=once").assert_outcomes(passed=1)
        patch.setenv("PROMPT", f"hi {key}")
        result = project.runpytest()
        verbose = project.runpytest("-l", "--tb=long")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["FAILED test_keyed.py::test_keyed - *CassetteMismatch*"])
    shown = result.stdout.str()
    assert "messages[0].content differs: recorded: 'hi', request: 'hi <REDACTED>'" in shown
    for run in (result, verbose):
        # the test's own locals and httpx's arguments hold it (the user's data in their own
        # frames, shown as pytest shows them); no frame of the kit's shows it
        kit = [
            line for line in run.stdout.lines if "dsh_testkit" in line or line.startswith("body = ")
        ]
        assert not [line for line in kit if key in line]
    assert key not in shown.split("FAILURES")[0]


FILE_SYSTEM = """
import httpx
import pytest

BODY = {"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": "hi"}]}

@pytest.mark.dsh_lenient
@pytest.mark.dsh_cassette(NAME)
def test_c(dsh_mock):
    httpx.post("https://api.deepseek.com/chat/completions", json=BODY,
               headers={"authorization": "Bearer test-key"})
"""


@pytest.mark.parametrize(
    ("setup", "name", "said"),
    [
        (
            "directory",
            "c",
            "*CassetteError: cassette */c.yaml is a directory; a cassette is a file*",
        ),
        ("fifo", "c", "*CassetteError: cassette */c.yaml is not a regular file*"),
        ("", "n" * 300, "*CassetteError: cassette name nnn*is 305 bytes, longer than a file name*"),
        ("folder-is-a-file", "c", "*CassetteError: cannot write cassette *: * is a file, not a*"),
    ],
    ids=["a-directory", "a-fifo", "a-long-name", "a-folder-that-is-a-file"],
)
@pytest.mark.parametrize("mode", ["none", "once"])
def test_a_cassette_path_that_cannot_be_used_fails_at_setup_naming_it(
    project: pytest.Pytester, setup: str, name: str, said: str, mode: str
) -> None:
    """Not a raw OSError from inside vcrpy at teardown, after the test passed."""
    project.makepyfile(test_fs=FILE_SYSTEM.replace("NAME", repr(name)))
    folder = project.path / "cassettes"  # a named cassette: cassettes/<name>.yaml
    if setup == "directory":
        (folder / "c.yaml").mkdir(parents=True)
    elif setup == "fifo":
        folder.mkdir(parents=True)
        os.mkfifo(folder / "c.yaml")
    elif setup == "folder-is-a-file":
        (project.path / "cassettes").write_text("not a folder", encoding="utf-8")
    result = project.runpytest(f"--dsh-record-mode={mode}")
    if mode == "none" and setup in ("", "folder-is-a-file"):
        result.assert_outcomes(errors=1)  # nothing to replay: the usual CassetteNotFound
        result.stdout.fnmatch_lines(["*CassetteNotFound*"])
        return
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines([said])
    assert "Traceback" not in result.stdout.str()


# ----------------------------------------------------------- mismatches a client swallowed

SHARED = """
import contextlib
import pytest
from dsh_testkit.mock import Reply

pytestmark = pytest.mark.dsh_lenient  # recorded from the mock's default replies


@pytest.mark.dsh_cassette("greeting")
async def test_two_turns(dsh_cassette_provider, dsh_agent):
    agent = dsh_agent(dsh_cassette_provider, system="Be terse.")
    await agent.run("Say hi")
    await agent.run("Again")
"""

SWALLOWING = """
import contextlib
import pytest

pytestmark = pytest.mark.dsh_lenient  # recorded from the mock's default replies


@pytest.mark.dsh_cassette("greeting")
async def test_swallowed_and_passed(dsh_cassette_provider, dsh_agent):
    agent = dsh_agent(dsh_cassette_provider, system="Something else.")
    with contextlib.suppress(Exception):
        await agent.run("Say hi")


@pytest.mark.dsh_cassette("greeting")
async def test_swallowed_then_failed_on_a_symptom(dsh_cassette_provider, dsh_agent):
    agent = dsh_agent(dsh_cassette_provider, system="Something else.")
    try:
        await agent.run("Say hi")
    except Exception:
        raise RuntimeError("the agent gave up") from None


@pytest.mark.dsh_cassette("greeting")
async def test_failed_showing_the_cause(dsh_cassette_provider, dsh_agent):
    agent = dsh_agent(dsh_cassette_provider, system="Something else.")
    try:
        await agent.run("Say hi")
    except Exception as exc:
        raise RuntimeError("wrapped with its cause") from exc


@pytest.mark.dsh_cassette("greeting")
async def test_failed_inside_the_handler(dsh_cassette_provider, dsh_agent):
    agent = dsh_agent(dsh_cassette_provider, system="Something else.")
    try:
        await agent.run("Say hi")
    except Exception:
        raise RuntimeError("raised while handling it")


@pytest.mark.dsh_cassette("greeting")
async def test_one_turn_of_two(dsh_cassette_provider, dsh_agent):
    await dsh_agent(dsh_cassette_provider, system="Be terse.").run("Say hi")

"""


@pytest.mark.slow
def test_mismatches_a_client_swallowed_still_fail_the_test(project: pytest.Pytester) -> None:
    project.makepyfile(test_shared=SHARED)
    project.runpytest("--dsh-record-mode=missing").assert_outcomes(passed=1)
    assert (project.path / "cassettes" / "greeting.yaml").is_file()
    project.makepyfile(test_swallowing=SWALLOWING)
    result = project.runpytest("test_swallowing.py", "-rf")
    result.assert_outcomes(failed=5)
    result.stdout.fnmatch_lines(
        [
            "*_ test_swallowed_and_passed _*",
            "E   *CassetteMismatch: cassette */cassettes/greeting.yaml has no recording for "
            "request #1: POST https://api.deepseek.com/chat/completions",
            "E   *system line 1 differs: recorded: 'Be terse.', request: 'Something else.'",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*_ test_swallowed_then_failed_on_a_symptom _*",
            "E   *RuntimeError: the agent gave up",
            "The above exception was the direct cause of the following exception:",
            "E   *CassetteMismatch: cassette */cassettes/greeting.yaml has no recording *",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "*_ test_one_turn_of_two _*",
            "E   *CassetteNotFullyPlayed: cassette */cassettes/greeting.yaml was only partly "
            "played: 1 of 2 recordings never requested (the code made 1 request(s)):",
            "E *  interaction #2: POST https://api.deepseek.com/chat/completions",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "FAILED test_swallowing.py::test_swallowed_and_passed - *CassetteMismatch*",
            "FAILED test_swallowing.py::test_swallowed_then_failed_on_a_symptom - *CassetteMismatch*",
            # the cassette's error is already in the chain pytest shows: not raised again
            "FAILED test_swallowing.py::test_failed_showing_the_cause - RuntimeError: wrapped with "
            "its cause",
            "FAILED test_swallowing.py::test_failed_inside_the_handler - RuntimeError: raised "
            "while handling it",
            "FAILED test_swallowing.py::test_one_turn_of_two - *CassetteNotFullyPlayed*",
        ]
    )


# ------------------------------------------------------------------------- where files go


def test_names_follow_class_function_and_parametrize_id(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_names="""
        import httpx
        import pytest

        AUTH = {"authorization": "Bearer any"}

        class TestNames:
            @pytest.mark.parametrize("who", ["a b", "c/d"])
            def test_greets(self, dsh_cassette, who):
                httpx.get("https://api.deepseek.com/models", headers=AUTH)
        """
    )
    project.runpytest("--dsh-record-mode=missing").assert_outcomes(passed=2)
    folder = project.path / "cassettes" / "test_names"
    assert sorted(p.name for p in folder.iterdir()) == [
        "TestNames.test_greets[a_b].yaml",
        "TestNames.test_greets[c_d].yaml",
    ]


def test_the_marker_names_a_shared_cassette_in_a_subfolder(project: pytest.Pytester) -> None:
    project.makepyfile(
        test_marked="""
        import httpx
        import pytest

        AUTH = {"authorization": "Bearer any"}
        pytestmark = pytest.mark.dsh_cassette("models/listing")

        def test_first(dsh_cassette):
            assert httpx.get("https://api.deepseek.com/models", headers=AUTH).status_code == 200

        @pytest.mark.dsh_cassette("models/listing.yml")
        def test_explicit_suffix(dsh_cassette):
            assert httpx.get("https://api.deepseek.com/models", headers=AUTH).status_code == 200
        """
    )
    project.runpytest("--dsh-record-mode=missing").assert_outcomes(passed=2)
    folder = project.path / "cassettes" / "models"
    assert sorted(p.name for p in folder.iterdir()) == ["listing.yaml", "listing.yml"]
    project.runpytest().assert_outcomes(passed=2)


@pytest.mark.parametrize(
    ("marker", "message"),
    [
        (
            "dsh_cassette('a', 'b')",
            "CassetteConfigError: @pytest.mark.dsh_cassette takes at most one positional "
            "argument, the cassette name (a string), got ('a', 'b')",
        ),
        (
            "dsh_cassette(path='a')",
            "CassetteConfigError: @pytest.mark.dsh_cassette: unknown option(s) path; known: "
            "allow_playback_repeats, before_record_request, before_record_response, "
            "filter_headers, filter_query_parameters, ignore_json_paths, loopback_as_one, "
            "match_on, rewrite_origin, scrub",
        ),
        (
            "dsh_cassette(match_on=['method', 'url'])",
            "CassetteConfigError: @pytest.mark.dsh_cassette: match_on: unknown matcher 'url'; "
            "known: method, uri, scheme, host, port, path, query, body, headers (or a vcrpy "
            "matcher callable)",
        ),
        (
            "dsh_cassette(record_mode='sometimes')",
            "CassetteConfigError: @pytest.mark.dsh_cassette: record_mode 'sometimes' is not a "
            "record mode; use one of none, once, new_episodes, all, rewrite",
        ),
        (
            "dsh_cassette(rewrite_origin={'gateway': 'https://api.deepseek.com'})",
            "CassetteConfigError: @pytest.mark.dsh_cassette: rewrite_origin: 'gateway' is not an "
            "origin (write 'https://host[:port][/path]')",
        ),
        (
            "dsh_cassette(3)",
            "CassetteConfigError: @pytest.mark.dsh_cassette takes at most one positional "
            "argument, the cassette name (a string), got (3,)",
        ),
        (
            "dsh_cassette('../outside')",
            "dsh_cassette name '../outside' must be a relative path inside the cassette directory "
            "(no leading '/', no '.' or '..' parts)",
        ),
        (
            "dsh_cassette('/etc/x')",
            "dsh_cassette name '/etc/x' must be a relative path inside the cassette directory "
            "(no leading '/', no '.' or '..' parts)",
        ),
    ],
)
def test_a_bad_marker_fails_at_setup_with_a_readable_message(
    project: pytest.Pytester, marker: str, message: str
) -> None:
    project.makepyfile(
        f"""
        import pytest

        @pytest.mark.{marker}
        def test_it(dsh_cassette):
            pass
        """
    )
    result = project.runpytest("--dsh-record-mode=new_episodes")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*ERROR at setup of test_it*", message])


LISTING = """
import httpx

AUTH = {"authorization": "Bearer any"}

def test_listing(dsh_cassette):
    assert httpx.get("https://api.deepseek.com/models", headers=AUTH).status_code == 200
"""


def test_the_cassette_dir_option_is_relative_to_where_pytest_runs(
    project: pytest.Pytester,
) -> None:
    project.mkpydir("suite")
    (project.path / "suite" / "test_listing.py").write_text(LISTING, encoding="utf-8")
    project.runpytest("--dsh-record-mode=missing", "--dsh-cassette-dir=recs").assert_outcomes(
        passed=1
    )
    assert (project.path / "recs" / "test_listing" / "test_listing.yaml").is_file()
    assert not (project.path / "suite" / "cassettes").exists()


def test_the_ini_cassette_dir_is_relative_to_the_ini_file_and_the_option_wins(
    project: pytest.Pytester,
) -> None:
    project.makefile(".ini", pytest=INI + "dsh_cassette_dir = shared/cassettes\n")
    project.mkpydir("suite")
    (project.path / "suite" / "test_listing.py").write_text(LISTING, encoding="utf-8")
    project.runpytest("--dsh-record-mode=missing", "suite").assert_outcomes(passed=1)
    expected = project.path / "shared" / "cassettes" / "test_listing" / "test_listing.yaml"
    assert expected.is_file()
    project.runpytest("--dsh-cassette-dir=other", "--dsh-record-mode=missing").assert_outcomes(
        passed=1
    )
    assert (project.path / "other" / "test_listing" / "test_listing.yaml").is_file()


# --------------------------------------------------------------------------- no live calls


def test_recording_without_dsh_live_answers_any_client_from_the_mock(
    project: pytest.Pytester,
) -> None:
    project.makepyfile(
        test_sdk_like="""
        import httpx

        async def test_async_client(dsh_cassette, dsh_mock):
            dsh_mock.lenient()  # the default reply is what this test records
            async with httpx.AsyncClient() as client:
                response = await client.post(
                    "https://api.deepseek.com/chat/completions",
                    headers={"authorization": "Bearer whatever"},
                    json={"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": "hi"}]},
                )
            assert response.json()["choices"][0]["message"]["content"].startswith("Mock DeepSeek")
            recording = dsh_cassette.mode != "none"
            assert len(dsh_mock.requests) == (1 if recording else 0)
        """
    )
    project.runpytest("--dsh-record-mode=all").assert_outcomes(passed=1)
    project.runpytest().assert_outcomes(passed=1)


def test_recording_live_reads_the_key_from_the_environment_and_never_stores_it(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DEEPSEEK_API_KEY", KEY)
    with MockServer(MockDeepSeek(api_keys=[KEY])) as live:
        # The "live API" here is a loopback mock that accepts only this key.
        base_url = live.base_url
        monkeypatch.setenv("DEEPSEEK_BASE_URL", base_url)
        project.makepyfile(
            test_live_recording="""
            async def test_live(dsh_cassette_provider, dsh_agent, dsh_mock):
                reply = await dsh_agent(dsh_cassette_provider).run("Say hi")
                assert reply.text.startswith("Mock DeepSeek reply to: Say hi")
                assert dsh_mock.requests == ()
            """
        )
        result = project.runpytest("--dsh-live", "--dsh-record-mode=missing", "-v")
        result.assert_outcomes(passed=1)
        assert len(live.mock.requests) == 1
    text = (project.path / "cassettes" / "test_live_recording" / "test_live.yaml").read_text(
        encoding="utf-8"
    )
    assert KEY not in text
    assert KEY not in result.stdout.str() + result.stderr.str()
    data = yaml.safe_load(text)
    assert data["metadata"]["recordedAgainst"] == (
        f"a local server at {base_url} ($DEEPSEEK_BASE_URL), not the default DeepSeek API "
        "https://api.deepseek.com; recorded with --dsh-live"
    )
    assert data["interactions"][0]["request"]["uri"] == "https://api.deepseek.com/chat/completions"
    monkeypatch.delenv("DEEPSEEK_API_KEY")
    monkeypatch.delenv("DEEPSEEK_BASE_URL")
    project.runpytest("test_live_recording.py").assert_outcomes(passed=1)  # replays offline


# ---------------------------------------------------------------------------- the live guard


LAYERS = """
import importlib
import socket
from pathlib import Path

import httpx
import httpx2
import pytest
from dsh_testkit.pytest_plugin import NetworkBlocked

METHODS = [
    (cls, name)
    for mod in (httpx, httpx2)
    for cls, name in (
        (mod.HTTPTransport, "handle_request"),
        (mod.AsyncHTTPTransport, "handle_async_request"),
        (mod.MockTransport, "handle_request"),
        (mod.MockTransport, "handle_async_request"),
        (mod.WSGITransport, "handle_request"),
        (mod.ASGITransport, "handle_async_request"),
    )
]


def depths():
    return {f"{cls.__module__}.{cls.__qualname__}.{name}": patch_depth(cls, name) for cls, name in METHODS}


def test_under_a_cassette(dsh_cassette, dsh_mock):
    assert depths() == dict.fromkeys(depths(), 1)
    # Both layers act behind the one patch: the routing answers from the in-process mock, the
    # cassette records that (and replays it on the next run, the mock not asked).
    response = httpx.get("https://api.deepseek.com/models", headers={"authorization": "Bearer k"})
    assert response.status_code == 200 and response.json()["object"] == "list"
    # (a GET is answered and counted, not logged)
    assert dsh_mock.mock.unlogged_requests == (0 if dsh_mock.replaying else 1)
    # What neither patch sees (vcrpy's own stubs of http.client aside) meets the socket guard.
    with pytest.raises(NetworkBlocked, match="example.org:443"):
        socket.create_connection(("example.org", 443), timeout=5)


def test_without_a_cassette():
    assert depths() == dict.fromkeys(depths(), 0)
    with pytest.raises(NetworkBlocked, match="example.org"):
        httpx.get("https://example.org/")


""" + inspect.getsource(patch_depth)


def test_a_cassette_test_patches_each_transport_method_once(project: pytest.Pytester) -> None:
    """The cassette's record/replay and the plugin's routing of live calls to the mock are
    layers of one interception: under a cassette each transport method is patched once (the
    count follows what each patch calls), both layers still act, and the socket guard still
    refuses what no transport patch sees; outside a cassette nothing is patched."""
    project.makepyfile(test_layers=LAYERS)
    args = ("--dsh-block-network",)
    project.runpytest("--dsh-record-mode=missing", *args).assert_outcomes(passed=2)
    recorded = project.path / "cassettes" / "test_layers" / "test_under_a_cassette.yaml"
    assert [i["request"]["uri"] for i in load(recorded)["interactions"]] == [
        "https://api.deepseek.com/models"
    ]
    project.runpytest(*args).assert_outcomes(passed=2)  # replayed


async def test_the_live_guard_answers_remote_hosts_in_process_and_lets_loopback_through() -> None:
    import httpx
    import httpx2

    from dsh_testkit.mock import MockHandler
    from dsh_testkit.pytest_plugin._cassette import route_network_to_mock

    originals = (httpx.HTTPTransport.handle_request, httpx2.AsyncHTTPTransport.handle_async_request)
    auth = {"authorization": "Bearer any"}
    in_process = MockDeepSeek()
    with MockServer() as server, route_network_to_mock(MockHandler(in_process)):
        remote = httpx.get("https://api.deepseek.com/models", headers=auth)
        async with httpx2.AsyncClient() as client:
            remote_async = await client.get("https://example.invalid/v1/models", headers=auth)
            local_async = await client.get(server.base_url + "/v1/models", headers=auth)
        local = httpx.get(server.base_url + "/models", headers=auth)
        statuses = {r.status_code for r in (remote, remote_async, local, local_async)}
        assert statuses == {200}
        # GETs are answered, not logged: each mock counts the two it answered
        assert in_process.unlogged_requests == 2
        assert server.mock.unlogged_requests == 2
    assert (
        httpx.HTTPTransport.handle_request,
        httpx2.AsyncHTTPTransport.handle_async_request,
    ) == originals
