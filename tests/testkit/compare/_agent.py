"""A small tool-using agent on the official ``openai`` client, run against the loopback mock.

Two implementations of one agent: :func:`run_agent` (a function) and :class:`RefactoredAgent`
(the same agent rewritten as a class, building its messages in another way), so a test can
show that a refactor which leaves every request byte-identical compares ``identical``. The
``system`` knob reproduces the classic cache breaker: a timestamp in the system prompt.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest

from dsh_testkit.capture import RequestCapture
from dsh_testkit.cli import main
from dsh_testkit.mock import MockDeepSeek, MockServer, Reply, ToolCall

KEY = "sk-" + "Q4w8E2r6T0" * 4
RULES = "\n".join(
    f"Rule {i}: answer precisely, cite the file you read, keep it short." for i in range(1, 41)
)
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        },
    }
]
PROMPTS = ("read a.txt", "and b.txt", "now summarize both")


def clock(step: int) -> str:
    """A timestamp that moves on every request, as ``datetime.now()`` would."""
    return f"2026-05-04T09:{step // 60:02d}:{step % 60:02d}Z"


def stable(_: int) -> str:
    return RULES


def stamped(step: int) -> str:
    return RULES + f"\nCurrent time: {clock(step)}"


def script() -> list[Reply]:
    call = ToolCall(name="read_file", arguments='{"path": "a.txt"}')
    return [Reply(reasoning="Let me read it.", tool_calls=(call,)), Reply(text="It says hi.")] * 3


def _client(base_url: str, capture: RequestCapture) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=base_url,
        api_key=KEY,
        http_client=httpx2.Client(transport=capture.transport(httpx2.HTTPTransport())),
    )


def _turn(client: openai.OpenAI, messages: list[dict[str, Any]]) -> dict[str, Any]:
    wire: Any = messages
    tools: Any = TOOLS
    done = client.chat.completions.create(model="deepseek-v4-flash", messages=wire, tools=tools)
    return done.choices[0].message.model_dump()


def run_agent(
    path: Path,
    *,
    system: Callable[[int], str] = stable,
    prompts: Sequence[str] = PROMPTS,
) -> Path:
    """Run the agent once against a fresh loopback mock; its traffic saved at ``path``."""
    mock = MockDeepSeek(script(), passback="off")
    capture = RequestCapture()
    with MockServer(mock) as server, _client(server.base_url, capture) as client:
        history: list[dict[str, Any]] = []
        step = 0
        for prompt in prompts:
            history.append({"role": "user", "content": prompt})
            while True:
                message = _turn(client, [{"role": "system", "content": system(step)}, *history])
                step += 1
                sent: dict[str, Any] = {"role": "assistant", "content": message["content"] or ""}
                if message.get("reasoning_content") is not None:
                    sent["reasoning_content"] = message["reasoning_content"]
                calls = message.get("tool_calls") or []
                if calls:
                    sent["tool_calls"] = [
                        {"id": c["id"], "type": "function", "function": c["function"]}
                        for c in calls
                    ]
                history.append(sent)
                if not calls:
                    break
                for c in calls:
                    history.append({"role": "tool", "tool_call_id": c["id"], "content": "hi"})
    capture.save(path)
    return path


class RefactoredAgent:
    """The same agent as :func:`run_agent`, rewritten: a class, a message builder per role."""

    def __init__(self, client: openai.OpenAI) -> None:
        self.client = client
        self.history: list[dict[str, Any]] = []
        self.steps = 0

    @staticmethod
    def _user(text: str) -> dict[str, Any]:
        return {"role": "user", "content": text}

    @staticmethod
    def _assistant(message: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"role": "assistant", "content": message["content"] or ""}
        if message.get("reasoning_content") is not None:
            out["reasoning_content"] = message["reasoning_content"]
        if message.get("tool_calls"):
            out["tool_calls"] = [
                {"id": c["id"], "type": "function", "function": c["function"]}
                for c in message["tool_calls"]
            ]
        return out

    def ask(self, prompt: str) -> str:
        self.history.append(self._user(prompt))
        while True:
            message = _turn(self.client, [{"role": "system", "content": RULES}, *self.history])
            self.steps += 1
            self.history.append(self._assistant(message))
            calls = message.get("tool_calls") or []
            if not calls:
                return str(message["content"])
            self.history.extend(
                {"role": "tool", "tool_call_id": c["id"], "content": "hi"} for c in calls
            )

    @classmethod
    def run(cls, path: Path, prompts: Sequence[str] = PROMPTS) -> Path:
        mock = MockDeepSeek(script(), passback="off")
        capture = RequestCapture()
        with MockServer(mock) as server, _client(server.base_url, capture) as client:
            agent = cls(client)
            for prompt in prompts:
                agent.ask(prompt)
        capture.save(path)
        return path


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``dsh-testkit ARGS…`` in this process (exit status, stdout, stderr); the slow tests run
    the command in a fresh Python instead (``tests._support.run_cli``)."""
    capsys.readouterr()
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def request_bodies(path: Path) -> list[bytes]:
    """The exact request bodies a saved capture holds."""
    return [r.content for r in RequestCapture.load(path).requests]


def json_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
