"""The recording proxy under hostile traffic, bounded to seconds (``make stress`` runs it longer).

``dsh-testkit proxy`` in its own process with 64 file descriptors, a misbehaving loopback
upstream, and clients that leave, reset, hang, plant secrets and send malformed HTTP
(``_proxy.py`` holds the round and its judges). Then ``kill -9`` with answers in flight, and a
restart on the same trace file.
"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest

from dsh_testkit.traces import load_trace
from tests.adversarial._proxy import (
    Round,
    Sent,
    Upstream,
    client,
    hostile_round,
    judge,
    leaks,
    records_of,
    start_proxy,
    tag_of,
)

pytestmark = pytest.mark.slow


def test_a_hostile_round_breaks_no_promise(tmp_path: Path) -> None:
    out = tmp_path / "hostile.trace"

    async def main() -> tuple[Round, list[str], list[str], int, int]:
        upstream = Upstream()
        url = await upstream.start()
        proxy = await start_proxy(
            url, out, "--idle-timeout", "1", "--first-byte-timeout", "1", nofile=64
        )
        done = await hostile_round(proxy.port, 0, random.Random(0))
        code = await proxy.stop()
        await asyncio.sleep(0.2)
        left = upstream.connections
        upstream.close()
        return done, proxy.stdout, proxy.stderr, code, left

    done, stdout, stderr, code, left = asyncio.run(main())
    assert code == 0, "".join(stderr)
    records = records_of(out)
    assert judge(done.sent, records) == []
    assert any(s.refused for s in done.sent), "the burst exceeded the connection cap"
    assert all(s.status == 200 and s.ended for s in done.after)
    assert all(status is not None and status >= 400 for status in done.malformed)
    assert len(stderr) <= 5, "".join(stderr)  # the summary line, no line per event
    assert leaks(out.read_text(encoding="utf-8"), *stdout, *stderr) == []
    assert len(load_trace(out)) == len(records)
    assert left == 0  # every upstream connection ended with the proxy


def test_kill_9_with_answers_in_flight_loses_no_recorded_exchange(tmp_path: Path) -> None:
    out = tmp_path / "killed.trace"

    async def main() -> tuple[list[int | None], list[int | None], list[str]]:
        upstream = Upstream()
        url = await upstream.start()
        proxy = await start_proxy(url, out)
        before = [await client(proxy.port, Sent(n, "ok")) for n in range(5)]
        assert all(s.ended for s in before)
        flying = [
            asyncio.ensure_future(client(proxy.port, Sent(100 + n, "slow-left"))) for n in range(10)
        ]
        await asyncio.sleep(0.3)
        await proxy.kill()  # kill -9, ten answers streaming
        await asyncio.gather(*flying)
        survived = [tag_of(r) for r in records_of(out)]
        again = await start_proxy(url, out)
        after = [await client(again.port, Sent(200 + n, "ok")) for n in range(3)]
        assert all(s.ended for s in after)
        await again.stop()
        upstream.close()
        return survived, [tag_of(r) for r in records_of(out)], again.stderr

    survived, final, stderr = asyncio.run(main())
    assert survived[:5] == [0, 1, 2, 3, 4]
    assert final[: len(survived)] == survived  # nothing recorded before the kill was lost
    assert final[len(survived) :] == [200, 201, 202]
    assert any("continuing" in line for line in stderr)
    assert len(load_trace(out)) == len(final)
