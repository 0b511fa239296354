"""8. The recording proxy: added latency and time to first byte against calling the upstream.

The upstream is the mock (``dsh-testkit serve``) in its own process; the proxy (``dsh-testkit
proxy --upstream … --out FILE``, recording every exchange) in another; the clients in this one.
The same streaming chat request goes to the upstream directly and through the proxy, the two
routes interleaved round by round so a noisy moment hurts both alike:

- one client, requests in a row, the mock's unpaced default reply: the proxy's own cost per
  request, without contention;
- 50 concurrent clients against a *paced* upstream (the mock's ``paceMs`` script option: 12 SSE
  events a few ms apart, as a model streams tokens), each client pausing between requests as an
  agent does while it runs a tool: the goal's case (50 concurrent streams, SSE never buffered),
  at a load this 2-CPU machine is not saturated by (the CPU share used is reported);
- 50 concurrent clients in a closed loop against the unpaced mock: that saturates the 2 CPUs
  (clients, proxy and mock are three Python processes), so its latencies measure CPU queueing;
  it is kept as a throughput and CPU figure (requests per second, proxy CPU per request).

Added latency = the route's percentile through the proxy − the same percentile direct (to the end
of the stream, its terminating chunk; first byte = to the first body chunk; last event = to the
last body chunk, ``data: [DONE]``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from ._common import Figure, Section, median, percentile, run_apart

__all__ = ["run"]

CLIENTS = 50
REQUESTS_PER_CLIENT = 10
SEQUENTIAL = 200
ROUNDS = 4
PACE_MS = 10
"""The paced upstream's pause before each of its body writes (12 SSE events: ~120 ms a stream,
a fast model's pace)."""
THINK_S = 0.5
"""Each paced client's pause between its requests (an agent running a tool)."""
PACED_PER_CLIENT = 6
QUICK = {"clients": 4, "per_client": 2, "paced_per_client": 2, "sequential": 10, "rounds": 1}
GOAL_MS = 1.0
REPLY_TEXT = "Mock DeepSeek reply to: a question about the module, answered in full."
"""Nine 8-character content chunks, as the mock's default reply to the benchmark's prompts."""


