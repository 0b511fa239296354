"""The repository's cassette scenarios, and the commands that (re-)record them.

Each :class:`CassetteScenario` drives :class:`dsh_core.providers.DeepSeekProvider` through a
fixed conversation (building each follow-up request from the streamed answer, as an agent loop
would) and carries the mock script that plays the model's part when no live key is at hand. The
same driver replays the cassette in tests, so a change in how the provider serializes requests
shows up as a :class:`~dsh_testkit.CassetteMismatch` naming the changed field.

``python -m tools.record_cassettes record-mock DIR`` records every scenario over real HTTP
against the loopback mock server; ``record-live DIR`` re-records the scenarios the live API can
produce (not the injected faults) when ``DEEPSEEK_API_KEY`` is set, and refuses otherwise. The
key is read from the environment only and never printed; cassettes are scrubbed before writing.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TextIO

from dsh_core import (
    Finish,
    GenerateOptions,
    Message,
    StreamChunk,
    ToolCallBlock,
    ToolSchema,
    assistant_message,
    freeze_json,
    tool_result_message,
    user_message,
)
from dsh_core._assembly import BlockAssembler
from dsh_core.providers.deepseek import API_KEY_ENV, BASE_URL_ENV
from dsh_testkit.cassettes import RecordingRefused

__all__ = [
    "API_KEY_ENV",
    "BASE_URL_ENV",
    "LIVE_ORIGIN",
    "SCENARIOS",
    "CassetteScenario",
    "Transcript",
    "main",
    "record_scenarios",
]

LIVE_ORIGIN: Final = "https://api.deepseek.com"
"""Every cassette files its requests under this origin, whatever it was recorded against."""
MODEL: Final = "deepseek-v4-flash"
PROVIDER: Final = "deepseek"
SYSTEM: Final = "You are a terse assistant.\nAnswer in one short sentence."

READ_FILE = ToolSchema(
    name="read_file",
    description="Read a text file from the working directory.",
    parameters=freeze_json(
        {
            "type": "object",
            "properties": {"path": {"type": "string", "description": "Relative path of the file."}},
            "required": ["path"],
        }
    ),
)
FILES: Final = {"notes.txt": "buy milk", "a.txt": "alpha", "b.txt": "beta"}
"""What the scenarios' ``read_file`` tool returns (a fixed, fake working directory)."""


class _Ids:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self) -> str:
        self.n += 1
        return f"msg-{self.n}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Transcript:
    """What a scenario run saw."""

    calls: tuple[tuple[GenerateOptions, tuple[StreamChunk, ...]], ...]
    """Each call's request and the chunks the provider streamed for it, in order."""


Driver = Callable[[Any], Awaitable[Transcript]]


@dataclass(frozen=True, slots=True, kw_only=True)
class CassetteScenario:
    """One recorded conversation: how to drive it and how the mock plays the model."""

    name: str
    """The cassette's file stem (``cassettes/<name>.yaml``)."""
    description: str
    live: bool
    """Whether the live API can produce it (injected faults cannot be re-recorded live)."""
    mock_script: Callable[[], Sequence[Any]]
    """The mock's script entries (built lazily: the mock is imported only when recording)."""
    run: Driver
    """Drives the calls through a provider (``DeepSeekProvider``) and returns what it saw."""


async def _call(provider: Any, request: GenerateOptions) -> tuple[StreamChunk, ...]:
    return tuple([chunk async for chunk in provider.stream(request)])


def _request(messages: Sequence[Message], *, tools: bool) -> GenerateOptions:
    return GenerateOptions(
        provider=PROVIDER,
        model=MODEL,
        messages=tuple(messages),
        system=SYSTEM,
        tools=(READ_FILE,) if tools else None,
        session_id="cassette-scenario",
    )


