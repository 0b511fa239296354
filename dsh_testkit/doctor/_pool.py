"""A trace's conversations diagnosed on every core, the report the same as one process's.

Once every request is linked to its conversation, conversations are independent: a request is
compared only with its parent, and what the doctor keeps between requests (positions, the
once-per-conversation notes) is kept per conversation. So:

1. **Plan** (this process, in trace order): each request's wire view and link. The brancher
   decides the conversations; it reads every earlier request, so it is the one sequential step.
2. **Diagnose** (this process and ``jobs - 1`` forked ones, which inherit the trace and the
   plan: nothing is sent to them): each takes the next conversation not yet taken, largest
   first, from a counter they share, and diagnoses its requests in trace order with the planned
   links. A parent in another conversation (a run started over repeats an earlier
   conversation's request) is held first, as one process would have held it.
3. **Merge**: the diagnoses come back by conversation and are put in the order one process
   gives (conversations by first request), so every report made of them is the same, byte for
   byte.

Figures the simulator makes are not pooled: its cache is one sequence shared by every
conversation (a new session hits an earlier one's system prompt), so a simulated report is
diagnosed in one process.
"""

from __future__ import annotations

import concurrent.futures.thread  # noqa: F401  (imported for its fork hooks: see _pooled)
import contextlib
import dataclasses
import gc
import multiprocessing
import multiprocessing.connection
import os
from collections.abc import Callable, Sequence
from typing import Any, Final

from ..traces import Trace
from ._engine import Doctor, Planned
from ._report import Finding, RequestDiagnosis, Segment

__all__ = [
    "POOL_THRESHOLD",
    "can_pool",
    "default_jobs",
    "diagnose_pooled",
    "flat_diagnosis",
    "unflat_diagnosis",
]

POOL_THRESHOLD: Final = 2000
"""Fewer requests than this are diagnosed in one process whatever ``jobs`` says: starting the
workers costs more than they save."""

_STATE: dict[str, Any] = {}
"""What the forked workers inherit (set just before the fork, cleared after)."""


def default_jobs() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - macOS and Windows have no affinity call
        return max(1, os.cpu_count() or 1)


def can_pool() -> bool:
    """Whether this platform forks (the workers inherit the plan instead of receiving it)."""
    return "fork" in multiprocessing.get_all_start_methods()


def diagnose_pooled(
    trace: Trace, make_doctor: Callable[[], Doctor], jobs: int
) -> dict[str, list[RequestDiagnosis]]:
    """Every request of ``trace`` diagnosed by ``jobs`` processes, by conversation, in the
    order one :class:`Doctor` would give them (conversations by first request)."""
    planner = make_doctor()
    plans = [planner.plan(exchange) for exchange in trace]
    members: dict[str, list[int]] = {}
    for i, planned in enumerate(plans):
        members.setdefault(planned.link.conversation, []).append(i)
    keys = list(members)
    # Largest first (by messages sent, the cost's main term), so that the last ones taken are
    # small and the processes finish together.
    weights = [sum(1 + len(plans[i].view.messages) for i in members[key]) for key in keys]
    order = sorted(range(len(keys)), key=lambda k: (-weights[k], k))
    jobs = min(jobs, len(keys))  # a process per conversation at most
    context = multiprocessing.get_context("fork")
    counter: Any = None
    if jobs > 1:
        try:
            counter = context.Value("q", 0)
        except (OSError, ImportError):  # no shared memory here (no /dev/shm): one process
            jobs = 1
    if counter is None:
        counter = _Counter()
    _STATE.update(
        trace=trace,
        plans=plans,
        members=[members[key] for key in keys],
        order=order,
        counter=counter,
        make_doctor=make_doctor,
    )
    # The workers only read what they inherit: frozen, the collector never touches (and so
    # never copies) those pages in them. (Not when the caller froze objects itself: unfreezing
    # would thaw those too.)
    freeze = jobs > 1 and gc.get_freeze_count() == 0
    if freeze:
        gc.freeze()
    try:
        found = _pooled(context, jobs) if jobs > 1 else _work(0)
    finally:
        _STATE.clear()
        if freeze:
            gc.unfreeze()
    # this process's own diagnoses never crossed a pipe: only the workers' are flat
    by_number = {
        number: [d if isinstance(d, RequestDiagnosis) else unflat_diagnosis(d) for d in items]
        for number, items in found
    }
    missing = [keys[k] for k in range(len(keys)) if k not in by_number]
    if missing:  # pragma: no cover - every conversation is taken by exactly one process
        raise RuntimeError(f"the pool lost conversations {missing}")
    return {key: by_number[k] for k, key in enumerate(keys)}


