"""``--dsh-cache-baseline``: a suite run as a user runs it (pytester), its traces kept, and the
one test whose harness change broke the cache fails, with the compare wording."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from dsh_testkit.traces._file import TRACE_FORMAT_VERSION

pytest_plugins = ["pytester"]

INI = """
[pytest]
addopts = --strict-markers -p no:cacheprovider -p no:randomly
filterwarnings = error
xfail_strict = true
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
"""

HARNESS = '''
import uuid

import httpx2
from openai import OpenAI

RULES = "\\n".join(f"Rule {i}: answer precisely, cite the file you read." for i in range(60))


def now(step):
    return f"2026-05-04T09:00:{step:02d}Z"


class Agent:
    """The harness under test: a chat loop on the openai SDK."""

    def __init__(self, base_url, transport=None, *, dated=False):
        http = httpx2.Client(transport=transport) if transport is not None else httpx2.Client()
        headers = {"x-dsh-conversation": str(uuid.uuid4())}  # a new id every run
        self.client = OpenAI(
            api_key="sk-test-0000", base_url=base_url, http_client=http, default_headers=headers
        )
        self.dated = dated
        self.history = []

    def ask(self, prompt, step):
        system = RULES
        if self.dated:
            prompt = f"[{now(step)}] {prompt}"  # DATED-LINE
        self.history.append({"role": "user", "content": prompt})
        answer = self.client.chat.completions.create(
            model="deepseek-v4-flash",
            messages=[{"role": "system", "content": system}, *self.history],
        )
        self.history.append({"role": "assistant", "content": answer.choices[0].message.content})

    def run(self, prompts):
        with self.client:
            for step, prompt in enumerate(prompts):
                self.ask(prompt, step)
'''

# The harness change under review: the date moves from the user message to the top of the system
# prompt.
BROKEN = 'system = f"Now: {now(step)}\\n" + RULES  # DATED-LINE'
# A change that costs more with no cause behind it: each question is sent with a long preamble
# (new text at the miss price on every request; the cache works as well as before).
BULKY = 'prompt = "Please be thorough and cite every file you read. " * 30 + prompt  # DATED-LINE'

SUITE = """
import pytest

from harness import Agent

pytestmark = pytest.mark.dsh_lenient
PROMPTS = ["read the file a.txt please", "and now b.txt", "summarize both of them"]


def test_plain(dsh_mock):
    Agent(dsh_mock.base_url, dsh_mock.transport("httpx2")).run(PROMPTS)


def test_dated(dsh_mock):
    Agent(dsh_mock.base_url, dsh_mock.transport("httpx2"), dated=True).run(PROMPTS)


def test_server(dsh_mock_server):
    Agent(dsh_mock_server.base_url).run(PROMPTS)


def test_captured(dsh_capture, dsh_mock_server):
    Agent(dsh_mock_server.base_url).run(PROMPTS[:2])


def test_no_model_requests():
    assert True
