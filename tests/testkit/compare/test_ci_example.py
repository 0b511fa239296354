"""The CI guide's GitHub Actions workflow runs as printed (docs/guides/ci.md).

A project is built from the guide's test file and its baseline written with the guide's command
(the baseline a team commits). Then every ``run:`` step of the guide's workflow runs with
``bash -e`` as a runner would, offline, in a fresh copy of the project: the ``if:`` conditions are
honoured (a failed step skips what follows unless ``always()``), ``${{ … }}`` expressions are
filled in, and ``gh`` is a stand-in that records the comment. Only the install step is left out:
the package is installed here already, and installing needs the network.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
GUIDE = ROOT / "docs" / "guides" / "ci.md"
EXAMPLE = re.compile(r"^<!-- ci-example: (\S+) -->\n```\w+\n(.*?)^```", re.M | re.S)
EXPRESSIONS = {
    "github.token": "token-for-the-test",
    "github.event.pull_request.number": "42",
    "github.event_name": "pull_request",
}
USER_PYTEST_INI = """\
[pytest]
filterwarnings = error
asyncio_default_fixture_loop_scope = function
"""
FAKE_GH = """#!/usr/bin/env python3
import json, os, sys
from pathlib import Path

state = Path(os.environ["FAKE_GH_STATE"])
comments = json.loads(state.read_text()) if state.exists() else []
args = sys.argv[1:]
assert args[:2] == ["pr", "comment"], args
assert os.environ.get("GH_TOKEN") == "token-for-the-test", "GH_TOKEN not passed"
body = Path(args[args.index("--body-file") + 1]).read_text(encoding="utf-8")
if "--edit-last" in args:
    if not comments:
        print("no comments found for current user", file=sys.stderr)
        sys.exit(1)
    comments[-1] = {"pr": args[2], "body": body}
else:
    comments.append({"pr": args[2], "body": body})
state.write_text(json.dumps(comments))
"""
BREAK = (
    "    return SYSTEM\n",
    "    return f\"Current time: {__import__('datetime').datetime.now().isoformat()}\\n\" + SYSTEM\n",
)
"""The harness change under review: a timestamp at the top of the system prompt."""


def examples() -> dict[str, str]:
    return {m.group(1): m.group(2) for m in EXAMPLE.finditer(GUIDE.read_text(encoding="utf-8"))}


def substitute(text: str) -> str:
    return re.sub(r"\$\{\{\s*(.*?)\s*\}\}", lambda m: EXPRESSIONS[m.group(1)], text)


def should_run(condition: str | None, failed: bool, cwd: Path) -> bool:
    if condition is None:
        return not failed
    always, holds = False, True
    for term in (t.strip() for t in condition.split("&&")):
        if term == "always()":
            always = True
        elif found := re.fullmatch(r"hashFiles\('([^']+)'\) != ''", term):
            holds = holds and (cwd / found.group(1)).exists()
        elif found := re.fullmatch(r"github\.event_name == '(\w+)'", term):
            holds = holds and EXPRESSIONS["github.event_name"] == found.group(1)
        else:
            raise AssertionError(f"the test cannot evaluate the workflow condition {term!r}")
    return holds and (always or not failed)


def run_workflow(
    project: Path,
    tmp: Path,
    *,
    may_fail: tuple[str, ...] = ("Compare with the committed baseline",),
) -> tuple[list[tuple[str, int]], dict[str, Any]]:
    """Every ``run:`` step of the guide's workflow in ``project``; (name, exit status) of each
    step that ran, and what the runner kept (the step summary, the comments)."""
    workflow = yaml.safe_load(examples()["workflow"])
    job = workflow["jobs"]["cache"]
    fake_bin = tmp / "bin"
    fake_bin.mkdir(exist_ok=True)
    (fake_bin / "gh").write_text(FAKE_GH, encoding="utf-8")
    (fake_bin / "gh").chmod(0o755)
    summary = tmp / "step-summary.md"
    env = {
        **os.environ,
        **{k: str(v) for k, v in job.get("env", {}).items()},
        "PATH": os.pathsep.join(
            [str(fake_bin), str(Path(sys.executable).parent), os.environ["PATH"]]
        ),
        "GITHUB_STEP_SUMMARY": str(summary),
        "FAKE_GH_STATE": str(tmp / "comments.json"),
    }
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_ADDOPTS", None)
    ran: list[tuple[str, int]] = []
    failed = False
    installs = 0
    for step in job["steps"]:
        if "run" not in step:
            continue  # actions (checkout, setup-python, upload-artifact) run on GitHub only
        if step.get("name") == "Install":
            installs += 1
            continue
        if not should_run(step.get("if"), failed, project):
            continue
        step_env = {**env, **{k: substitute(str(v)) for k, v in step.get("env", {}).items()}}
        result = subprocess.run(
            ["bash", "-e", "-c", substitute(step["run"])],
            cwd=project,
            env=step_env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        ran.append((step["name"], result.returncode))
        if result.returncode:
            failed = True
            assert step["name"] in may_fail, f"{step['name']}\n{result.stdout}\n{result.stderr}"
    assert installs == 1
    comments = tmp / "comments.json"
    return ran, {
        "summary": summary.read_text(encoding="utf-8") if summary.exists() else "",
        "comments": json.loads(comments.read_text(encoding="utf-8")) if comments.exists() else [],
    }


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The project as committed: the guide's test file, and its baseline."""
    project = tmp_path_factory.mktemp("repository")
    (project / "tests").mkdir()
    (project / "tests" / "test_agent.py").write_text(examples()["test_agent.py"], encoding="utf-8")
    (project / "pytest.ini").write_text(USER_PYTEST_INI, encoding="utf-8")
    written = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--dsh-cache-baseline=.dsh-cache-baseline",
            "--dsh-cache-baseline-update",
        ],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert written.returncode == 0, written.stdout + written.stderr
    assert (
        project
        / ".dsh-cache-baseline"
        / "tests"
        / "test_agent"
        / "test_the_agent_answers_three_questions.trace.jsonl"
    ).is_file()
    return project


