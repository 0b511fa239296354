"""4. Cassette replay: a 100-request streaming cassette, ours vs plain vcrpy, and load time.

One recording, two files: the cassette is recorded once through ``use_cassette`` (mode
``rewrite``) from the in-process mock, then the same interactions are written again with plain
vcrpy's default YAML serializer. The same client code replays each: 100 streaming chat requests
of a growing conversation, every SSE stream read line by line to its end. Goal (issue 17 §1):
ours at or under plain vcrpy's time for both load and replay, measured side by side here, while
ours keeps SSE played one event per chunk, scrubbing on and byte-stable readable files.
"""

from __future__ import annotations

import asyncio
import gc
import shutil
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import httpx

from ._common import Figure, Section, median

__all__ = ["run"]

REQUESTS = 100
QUICK_REQUESTS = 10
BASE_URL = "https://api.deepseek.com"
_PARAGRAPH = "The build failed in the linker step; the log points at a missing symbol. " * 3


def _bodies(count: int) -> list[dict[str, Any]]:
    """``count`` streaming chat requests of one conversation, each one exchange longer."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You are a careful coding agent.\n" * 20}
    ]
    out = []
    for n in range(count):
        messages.append({"role": "user", "content": f"Step {n}: {_PARAGRAPH}"})
        out.append({"model": "deepseek-chat", "stream": True, "messages": list(messages)})
        messages.append({"role": "assistant", "content": f"Done with step {n}. {_PARAGRAPH}"})
    return out


async def _replay(bodies: list[dict[str, Any]]) -> int:
    """Send every body and read its SSE stream line by line; returns the lines read."""

    def live(request: httpx.Request) -> httpx.Response:
        raise AssertionError(f"a replayed request reached the network: {request.url}")

    lines = 0
    async with httpx.AsyncClient(base_url=BASE_URL, transport=httpx.MockTransport(live)) as client:
        for body in bodies:
            async with client.stream(
                "POST",
                "/chat/completions",
                json=body,
                headers={"authorization": "Bearer sk-bench"},
            ) as response:
                async for line in response.aiter_lines():
                    lines += bool(line)
    return lines


async def _record(path: Path, bodies: list[dict[str, Any]]) -> None:
    from dsh_testkit.cassettes import use_cassette
    from dsh_testkit.mock import MockDeepSeek, mock_transport

    transport = mock_transport(MockDeepSeek(seed=0))
    with use_cassette(path, mode="rewrite"):
        async with httpx.AsyncClient(base_url=BASE_URL, transport=transport) as client:
            for body in bodies:
                async with client.stream(
                    "POST",
                    "/chat/completions",
                    json=body,
                    headers={"authorization": "Bearer sk-bench"},
                ) as response:
                    await response.aread()


def _to_plain_vcrpy(ours: Path, plain: Path) -> None:
    """Write the interactions of our cassette with vcrpy's default (YAML) serializer."""
    from vcr.serialize import deserialize, serialize
    from vcr.serializers import yamlserializer

    from dsh_testkit.cassettes._format import CassetteSerializer

    loaded = deserialize(ours.read_text(encoding="utf-8"), CassetteSerializer)
    requests, responses = loaded[0], loaded[1]
    for response in responses:
        response["body"].pop("chunks", None)  # ours only: the SSE event boundaries
    plain.write_text(
        serialize({"requests": requests, "responses": responses}, yamlserializer),
        encoding="utf-8",
    )


def _ours(path: Path) -> AbstractContextManager[Any]:
    from dsh_testkit.cassettes import use_cassette

    return use_cassette(path)


def _plain(path: Path) -> AbstractContextManager[Any]:
    import vcr

    context: AbstractContextManager[Any] = vcr.VCR().use_cassette(str(path))
    return context


def _timed_replay(
    open_cassette: Callable[..., AbstractContextManager[Any]],
    path: Path,
    bodies: list[dict[str, Any]],
) -> tuple[float, float, int]:
    """(seconds to load, seconds to replay every request, lines read)."""
    gc.collect()
    start = time.perf_counter()
    with open_cassette(path):
        loaded = time.perf_counter()
        lines = asyncio.run(_replay(bodies))
        done = time.perf_counter()
    return loaded - start, done - loaded, lines


def run(quick: bool) -> Section:
    count = QUICK_REQUESTS if quick else REQUESTS
    rounds = 2 if quick else 3
    bodies = _bodies(count)
    tmp = Path(tempfile.mkdtemp(prefix="dsh-bench-cassette-"))
    try:
        ours_path, plain_path = tmp / "ours.yaml", tmp / "plain-vcrpy.yaml"
        asyncio.run(_record(ours_path, bodies))
        _to_plain_vcrpy(ours_path, plain_path)
        cases = {"ours": (_ours, ours_path), "plain vcrpy": (_plain, plain_path)}
        replay: dict[str, list[float]] = {name: [] for name in cases}
        load: dict[str, list[float]] = {name: [] for name in cases}
        lines: dict[str, int] = {}
        for r in range(rounds):
            for name in list(cases)[:: 1 if r % 2 == 0 else -1]:
                opener, path = cases[name]
                loading, seconds, lines[name] = _timed_replay(opener, path, bodies)
                load[name].append(loading)
                replay[name].append(seconds)
        sizes = {name: path.stat().st_size for name, (_, path) in cases.items()}
    finally:
        shutil.rmtree(tmp)
    section = Section(
        key="cassette",
        title="Cassette replay",
        method=(
            f"A {count}-request streaming conversation (request k carries k user/assistant "
            "exchanges, ~0.5 KB each, after a 20-line system prompt) recorded once from the "
            "in-process mock through `use_cassette(mode='rewrite')`; the same interactions are then "
            "written with vcrpy's default YAML serializer (`vcr.VCR().use_cassette` defaults: "
            "match on method, scheme, host, port, path, query). One `httpx.AsyncClient` replays "
            "all requests, reading each SSE body with `aiter_lines()`. Replay = the requests "
            "inside the `with` block; load = entering the block (reading and parsing the file). "
            f"{rounds} rounds, alternating which goes first; medians."
        ),
    )
    ours, plain = median(replay["ours"]), median(replay["plain vcrpy"])
    section.figures += [
        Figure(
            label=f"replay {count} requests, ours",
            value=ours * 1000,
            unit="ms",
            note=f"{lines.get('ours', 0):,} SSE lines, one stream chunk per event",
        ),
        Figure(
            label=f"replay {count} requests, plain vcrpy",
            value=plain * 1000,
            unit="ms",
            note=f"{lines.get('plain vcrpy', 0):,} SSE lines, each body as one chunk",
        ),
        Figure(
            label="replay time, ours / plain vcrpy",
            value=ours / plain,
            unit="×",
            goal="≤ 1.0",
            ok=ours / plain <= 1.0,
        ),
        Figure(
            label="cassette load, ours",
            value=median(load["ours"]) * 1000,
            unit="ms",
            note=f"file {sizes['ours'] / 1024:,.0f} KiB",
        ),
        Figure(
            label="cassette load, plain vcrpy",
            value=median(load["plain vcrpy"]) * 1000,
            unit="ms",
            note=f"file {sizes['plain vcrpy'] / 1024:,.0f} KiB",
        ),
        Figure(
            label="load time, ours / plain vcrpy",
            value=median(load["ours"]) / median(load["plain vcrpy"]),
            unit="×",
            goal="≤ 1.0",
            ok=median(load["ours"]) / median(load["plain vcrpy"]) <= 1.0,
        ),
    ]
    return section
