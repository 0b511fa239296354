"""The report of a trace diagnosed on several processes is the report of one process: the same
diagnoses, in the same order, so every document, table and page made of it is the same bytes.

The corpus covers what links conversations to one another: runs started over (a request whose
parent is in another conversation), side calls, explicit keys, refused requests, a volatile
system prompt, real recordings of many projects, and the benchmark's own trace through the CLI.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Final

import pytest

from benchmarks.bench_traces import _write as write_benchmark_trace
from dsh_testkit.doctor import _diagnose as diagnose_module
from dsh_testkit.doctor import _pool as pool_module
from dsh_testkit.doctor import diagnose
from dsh_testkit.doctor._compact import compact_report, dumps_compact
from dsh_testkit.doctor._engine import Doctor
from dsh_testkit.doctor._model_facts import cache_granularity
from dsh_testkit.doctor._pool import POOL_THRESHOLD, can_pool, default_jobs, diagnose_pooled
from dsh_testkit.doctor._report import DoctorReport
from dsh_testkit.traces import Trace, load_trace

from ._bodies import SYSTEM, Traffic, assistant, body, floor, system, tokens_before, user
from ._real_wire import conversation_runs, har_document, load_runs, require_wire
from .test_branches import _main_line

ROOT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.skipif(not can_pool(), reason="this platform does not fork")


@pytest.fixture
def pooled_always(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Pool every trace, however small, and count the pooled runs (so that a test cannot pass
    by quietly running in one process)."""
    calls: list[int] = []

    def counted(trace: Trace, make_doctor: Any, jobs: int) -> Any:
        calls.append(jobs)
        return diagnose_pooled(trace, make_doctor, jobs)

    monkeypatch.setattr(diagnose_module, "POOL_THRESHOLD", 0)
    monkeypatch.setattr(diagnose_module, "diagnose_pooled", counted)
    return calls


def _same(one: DoctorReport, other: DoctorReport) -> None:
    assert [c.key for c in other.conversations] == [c.key for c in one.conversations]
    assert other == one
    assert dumps_compact(compact_report(other)) == dumps_compact(compact_report(one))


def _mixed_traffic() -> Traffic:
    """Every way one request reaches into another conversation, several times over."""
    traffic = Traffic()
    for run in range(3):
        _main_line(traffic, side_calls=run == 1)
        _main_line(traffic, side_calls=False, warm=True)  # started over: parent elsewhere
        _main_line(traffic, side_calls=True, headers=[("x-dsh-conversation", f"run-{run}")])
    # a volatile system prompt: every request diverges from the one before
    messages = [user("What changed?")]
    for step in range(4):
        request = body([system(f"{SYSTEM}\nNow: 2026-12-0{step + 1}T10:00:00Z"), *messages])
        traffic.add(request, answer=assistant(f"answer {step}"), hit=0)
        messages = [*messages, assistant(f"answer {step}"), user(f"and then {step}?")]
    # a refused request in the middle of a conversation, then the retry
    base = [system(SYSTEM), user("Refactor the module.")]
    traffic.add(body(base), answer=assistant("On it."), hit=0)
    grown = [*base, assistant("On it."), user("Go on.")]
    traffic.add(body(grown), status=400, error="invalid request")
    traffic.add(body(grown), answer=assistant("Done."), hit=floor(tokens_before(body(grown), 2)))
    return traffic


def test_a_pool_reports_exactly_what_one_process_reports(pooled_always: list[int]) -> None:
    trace = _mixed_traffic().trace()
    one = diagnose(trace)
    parents_elsewhere = [
        r
        for c in one.conversations
        for r in c.requests
        if r.parent is not None
        and next(
            x for d in one.conversations for x in d.requests if x.index == r.parent
        ).conversation
        != r.conversation
    ]
    assert parents_elsewhere, "the corpus must hold requests compared across conversations"
    assert len(one.conversations) > 6 and one.counts()
    for jobs in (2, 3, 8):
        _same(one, diagnose(trace, jobs=jobs))
    assert pooled_always == [2, 3, 8]


def test_the_restriction_to_one_conversation_holds_pooled(pooled_always: list[int]) -> None:
    trace = _mixed_traffic().trace()
    _same(diagnose(trace, conversation="#4"), diagnose(trace, conversation="#4", jobs=2))
    assert pooled_always == [2]