"""

SUMMARY = re.compile(r"^cache: .*$", re.M)


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    monkeypatch.delenv("DEEPSEEK_BASE_URL", raising=False)
    pytester.makefile(".ini", pytest=INI)
    pytester.makepyfile(harness=HARNESS, test_suite=SUITE)
    pytester.syspathinsert()
    return pytester


def summary(result: pytest.RunResult) -> str:
    lines = SUMMARY.findall(result.stdout.str())
    assert len(lines) == 1, result.stdout.str()
    return lines[0]


def break_the_harness(pytester: pytest.Pytester, change: str = BROKEN) -> None:
    harness = pytester.path / "harness.py"
    text = harness.read_text(encoding="utf-8")
    line = next(line for line in text.splitlines() if "DATED-LINE" in line)
    indent = line[: len(line) - len(line.lstrip())]
    harness.write_text(text.replace(line, indent + change), encoding="utf-8")


def baseline_files(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.mark.slow
def test_the_baseline_fails_exactly_the_test_whose_harness_change_broke_the_cache(
    suite: pytest.Pytester,
) -> None:
    written = suite.runpytest("--dsh-cache-baseline=baseline", "--dsh-cache-baseline-update")
    written.assert_outcomes(passed=5)
    folder = suite.path / "baseline"
    assert summary(written) == (
        f"cache: 4 tests · efficiency 100.0 % · baseline written for 4 test(s) in {folder}"
    )
    files = baseline_files(folder)
    assert sorted(files) == [
        "test_suite/test_captured.trace.jsonl",
        "test_suite/test_dated.trace.jsonl",
        "test_suite/test_plain.trace.jsonl",
        "test_suite/test_server.trace.jsonl",
    ]
    header = json.loads(files["test_suite/test_dated.trace.jsonl"].split(b"\n")[0])
    assert header == {
        "format": "dsh-trace",
        "version": TRACE_FORMAT_VERSION,
        "source": "memory",
        "scenario": "test_suite.py::test_dated",
    }
    assert json.loads(files["test_suite/test_captured.trace.jsonl"].split(b"\n")[0])["source"] == (
        "capture"
    )
    records = [
        json.loads(line) for line in files["test_suite/test_server.trace.jsonl"].splitlines()[1:]
    ]
    assert {r["url"] for r in records} == {"https://api.deepseek.com/chat/completions"}
    assert {r["conversation"] for r in records} == {"conversation-1"}
    assert {r["started"] for r in records} == {None}

    # The same run writes the same bytes (a new loopback port, new conversation ids).
    again = suite.runpytest("--dsh-cache-baseline=baseline", "--dsh-cache-baseline-update")
    again.assert_outcomes(passed=5)
    assert baseline_files(folder) == files

    unchanged = suite.runpytest("--dsh-cache-baseline=baseline")
    unchanged.assert_outcomes(passed=5)
    assert summary(unchanged) == (
        "cache: 4 tests · efficiency 100.0 % (baseline 100.0 %) · cost +0.0 % · no regression"
    )

    break_the_harness(suite)
    broken = suite.runpytest("--dsh-cache-baseline=baseline")
    broken.assert_outcomes(passed=4, failed=1)
    out = broken.stdout.str()
    assert re.findall(r"^FAILED (\S+)", out, re.M) == ["test_suite.py::test_dated"]
    assert re.search(
        r"^E +dsh_testkit\.compare\.CacheRegression: cache regression in "
        r"test_suite\.py::test_dated against the baseline baseline/test_suite/test_dated\.trace\.jsonl:$",
        out,
        re.M,
    )
    assert "volatile-system-text appeared (loss) on #2–#3" in out
    assert "'2026-05-04T09:00:00Z' → '2026-05-04T09:00:01Z'" in out
    assert re.search(
        r"efficiency fell [\d.]+ pp \(100\.0 % → [\d.]+ %; more than 2 pp beyond the rounding "
        r"bound of ±[\d.]+ pp\)",
        out,
    )
    assert "accept it with --dsh-cache-baseline-update" in out
    line = summary(broken)
    assert re.fullmatch(
        r"cache: 4 tests · efficiency \d+\.\d % \(baseline 100\.0 %\) · cost [+-]\d+\.\d % "
        r"· 1 regression",
        line,
    ), line
    assert baseline_files(folder) == files  # comparing never writes

    # Under pytest-xdist the line and the failure are the same.
    parallel = suite.runpytest("--dsh-cache-baseline=baseline", "-n", "2")
    parallel.assert_outcomes(passed=4, failed=1)
    assert summary(parallel) == line

    # Accepting the change: the next comparison passes.
    suite.runpytest("--dsh-cache-baseline=baseline", "--dsh-cache-baseline-update").assert_outcomes(
        passed=5
    )
    suite.runpytest("--dsh-cache-baseline=baseline").assert_outcomes(passed=5)


@pytest.mark.slow
def test_thresholds_and_tests_without_a_baseline(suite: pytest.Pytester) -> None:
    suite.runpytest(
        "--dsh-cache-baseline=baseline", "--dsh-cache-baseline-update", "-k", "plain or dated"
    ).assert_outcomes(passed=2, deselected=3)
    # Thresholds judge the figures: a cost increase no cause explains (here +60 %, beyond the
    # rounding bound of this three-request test).
    break_the_harness(suite, BULKY)
    assert suite.runpytest("--dsh-cache-baseline=baseline").parseoutcomes()["failed"] == 1
    (suite.path / "pytest.ini").write_text(
        INI + "dsh_cache_max_efficiency_drop = 100\ndsh_cache_max_cost_increase = 1000\n",
        encoding="utf-8",
    )
    lenient = suite.runpytest("--dsh-cache-baseline=baseline")
    lenient.assert_outcomes(passed=5)
    line = summary(lenient)
    assert line.startswith("cache: 4 tests · efficiency ")
    assert line.endswith(
        " · no regression · 2 without baseline (--dsh-cache-baseline-update writes it)"
    )
    # The command line wins over the ini file.
    strict = suite.runpytest("--dsh-cache-baseline=baseline", "--dsh-cache-max-cost-increase=5")
    strict.assert_outcomes(passed=4, failed=1)
    strict.stdout.fnmatch_lines(["*estimated cost rose * more than 5 % beyond what rounding*"])
    # A cause that appeared is a regression whatever the thresholds: they judge figures only.
    break_the_harness(suite, BROKEN)
    caused = suite.runpytest("--dsh-cache-baseline=baseline")
    caused.assert_outcomes(passed=4, failed=1)
    caused.stdout.fnmatch_lines(["*volatile-system-text appeared on #2–#3*"])


def test_a_failing_test_without_traffic_writes_no_baseline(pytester: pytest.Pytester) -> None:
    pytester.makefile(".ini", pytest=INI)
    pytester.makepyfile(
        """
        import pytest
        from dsh_testkit.mock import Reply

        def test_fails(dsh_mock):
            dsh_mock.push(Reply(text="hi"))
            dsh_mock.provider  # a request would be made by the agent; this test fails first
            raise AssertionError("the agent is broken")
        """
    )
    result = pytester.runpytest("--dsh-cache-baseline=b", "--dsh-cache-baseline-update")
    result.assert_outcomes(failed=1)
    assert not (pytester.path / "b").exists()
    assert summary(result) == "cache: no test sent model requests"


def test_a_baseline_file_that_does_not_read_fails_its_test_saying_so(
    pytester: pytest.Pytester,
) -> None:
    pytester.makefile(".ini", pytest=INI)
    pytester.makepyfile(
        test_one="""
        import httpx

        def test_one(dsh_mock):
            dsh_mock.lenient()
            body = {"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": "hi"}]}
            with httpx.Client(transport=dsh_mock.transport("httpx")) as client:
                client.post(
                    "https://api.deepseek.com/chat/completions",
                    json=body,
                    headers={"authorization": "Bearer sk-test"},
                )
        """
    )
    broken = pytester.path / "b" / "test_one" / "test_one.trace.jsonl"
    broken.parent.mkdir(parents=True)
    broken.write_text('{"format": "dsh-trace", "version": 9}\n', encoding="utf-8")
    result = pytester.runpytest("--dsh-cache-baseline=b")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*the cache baseline of test_one.py::test_one does not read: *dsh-trace format version 9*"
            "; rewrite it with --dsh-cache-baseline-update"
        ]
    )


def _cut_last_line(text: str) -> str:
    return text[: len(text) - 60]  # the last exchange cut off mid-line


def _header_only(text: str) -> str:
    return text.splitlines(keepends=True)[0]


def _negative_counts(text: str) -> str:
    return re.sub(r'"promptTokens":\s*\d+', '"promptTokens":-5', text)


def _a_cassette(text: str) -> str:
    return "format: dsh-cassette\nversion: 2\ninteractions: []\n"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("damage", "said"),
    [
        (_cut_last_line, "*does not read: *"),
        (_header_only, "*does not read: *holds no request*"),
        (_negative_counts, "*does not read: *"),
        (_a_cassette, "*does not read: *"),
        ("directory", "*does not read: *is not a file*"),
    ],
    ids=["cut-last-line", "header-only", "negative-counts", "a-cassette", "a-directory"],
)
def test_a_damaged_baseline_fails_its_test_instead_of_deciding_anything(
    pytester: pytest.Pytester, damage: object, said: str
) -> None:
    """A baseline is written whole: what a trace reader forgives in a live recording (a cut
    line, figures it leaves out, nothing at all) means the file is damaged, and the test says
    so rather than passing, or failing as a regression, against what is left of it."""
    pytester.makefile(".ini", pytest=INI)
    pytester.makepyfile(
        test_one="""
        import httpx

        def test_one(dsh_mock):
            dsh_mock.lenient()
            with httpx.Client(transport=dsh_mock.transport("httpx")) as client:
                for text in ("hi", "and again"):
                    body = {"model": "deepseek-v4-flash",
                            "messages": [{"role": "user", "content": text}]}
                    client.post("https://api.deepseek.com/chat/completions", json=body,
                                headers={"authorization": "Bearer sk-test"})
        """
    )
    pytester.runpytest("--dsh-cache-baseline=b", "--dsh-cache-baseline-update").assert_outcomes(
        passed=1
    )
    baseline = pytester.path / "b" / "test_one" / "test_one.trace.jsonl"
    umask = os.umask(0o022)
    os.umask(umask)
    assert baseline.stat().st_mode & 0o777 == 0o666 & ~umask  # as open() makes it, not 0600
    pytester.runpytest("--dsh-cache-baseline=b").assert_outcomes(passed=1)  # whole: it reads
    if damage == "directory":
        baseline.unlink()
        baseline.mkdir()
    else:
        assert callable(damage)
        whole = baseline.read_text(encoding="utf-8")
        damaged = damage(whole)
        assert damaged != whole
        baseline.write_text(damaged, encoding="utf-8")
    result = pytester.runpytest("--dsh-cache-baseline=b")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [f"{said.rstrip('*')}*; rewrite it with --dsh-cache-baseline-update"]
    )
    assert summary(result) == "cache: 1 test · efficiency – · 1 baseline that does not read"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--dsh-cache-baseline-update"],
            "--dsh-cache-baseline-update needs --dsh-cache-baseline DIR",
        ),
        (["--dsh-cache-baseline=pytest.ini"], "--dsh-cache-baseline pytest.ini: not a directory"),
        (
            ["--dsh-cache-baseline=b", "--dsh-cache-max-cost-increase=-3"],
            "--dsh-cache-max-cost-increase: must be a number ≥ 0, got -3.0",
        ),
    ],
)
def test_usage_errors(pytester: pytest.Pytester, args: list[str], message: str) -> None:
    pytester.makefile(".ini", pytest=INI)
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert message in result.stderr.str()


CASSETTE_SUITE = """
import pytest

