"""``make stress``: the adversarial checks for longer, within a time budget.

The bounded tests in this package sample; this runs the same judges longer. Session logs
(``_logs.py``) over every real log: the loader at every byte offset, resumes at sampled cuts,
every field replaced by a value of every other JSON kind, random byte damage, and a
100,000-deep line. The recording proxy (``_proxy.py``): one long session of hostile rounds and
5 MB requests through ``dsh-testkit proxy`` with its resident set sampled after each round,
ended by ``kill -9`` and a restart. It prints the figures RELIABILITY.md reports and exits 1
when any promise broke.

``DSH_STRESS_SECONDS`` (default 120) bounds the whole run (the proxy gets
``DSH_STRESS_PROXY_SHARE`` of it, default 0.3); ``DSH_STRESS_SEED`` (default 0) picks the
sample, so a failure is reproducible.
"""

from __future__ import annotations

import asyncio
import functools
import os
import random
import resource
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from dsh_core import CorruptLogError
from dsh_core._json_text import dumps_canonical
from dsh_core.persistence import load_session, loads_session
from tests.adversarial._logs import (
    Tally,
    _expected_events,
    apply_field,
    byte_corruptions,
    cuts,
    field_specs,
    judge_corruption,
    judge_cut,
    real_logs,
    record_ends,
)
from tests.adversarial._proxy_session import long_session


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def proxy_stress(seconds: float, seed: int) -> list[str]:
    """The proxy's long session; prints its figures, returns the promises broken."""
    out = Path(tempfile.mkdtemp(prefix="dsh-stress-proxy-")) / "session.trace"
    started = time.monotonic()
    session = asyncio.run(long_session(out, seconds, random.Random(seed)))
    elapsed = time.monotonic() - started
    rss = [kib / 1024 for kib in session.rss_kib]
    settled = rss[min(2, len(rss) - 1)]
    print(f"\n## Recording proxy: `make stress` ({seconds:.0f} s of the budget, seed {seed})\n")
    print(
        f"{session.rounds} rounds, {elapsed:.0f} s, {sum(session.sent.values()):,} requests, "
        f"trace {session.trace_bytes / 2**20:.0f} MiB\n"
    )
    print("| requests sent | count |")
    print("|---|---:|")
    for kind, count in sorted(session.sent.items()):
        print(f"| {kind} | {count:,} |")
    print(f"| of which refused over the connection cap (503) | {session.refused:,} |")
    print("\n| exchanges recorded | count |")
    print("|---|---:|")
    for outcome, count in sorted(session.outcomes.items()):
        print(f"| {outcome} | {count:,} |")
    print(
        f"\nproxy RSS: {rss[0]:.0f} MiB after round 1, {settled:.0f} MiB after round "
        f"{min(3, len(rss))}, {max(rss):.0f} MiB at most, {rss[-1]:.0f} MiB at the end; "
        f"stderr lines besides the summary: {session.stderr_lines}"
    )
    broken = list(session.broken)
    if rss[-1] - settled > 32:
        broken.append(f"RSS grew from {settled:.0f} to {rss[-1]:.0f} MiB over the session")
    if session.stderr_lines > 5:
        broken.append(f"{session.stderr_lines} stderr lines: printed per event")
    print(f"\nproxy promises broken: {len(broken)}")
    for failure in broken[:20]:
        print(f"- {failure}")
    return broken


