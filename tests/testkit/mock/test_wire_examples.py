"""The documented wire examples end to end: DeepSeek's four context-caching sequences (docs/wire.md
§2.1) through ``/chat/completions`` with the official openai SDK, and the README's snippet
against ``dsh-testkit serve`` run as a user runs it."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest

from dsh_testkit.mock import (
    MockDeepSeek,
    MockHandler,
    MockServer,
    Reply,
)
from dsh_testkit.prompt import PrefixCacheSimulator, PromptRenderer
from dsh_testkit.prompt._granularity import DEFAULT_GRANULARITY

from ._helpers import API_KEY

RENDERER = PromptRenderer()
"""The mock's default renderer: the token boundaries the cache simulator cuts at."""

GRANULARITY = DEFAULT_GRANULARITY
"""The simulator's default hit granularity (128: every V4-era live hit is a multiple of it)."""

OFF = {"thinking": {"type": "disabled"}}

WORDS = [
    *("cache", "prefix", "unit", "token", "request", "model", "output", "input", "system"),
    *("document", "question", "answer", "harness", "agent", "tool", "result", "stream"),
    *("reasoning", "history", "session", "context", "window", "budget"),
]


def prose(seed: int, words: int) -> str:
    """Deterministic filler text, different for each seed."""
    return " ".join(WORDS[(seed * 7 + i * (seed + 3)) % len(WORDS)] for i in range(words)) + "."


SYSTEM_A = "You are a careful assistant. " + prose(1, 300)


def system(text: str) -> dict[str, Any]:
    return {"role": "system", "content": text}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def aligned(tokens: int) -> int:
    return tokens // GRANULARITY * GRANULARITY


def shared_prefix(*bodies: dict[str, Any]) -> int:
    """Tokens the rendered prompts of ``bodies`` have in common from the start."""
    prompts = [RENDERER.render_chat(body).tokens for body in bodies]
    length = 0
    for column in zip(*prompts, strict=False):
        if len(set(column)) != 1:
            break
        length += 1
    return length


@dataclass
class Chat:
    """The openai SDK on one way to the mock, sending ``/chat/completions`` requests."""

    mock: MockDeepSeek
    client: openai.OpenAI

    def ask(self, *messages: dict[str, Any], **extra: Any) -> Any:
        """One request; returns the SDK's usage object, checked against the documented laws."""
        wire_messages: Any = list(messages)  # plain dicts, as on the wire
        reply = self.client.chat.completions.create(
            model="deepseek-v4-flash", messages=wire_messages, extra_body=extra or None
        )
        usage = reply.usage
        assert usage is not None and usage.model_extra is not None
        # DeepSeek's own usage fields are extras to the SDK's model
        hit = usage.model_extra["prompt_cache_hit_tokens"]
        miss = usage.model_extra["prompt_cache_miss_tokens"]
        assert isinstance(hit, int) and isinstance(miss, int)
        assert usage.prompt_tokens == hit + miss  # docs/wire.md §1.7
        assert usage.prompt_tokens_details is not None
        assert usage.prompt_tokens_details.cached_tokens == hit  # the OpenAI-style mirror
        assert hit % GRANULARITY == 0
        return usage

    @staticmethod
    def body(*messages: dict[str, Any], **extra: Any) -> dict[str, Any]:
        """The body :meth:`ask` sends for these messages (what the mock renders)."""
        return {"model": "deepseek-v4-flash", "messages": list(messages), **extra}


@pytest.fixture(params=["in-process", "loopback"])
def chat(request: pytest.FixtureRequest) -> Iterator[Chat]:
    yield from _chat(request.param, MockDeepSeek(api_keys={API_KEY}))


@pytest.fixture(params=["in-process", "loopback"])
def literal_chat(request: pytest.FixtureRequest) -> Iterator[Chat]:
    """The documented rule taken literally: a common prefix persists only once two requests
    share it (the calibrated default reuses any block-aligned prefix of an earlier prompt)."""
    cache = PrefixCacheSimulator(common_prefix="detected")
    yield from _chat(request.param, MockDeepSeek(api_keys={API_KEY}, cache=cache))