class _Counter:
    """The shared counter's stand-in when one process takes every conversation."""

    def __init__(self) -> None:
        self.value = 0

    def get_lock(self) -> contextlib.nullcontext[None]:
        return contextlib.nullcontext()


_Taken = list[tuple[int, list[Any]]]
"""Conversations a process diagnosed, by number: a worker's diagnoses flat (tuples, for the
pipe), this process's as they are."""


def _pooled(context: Any, jobs: int) -> _Taken:
    """This process and ``jobs - 1`` forked ones take the conversations.

    A process that cannot be started, or a worker that dies (killed for memory, say), leaves the
    whole diagnosis to this process: the conversations a dead worker took are not known to be
    done. A worker that never starts its share is not waited for once every conversation is
    in: a library's fork hook can hold a forked child forever (OpenTelemetry's SDK, in a process
    where its tracer provider was made before ``concurrent.futures.thread`` was imported, waits
    in the child on a lock taken before the fork), and such a child never takes a conversation.
    Importing ``concurrent.futures.thread`` with this module registers that lock's own fork
    hooks first, so a provider made after the doctor was imported no longer holds a child.
    """
    started: list[_Worker] = []
    try:
        for number in range(1, jobs):
            receive, send = context.Pipe(duplex=False)
            try:
                process = context.Process(target=_serve, args=(number, send), daemon=True)
                process.start()
            except BaseException:
                receive.close()
                raise
            finally:
                send.close()
            started.append(_Worker(process, receive))
    except (OSError, RuntimeError):  # no process or pipe to be had (limits)
        return _alone(started)
    total = len(_STATE["order"])
    try:
        found = _work(0)
        waiting = {worker.receive: worker for worker in started}
        while len(found) < total:
            if not waiting:  # pragma: no cover - every conversation is taken by someone
                raise RuntimeError("the pool's conversations were neither done nor taken")
            ready: list[Any] = multiprocessing.connection.wait(list(waiting))
            for receive in ready:
                worker = waiting.pop(receive)
                try:
                    kind, value = receive.recv()
                except (EOFError, OSError):  # it died: what it took is lost
                    return _alone(started)
                worker.heard = True
                if kind == "failed":
                    raise value  # as one process would have raised it
                found.extend(value)
    finally:
        _stop(started)
    return found


class _Worker:
    """A forked worker, the pipe its share comes back on, and whether it came."""

    __slots__ = ("heard", "process", "receive")

    def __init__(self, process: Any, receive: Any) -> None:
        self.process = process
        self.receive = receive
        self.heard = False


def _serve(number: int, send: Any) -> None:
    """A forked worker: its share sent back whole, or what it raised."""
    try:
        try:
            message: tuple[str, Any] = ("done", _work(number))
        except Exception as exc:  # any failure goes back, to be raised there
            message = ("failed", exc)
        try:
            send.send(message)
        except Exception as exc:  # the share or the error would not pickle
            send.send(("failed", RuntimeError(f"a pool worker could not send back: {exc!r}")))
    finally:
        send.close()


def _alone(started: list[_Worker]) -> _Taken:
    """Every conversation diagnosed by this process, from the first (what started workers
    took is not trusted; a dead one may have died holding the shared counter's lock)."""
    _stop(started)
    _STATE["counter"] = _Counter()
    return _work(0)