def _body(client: int, n: int) -> dict[str, Any]:
    return {
        "model": "deepseek-chat",
        "stream": True,
        "messages": [
            {"role": "system", "content": "You are a terse assistant."},
            {"role": "user", "content": f"Client {client}, request {n}: say hello in one line."},
        ],
    }


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process, from /proc (``None`` where there is no /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


@contextlib.contextmanager
def _process(args: list[str], pattern: str) -> Iterator[tuple[str, int]]:
    """A child process whose first stdout line matches ``pattern``; yields the match's group 1
    and the process id."""
    with subprocess.Popen(
        [sys.executable, "-m", "dsh_testkit.cli", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as process:
        try:
            assert process.stdout is not None
            line = process.stdout.readline()
            match = re.search(pattern, line)
            if match is None:
                raise RuntimeError(f"`dsh-testkit {args[0]}` printed {line!r}")
            yield match.group(1), process.pid
        finally:
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


async def _one_client(
    client: httpx.AsyncClient,
    index: int,
    count: int,
    out: list[tuple[float, float, float]],
    *,
    think: float,
    offset: float,
) -> None:
    if offset:
        await asyncio.sleep(offset)
    for n in range(count):
        if n and think:
            await asyncio.sleep(think)
        start = time.perf_counter()
        first = 0.0
        async with client.stream(
            "POST",
            "/chat/completions",
            json=_body(index, n),
            headers={"authorization": "Bearer sk-bench-proxy"},
        ) as response:
            if response.status_code != 200:
                raise RuntimeError(f"answered {response.status_code}")
            last = 0.0
            async for data in response.aiter_raw():
                if data:
                    last = time.perf_counter() - start
                    if not first:
                        first = last
        out.append((first, time.perf_counter() - start, last))


async def _load(
    base_url: str, clients: int, per_client: int, *, think: float = 0.0
) -> list[tuple[float, float, float]]:
    """``clients`` concurrent clients, ``per_client`` requests each; with ``think``, each pauses
    that long between its requests and the clients start spread over one such pause."""
    pool = [httpx.AsyncClient(base_url=base_url, timeout=60.0) for _ in range(clients)]
    out: list[tuple[float, float, float]] = []
    try:
        await asyncio.gather(
            *(
                _one_client(pool[i], i, per_client, out, think=think, offset=think * i / clients)
                for i in range(clients)
            )
        )
    finally:
        for client in pool:
            await client.aclose()
    return out


def _added(label: str, direct: list[float], proxied: list[float], *, goal: bool) -> list[Figure]:
    out = []
    for name, q in (("p50", 50.0), ("p99", 99.0)):
        d = percentile(direct, q) * 1000
        p = percentile(proxied, q) * 1000
        added = p - d
        out.append(
            Figure(
                label=f"{label}: added {name}",
                value=added,
                unit="ms",
                goal=f"< {GOAL_MS:g}" if goal and name == "p50" else None,
                ok=(added < GOAL_MS) if goal and name == "p50" else None,
                note=f"direct {d:.2f} ms, through the proxy {p:.2f} ms",
            )
        )
    return out


class _Meter:
    """CPU seconds of some processes (this one included) and wall time over a stretch."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self.cpu: dict[str, float] = dict.fromkeys(pids, 0.0)
        self.wall = 0.0

    @contextlib.contextmanager
    def measure(self) -> Iterator[None]:
        before = {name: _cpu_seconds(pid) for name, pid in self.pids.items()}
        wall = time.perf_counter()
        try:
            yield
        finally:
            self.wall += time.perf_counter() - wall
            for name, pid in self.pids.items():
                start, end = before[name], _cpu_seconds(pid)
                if start is not None and end is not None:
                    self.cpu[name] += end - start

    def busy(self) -> float:
        """The share of the machine's CPUs these processes used (0–1)."""
        return sum(self.cpu.values()) / (self.wall * _cpus()) if self.wall else 0.0


def _script_file(tmp: str) -> str:
    path = Path(tmp) / "paced.json"
    script = {
        "version": 1,
        "onExhausted": "repeat-last",
        "entries": [{"kind": "reply", "text": REPLY_TEXT, "paceMs": PACE_MS}],
    }
    path.write_text(json.dumps(script), encoding="utf-8")
    return str(path)


def _lines(path: Path) -> int:
    with path.open(encoding="utf-8") as file:
        return sum(1 for _ in file) - 1


def run(quick: bool) -> Section:
    """The section, measured in a fresh Python (:func:`run_apart`): its clients' latencies must
    not pay for the heap the earlier sections leave in the benchmark process (in one process the
    paced p50 came out 0.2 ms in one run and 1.1 ms in another, for the same proxy)."""
    return run_apart("benchmarks.bench_proxy", quick)


def _run_here(quick: bool) -> Section:
    clients = QUICK["clients"] if quick else CLIENTS
    per_client = QUICK["per_client"] if quick else REQUESTS_PER_CLIENT
    paced_per_client = QUICK["paced_per_client"] if quick else PACED_PER_CLIENT
    sequential = QUICK["sequential"] if quick else SEQUENTIAL
    rounds = QUICK["rounds"] if quick else ROUNDS
    stream_ms = 12 * PACE_MS
    section = Section(
        key="proxy",
        title="Recording proxy: added latency",
        method=(
            "Upstream: the mock (`dsh-testkit serve`, its own process). Proxy: `dsh-testkit "
            "proxy --upstream … --out FILE` (its own process, recording every exchange). Clients "
            "in a fresh Python of their own (not the benchmark process, whose heap the earlier "
            "sections grew), `httpx.AsyncClient`, one keep-alive connection each, streaming "
            "chat requests read to the end; direct and through the proxy alternately, "
            f"{rounds} round(s) of: (a) {sequential} requests in a row from one client, the "
            "mock's default reply (12 SSE events, unpaced); (b) the goal's case: "
            f"{clients} concurrent clients × {paced_per_client} requests against a paced upstream "
            f"(a script reply of 12 SSE events with `paceMs: {PACE_MS}`, ~{stream_ms} ms a "
            f"stream, as a model streams tokens), each client pausing {THINK_S * 1000:.0f} ms "
            "between requests (an agent running a tool), so the machine is not saturated (the "
            f"CPU share used is reported); (c) {clients} concurrent clients × {per_client} "
            "requests back to back against the unpaced mock, a closed loop that saturates the 2 "
            "CPUs (clients, proxy and mock are three Python processes), kept as a throughput "
            "and CPU figure: its latencies measure CPU queueing, not the proxy. Added = "
            "percentile through the proxy − the same percentile direct, to the end of the "
            "stream (its terminating chunk), to the first body chunk, and (paced) to the last "
            "event."
        ),
    )
    single: dict[str, list[tuple[float, float, float]]] = {"direct": [], "proxy": []}
    paced: dict[str, list[tuple[float, float, float]]] = {"direct": [], "proxy": []}
    closed: dict[str, list[tuple[float, float, float]]] = {"direct": [], "proxy": []}
    closed_wall: dict[str, float] = {"direct": 0.0, "proxy": 0.0}
    with tempfile.TemporaryDirectory() as tmp:
        plain_out, paced_out = Path(tmp) / "plain.trace", Path(tmp) / "paced.trace"
        with (
            _process(["serve", "--port", "0"], r"^(http://\S+)") as (upstream, _),
            _process(["serve", "--port", "0", "--script", _script_file(tmp)], r"^(http://\S+)") as (
                paced_upstream,
                paced_upstream_pid,
            ),
            _process(
                ["proxy", "--upstream", upstream, "--out", str(plain_out)],
                r"(http://\S+)",
            ) as (proxy, proxy_pid),
            _process(
                ["proxy", "--upstream", paced_upstream, "--out", str(paced_out)],
                r"(http://\S+)",
            ) as (paced_proxy, paced_proxy_pid),
        ):
            plain_routes = {"direct": upstream, "proxy": proxy}
            paced_routes = {"direct": paced_upstream, "proxy": paced_proxy}
            for url in (*plain_routes.values(), *paced_routes.values()):
                asyncio.run(_load(url, 2, 2))  # warm up: imports, first connections
            # CPU of the proxy over (a) + (c); of everything over (b), to show the load.
            plain_meter = _Meter({"proxy": proxy_pid})
            paced_meter = _Meter(
                {
                    "clients": os.getpid(),
                    "upstream": paced_upstream_pid,
                    "proxy": paced_proxy_pid,
                }
            )
            paced_proxy_meter = _Meter({"proxy": paced_proxy_pid})
            for _ in range(rounds):
                for route, url in plain_routes.items():
                    with plain_meter.measure() if route == "proxy" else contextlib.nullcontext():
                        single[route] += asyncio.run(_load(url, 1, sequential))
                for route, url in paced_routes.items():
                    meters: list[contextlib.AbstractContextManager[None]] = [paced_meter.measure()]
                    if route == "proxy":
                        meters.append(paced_proxy_meter.measure())
                    with contextlib.ExitStack() as stack:
                        for meter in meters:
                            stack.enter_context(meter)
                        paced[route] += asyncio.run(_load(url, clients, per_client, think=THINK_S))
                for route, url in plain_routes.items():
                    with plain_meter.measure() if route == "proxy" else contextlib.nullcontext():
                        started = time.perf_counter()
                        closed[route] += asyncio.run(_load(url, clients, per_client))
                        closed_wall[route] += time.perf_counter() - started
        recorded = _lines(plain_out) + _lines(paced_out)
    section.figures += _added(
        "one client, to the end of the stream",
        [r[1] for r in single["direct"]],
        [r[1] for r in single["proxy"]],
        goal=True,
    )
    section.figures += _added(
        "one client, first byte",
        [r[0] for r in single["direct"]],
        [r[0] for r in single["proxy"]],
        goal=False,
    )
    label = f"{clients} concurrent paced streams"
    section.figures += _added(
        f"{label}, to the end of the stream",
        [r[1] for r in paced["direct"]],
        [r[1] for r in paced["proxy"]],
        goal=True,
    )
    section.figures += _added(
        f"{label}, first byte",
        [r[0] for r in paced["direct"]],
        [r[0] for r in paced["proxy"]],
        goal=True,
    )
    section.figures += _added(
        f"{label}, last event (`data: [DONE]`)",
        [r[2] for r in paced["direct"]],
        [r[2] for r in paced["proxy"]],
        goal=False,
    )
    share = ", ".join(
        f"{name} {seconds / paced_meter.wall / _cpus() * 100:.0f} %"
        for name, seconds in paced_meter.cpu.items()
    )
    section.figures.append(
        Figure(
            label=f"{label}: CPU share of the machine used",
            value=paced_meter.busy() * 100,
            unit="%",
            note=f"clients, mock and proxy over {_cpus()} CPUs, both routes ({share})",
        )
    )
    paced_proxied = len(paced["proxy"])
    section.figures.append(
        Figure(
            label=f"{label}: proxy CPU per request",
            value=paced_proxy_meter.cpu["proxy"] / paced_proxied * 1000 if paced_proxied else None,
            unit="ms",
            note="each of the 12 events arrives in its own upstream read and is relayed at once",
        )
    )
    for route in ("direct", "proxy"):
        count = len(closed[route])
        section.figures.append(
            Figure(
                label=f"{clients} clients, closed loop (saturated), {route}: requests per second",
                value=count / closed_wall[route] if closed_wall[route] else None,
                unit="req/s",
                note=f"{count} requests; latency p50 "
                f"{percentile([r[1] for r in closed[route]], 50.0) * 1000:.1f} ms (CPU queueing)",
            )
        )
    proxied = len(single["proxy"]) + len(closed["proxy"])
    section.figures.append(
        Figure(
            label="proxy CPU per request, unpaced upstream (forwarding + recording)",
            value=plain_meter.cpu["proxy"] / proxied * 1000 if proxied else None,
            unit="ms",
            note="user + system CPU of the proxy process over (a) and (c) "
            "(independent of how loaded the machine is)",
        )
    )
    sent = sum(len(v["proxy"]) for v in (single, paced, closed)) + 8
    section.figures.append(
        Figure(
            label="exchanges recorded in the trace files",
            value=float(recorded),
            unit="exchanges",
            note=f"of {sent} sent through the proxies (warm-up included)",
        )
    )
    section.notes.append(
        "Median first byte through the proxy vs direct, paced upstream: "
        f"{median([r[0] for r in paced['proxy']]) * 1000:.2f} ms vs "
        f"{median([r[0] for r in paced['direct']]) * 1000:.2f} ms: the proxy relays each "
        "upstream read as it arrives (no buffering), so its first byte follows the upstream's."
    )
    return section


if __name__ == "__main__":
    print(json.dumps(_run_here("--quick" in sys.argv).to_json()))