def _chat(way: str, mock: MockDeepSeek) -> Iterator[Chat]:
    if way == "in-process":
        http = httpx2.Client(transport=httpx2.MockTransport(MockHandler(mock)))
        with openai.OpenAI(
            base_url="https://api.deepseek.com", api_key=API_KEY, http_client=http, max_retries=0
        ) as client:
            yield Chat(mock=mock, client=client)
        return
    with (
        MockServer(mock) as server,
        openai.OpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=0) as client,
    ):
        yield Chat(mock=mock, client=client)


# -- docs/wire.md §2.1, the documented sequences ---------------------------------------------------


def test_doc_a_b_then_a_b_c_hits_a_b(chat: Chat) -> None:
    a_b = (system(SYSTEM_A), user("B: " + prose(2, 40)))
    a_b_c = (*a_b, user("C: and one more thing."))
    first = chat.ask(*a_b)
    second = chat.ask(*a_b_c)
    assert first.prompt_cache_hit_tokens == 0
    assert first.prompt_cache_miss_tokens == first.prompt_tokens
    # the unit "A+B" ends where request 1's input ends (before its generation prefix)
    unit = RENDERER.render_chat(chat.body(*a_b)).input_end
    assert second.prompt_cache_hit_tokens == aligned(unit) > 0
    assert second.prompt_cache_miss_tokens == second.prompt_tokens - aligned(unit)


def test_doc_a_b_then_a_c_misses_then_a_d_hits_a(literal_chat: Chat) -> None:
    chat = literal_chat
    a_b = (system(SYSTEM_A), user("Bravo " + prose(3, 30)))
    a_c = (system(SYSTEM_A), user("Charlie " + prose(4, 30)))
    a_d = (system(SYSTEM_A), user("Delta " + prose(5, 30)))
    assert chat.ask(*a_b).prompt_cache_hit_tokens == 0
    missed = chat.ask(*a_c)
    # A+C does not fully match the unit A+B: no partial use of a unit
    assert missed.prompt_cache_hit_tokens == 0
    assert missed.prompt_cache_miss_tokens == missed.prompt_tokens
    # the common prefix A was persisted on the way; A+D hits exactly it
    shared = shared_prefix(chat.body(*a_b), chat.body(*a_c))
    assert shared == shared_prefix(chat.body(*a_b), chat.body(*a_d))
    third = chat.ask(*a_d)
    assert third.prompt_cache_hit_tokens == aligned(shared) > 0
    assert third.prompt_cache_hit_tokens >= aligned(RENDERER.count(SYSTEM_A))  # A is the system
    assert third.prompt_cache_miss_tokens == third.prompt_tokens - aligned(shared)


def test_calibrated_default_a_c_hits_the_shared_block_prefix_at_once(chat: Chat) -> None:
    """Measured on live traffic: a later session hits the 128-aligned prefix it shares with an
    earlier one (its system prompt) on its first request; the default follows that."""
    a_b = (system(SYSTEM_A), user("Bravo " + prose(3, 30)))
    a_c = (system(SYSTEM_A), user("Charlie " + prose(4, 30)))
    assert chat.ask(*a_b).prompt_cache_hit_tokens == 0
    hit = chat.ask(*a_c)
    shared = shared_prefix(chat.body(*a_b), chat.body(*a_c))
    assert hit.prompt_cache_hit_tokens == aligned(shared) > 0
    assert hit.prompt_cache_miss_tokens == hit.prompt_tokens - aligned(shared)


def test_doc_multi_round_chat_reuses_the_first_request(chat: Chat) -> None:
    answer = "The capital of France is Paris. " + prose(6, 60)
    chat.mock.push(Reply(text=answer), Reply(text="Berlin."))
    round_one = (system(SYSTEM_A), user("What is the capital of France?"))
    first = chat.ask(*round_one, **OFF)
    assert first.prompt_cache_hit_tokens == 0
    round_two = (*round_one, {"role": "assistant", "content": answer}, user("And of Germany?"))
    second = chat.ask(*round_two, **OFF)
    # request 2 = request 1 + its reply + a new question: it hits request 1's "end of model
    # output" unit, i.e. everything request 1 read and wrote
    whole = first.prompt_tokens + first.completion_tokens
    assert second.prompt_cache_hit_tokens == aligned(whole)
    assert second.prompt_cache_hit_tokens > aligned(first.prompt_tokens)  # the output too
    assert second.prompt_cache_miss_tokens == second.prompt_tokens - aligned(whole)