@pytest.mark.dsh_lenient
@pytest.mark.dsh_cassette
async def test_chat(dsh_cassette_provider, dsh_agent):
    agent = dsh_agent(dsh_cassette_provider, system="Be terse. " * 50)
    await agent.run("Say hi")
    await agent.run("Again")
"""


@pytest.mark.slow
def test_a_cassette_test_keeps_the_same_baseline_recording_and_replaying(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DEEPSEEK_API_KEY", raising=False)
    monkeypatch.delenv("CI", raising=False)  # it records first, which CI=true refuses
    pytester.makefile(".ini", pytest=INI)
    pytester.makepyfile(test_cassette=CASSETTE_SUITE)
    # Recording: the mock answers and its log is the traffic.
    recorded = pytester.runpytest(
        "--dsh-record-mode=once", "--dsh-cache-baseline=b", "--dsh-cache-baseline-update"
    )
    recorded.assert_outcomes(passed=1)
    first = baseline_files(pytester.path / "b")
    assert list(first) == ["test_cassette/test_chat.trace.jsonl"]
    # Replaying: nothing reaches the mock; the cassette is the traffic, and it is the same.
    replayed = pytester.runpytest("--dsh-cache-baseline=b", "--dsh-cache-baseline-update")
    replayed.assert_outcomes(passed=1)
    assert baseline_files(pytester.path / "b") == first
    compared = pytester.runpytest("--dsh-cache-baseline=b")
    compared.assert_outcomes(passed=1)
    assert summary(compared) == (
        "cache: 1 test · efficiency 100.0 % (baseline 100.0 %) · cost +0.0 % · no regression"
    )


FAILING_SUITE = """
import os