def checkout(repository: Path, tmp: Path) -> Path:
    project = tmp / "checkout"
    shutil.copytree(repository, project)
    return project


STEPS = [
    "Run the suite offline, keeping this run's traffic",
    "Compare with the committed baseline",
    "Put the report on the job's page",
    "Comment on the pull request",
]


@pytest.mark.slow
def test_an_unchanged_harness_passes_and_reports_identical(
    repository: Path, tmp_path: Path
) -> None:
    ran, kept = run_workflow(checkout(repository, tmp_path), tmp_path)
    assert ran == [(name, 0) for name in STEPS]
    assert kept["summary"].startswith("### Cache compare: identical\n")
    assert kept["comments"] == [{"pr": "42", "body": kept["summary"]}]


@pytest.mark.slow
def test_a_timestamp_in_the_system_prompt_fails_the_job_and_is_reported(
    repository: Path, tmp_path: Path
) -> None:
    project = checkout(repository, tmp_path)
    agent = project / "tests" / "test_agent.py"
    text = agent.read_text(encoding="utf-8")
    assert text.count(BREAK[0]) == 1
    agent.write_text(text.replace(*BREAK), encoding="utf-8")
    ran, kept = run_workflow(project, tmp_path)
    assert ran == [(STEPS[0], 0), (STEPS[1], 1), (STEPS[2], 0), (STEPS[3], 0)]
    summary = kept["summary"]
    assert summary.startswith("### Cache compare: regression\n")
    assert (
        "| `tests/test_agent.py::test_the_agent_answers_three_questions` | **regression** |"
        in summary
    )
    assert "`volatile-system-text` appeared (loss)" in summary
    assert re.search(r"estimated cost rose [\d.]+ %", summary)
    assert kept["comments"] == [{"pr": "42", "body": summary}]


FAIL = (
    "    assert len(dsh_mock.requests) == 3\n",
    "    assert len(dsh_mock.requests) == 4, 'the agent asked one question too few'\n",
)
"""A test that fails (its assertion), whatever its traffic did to the cache."""


@pytest.mark.slow
def test_a_failing_test_still_has_its_cache_regression_compared_and_reported(
    repository: Path, tmp_path: Path
) -> None:
    project = checkout(repository, tmp_path)
    agent = project / "tests" / "test_agent.py"
    text = agent.read_text(encoding="utf-8")
    assert text.count(BREAK[0]) == 1 and text.count(FAIL[0]) == 1
    agent.write_text(text.replace(*BREAK).replace(*FAIL), encoding="utf-8")
    ran, kept = run_workflow(project, tmp_path, may_fail=(STEPS[0], STEPS[1]))
    # The suite fails; the comparison still runs (it used to be skipped, or to pass with the
    # test "removed"), fails on the failed test's traffic, and is reported.
    assert ran == [(STEPS[0], 1), (STEPS[1], 1), (STEPS[2], 0), (STEPS[3], 0)]
    summary = kept["summary"]
    assert summary.startswith("### Cache compare: regression\n")
    assert "the new run's traffic is marked failed (its test failed)" in summary
    assert "`volatile-system-text` appeared (loss)" in summary
