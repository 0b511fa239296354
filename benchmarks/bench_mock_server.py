"""5. Mock server: requests per second and latency for 50 concurrent streaming clients.

Loopback only (127.0.0.1), a bounded number of requests and a time cap. Two ways to run the
server are measured side by side: its own process (``dsh-testkit serve``, as a test suite in
another language or a CI service container uses it) and a background thread of the client's
process (``MockServer``, as this project's pytest fixtures use it: server and client then share
one interpreter lock).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

from ._common import Figure, Section, median, percentile

__all__ = ["run"]

CLIENTS = 50
REQUESTS_PER_CLIENT = 20
QUICK_CLIENTS = 5
QUICK_REQUESTS_PER_CLIENT = 2
TIME_CAP = 30.0
"""Seconds after which the clients stop starting requests (the run reports what completed)."""


def _body(client: int, n: int) -> dict[str, Any]:
    return {
        "model": "deepseek-chat",
        "stream": True,
        "messages": [
            {"role": "system", "content": "You are a terse assistant."},
            {"role": "user", "content": f"Client {client}, request {n}: say hello in one line."},
        ],
    }


async def _client(
    client: httpx.AsyncClient,
    index: int,
    count: int,
    deadline: float,
    out: list[tuple[float, float]],
) -> None:
    """One client on its own connection: ``count`` streaming requests in a row, each read to
    the end; records (time to first body chunk, time to the end of the stream)."""
    async with client:
        for n in range(count):
            if time.perf_counter() > deadline:
                return
            start = time.perf_counter()
            first = 0.0
            async with client.stream(
                "POST",
                "/chat/completions",
                json=_body(index, n),
                headers={"authorization": "Bearer sk-bench"},
            ) as response:
                if response.status_code != 200:
                    raise RuntimeError(f"mock answered {response.status_code}")
                async for _ in response.aiter_raw():
                    if not first:
                        first = time.perf_counter() - start
            out.append((first, time.perf_counter() - start))


async def _load(
    base_url: str, clients: int, per_client: int
) -> tuple[float, list[tuple[float, float]]]:
    # Clients are built before the clock starts: building one (its TLS context, even for a plain
    # http URL) costs tens of milliseconds of client CPU that says nothing about the server.
    pool = [httpx.AsyncClient(base_url=base_url, timeout=30.0) for _ in range(clients)]
    out: list[tuple[float, float]] = []
    start = time.perf_counter()
    deadline = start + TIME_CAP
    await asyncio.gather(*(_client(pool[i], i, per_client, deadline, out) for i in range(clients)))
    return time.perf_counter() - start, out


def _cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a process, from /proc (``None`` where there is no /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def _subprocess_server() -> Iterator[tuple[str, int | None]]:
    """``dsh-testkit serve`` in a child process; yields its base URL and pid; terminates it."""
    with subprocess.Popen(
        [sys.executable, "-m", "dsh_testkit.cli", "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    ) as process:
        try:
            assert process.stdout is not None
            base_url = process.stdout.readline().strip()
            if not base_url.startswith("http://127.0.0.1:"):
                raise RuntimeError(
                    f"dsh-testkit serve did not print its base URL (got {base_url!r})"
                )
            yield base_url, process.pid
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


@contextlib.contextmanager
def _thread_server() -> Iterator[tuple[str, int | None]]:
    from dsh_testkit.mock import MockServer

    with MockServer() as server:
        yield server.base_url, None


def run(quick: bool) -> Section:
    clients = QUICK_CLIENTS if quick else CLIENTS
    per_client = QUICK_REQUESTS_PER_CLIENT if quick else REQUESTS_PER_CLIENT
    section = Section(
        key="mock-server",
        title="Mock server under 50 concurrent streaming clients",
        method=(
            f"{clients} concurrent clients, each an `httpx.AsyncClient` with its own keep-alive "
            f"connection to 127.0.0.1, send {per_client} streaming chat requests in a row "
            f"(≤ {clients * per_client} requests, capped at {TIME_CAP:.0f} s) and read every "
            "SSE stream to its end; the mock answers with its default reply (12 SSE events: "
            "role, 9 content chunks, finish with usage, `[DONE]`). Latency = request start to "
            "the end of the stream (first byte = to the first body chunk), `perf_counter`, all "
            "requests. The clients run in this process; the server in its own process "
            "(`dsh-testkit serve`) or in a "
            "thread of this process (`MockServer`)."
        ),
    )
    for name, server in (("own process", _subprocess_server), ("thread", _thread_server)):
        with server() as (base_url, pid):
            asyncio.run(_load(base_url, 2, 1))  # warm up: imports, first connections
            server_cpu = _cpu_seconds(pid) if pid is not None else None
            client_cpu = time.process_time()
            seconds, results = asyncio.run(_load(base_url, clients, per_client))
            client_cpu = time.process_time() - client_cpu
            if pid is not None and server_cpu is not None:
                after = _cpu_seconds(pid)
                server_cpu = None if after is None else after - server_cpu
        total = [r[1] for r in results]
        first = [r[0] for r in results]
        if pid is not None:
            section.figures.append(
                Figure(
                    label=f"server in {name}: server CPU per request",
                    value=None if server_cpu is None else server_cpu / len(results) * 1000,
                    unit="ms",
                    note=f"client process CPU {client_cpu / len(results) * 1000:.2f} ms/request",
                )
            )
        section.figures += [
            Figure(
                label=f"server in {name}: requests per second",
                value=len(results) / seconds,
                unit="req/s",
                note=f"{len(results)} requests in {seconds:.2f} s",
            ),
            Figure(label=f"server in {name}: latency p50", value=median(total) * 1000, unit="ms"),
            Figure(
                label=f"server in {name}: latency p99",
                value=percentile(total, 99) * 1000,
                unit="ms",
            ),
            Figure(
                label=f"server in {name}: first byte p50",
                value=median(first) * 1000,
                unit="ms",
            ),
        ]
    return section