def test_doc_long_document_qa_first_two_miss_third_hits(literal_chat: Chat) -> None:
    chat = literal_chat
    document = "Report. " + prose(7, 1200)

    def question(text: str) -> tuple[dict[str, Any], ...]:
        return (
            system("You answer questions about the document."),
            user(f"{document}\n\nQuestion: {text}"),
        )

    chat.mock.push(*[Reply(text="Unknown.")] * 3)
    first = chat.ask(*question("Who wrote it?"), **OFF)
    second = chat.ask(*question("When was it written?"), **OFF)
    third = chat.ask(*question("Why?"), **OFF)
    assert (first.prompt_cache_hit_tokens, second.prompt_cache_hit_tokens) == (0, 0)
    assert second.prompt_cache_miss_tokens == second.prompt_tokens
    # after request 2, system + document is persisted as a common prefix; request 3 hits it
    shared = shared_prefix(
        chat.body(*question("Who wrote it?"), **OFF),
        chat.body(*question("When was it written?"), **OFF),
    )
    assert third.prompt_cache_hit_tokens == aligned(shared)
    assert third.prompt_cache_hit_tokens >= aligned(RENDERER.count(document))
    assert third.prompt_cache_miss_tokens == third.prompt_tokens - aligned(shared)


# -- the README's snippet against `dsh-testkit serve` --------------------------------------------

README = Path(__file__).resolve().parents[3] / "README.md"

SNIPPET_CALLS = """\
client = openai.OpenAI(base_url="http://127.0.0.1:40213", api_key="sk-local-anything")
reply = client.chat.completions.create(
    model="deepseek-v4-flash", messages=[{"role": "user", "content": "hello"}]
)
print(reply.choices[0].message.content, reply.usage.prompt_cache_hit_tokens)
"""
"""The README's calls, verbatim; the test below runs these against a served mock."""


@pytest.fixture
def served() -> Iterator[tuple[subprocess.Popen[str], str]]:
    """``dsh-testkit serve --port 0`` as a subprocess; yields it with its base URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "dsh_testkit.cli", "serve", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        yield process, process.stdout.readline().strip()
    finally:
        if process.poll() is None:
            process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - only a wedged server
            process.kill()
            process.wait(timeout=10)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


def test_the_readme_openai_snippet_against_dsh_testkit_serve(
    served: tuple[subprocess.Popen[str], str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    process, url = served
    assert url.startswith("http://127.0.0.1:"), url
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)  # loopback only, whatever the environment
    # exactly the README's calls, with the URL the server printed
    client = openai.OpenAI(base_url=url, api_key="sk-local-anything")
    reply = client.chat.completions.create(
        model="deepseek-v4-flash", messages=[{"role": "user", "content": "hello"}]
    )
    print(reply.choices[0].message.content, reply.usage.prompt_cache_hit_tokens)  # type: ignore[union-attr]
    client.close()

    content = reply.choices[0].message.content
    assert content is not None and content.startswith("Mock DeepSeek reply")
    assert reply.usage is not None
    hit = reply.usage.prompt_cache_hit_tokens  # type: ignore[attr-defined]
    assert isinstance(hit, int) and not isinstance(hit, bool)
    assert hit == 0  # a fresh server has nothing cached
    assert capsys.readouterr().out == f"{content} {hit}\n"
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=10) == 0


def test_the_readme_still_shows_the_snippet_this_file_runs() -> None:
    if not README.is_file():
        pytest.skip(f"no README at {README} (not a source checkout)")
    text = README.read_text(encoding="utf-8")
    assert ".venv/bin/dsh-testkit serve --port 0" in text
    assert SNIPPET_CALLS in text, (
        "README's openai snippet changed: update SNIPPET_CALLS and the test"
    )