def main() -> int:
    total = float(os.environ.get("DSH_STRESS_SECONDS", "120"))
    share = float(os.environ.get("DSH_STRESS_PROXY_SHARE", "0.3"))
    budget = total * (1 - share)
    seed = int(os.environ.get("DSH_STRESS_SEED", "0"))
    rng = random.Random(seed)
    logs = real_logs()
    started = time.monotonic()
    failures: list[str] = []
    tallies = {
        "cuts, loaded (every offset)": Tally(),
        "cuts, loaded and resumed": Tally(),
        "field corruptions": Tally(),
        "byte corruptions": Tally(),
        "100,000-deep line": Tally(),
    }
    scratch = Path(tempfile.mkdtemp(prefix="dsh-stress-")) / "log.jsonl"

    Attempts = Iterator[Callable[[], str]]

    def run(share: float, name: str, attempts: Callable[[], Attempts]) -> None:
        """Run the attempts until their share of the budget is spent."""
        deadline = time.monotonic() + share * budget
        for attempt in attempts():
            if time.monotonic() > deadline:
                break
            try:
                tallies[name].add(attempt())
            except AssertionError as exc:
                tallies[name].add("PROMISE BROKEN")
                failures.append(str(exc))

    def every_offset() -> Attempts:
        for log in logs:
            raw = log.read_bytes()
            ends = record_ends(raw)
            for cut in range(ends[0] - 1, len(raw) + 1):

                def attempt(
                    raw: bytes = raw, cut: int = cut, ends: list[int] = ends, name: str = log.name
                ) -> str:
                    loaded = loads_session(raw[:cut], audit=True)
                    complete = max([e for e in ends if e <= cut], default=0)
                    if cut > complete and raw[cut : cut + 1] == b"\n":
                        complete = cut
                    got = [dumps_canonical(e.to_json(), sort_keys=True) for e in loaded.events]
                    assert got == _expected_events(raw[:complete]), f"{name}: cut at {cut}"
                    assert loaded.committed_bytes == complete, f"{name}: cut at {cut}"
                    return "recovered"

                yield attempt

    def resumed_cuts() -> Attempts:
        for log in logs:
            raw = log.read_bytes()
            for cut in cuts(raw, 60, rng):
                yield functools.partial(judge_cut, raw, cut, scratch, log.name)

    def fields() -> Attempts:
        raws = [log.read_bytes() for log in logs]
        pool = [(i, spec) for i, raw in enumerate(raws) for spec in field_specs(raw)]
        rng.shuffle(pool)
        for i, spec in pool:
            corruption = apply_field(raws[i], spec)
            yield functools.partial(judge_corruption, corruption, scratch, logs[i].name)

    def bytes_() -> Attempts:
        while True:
            log = rng.choice(logs)
            (corruption,) = byte_corruptions(log.read_bytes(), rng, 1)
            yield functools.partial(judge_corruption, corruption, scratch, log.name)

    def deep() -> Attempts:
        def attempt() -> str:
            header = b'{"type":"session","version":0,"id":"s","createdAt":1}\n'
            line = b'{"type":"x/y","seq":0,"time":1,"data":' + b'{"a":' * 100_000 + b"1"
            scratch.write_bytes(header + line + b"}" * 100_001 + b"\n")
            try:
                load_session(scratch, audit=True)
            except CorruptLogError:
                return "typed error"
            raise AssertionError("a 100,000-deep line loaded")

        yield attempt

    run(0.05, "100,000-deep line", deep)
    run(0.25, "cuts, loaded (every offset)", every_offset)
    run(0.2, "cuts, loaded and resumed", resumed_cuts)
    run(0.3, "field corruptions", fields)
    run(0.2, "byte corruptions", bytes_)

    elapsed = time.monotonic() - started
    print(f"## Session logs: `make stress` (budget {budget:.0f} s, seed {seed})\n")
    print(f"{len(logs)} real logs, {elapsed:.0f} s, peak RSS {_peak_rss_mib():.0f} MiB\n")
    print("| check | tried | outcomes |")
    print("|---|---:|---|")
    for name, tally in tallies.items():
        outcomes = ", ".join(f"{k}: {v:,}" for k, v in sorted(tally.outcomes.items()))
        print(f"| {name} | {tally.tried:,} | {outcomes} |")
    print(f"\npromises broken: {len(failures)}")
    for failure in failures[:20]:
        print(f"- {failure}")
    failures += proxy_stress(total * share, seed) if share > 0 else []
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
