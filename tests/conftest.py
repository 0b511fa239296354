"""Shared test configuration: the hypothesis profiles and pytester isolation (helpers live in
tests/_support.py)."""

from __future__ import annotations

import importlib
import itertools
import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, settings

# "ci" is derandomized so a CI run is reproducible; "dev" explores more. CI=true selects "ci".
settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    max_examples=100,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, max_examples=200)
# "fast" is the edit-test loop's (make check): every property still runs, on fewer examples.
settings.register_profile(
    "fast",
    derandomize=True,
    deadline=None,
    max_examples=12,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))


_XDIST_WORKER_VARIABLES = (
    "PYTEST_XDIST_WORKER",
    "PYTEST_XDIST_WORKER_COUNT",
    "PYTEST_XDIST_TESTRUNUID",
)

# What the runs inside pytester import. pytester takes a snapshot of sys.modules when it starts
# and drops every module a run imported when that run ends, so each run imported these anew
# (openai alone is ~600 modules), and LangSmith's plugin (below) with its ~230: the three
# test_plugin*.py files took 54 s, 7 s now. Imported before pytester takes its snapshot, they
# stay; the runs' own test modules and conftests are still dropped after each run.
_PYTESTER_PRELOAD = (
    "openai",
    "vcr",
    "dsh_testkit.cassettes",
    "dsh_testkit.mock",
    "dsh_testkit.replay",
    "dsh_testkit.pytest_plugin._cassette",
    "dsh_testkit.pytest_plugin._support",
    "dsh_testkit.pytest_plugin._strict",
)


# The plugins this run was told to leave out (``-p no:NAME`` in PYTEST_ADDOPTS; the Makefile
# leaves out LangSmith's, which imports ~230 modules at every start). pytester clears
# PYTEST_ADDOPTS for its runs; these are given back to them, nothing else.
def _left_out_plugins(addopts: str) -> str:
    """``-p no:NAME`` for each plugin ``addopts`` leaves out (as ``-p no:NAME`` or ``-pno:NAME``)."""
    words = addopts.split()
    names = [word[2:] for word in words if word.startswith("-pno:")]
    names += [
        after
        for word, after in itertools.pairwise(words)
        if word == "-p" and after.startswith("no:")
    ]
    return " ".join(f"-p {name}" for name in names)


_LEFT_OUT_PLUGINS = _left_out_plugins(os.environ.get("PYTEST_ADDOPTS", ""))


@pytest.fixture(autouse=True)
def _pytester_runs_as_a_fresh_session(request: pytest.FixtureRequest) -> Iterator[None]:
    """A ``pytester`` run is a session of its own, not part of this one's xdist worker.

    pytest-xdist marks its workers with ``PYTEST_XDIST_*`` variables, and an in-process
    ``runpytest`` inherits them: plugins then take the inner run for a worker too (syrupy prints
    no snapshot summary on a worker). The variables are dropped for tests that use ``pytester``.
    The modules its runs import are imported first, and the plugins left out of this run are
    left out of its runs (see above).
    """
    if "pytester" not in request.fixturenames:
        yield
        return
    for name in _PYTESTER_PRELOAD:
        importlib.import_module(name)
    request.getfixturevalue("pytester")  # its snapshot of sys.modules now holds them
    with pytest.MonkeyPatch.context() as patch:
        for name in _XDIST_WORKER_VARIABLES:
            patch.delenv(name, raising=False)
        if _LEFT_OUT_PLUGINS:
            patch.setenv("PYTEST_ADDOPTS", _LEFT_OUT_PLUGINS)
        yield


def pytest_configure(config: pytest.Config) -> None:
    """Under ``coverage run`` (make pytest), measure this process but not what tests start.

    ``patch = ["subprocess"]`` (pyproject.toml) makes every Python subprocess of ``coverage run``
    measure itself, through ``COVERAGE_PROCESS_CONFIG``: that is how the pytest-xdist workers are
    measured. The variable is dropped in every process that runs tests (a worker, or a run
    without xdist), so the programs tests start (the CLI, pytest in a temporary project, the docs'
    examples, the benchmarks' smoke run) run unmeasured, exactly as in a serial ``coverage run``:
    measuring them doubled their cost and turned the coverage figure into a different measure.
    """
    if config.getoption("numprocesses", None) and not hasattr(config, "workerinput"):
        return  # the xdist controller: its workers are yet to start, measured
    os.environ.pop("COVERAGE_PROCESS_CONFIG", None)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests marked slow run first (otherwise in collection order): on pytest-xdist workers
    the longest tests then start early, and the run does not end on one worker alone."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
