"""The recording proxy for long: a session of hostile rounds with its memory sampled, and load.

``make stress`` runs :func:`long_session`; :func:`load` measures latency and one trace line per
completed request for RELIABILITY.md. The rounds, clients and judges are ``_proxy.py``'s.
"""

from __future__ import annotations

import asyncio
import collections
import random
from dataclasses import dataclass, field
from pathlib import Path

from dsh_testkit.traces import load_trace
from tests.adversarial._proxy import (
    Sent,
    Upstream,
    client,
    hostile_round,
    judge,
    leaks,
    read_head,
    read_rest,
    records_of,
    request_bytes,
    rss_kib,
    start_proxy,
    tag_of,
)


@dataclass
class Session:
    """What a long session (:func:`long_session`) did and saw."""

    rounds: int = 0
    sent: collections.Counter[str] = field(default_factory=collections.Counter)
    refused: int = 0
    outcomes: collections.Counter[str] = field(default_factory=collections.Counter)
    rss_kib: list[int] = field(default_factory=list)
    """The proxy's resident set after each round."""
    stderr_lines: int = 0
    """Lines on the proxy's stderr besides its "continuing" and summary lines."""
    trace_bytes: int = 0
    broken: list[str] = field(default_factory=list)


async def long_session(out: Path, seconds: float, rng: random.Random) -> Session:
    """Hostile rounds and large requests (three 5 MB bodies and three 1 MB answers a round)
    through one proxy until ``seconds`` have passed, the proxy's RSS sampled after each round;
    then ``kill -9`` with answers in flight and a restart on the same file. Judged as the
    bounded test judges."""
    session = Session()
    upstream = Upstream()
    url = await upstream.start()
    proxy = await start_proxy(
        url, out, "--idle-timeout", "1", "--first-byte-timeout", "1", nofile=256
    )
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    tag = 0
    sent: list[Sent] = []
    while loop.time() < deadline or session.rounds < 3:
        done = await hostile_round(proxy.port, tag, rng)
        tag += 10_000
        for _ in range(3):
            request = Sent(tag, "large")
            tag += 1
            done.sent.append(await client(proxy.port, request, size=5 << 20))
            big = Sent(tag, "big")
            tag += 1
            done.sent.append(await client(proxy.port, big, size=1 << 20))
        if not all(s.status == 200 and s.ended for s in done.after):
            session.broken.append(f"round {session.rounds}: a normal request after it failed")
        if not all(status is not None and status >= 400 for status in done.malformed):
            session.broken.append(f"round {session.rounds}: malformed HTTP got no error answer")
        sent += done.sent
        session.rounds += 1
        session.rss_kib.append(rss_kib(proxy.process.pid))
    flying = [
        asyncio.ensure_future(client(proxy.port, Sent(tag + n, "slow-left"))) for n in range(10)
    ]
    tag += 100
    await asyncio.sleep(0.3)
    before_kill = len(records_of(out))
    await proxy.kill()
    await asyncio.gather(*flying)
    survived = records_of(out)
    if len(survived) < before_kill:
        session.broken.append("kill -9 lost exchanges recorded before it")
    again = await start_proxy(url, out)
    after = [await client(again.port, Sent(tag + n, "ok")) for n in range(3)]
    if not all(s.ended for s in after):
        session.broken.append("the restarted proxy did not serve")
    await again.stop()
    expected = ("dsh-testkit proxy: stopped;", "dsh-testkit proxy: continuing")
    session.stderr_lines = sum(
        not line.startswith(expected) for line in [*proxy.stderr, *again.stderr]
    )
    upstream.close()
    records = records_of(out)
    in_flight = set(range(tag - 100, tag - 90))
    judged = [s for s in sent if s.tag not in in_flight]
    session.broken += judge(judged, [r for r in records if tag_of(r) not in in_flight])
    session.broken += [
        f"leaked {s}" for s in leaks(out.read_text(encoding="utf-8"), *proxy.stdout, *proxy.stderr)
    ]
    if len(load_trace(out)) != len(records):
        session.broken.append("the trace does not read back whole")
    for s in sent:
        session.sent[s.kind] += 1
        session.refused += s.refused
    session.outcomes.update(str(r.get("outcome")) for r in records)
    session.trace_bytes = out.stat().st_size
    return session


@dataclass
class Load:
    """Latencies of one load run, direct and through the proxy (seconds, to the answer's end)."""

    direct: list[float] = field(default_factory=list)
    proxied: list[float] = field(default_factory=list)
    completed: int = 0
    """Requests through the proxy whose client got the whole answer."""
    recorded: int = 0
    """Trace lines those requests left (one each is the promise)."""


async def load(out: Path, clients: int = 50, streams: int = 20) -> Load:
    """``clients`` clients at once, each sending ``streams`` streamed requests one after the
    other, to the upstream directly and then through the proxy (kept-alive connections)."""
    result = Load()
    upstream = Upstream()
    url = await upstream.start()
    direct_port = int(url.rsplit(":", 1)[1])
    proxy = await start_proxy(url, out, nofile=4096)

    async def one_client(port: int, times: list[float], first_tag: int) -> int:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        completed = 0
        loop = asyncio.get_running_loop()
        try:
            for n in range(streams):
                sent = Sent(first_tag + n, "ok")
                started = loop.time()
                writer.write(request_bytes(sent.tag, "ok"))
                head = await read_head(reader, sent)
                await read_rest(reader, head, sent)
                times.append(loop.time() - started)
                completed += sent.ended
        finally:
            writer.close()
        return completed

    await asyncio.gather(*(one_client(direct_port, result.direct, 0) for _ in range(clients)))
    done = await asyncio.gather(
        *(one_client(proxy.port, result.proxied, 1000 * (i + 1)) for i in range(clients))
    )
    result.completed = sum(done)
    await proxy.stop()
    upstream.close()
    result.recorded = len(records_of(out))
    return result