def test_the_real_recordings_of_many_projects_pooled(
    pooled_always: list[int], tmp_path: Path
) -> None:
    """Every recorded run of the real-wire fixture, one after another in one HAR trace (1,065
    requests of many projects' suites)."""
    runs = load_runs(require_wire())
    documents = [har_document(run) for run in conversation_runs(runs)]
    entries = [entry for document in documents for entry in document["log"]["entries"]]
    merged = {**documents[0], "log": {**documents[0]["log"], "entries": entries}}
    path = tmp_path / "every-run.har"
    path.write_text(json.dumps(merged), encoding="utf-8")
    trace = load_trace(path)
    assert len(trace) > 500
    one = diagnose(trace)
    assert len(one.conversations) > 50
    _same(one, diagnose(trace, jobs=2))
    assert pooled_always == [2]


def test_simulated_figures_stay_in_one_process(pooled_always: list[int]) -> None:
    trace = _mixed_traffic().trace()
    _same(diagnose(trace, simulate=True), diagnose(trace, simulate=True, jobs=2))
    assert pooled_always == []


def test_a_worker_that_dies_leaves_the_work_to_this_process() -> None:
    """A worker killed mid-way (out of memory, say) loses the conversations it took: the pool
    does not wait for them forever, and the report is still whole and right."""
    trace = _mixed_traffic().trace()
    parent = os.getpid()
    granularity = cache_granularity(trace)

    class Dying(Doctor):
        def add(self, exchange: Any, planned: Any = None) -> Any:
            if os.getpid() != parent:
                os._exit(9)
            if not exchange.index:  # this process waits, so that the workers take some
                time.sleep(0.5)
            return super().add(exchange, planned)

    def make_doctor() -> Doctor:
        return Dying(granularity=granularity, time_resolution=trace.time_resolution)

    broken: list[int] = []
    real = pool_module._pooled
    real_counter = pool_module._Counter

    def counted() -> Any:
        broken.append(1)
        return real_counter()

    def watched(context: Any, jobs: int) -> Any:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(pool_module, "_Counter", counted)
            return real(context, jobs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pool_module, "_pooled", watched)
        found = diagnose_pooled(trace, make_doctor, 3)
    assert broken, "a worker died, and this process took the work back"
    one = diagnose(trace)
    assert [c.key for c in one.conversations] == list(found)
    assert [list(c.requests) for c in one.conversations] == list(found.values())


_HOLD: list[int] = []
"""Set by a test: the forked child of that fork (1 = the first after it was set) never returns
from its fork hook, as a library's hook that deadlocks in a child."""
_FORKS: list[int] = [0]


def _count_fork() -> None:
    _FORKS[0] += 1


def _hold_in_child() -> None:
    if _HOLD and _FORKS[0] - _HOLD[0] == 1:
        time.sleep(3600)


if can_pool():
    os.register_at_fork(before=_count_fork, after_in_child=_hold_in_child)


def _event() -> Any:
    try:
        return multiprocessing.get_context("fork").Event() if can_pool() else None
    except OSError:  # no shared memory here (no /dev/shm): the pool runs in one process too
        return None


_TOOK: Any = _event()
"""Set by a worker's first request (inherited by each fork: one event for the test's pool)."""

_NO_EVENT: Final = "no shared memory for an event here (the pool itself falls back to one process)"


class _Slow(Doctor):
    """On this process's first request, waits until a worker has taken a conversation (when
    ``wait``), so that the workers' share is never empty by chance; a worker raises when
    ``fail``."""

    parent = os.getpid()
    wait = False
    fail = False

    def add(self, exchange: Any, planned: Any = None) -> Any:
        if os.getpid() != _Slow.parent:
            _TOOK.set()
            if _Slow.fail:
                raise ValueError("a worker's own failure")
        elif _Slow.wait and not exchange.index:
            assert _TOOK.wait(60), "no worker took a conversation within a minute"
        return super().add(exchange, planned)


