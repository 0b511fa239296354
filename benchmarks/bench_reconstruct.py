"""2. Reconstruction and audit over logs of 5,000 and 10,000 events: they must scale linearly.

Goal: twice the log takes at most 2.2× the time, for ``reconstruct_requests`` (every request of
the log rebuilt) and ``audit_log`` (invariants, folds, the header timeline, every request rebuilt
and compared with the one before it). Loading the JSONL file is reported beside them.

The cache doctor's report of the log (``dsh_testkit.doctor.diagnose`` over the log's rebuilt wire
requests, as ``dsh-testkit cache-report LOG`` runs it) reads what the log's requests sent: every
request whole, as the provider did, so its input is the sum of the requests' messages, which
grows with the square of the log (twice the events, about four times the messages sent). Its
goal is linear in that input: at most 1.1× the ratio of the messages the two logs' requests
sent.
"""

from __future__ import annotations

import gc
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from dsh_core import Event, Session, SessionInfo, reconstruct_requests
from dsh_core.persistence import LoadedLog, load_session, write_session
from dsh_testkit.doctor import diagnose
from dsh_testkit.reports import audit_log
from dsh_testkit.traces._readers._session_log import session_log_trace

from ._common import Figure, Section, median
from ._history import build_log, cut_at_turn

__all__ = ["run"]

SIZES = (5_000, 10_000)
QUICK_SIZES = (250, 500)
GOAL = 2.2
DOCTOR_ROUNDS = 3
DOCTOR_SLACK = 1.1
"""The doctor's goal: at most this many times the ratio of the messages the requests sent."""


def _timed(fn: Callable[[], object]) -> float:
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def run(quick: bool) -> Section:
    sizes = QUICK_SIZES if quick else SIZES
    rounds = 2 if quick else 15
    log = build_log(max(sizes))
    logs = {n: cut_at_turn(log, n) for n in sizes}
    tmp = Path(tempfile.mkdtemp(prefix="dsh-bench-"))
    files: dict[int, Path] = {}
    for n, events in logs.items():
        files[n] = tmp / f"log-{n}.jsonl"
        write_session(files[n], Session.create(f"bench-{n}", events)).close()

    def reconstruct(events: list[Event]) -> Callable[[], object]:
        return lambda: list(reconstruct_requests(events))

    def audit(events: list[Event]) -> Callable[[], object]:
        return lambda: audit_log(events)

    def report(events: list[Event]) -> Callable[[], object]:
        loaded = LoadedLog(info=SessionInfo(id="bench", created_at=0), events=tuple(events))
        return lambda: diagnose(session_log_trace(loaded))

    def load(path: Path) -> Callable[[], object]:
        return lambda: load_session(path)

    # name → (make the operation for a size, has the linear-scaling goal, rounds)
    operations: dict[str, tuple[Callable[[int], Callable[[], object]], bool, int]] = {
        "reconstruct_requests": (lambda n: reconstruct(logs[n]), True, rounds),
        "audit_log": (lambda n: audit(logs[n]), True, rounds),
        "load_session (JSONL file)": (lambda n: load(files[n]), False, rounds),
        # A sample of the doctor takes seconds at these sizes: fewer rounds keep make bench short.
        "diagnose (cache-report)": (lambda n: report(logs[n]), True, min(rounds, DOCTOR_ROUNDS)),
    }
    samples: dict[tuple[str, int], list[float]] = {(op, n): [] for op in operations for n in sizes}
    for r in range(rounds):
        order = sizes if r % 2 == 0 else tuple(reversed(sizes))
        for op, (make, _, op_rounds) in operations.items():
            if r < op_rounds:
                for n in order:
                    samples[(op, n)].append(_timed(make(n)))
    for path in files.values():
        path.unlink()
    tmp.rmdir()
    small, large = sizes
    requests = {n: sum(1 for _ in reconstruct_requests(logs[n])) for n in sizes}
    sent = {n: sum(len(r.request.messages) for r in reconstruct_requests(logs[n])) for n in sizes}
    sent_ratio = sent[large] / sent[small]
    goals = {op: GOAL for op, (_, has_goal, _) in operations.items() if has_goal}
    goals["diagnose (cache-report)"] = round(DOCTOR_SLACK * sent_ratio, 2)
    section = Section(
        key="reconstruct",
        title="Reconstruction and audit scaling",
        method=(
            "Two logs written by the real loop (tool turns, as in §1), cut at turn boundaries: "
            f"{len(logs[small]):,} events ({requests[small]} requests) and {len(logs[large]):,} "
            f"events ({requests[large]} requests). Each operation runs on the in-memory events "
            "(`load_session` reads the JSONL file written by `write_session`); "
            f"{rounds} rounds ({min(rounds, DOCTOR_ROUNDS)} for the cache doctor) alternating "
            "the order of the two "
            "sizes, `gc.collect()` before each sample; times are medians. The scaling figure is "
            "the median over rounds of t(large) / t(small) measured back to back, at a "
            f"{len(logs[large]) / len(logs[small]):.2f}× longer log. The requests of the two "
            f"logs sent {sent[small]:,} and {sent[large]:,} messages in all "
            f"({sent_ratio:.2f}×): the cache doctor reads each request whole, so its goal is "
            f"{DOCTOR_SLACK}× that ratio, linear in the traffic it explains."
        ),
    )
    for op in operations:
        t_small, t_large = median(samples[(op, small)]), median(samples[(op, large)])
        section.figures.append(
            Figure(label=f"{op}, {len(logs[small]):,} events", value=t_small * 1000, unit="ms")
        )
        section.figures.append(
            Figure(label=f"{op}, {len(logs[large]):,} events", value=t_large * 1000, unit="ms")
        )
        # The verdict is the median of the per-round ratios: each round times both sizes back
        # to back, so a pair shares the machine's load of that moment.
        paired = median(
            [b / a for a, b in zip(samples[(op, small)], samples[(op, large)], strict=True)]
        )
        fastest = min(samples[(op, large)]) / min(samples[(op, small)])
        section.figures.append(
            Figure(
                label=f"{op}: t({len(logs[large]):,}) / t({len(logs[small]):,})",
                value=paired,
                unit="×",
                goal=f"≤ {goals[op]}" if op in goals else None,
                ok=paired <= goals[op] if op in goals else None,
                note=(
                    f"median of {len(samples[(op, small)])} paired ratios; ratio of medians "
                    f"{t_large / t_small:.2f}×, of the fastest samples {fastest:.2f}×"
                ),
            )
        )
    return section
