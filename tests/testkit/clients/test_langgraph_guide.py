"""The LangGraph guide (docs/guides/langgraph.md), walked as a new user walks it: a fresh
environment where the guide's install line runs (offline, from wheels repacked from this
environment: tests/_install.py), the guide's files written in the order it gives them, and each
of its commands run as printed, with what the guide says each one does checked. Then the two
things it says would fail: the agent on plain ``ChatDeepSeek`` (its printed output), and a
timestamp at the top of the system prompt against the baseline."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from pathlib import Path

import pytest

from tests._install import checkout, commands, fresh_venv, offline_env, sh, wheelhouse

ROOT = Path(__file__).resolve().parents[3]
GUIDE = ROOT / "docs" / "guides" / "langgraph.md"
TITLED = re.compile(r'^```\w+ title="([^"]+)"\n(.*?)^```', re.S | re.M)
STEP = re.compile(r"^<!-- langgraph-step: (\S+) -->\n```sh\n(.*?)^```", re.S | re.M)
OUTPUT = re.compile(r"^<!-- langgraph-output: ([^>]+?) -->\n```text\n(.*?)^```", re.S | re.M)
FRAMEWORK = ("langgraph", "langchain", "langchain-deepseek")

TIME_FIRST = (
    "    return create_agent(model, [get_weather, get_time], system_prompt=SYSTEM_PROMPT)\n",
    "    return create_agent(model, [get_weather, get_time], middleware=[_the_time_first])\n",
)
TIME_FIRST_MIDDLEWARE = """

import time

from langchain.agents.middleware import dynamic_prompt


@dynamic_prompt
def _the_time_first(request) -> str:
    return f"Now: {time.time_ns()}\\n{SYSTEM_PROMPT}"
"""
"""A harness change that costs every cache hit: the time at the top of the system prompt."""


def guide() -> str:
    return GUIDE.read_text(encoding="utf-8")


def test_the_guide_holds_its_files_and_steps() -> None:
    assert [name for name, _ in TITLED.findall(guide())] == [
        "agent.py",
        "pytest.ini",
        "tests/test_agent.py",
        "tests/test_cassette.py",
    ]
    assert [name for name, _ in STEP.findall(guide())] == [
        "install",
        "first-run",
        "cassette",
        "baseline",
    ]
    (install,) = commands(dict(STEP.findall(guide()))["install"])
    assert install.split()[:3] == ["pip", "install", "./dsh-testkit"]
    assert set(install.split()[3:]) == set(FRAMEWORK)


def test_the_guide_names_the_pinned_versions() -> None:
    pins = dict(
        spec.split("==")
        for spec in tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))[
            "dependency-groups"
        ]["dev"]
        if "==" in spec
    )
    for name in ("langgraph", "langchain", "langchain-deepseek", "langchain-openai"):
        assert f"{name} {pins[name]}" in guide(), name


@pytest.mark.slow
def test_a_new_user_walks_the_guide_to_a_cassette_and_a_baseline(tmp_path: Path) -> None:
    files = dict(TITLED.findall(guide()))
    steps = {name: commands(block) for name, block in STEP.findall(guide())}
    (tmp_path / "dsh-testkit").mkdir()
    checkout(tmp_path / "dsh-testkit")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    wheels = wheelhouse(
        [
            *pyproject["project"]["dependencies"],
            *pyproject["build-system"]["requires"],
            *FRAMEWORK,
        ],
        tmp_path / "wheels",
    )
    env = dict(offline_env(fresh_venv(tmp_path / "venv", wheels), wheels))
    installed = sh(steps["install"][0], tmp_path, env)
    assert installed.returncode == 0, installed.stdout + installed.stderr

    project = tmp_path / "my-agent"
    (project / "tests").mkdir(parents=True)
    for name in ("agent.py", "pytest.ini", "tests/test_agent.py"):
        (project / name).write_text(files[name], encoding="utf-8")

    # The first test: the mock answers, thinking on, the reasoning passed back.
    (first,) = steps["first-run"]
    result = sh(first, project, env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 passed" in result.stdout

    # The cassette: an error that says how to record it, then recorded once, then replayed.
    (project / "tests" / "test_cassette.py").write_text(
        files["tests/test_cassette.py"], encoding="utf-8"
    )
    before = sh(first, project, env)
    assert before.returncode != 0
    assert "CassetteNotFound" in before.stdout and "--dsh-record-mode=once" in before.stdout
    record, replay = steps["cassette"]
    recorded = sh(record, project, env)
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    cassette = project / "tests/cassettes/test_cassette/test_the_agent_from_its_cassette.yaml"
    assert f"`{cassette.relative_to(project)}`" in guide()
    written = cassette.read_bytes()
    replayed = sh(replay, project, env)
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
    assert "4 passed" in replayed.stdout
    assert cassette.read_bytes() == written

    # The baseline: written, then compared; no regression.
    update, check = steps["baseline"]
    result = sh(update, project, env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert len(list((project / ".dsh-cache-baseline").rglob("*.trace.jsonl"))) == 4
    result = sh(check, project, env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no regression" in result.stdout

    # What the guide says would fail. Plain ChatDeepSeek: refused, as printed.
    agent = project / "agent.py"
    original = agent.read_text(encoding="utf-8")
    agent.write_text(
        original.replace("model = ChatDeepSeekWithReasoning(", "model = ChatDeepSeek("),
        encoding="utf-8",
    )
    plain = sh("pytest tests/test_agent.py::test_the_agent_calls_both_tools", project, env)
    assert plain.returncode == 1
    (printed,) = dict(OUTPUT.findall(guide())).values()
    for line in printed.splitlines():
        if line != "…":
            pattern = line.replace("[", "[[]").replace("…", "*")
            assert any(fnmatch.fnmatchcase(out, pattern) for out in plain.stdout.splitlines()), (
                line,
                plain.stdout,
            )

    # The time at the top of the system prompt: the baseline catches it, naming the cause.
    assert original.count(TIME_FIRST[0]) == 1
    agent.write_text(original.replace(*TIME_FIRST) + TIME_FIRST_MIDDLEWARE, encoding="utf-8")
    regressed = sh(f"{check} tests/test_agent.py", project, env)
    assert regressed.returncode == 1
    assert "CacheRegression" in regressed.stdout
    assert "efficiency 0.0 % (baseline 100.0 %)" in regressed.stdout
    assert "volatile-system-text" in regressed.stdout