def _pool_with(trace: Trace, jobs: int, *, wait: bool, fail: bool = False) -> Any:
    """``diagnose_pooled`` with :class:`_Slow` doctors; returns the result, the conversations
    as each process gave them, and the workers' exit codes."""
    if _TOOK is None:
        pytest.skip(_NO_EVENT)
    granularity = cache_granularity(trace)
    _Slow.parent, _Slow.wait, _Slow.fail = os.getpid(), wait, fail
    _TOOK.clear()

    def make_doctor() -> Doctor:
        return _Slow(granularity=granularity, time_resolution=trace.time_resolution)

    taken: list[Any] = []
    codes: list[int | None] = []
    real, real_stop = pool_module._pooled, pool_module._stop

    def watched(context: Any, jobs: int) -> Any:
        found = real(context, jobs)
        taken.extend(found)
        return found

    def stopped(started: list[Any]) -> None:
        workers = list(started)
        real_stop(started)
        codes.extend(w.process.exitcode for w in workers)

    def expired(*_: Any) -> None:
        raise TimeoutError("the pool waited for a worker that never started")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.alarm(60)
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(pool_module, "_pooled", watched)
            patch.setattr(pool_module, "_stop", stopped)
            return diagnose_pooled(trace, make_doctor, jobs), taken, codes
    finally:
        _Slow.wait = _Slow.fail = False
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.parametrize("jobs", [2, 3])
def test_a_worker_held_in_a_fork_hook_is_not_waited_for(jobs: int) -> None:
    """OpenTelemetry's SDK registers a fork hook that can wait forever in the child (its tracer
    provider made before ``concurrent.futures.thread`` was imported): this suite hung on it once.
    A worker that never starts takes no conversation: the pool ends without it, the report
    whole and right, and no process left behind (the held one killed). With three jobs the
    other worker's share comes back, and it exits by itself."""
    trace = _mixed_traffic().trace()
    _HOLD[:] = [_FORKS[0]]
    try:
        found, taken, codes = _pool_with(trace, jobs, wait=jobs == 3)
    finally:
        _HOLD.clear()
    one = diagnose(trace)
    assert [c.key for c in one.conversations] == list(found)
    assert [list(c.requests) for c in one.conversations] == list(found.values())
    assert multiprocessing.active_children() == []
    by_worker = [n for n, items in taken if any(isinstance(d, tuple) for d in items)]
    if jobs == 3:
        assert by_worker, "the worker that started took conversations, and they came back"
        assert sorted(codes, key=str) == [-signal.SIGKILL, 0]
    else:
        assert not by_worker and len(taken) == len(one.conversations)
        assert codes == [-signal.SIGKILL]


def test_what_a_worker_raises_is_raised_here() -> None:
    """A worker's failure is the caller's, as one process's would be (not a quiet rerun)."""
    trace = _mixed_traffic().trace()
    with pytest.raises(ValueError, match="a worker's own failure"):
        _pool_with(trace, 2, wait=True, fail=True)
    assert multiprocessing.active_children() == []


def test_jobs_below_one_are_refused() -> None:
    with pytest.raises(ValueError, match="jobs must be 1 or more, not 0"):
        diagnose(_mixed_traffic().trace(), jobs=0)


def test_a_small_trace_is_not_worth_a_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*_: Any) -> Any:
        raise AssertionError("pooled below the threshold")

    monkeypatch.setattr(diagnose_module, "diagnose_pooled", refuse)
    trace = _mixed_traffic().trace()
    assert len(trace) < POOL_THRESHOLD
    _same(diagnose(trace), diagnose(trace, jobs=4))


def _cli(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "dsh_testkit.cli", "cache-report", *args],
        capture_output=True,
        cwd=ROOT,
        check=False,
    )


@pytest.mark.slow
def test_the_cli_pools_the_benchmark_trace_to_the_same_bytes(tmp_path: Path) -> None:
    """The benchmark's own trace (conversations of 20 requests, ten interleaved, one in ten with
    a timestamp in its system prompt) above the pool's threshold: ``--json``, the text report and
    the page are the same bytes on one and on three processes."""
    path = tmp_path / "bench.trace"
    write_benchmark_trace(path, POOL_THRESHOLD + 400)
    assert len(load_trace(path)) >= POOL_THRESHOLD
    outputs = {}
    for jobs in ("1", "3"):
        page = tmp_path / f"page-{jobs}.html"
        as_json = _cli(str(path), "--json", "--jobs", jobs)
        text = _cli(str(path), "--jobs", jobs, "--html", str(page))
        assert as_json.returncode == 0 and text.returncode == 0, as_json.stderr + text.stderr
        outputs[jobs] = (as_json.stdout, text.stdout, page.read_bytes())
    assert outputs["3"] == outputs["1"]
    document = json.loads(outputs["1"][0])
    assert document["causeCounts"]["volatile-system-text"] > 0


def test_jobs_on_the_command_line_are_checked(tmp_path: Path) -> None:
    path = tmp_path / "bench.trace"
    write_benchmark_trace(path, 40)
    refused = _cli(str(path), "--jobs", "0")
    assert refused.returncode == 2
    assert b"--jobs must be at least 1, got 0" in refused.stderr
    assert _cli(str(path), "--jobs", "2", "--json").returncode == 0


def test_the_default_is_every_core_this_process_may_use() -> None:
    assert default_jobs() == len(os.sched_getaffinity(0))