import httpx2
from openai import OpenAI

SYSTEM = "\\\\n".join(f"Rule {i}: answer precisely, cite the file you read." for i in range(60))


def test_agent(dsh_mock):
    dsh_mock.lenient()
    http = httpx2.Client(transport=dsh_mock.transport("httpx2"))
    client = OpenAI(api_key="sk-test-0000", base_url=dsh_mock.base_url, http_client=http)
    history = []
    for step, question in enumerate(["read a.txt", "and b.txt", "compare them"]):
        system = SYSTEM
        if os.environ.get("AGENT_STAMPS"):
            system = f"Now: 2026-05-04T09:00:{step:02d}Z\\\\n" + SYSTEM
        history.append({"role": "user", "content": question})
        answer = client.chat.completions.create(
            model="deepseek-v4-flash", messages=[{"role": "system", "content": system}, *history]
        )
        history.append({"role": "assistant", "content": answer.choices[0].message.content})
    assert not os.environ.get("AGENT_FAILS"), "the agent's last answer is wrong"
"""


@pytest.mark.slow
def test_a_failing_test_never_hides_its_cache_regression(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dsh_testkit.cli import main

    pytester.makefile(".ini", pytest=INI)
    pytester.makepyfile(test_agent=FAILING_SUITE)
    pytester.runpytest("--dsh-cache-baseline=b", "--dsh-cache-baseline-update").assert_outcomes(
        passed=1
    )
    committed = baseline_files(pytester.path / "b")
    monkeypatch.setenv("AGENT_FAILS", "1")
    monkeypatch.setenv("AGENT_STAMPS", "1")
    # The gate: the test fails with its own error, and its traffic is still compared.
    gated = pytester.runpytest("--dsh-cache-baseline=b")
    gated.assert_outcomes(failed=1)
    gated.stdout.fnmatch_lines(
        [
            "*- Captured dsh cache call -*",
            "the test failed; its traffic, compared with the cache baseline "
            "b/test_agent/test_agent.trace.jsonl, is a regression:",
            "*the new run's traffic is marked failed (its test failed)*",
            "*volatile-system-text appeared on #2–#3*",
        ]
    )
    assert "1 failed test (traffic kept, marked failed)" in summary(gated)
    # The CI flow: the run folder keeps the failed test's traffic, marked, and compare fails it.
    written = pytester.runpytest("--dsh-cache-baseline=run", "--dsh-cache-baseline-update")
    written.assert_outcomes(failed=1)
    run_file = pytester.path / "run" / "test_agent" / "test_agent.trace.jsonl"
    header = json.loads(run_file.read_text(encoding="utf-8").split("\n")[0])
    assert header["failed"] is True and header["scenario"] == "test_agent.py::test_agent"
    assert main(["compare", str(pytester.path / "b"), str(pytester.path / "run")]) == 1
    # Even when the failing test sent exactly what the baseline holds.
    monkeypatch.delenv("AGENT_STAMPS")
    same = pytester.runpytest("--dsh-cache-baseline=again", "--dsh-cache-baseline-update")
    same.assert_outcomes(failed=1)
    assert main(["compare", str(pytester.path / "b"), str(pytester.path / "again")]) == 1
    # A committed baseline is never replaced by a failed run's traffic.
    kept = pytester.runpytest("--dsh-cache-baseline=b", "--dsh-cache-baseline-update")
    kept.assert_outcomes(failed=1)
    kept.stdout.fnmatch_lines(["*the test failed: its cache baseline * is kept as it was*"])
    assert baseline_files(pytester.path / "b") == committed


def test_a_baseline_keeps_stable_conversation_keys_and_renames_random_ones(tmp_path: Path) -> None:
    from dsh_testkit.pytest_plugin._baseline import stable_key, write_baseline
    from dsh_testkit.traces import Exchange, Trace, load_trace

    body = {"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": "hi"}]}
    keys = ["bugfix", "7f3e9a1c-0d2b-4e5f-8a9b-0c1d2e3f4a5b", "bugfix"]
    trace = Trace(
        exchanges=tuple(
            Exchange(index=i, endpoint="chat", body=body, conversation=key)
            for i, key in enumerate(keys)
        ),
        source="memory",
    )
    write_baseline(trace, tmp_path / "b.trace.jsonl", scenario="t.py::test_x")
    written = load_trace(tmp_path / "b.trace.jsonl")
    # A scenario's own key stays, so the baseline pairs with a proxy recording of the same
    # scenarios; a key drawn anew on every run is renamed, so the file is byte-stable.
    assert [e.conversation for e in written] == ["bugfix", "conversation-1", "bugfix"]

    renamed: dict[str, str] = {}
    assert stable_key("bugfix", renamed) == "bugfix"
    assert stable_key("test_checkout[en-2]", renamed) == "test_checkout[en-2]"
    assert stable_key("0b7c2f3e-1a2b-4c3d-8e9f-001122334455", renamed) == "conversation-1"
    assert stable_key("sess_9fK2aQ7xLm3Pz8Rt", renamed) == "conversation-2"
    assert stable_key("run-1733567890", renamed) == "conversation-3"
    assert stable_key("0b7c2f3e-1a2b-4c3d-8e9f-001122334455", renamed) == "conversation-1"