async def _converse(provider: Any, prompt: str, *, tools: bool, retries: int = 0) -> Transcript:
    """An agent loop in miniature: call, run the tool calls, call again until no calls."""
    ids = _Ids()
    messages: list[Message] = [user_message(prompt, id=ids())]
    calls: list[tuple[GenerateOptions, tuple[StreamChunk, ...]]] = []
    for _ in range(4):
        request = _request(messages, tools=tools)
        chunks = await _call(provider, request)
        calls.append((request, chunks))
        finish = chunks[-1] if chunks and isinstance(chunks[-1], Finish) else None
        failure = finish.reason.failure if finish is not None else None
        if finish is not None and finish.reason.kind == "error":
            if retries and failure is not None and failure.retryable:
                retries -= 1
                continue  # the byte-identical request again
            break
        assembler = BlockAssembler()
        for chunk in chunks:
            assembler.feed(chunk)
        blocks = assembler.blocks()
        messages.append(assistant_message(blocks, provider=PROVIDER, model=MODEL, id=ids()))
        tool_calls = [b for b in blocks if isinstance(b, ToolCallBlock)]
        if not tool_calls:
            break
        for call in tool_calls:
            messages.append(tool_result_message(call.id, _run_read_file(call.arguments), id=ids()))
    return Transcript(calls=tuple(calls))


def _run_read_file(arguments: str) -> str:
    import json

    try:
        path = json.loads(arguments).get("path", "")
    except (ValueError, AttributeError):
        return "error: arguments are not a JSON object"
    return FILES.get(path, f"error: no such file {path!r}")


def _plain_chat_script() -> Sequence[Any]:
    from dsh_testkit.mock import Reply

    return [Reply(text="Hello! How can I help you today?", reasoning="A greeting.")]


def _one_tool_call_script() -> Sequence[Any]:
    from dsh_testkit.mock import Reply, ToolCall

    return [
        Reply(
            reasoning="I should read the file.",
            tool_calls=(ToolCall(name="read_file", arguments='{"path":"notes.txt"}'),),
        ),
        Reply(text="It says: buy milk."),
    ]


def _parallel_script() -> Sequence[Any]:
    from dsh_testkit.mock import Reply, ToolCall

    return [
        Reply(
            reasoning="Read both files at once.",
            tool_calls=(
                ToolCall(name="read_file", arguments='{"path":"a.txt"}'),
                ToolCall(name="read_file", arguments='{"path":"b.txt"}'),
            ),
        ),
        Reply(text="a.txt says alpha and b.txt says beta."),
    ]


def _rate_limit_script() -> Sequence[Any]:
    from dsh_testkit.mock import ErrorReply, Reply

    return [ErrorReply(status=429, retry_after="1"), Reply(text="Hello after the retry.")]


def _eof_script() -> Sequence[Any]:
    from dsh_testkit.mock import Reply

    return [Reply(text="This answer is cut off before the end.", fault="eof", fault_after=3)]


SCENARIOS: Final[Mapping[str, CassetteScenario]] = {
    s.name: s
    for s in (
        CassetteScenario(
            name="plain-chat",
            description="One streamed answer to a greeting; no tools.",
            live=True,
            mock_script=_plain_chat_script,
            run=lambda provider: _converse(provider, "Say hello.", tools=False),
        ),
        CassetteScenario(
            name="one-tool-call",
            description="The model calls read_file once, then answers from its result.",
            live=True,
            mock_script=_one_tool_call_script,
            run=lambda provider: _converse(
                provider, "What does notes.txt say? Use the read_file tool.", tools=True
            ),
        ),
        CassetteScenario(
            name="parallel-tool-calls",
            description="The model calls read_file twice in one answer, then answers from both.",
            live=True,
            mock_script=_parallel_script,
            run=lambda provider: _converse(
                provider,
                "What do a.txt and b.txt say? Read both with read_file in parallel.",
                tools=True,
            ),
        ),
        CassetteScenario(
            name="rate-limit-retry",
            description="HTTP 429 with Retry-After, then the identical request succeeds.",
            live=False,
            mock_script=_rate_limit_script,
            run=lambda provider: _converse(provider, "Say hello.", tools=False, retries=1),
        ),
        CassetteScenario(
            name="eof-without-done",
            description="The stream ends cleanly after a few events with no [DONE] (truncation).",
            live=False,
            mock_script=_eof_script,
            run=lambda provider: _converse(provider, "Tell me a long story.", tools=False),
        ),
    )
}
"""Every scenario of ``cassettes/``, by cassette name."""

