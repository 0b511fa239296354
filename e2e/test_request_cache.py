"""The keyed end-to-end test: prefix-stable requests earn real cache hits.

Two turns through our loop and ``DeepSeekProvider``: a long fixed persona (well above one cache
unit), one ``lookup`` tool. Turn 1 asks the model to look a key up and report the value, turn 2
to repeat it. Every request after the first must read from the provider's prefix cache.

With ``DEEPSEEK_API_KEY`` set, the ``live`` variant runs against the real API (model from
``DSH_E2E_MODEL``, default ``deepseek-v4-flash``; base URL from ``DSH_E2E_BASE_URL``). The
``mock`` variant always runs: the same scenario against the loopback mock server over real HTTP,
whose prefix-cache simulator applies DeepSeek's documented rules. Each run's log is written to a
temp dir, audited and read by the cache doctor inside the test.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_core import Agent, AgentOptions, Session, tool
from dsh_core.persistence import load_session, write_session
from dsh_core.providers import DeepSeekProvider
from dsh_testkit.doctor import assert_cache_friendly
from dsh_testkit.mock import MockDeepSeek, MockServer, Reply, ToolCall
from dsh_testkit.reports import audit_file

VALUE = "azure-falcon-42"
KEY = "deploy-color"

PERSONA = "\n".join(
    [
        "You are Quill, a meticulous release engineer for a small infrastructure team.",
        "You answer briefly and precisely, and you never guess a configuration value:",
        "when a value lives in the configuration store you look it up with the lookup tool",
        "and report exactly what the tool returned, character for character.",
    ]
    + [
        f"Operating rule {i}: keep deployments reproducible, record every change in the "
        f"release log, prefer small reversible steps, and state assumptions explicitly."
        for i in range(1, 41)
    ]
)
"""A long fixed system prompt: several thousand characters, far above one 64-token cache unit."""


@tool(
    parameters={
        "type": "object",
        "properties": {"key": {"type": "string", "description": "The configuration key."}},
        "required": ["key"],
    },
    concurrency_safe=True,
)
async def lookup(args: Any, ctx: Any) -> str:
    """Look up a key in the configuration store and return its value."""
    key = args.get("key") if isinstance(args, dict) else None
    return f"value({key}) = {VALUE}"


def _mock_script() -> list[Any]:
    return [
        Reply(
            reasoning="The user wants a configuration value; use the lookup tool.",
            tool_calls=(ToolCall(name="lookup", arguments=f'{{"key": "{KEY}"}}'),),
        ),
        Reply(text=f"The value of {KEY} is {VALUE}."),
        Reply(text=f"Once more: {VALUE}."),
    ]


@pytest.fixture(params=["mock", "live"])
def target(request: pytest.FixtureRequest) -> Iterator[tuple[str, str, str]]:
    """``(base_url, api_key, model)`` of the API under test."""
    if request.param == "live":
        key = os.environ.get("DEEPSEEK_API_KEY")
        if not key:
            pytest.skip("live variant: DEEPSEEK_API_KEY is not set (the mock variant ran instead)")
        base = os.environ.get("DSH_E2E_BASE_URL", "https://api.deepseek.com")
        yield base, key, os.environ.get("DSH_E2E_MODEL", "deepseek-v4-flash")
        return
    with MockServer(MockDeepSeek(_mock_script())) as server:
        yield server.base_url, "sk-e2e-mock-not-a-real-key", "deepseek-v4-flash"


async def test_request_cache(target: tuple[str, str, str], tmp_path: Path) -> None:
    base_url, api_key, model = target
    log_path = tmp_path / "cache-e2e.jsonl"
    session = Session.create("cache-e2e")
    async with DeepSeekProvider(api_key=api_key, base_url=base_url) as provider:
        with write_session(log_path, session):
            agent = Agent(
                session,
                provider,
                AgentOptions(provider="deepseek", model=model, system=PERSONA, invariants=True),
                tools=[lookup],
            )
            await agent.run(f'Look up the key "{KEY}" with the lookup tool and tell me the value.')
            final = await agent.run("Thanks. Repeat that value one more time.")

    messages = [e for e in load_session(log_path).events if e.type == "assistant/message"]
    assert len(messages) >= 3, "turn 1 needs a tool call and an answer, turn 2 an answer"
    usages = [m.data.get("usage") for m in messages]
    assert all(u is not None for u in usages), usages
    for i, usage in enumerate(usages[1:], start=2):
        assert usage.get("cacheReadTokens", 0) > 0, (
            f"request {i} read nothing from the cache: {usage}"
        )
    assert VALUE in final.text

    audit = audit_file(log_path)
    assert audit.ok, [v.to_json() for v in audit.violations]
    assert all(r.extends_previous for r in audit.requests[1:]), [
        r.to_json() for r in audit.requests
    ]
    # a prefix-stable client: nothing it did cost a hit (the provider's own misses allowed)
    report = assert_cache_friendly(log_path)
    assert report.figures == "reported"
    assert report.totals.hit_tokens > 0
    [conversation] = report.conversations
    assert [r.relation for r in conversation.requests[1:]] == ["extends"] * (len(messages) - 1)
    assert agent.request_invariant is not None and agent.request_invariant.checked == len(messages)
