"""8. The recording proxy: added latency and time to first byte against calling the upstream.

The upstream is the mock (``dsh-testkit serve``) in its own process; the proxy (``dsh-testkit
proxy --upstream … --out FILE``, recording every exchange) in another; the clients in this one.
The same streaming chat request goes to the upstream directly and through the proxy, the two
routes interleaved round by round so a noisy moment hurts both alike:

- one client, requests in a row: the proxy's own cost per request, without contention;
- 50 concurrent clients (each its own keep-alive connection): the cost under load.

Added latency = the route's percentile through the proxy − the same percentile direct (to the end
of the stream; first byte = to the first body chunk).
"""

from __future__ import annotations

import asyncio
import contextlib
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

from ._common import Figure, Section, median, percentile

__all__ = ["run"]

CLIENTS = 50
REQUESTS_PER_CLIENT = 10
SEQUENTIAL = 200
ROUNDS = 4
QUICK = {"clients": 4, "per_client": 2, "sequential": 10, "rounds": 1}
GOAL_MS = 1.0


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
    client: httpx.AsyncClient, index: int, count: int, out: list[tuple[float, float]]
) -> None:
    for n in range(count):
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
            async for _ in response.aiter_raw():
                if not first:
                    first = time.perf_counter() - start
        out.append((first, time.perf_counter() - start))


async def _load(base_url: str, clients: int, per_client: int) -> list[tuple[float, float]]:
    pool = [httpx.AsyncClient(base_url=base_url, timeout=60.0) for _ in range(clients)]
    out: list[tuple[float, float]] = []
    try:
        await asyncio.gather(*(_one_client(pool[i], i, per_client, out) for i in range(clients)))
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


def run(quick: bool) -> Section:
    clients = QUICK["clients"] if quick else CLIENTS
    per_client = QUICK["per_client"] if quick else REQUESTS_PER_CLIENT
    sequential = QUICK["sequential"] if quick else SEQUENTIAL
    rounds = QUICK["rounds"] if quick else ROUNDS
    section = Section(
        key="proxy",
        title="Recording proxy: added latency",
        method=(
            "Upstream: the mock (`dsh-testkit serve`, its own process, default reply: 12 SSE "
            "events). Proxy: `dsh-testkit proxy --upstream … --out FILE` (its own process, "
            "recording every exchange). Clients in this process, `httpx.AsyncClient`, one "
            f"keep-alive connection each, streaming chat requests read to the end. {rounds} "
            f"round(s), each: {sequential} requests in a row from one client, then {clients} "
            f"concurrent clients × {per_client} requests, direct and through the proxy "
            "alternately. Added = percentile through the proxy − the same percentile direct."
        ),
    )
    single: dict[str, list[tuple[float, float]]] = {"direct": [], "proxy": []}
    loaded: dict[str, list[tuple[float, float]]] = {"direct": [], "proxy": []}
    with (
        tempfile.TemporaryDirectory() as tmp,
        _process(["serve", "--port", "0"], r"^(http://\S+)") as (upstream, _),
        _process(
            ["proxy", "--upstream", upstream, "--out", str(Path(tmp) / "bench.trace")],
            r"listening on (http://\S+)",
        ) as (proxy, proxy_pid),
    ):
        routes = {"direct": upstream, "proxy": proxy}
        for url in routes.values():
            asyncio.run(_load(url, 2, 2))  # warm up: imports, first connections
        cpu_before = _cpu_seconds(proxy_pid)
        for _ in range(rounds):
            for route, url in routes.items():
                single[route] += asyncio.run(_load(url, 1, sequential))
            for route, url in routes.items():
                loaded[route] += asyncio.run(_load(url, clients, per_client))
        cpu_after = _cpu_seconds(proxy_pid)
        recorded = sum(1 for _ in (Path(tmp) / "bench.trace").open(encoding="utf-8")) - 1
    for label, results in (("one client", single), (f"{clients} concurrent clients", loaded)):
        section.figures += _added(
            f"{label}, to the end of the stream",
            [r[1] for r in results["direct"]],
            [r[1] for r in results["proxy"]],
            goal=True,
        )
        section.figures += _added(
            f"{label}, first byte",
            [r[0] for r in results["direct"]],
            [r[0] for r in results["proxy"]],
            goal=False,
        )
    proxied = len(single["proxy"]) + len(loaded["proxy"])
    section.figures.append(
        Figure(
            label="proxy CPU per request (forwarding + recording)",
            value=None
            if cpu_before is None or cpu_after is None
            else (cpu_after - cpu_before) / proxied * 1000,
            unit="ms",
            note="user + system CPU of the proxy process over the measured requests "
            "(independent of how loaded the machine is)",
        )
    )
    section.figures.append(
        Figure(
            label="exchanges recorded in the trace file",
            value=float(recorded),
            unit="exchanges",
            note=f"of {sum(len(v) for v in (single['proxy'], loaded['proxy'])) + 4} sent "
            "through the proxy (warm-up included)",
        )
    )
    section.notes.append(
        "Median first byte through the proxy vs direct (one client): "
        f"{median([r[0] for r in single['proxy']]) * 1000:.2f} ms vs "
        f"{median([r[0] for r in single['direct']]) * 1000:.2f} ms: the proxy relays each "
        "upstream read as it arrives (no buffering), so its first byte follows the upstream's."
    )
    return section
