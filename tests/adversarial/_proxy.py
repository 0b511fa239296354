"""The recording proxy under hostile traffic: the judges shared by the tests and ``make stress``.

A round runs ``dsh-testkit proxy`` as a user runs it (its own process, an open-file limit of
64 by default), in front of a loopback upstream that misbehaves on request (hangs, stalls,
cuts, 5xx, slow streams, large answers), and sends it a mix of clients that complete, leave
mid-answer, leave before the head, reset, send malformed HTTP or plant secrets. Every model
request carries a tag (``#n kind``) in its last message, so each one's record can be found in
the trace and judged:

- every request that reached the proxy (not refused with a 503 over the cap) has exactly one
  record, with the outcome its kind must end with; a refused one has none;
- no planted secret, in any spelling, is in the trace, on stdout or on stderr;
- stderr stays short (no line per event), and normal requests after the hostile ones succeed;
- after ``kill -9`` with answers in flight, every exchange recorded before is still in the
  file, which a restarted proxy continues.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import json
import os
import random
import re
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import unquote

from tests._support import with_open_file_limit

KEY = "sk-" + "H0st1leKey2Planted3Here4"
CREDENTIAL = "Hostile7Client8Credential9"
"""The client's own credential: not key-shaped, sent as ``x-api-key`` and repeated in bodies."""
SECRETS = (KEY, CREDENTIAL)

SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
)

EXPECTED = {
    "ok": "delivered",
    "big": "delivered",
    "large": "delivered",
    "error": "delivered",  # a 500 relayed is an answer delivered
    "secret": "delivered",
    "slow-left": "abandoned",
    "hang-left": "abandoned",
    "reset": "abandoned",
    "stall": "upstream-timeout",
    "hang": "upstream-timeout",
    "cut": "upstream-error",
}
"""The outcome each kind of request must be recorded with."""


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(data), data)


def _event(text: str, usage: bool = False) -> bytes:
    payload: dict[str, Any] = {"choices": [{"index": 0, "delta": {"content": text}}]}
    if usage:
        payload["usage"] = {
            "prompt_tokens": 10,
            "completion_tokens": 3,
            "prompt_cache_hit_tokens": 0,
        }
    return b"data: " + json.dumps(payload).encode() + b"\n\n"