_MOCK_NOTE: Final = (
    "recorded over real HTTP against the loopback mock server (dsh_testkit.mock.MockServer, "
    "seed 0), not the live DeepSeek API: no live key was available; requests are filed under "
    f"{LIVE_ORIGIN}. Re-record live with: python -m tools.record_cassettes record-live cassettes"
)


async def _record_one(
    scenario: CassetteScenario,
    directory: Path,
    *,
    base_url: str,
    api_key: str,
    recorded_against: str,
) -> Path:
    from dsh_core.providers import DeepSeekProvider
    from dsh_testkit.cassettes import use_cassette

    path = directory / f"{scenario.name}.yaml"
    metadata = {
        "scenario": scenario.name,
        "description": scenario.description,
        "recordedAgainst": recorded_against,
        "liveRecordable": scenario.live,
    }
    with use_cassette(
        path, mode="rewrite", metadata=metadata, rewrite_origin=(base_url, LIVE_ORIGIN)
    ):
        async with DeepSeekProvider(api_key=api_key, base_url=base_url) as provider:
            await scenario.run(provider)
    return path


async def record_scenarios(
    directory: Path,
    *,
    live: bool,
    names: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    out: TextIO = sys.stdout,
) -> list[Path]:
    """Record scenarios into ``directory``: against the loopback mock, or the live API.

    Live recording reads the key from ``env`` (default ``os.environ``) and refuses without one.
    """
    env = os.environ if env is None else env
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise RecordingRefused(
            f"unknown scenario(s) {', '.join(unknown)}; known: {', '.join(SCENARIOS)}"
        )
    chosen = [SCENARIOS[n] for n in (names or SCENARIOS)]
    directory.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    if live:
        key = env.get(API_KEY_ENV, "")
        if not key:
            raise RecordingRefused(
                f"record-live needs a DeepSeek API key in the environment variable {API_KEY_ENV}; "
                "none is set, so nothing was recorded (replay needs no key)"
            )
        base_url = (env.get(BASE_URL_ENV) or LIVE_ORIGIN).rstrip("/")
        for scenario in chosen:
            if not scenario.live:
                print(
                    f"skip {scenario.name}: a fault the live API cannot be made to produce "
                    "(kept as recorded against the mock)",
                    file=out,
                )
                continue
            path = await _record_one(
                scenario,
                directory,
                base_url=base_url,
                api_key=key,
                recorded_against=f"the live DeepSeek API at {base_url}",
            )
            print(f"recorded {path} (live)", file=out)
            written.append(path)
        return written
    from dsh_testkit.mock import MockDeepSeek, MockServer

    for scenario in chosen:
        with MockServer(MockDeepSeek(list(scenario.mock_script()), seed=0)) as server:
            path = await _record_one(
                scenario,
                directory,
                base_url=server.base_url,
                api_key="sk-mock-recording",
                recorded_against=_MOCK_NOTE,
            )
        print(f"recorded {path} (loopback mock)", file=out)
        written.append(path)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m tools.record_cassettes record-live|record-mock DIRECTORY [SCENARIO …]``."""
    parser = argparse.ArgumentParser(
        prog="python -m dsh_testkit.cassettes._api",
        description="Re-record the repository's cassettes.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for command, help_text in (
        ("record-live", f"re-record against the live DeepSeek API (needs ${API_KEY_ENV})"),
        ("record-mock", "re-record against the loopback mock server (no key, no network)"),
    ):
        cmd = sub.add_parser(command, help=help_text)
        cmd.add_argument("directory", type=Path)
        cmd.add_argument("scenarios", nargs="*", help=f"default: all ({', '.join(SCENARIOS)})")
    args = parser.parse_args(argv)
    try:
        asyncio.run(
            record_scenarios(
                args.directory, live=args.command == "record-live", names=args.scenarios
            )
        )
    except RecordingRefused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