def _stop(started: list[_Worker]) -> None:
    """End the workers. One whose share came back exits by itself: it is waited for. One never
    heard from (still starting, held in a fork hook, or dead) is killed: not terminated, since a
    forked child would run the application's own SIGTERM handler."""
    for worker in started:
        worker.receive.close()
        if worker.heard:
            worker.process.join(10)
        if worker.process.is_alive():
            worker.process.kill()
        worker.process.join()
    started.clear()


def _work(worker: int) -> _Taken:
    """One process's share: conversations taken from the shared counter until none is left
    (``worker`` 0 is this process: its diagnoses stay objects; a worker's are made flat)."""
    trace: Trace = _STATE["trace"]
    plans: Sequence[Planned] = _STATE["plans"]
    members: Sequence[Sequence[int]] = _STATE["members"]
    order: Sequence[int] = _STATE["order"]
    counter = _STATE["counter"]
    doctor: Doctor = _STATE["make_doctor"]()
    exchanges = trace.exchanges
    out: _Taken = []
    flat = worker != 0
    while True:
        with counter.get_lock():
            taken = counter.value
            if taken >= len(order):
                break
            counter.value = taken + 1
        number = order[taken]
        diagnoses: list[Any] = []
        for i in members[number]:
            planned = plans[i]
            parent = planned.link.parent
            if parent is not None and plans[parent].link.conversation != planned.link.conversation:
                doctor.hold(exchanges[parent], plans[parent])
            diagnosis = doctor.add(exchanges[i], planned)
            diagnoses.append(flat_diagnosis(diagnosis) if flat else diagnosis)
        out.append((number, diagnoses))
    return out


# -- the way back ----------------------------------------------------------------------------
# A diagnosis crosses the pipe as a tuple of its fields (findings and segments as tuples too):
# pickle writes and reads plain tuples in C, where a frozen dataclass costs a Python call and a
# setattr per field each way (0.24 s against 1.7 s for the 10,000-request benchmark's report).

_REQUEST_FIELDS: Final = tuple(f.name for f in dataclasses.fields(RequestDiagnosis))
_FINDING_FIELDS: Final = tuple(f.name for f in dataclasses.fields(Finding))
_FINDINGS: Final = _REQUEST_FIELDS.index("findings")
_SEGMENTS: Final = _REQUEST_FIELDS.index("segments")
_new = object.__new__
_set = object.__setattr__


def flat_diagnosis(diagnosis: RequestDiagnosis) -> tuple[Any, ...]:
    values = [getattr(diagnosis, name) for name in _REQUEST_FIELDS]
    values[_FINDINGS] = tuple(
        tuple(getattr(f, name) for name in _FINDING_FIELDS) for f in diagnosis.findings
    )
    values[_SEGMENTS] = tuple(x for s in diagnosis.segments for x in (s.label, s.tokens))
    return tuple(values)


def unflat_diagnosis(values: tuple[Any, ...]) -> RequestDiagnosis:
    """The diagnosis :func:`flat_diagnosis` took apart (built as unpickling builds a frozen dataclass:
    no ``__init__``, the fields set directly)."""
    findings = []
    for item in values[_FINDINGS]:
        finding = _new(Finding)
        for name, value in zip(_FINDING_FIELDS, item, strict=True):
            _set(finding, name, value)
        findings.append(finding)
    flat_segments = values[_SEGMENTS]
    segments = []
    for at in range(0, len(flat_segments), 2):
        segment = _new(Segment)
        _set(segment, "label", flat_segments[at])
        _set(segment, "tokens", flat_segments[at + 1])
        segments.append(segment)
    diagnosis = _new(RequestDiagnosis)
    for name, value in zip(_REQUEST_FIELDS, values, strict=True):
        _set(diagnosis, name, value)
    _set(diagnosis, "findings", tuple(findings))
    _set(diagnosis, "segments", tuple(segments))
    return diagnosis