@dataclass
class Upstream:
    """A loopback upstream that misbehaves as each request's tag asks."""

    connections: int = 0
    opened: int = 0
    server: Any = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0, backlog=512)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"

    async def _answer(self, kind: str, size: int, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; ``False`` when the connection must close afterwards."""
        if kind in ("hang", "hang-left"):
            await asyncio.sleep(3600)
        if kind == "error":
            body = b'{"error":{"message":"upstream trouble","type":"server_error"}}'
            writer.write(
                b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\n\r\n%b" % (len(body), body)
            )
            return True
        if kind == "big":
            content = "b" * size
            body = json.dumps(
                {
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
                    "usage": {
                        "prompt_tokens": 10,
                        "completion_tokens": 1,
                        "prompt_cache_hit_tokens": 0,
                    },
                }
            ).encode()
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n"
                % len(body)
            )
            writer.write(body)
            return True
        writer.write(SSE_HEAD + _chunk(_event("first ")))
        await writer.drain()
        if kind == "stall":
            await asyncio.sleep(3600)
        if kind == "cut":
            return False
        pieces = 150 if kind in ("slow-left", "reset") else 3
        for i in range(pieces):
            if kind in ("slow-left", "reset"):
                await asyncio.sleep(0.02)
            writer.write(_chunk(_event(f"p{i} ", usage=i == pieces - 1)))
            await writer.drain()
        if kind == "secret":
            writer.write(_chunk(_event(f"echo {KEY} {CREDENTIAL}")))
        writer.write(_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        await writer.drain()
        return True

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.opened += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.decode("latin-1").split("\r\n"):
                    if line.lower().startswith("content-length:"):
                        length = int(line.split(":", 1)[1])
                body = await reader.readexactly(length)
                kind, size = "ok", 0
                match = re.search(rb"#\d+ ([a-z-]+)(?::(\d+))?", body)
                if match:
                    kind = match.group(1).decode()
                    size = int(match.group(2) or 0)
                work = asyncio.ensure_future(self._answer(kind, size, writer))
                gone = asyncio.ensure_future(reader.read())
                done, _ = await asyncio.wait({work, gone}, return_when=asyncio.FIRST_COMPLETED)
                if gone in done:
                    with contextlib.suppress(BaseException):
                        gone.result()  # retrieved: a reset is an end like any other
                if work not in done:  # the proxy gave up: stop producing, as an API does
                    work.cancel()
                    with contextlib.suppress(BaseException):
                        await work
                    return
                gone.cancel()
                with contextlib.suppress(BaseException):
                    await gone
                if not work.result():
                    return
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            self.connections -= 1
            writer.close()

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


@dataclass
class Proxy:
    process: asyncio.subprocess.Process
    base: str
    port: int
    stderr: list[str] = field(default_factory=list)
    stdout: list[str] = field(default_factory=list)
    _readers: list[asyncio.Task[None]] = field(default_factory=list)

    async def _drain(self, stream: asyncio.StreamReader, into: list[str]) -> None:
        while line := await stream.readline():
            into.append(line.decode("utf-8", "replace"))

    async def stop(self) -> int:
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signal.SIGINT)
        code = await asyncio.wait_for(self.process.wait(), 60)
        await asyncio.gather(*self._readers)
        return code

    async def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        await self.process.wait()
        await asyncio.gather(*self._readers)


async def start_proxy(upstream: str, out: Path, *args: str, nofile: int = 64) -> Proxy:
    """``dsh-testkit proxy`` in its own process with an open-file limit of ``nofile``."""

    process = await asyncio.create_subprocess_exec(
        *with_open_file_limit(
            nofile,
            "-m",
            "dsh_testkit.cli",
            "proxy",
            "--upstream",
            upstream,
            "--out",
            str(out),
            *args,
        ),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert process.stdout is not None and process.stderr is not None
    first = (await asyncio.wait_for(process.stdout.readline(), 60)).decode()
    match = re.fullmatch(r"(http://127\.0\.0\.1:(\d+))\n", first)  # the base URL alone
    if not match:
        rest = await process.stderr.read()
        raise AssertionError(f"the proxy did not start: {first!r} {rest.decode()!r}")
    proxy = Proxy(process, match.group(1), int(match.group(2)), stdout=[first])
    proxy._readers = [
        asyncio.create_task(proxy._drain(process.stdout, proxy.stdout)),
        asyncio.create_task(proxy._drain(process.stderr, proxy.stderr)),
    ]
    return proxy


# -- clients -------------------------------------------------------------------------------


@dataclass
class Sent:
    """One request a client sent, and what it saw."""

    tag: int
    kind: str
    refused: bool = False
    """Answered 503 over the connection cap (no record expected)."""
    status: int | None = None
    ended: bool = False


_ESCAPED: Final = "".join(f"\\u{ord(c):04x}" for c in CREDENTIAL)
"""The credential spelled with JSON escapes, as a client's serializer may write it."""


def request_bytes(tag: int, kind: str, *, size: int = 0) -> bytes:
    content = f"#{tag} {kind}" + (f":{size}" if size and kind == "big" else "")
    if kind == "large":
        content += " " + "x" * size
    if kind == "secret":
        content += f" my key {KEY}, my credential @@ and {CREDENTIAL}"
    text = json.dumps(
        {
            "model": "deepseek-chat",
            "stream": kind != "big",
            "messages": [{"role": "user", "content": content}],
        }
    )
    body = text.replace("@@", _ESCAPED).encode()
    head = (
        f"POST /chat/completions HTTP/1.1\r\nhost: localhost\r\nx-api-key: {CREDENTIAL}\r\n"
        f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def read_head(reader: asyncio.StreamReader, sent: Sent) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    sent.status = int(head.split(b" ", 2)[1])
    sent.refused = sent.status == 503 and b"too many connections" in await _peek_body(reader, head)
    return head


async def _peek_body(reader: asyncio.StreamReader, head: bytes) -> bytes:
    match = re.search(rb"content-length: (\d+)", head.lower())
    if not match:
        return b""
    return await reader.readexactly(int(match.group(1)))


async def read_rest(reader: asyncio.StreamReader, head: bytes, sent: Sent) -> None:
    if b"transfer-encoding: chunked" not in head.lower():
        sent.ended = True
        return
    try:
        while True:
            size = int((await reader.readuntil(b"\r\n"))[:-2], 16)
            if size == 0:
                await reader.readuntil(b"\r\n")
                sent.ended = True
                return
            await reader.readexactly(size + 2)
    except (asyncio.IncompleteReadError, ConnectionError):
        sent.ended = False


async def client(port: int, sent: Sent, *, size: int = 0) -> Sent:
    """One client of ``sent.kind``: it completes, leaves, or resets as the kind says."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        sent.refused = True  # the proxy could not even accept: counted as refused
        return sent
    try:
        writer.write(request_bytes(sent.tag, sent.kind, size=size))
        await writer.drain()
        if sent.kind == "hang-left":
            # The client gives up after a moment (unless refused at once with a 503).
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(read_head(reader, sent), 0.3)
            return sent
        head = await read_head(reader, sent)
        if sent.refused:
            return sent
        if sent.kind in ("slow-left", "reset"):
            await reader.read(200)
            if sent.kind == "reset":
                writer.transport.abort()
            return sent
        await read_rest(reader, head, sent)
        return sent
    except (asyncio.IncompleteReadError, ConnectionError):
        return sent
    finally:
        writer.close()


async def malformed(port: int) -> int | None:
    """Malformed HTTP: the proxy must answer it (4xx/5xx), never crash or hang."""
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError:
        return None
    try:
        writer.write(
            random.choice(
                [
                    b"GARBAGE\r\n\r\n",
                    b"POST / HTTP/9.9\r\n\r\n",
                    b"GET / HTTP/1.1\r\nbad header\r\n\r\n",
                ]
            )
        )
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
        return int(head.split(b" ", 2)[1])
    except (asyncio.IncompleteReadError, ConnectionError, TimeoutError):
        return None
    finally:
        writer.close()


# -- judging -------------------------------------------------------------------------------


def records_of(out: Path) -> list[dict[str, Any]]:
    lines = out.read_bytes().split(b"\n")
    return [json.loads(line) for line in lines[1:] if line.strip()]


def tag_of(record: dict[str, Any]) -> int | None:
    content = record["request"]["messages"][-1]["content"]
    match = re.match(r"#(\d+) ", content)
    return int(match.group(1)) if match else None


def judge(sent: list[Sent], records: list[dict[str, Any]]) -> list[str]:
    """The promises the records break for the requests ``sent`` (empty: none)."""
    broken: list[str] = []
    by_tag: dict[int, list[dict[str, Any]]] = collections.defaultdict(list)
    for record in records:
        tag = tag_of(record)
        if tag is not None:
            by_tag[tag].append(record)
    for request in sent:
        found = by_tag.get(request.tag, [])
        if request.refused:
            if found:
                broken.append(f"#{request.tag} {request.kind}: refused with a 503 but recorded")
            continue
        if len(found) != 1:
            broken.append(f"#{request.tag} {request.kind}: {len(found)} records, expected one")
            continue
        outcome = found[0].get("outcome")
        expected = EXPECTED[request.kind]
        if request.kind in ("slow-left", "reset") and outcome == "delivered" and request.ended:
            continue  # it had its whole answer before it left
        if outcome != expected:
            broken.append(
                f"#{request.tag} {request.kind}: recorded {outcome!r}, expected {expected!r}"
            )
        if expected == "delivered" and request.kind != "big" and not request.ended:
            broken.append(
                f"#{request.tag} {request.kind}: delivered, but the client's answer was cut"
            )
    return broken


def leaks(*texts: str) -> list[str]:
    """Planted secrets found in ``texts`` (raw, or percent/escape-decoded)."""
    found = []
    for text in texts:
        escapes = text.encode("latin-1", "replace").decode("unicode_escape", "replace")
        for form in (text, unquote(text), escapes):
            found += [secret for secret in SECRETS if secret in form]
    return sorted(set(found))


def rss_kib(pid: int) -> int:
    """A process's resident set (Linux ``/proc``), in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


Kinds = Callable[[int], Awaitable[Sent]]


@dataclass
class Round:
    """What one hostile round sent and saw."""

    sent: list[Sent] = field(default_factory=list)
    malformed: list[int | None] = field(default_factory=list)
    after: list[Sent] = field(default_factory=list)
    """Normal requests sent after the hostile ones (they must succeed)."""


async def hostile_round(port: int, first_tag: int, rng: random.Random, *, scale: int = 1) -> Round:
    """One round: a burst of 40 clients that send and give up before any answer (most over the
    connection cap), then hostile clients eight at a time (leavers, resets, hangs, stalls,
    cuts, 5xx, secrets, large answers) with malformed HTTP among them, then normal requests one
    after the other."""
    done = Round()
    tags = iter(range(first_tag, first_tag + 10_000))
    burst = [Sent(next(tags), "hang-left") for _ in range(40)]
    await asyncio.gather(*(client(port, sent) for sent in burst))
    done.sent += burst
    kinds = (
        ["hang-left"] * 4
        + ["slow-left"] * 8
        + ["reset"] * 6
        + ["stall"] * 2
        + ["cut"] * 3
        + ["error"] * 3
        + ["secret"] * 3
        + ["ok"] * 10
        + ["hang"] * 2
        + ["big"] * 2
    ) * scale
    rng.shuffle(kinds)
    gate = asyncio.Semaphore(8)

    async def gated(job: Awaitable[Any]) -> Any:
        async with gate:
            return await job

    jobs: list[Awaitable[Any]] = []
    for kind in kinds:
        sent = Sent(next(tags), kind)
        done.sent.append(sent)
        jobs.append(gated(client(port, sent, size=300_000 if kind == "big" else 0)))
    jobs += [gated(malformed(port)) for _ in range(4 * scale)]
    results = await asyncio.gather(*jobs)
    done.malformed = [r for r in results if not isinstance(r, Sent)]
    await asyncio.sleep(0.5)  # let the leavers' exchanges be cancelled and recorded
    for _ in range(5):
        done.after.append(await client(port, Sent(next(tags), "ok")))
    done.sent += done.after
    return done
