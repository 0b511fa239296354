"""The retry policy against the failures our providers really emit: the agent loop driving a real
provider over the mock DeepSeek (in process), plus the policy's rules on bare failures."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from dsh_core import (
    Agent,
    LlmFailure,
    ProviderError,
    RetryPolicy,
)
from dsh_core._retry import DEFAULT_RETRYABLE_CODES, DEFAULT_RETRYABLE_STATUSES
from dsh_core.providers import AnthropicProvider, DeepSeekProvider
from dsh_core.providers._failures import RETRYABLE_CODES, classify_http_error
from dsh_testkit.mock import ErrorReply, MockDeepSeek, MockHandler, Reply, behaviour

from ._loop_helpers import Sleeps, assert_balanced, new_session, of_type, options

API_KEY = "sk-retry-test-0000"


def agent_over(
    mock: MockDeepSeek, *, anthropic: bool = False, **overrides: Any
) -> tuple[Agent, Any]:
    transport = httpx.MockTransport(MockHandler(mock))
    provider: DeepSeekProvider | AnthropicProvider
    if anthropic:
        provider = AnthropicProvider(
            api_key=API_KEY, base_url="https://api.deepseek.com/anthropic", transport=transport
        )
    else:
        provider = DeepSeekProvider(api_key=API_KEY, transport=transport)
    session = new_session()
    opts = options(provider="deepseek", model="deepseek-v4-flash", **overrides)
    return Agent(session, provider, opts), session


QUOTA_ANSWERS = [
    pytest.param(behaviour("quota_exceeded"), id="429-insufficient-quota"),
    pytest.param(ErrorReply(status=402, message="Insufficient Balance"), id="402"),
    pytest.param(
        ErrorReply(status=402, message="Insufficient Balance", retry_after="1"),
        id="402-with-retry-after",
    ),
]


@pytest.mark.parametrize("anthropic", [False, True], ids=["chat", "anthropic"])
@pytest.mark.parametrize("answer", QUOTA_ANSWERS)
async def test_quota_is_never_retried(answer: ErrorReply, anthropic: bool) -> None:
    mock = MockDeepSeek([answer, Reply(text="never sent")])
    agent, session = agent_over(mock, anthropic=anthropic)
    with pytest.raises(ProviderError) as caught:
        await agent.run("hi")
    assert caught.value.failure.code == "QUOTA"
    assert len(mock.requests) == 1
    assert not of_type(session, "llm/retry")
    assert_balanced(session)


@pytest.mark.parametrize("anthropic", [False, True], ids=["chat", "anthropic"])
async def test_a_429_rate_limit_is_retried_after_its_retry_after(anthropic: bool) -> None:
    sleeps = Sleeps()
    mock = MockDeepSeek([ErrorReply(status=429, retry_after="2"), Reply(text="done")])
    agent, session = agent_over(mock, anthropic=anthropic, sleep=sleeps, random=lambda: 0.99)
    final = await agent.run("hi")
    assert final.text == "done"
    (retry,) = of_type(session, "llm/retry")
    assert retry.data["failure"]["code"] == "RATE_LIMIT"
    assert retry.data["delayMs"] == 2000  # the header, not the jittered backoff
    assert sleeps.delays == [2.0]
    assert mock.requests[0].body == mock.requests[1].body  # the same request resent


@pytest.mark.parametrize("anthropic", [False, True], ids=["chat", "anthropic"])
@pytest.mark.parametrize("name", ["stream_eof", "partial_eof", "empty_body"])
async def test_a_stream_closed_mid_answer_is_retried(name: str, anthropic: bool) -> None:
    mock = MockDeepSeek([behaviour(name), Reply(text="whole")])
    agent, session = agent_over(mock, anthropic=anthropic)
    final = await agent.run("hi")
    assert final.text == "whole"
    (retry,) = of_type(session, "llm/retry")
    assert retry.data["failure"]["code"] == "STREAM_CLOSED"
    assert retry.data["failure"].get("retryable") is not True  # the provider does not claim it
    assert len(mock.requests) == 2


@pytest.mark.parametrize("name", ["auth_error", "invalid_request", "context_overflow"])
async def test_other_client_errors_are_not_retried(name: str) -> None:
    mock = MockDeepSeek([behaviour(name)])
    agent, session = agent_over(mock)
    with pytest.raises(ProviderError):
        await agent.run("hi")
    assert len(mock.requests) == 1
    assert not of_type(session, "llm/retry")


# -------------------------------------------------------------------------------- the rules


def test_the_default_codes_are_the_providers_retryable_ones_plus_stream_closed() -> None:
    expected = RETRYABLE_CODES | {"STREAM_CLOSED"}
    assert expected == DEFAULT_RETRYABLE_CODES
    assert "RATE_LIMITED" not in DEFAULT_RETRYABLE_CODES


@pytest.mark.parametrize(
    ("status", "body", "retried"),
    [
        (429, {"error": {"message": "Rate Limit Reached"}}, True),
        (429, {"error": {"message": "insufficient quota", "code": "insufficient_quota"}}, False),
        (402, {"error": {"message": "Insufficient Balance"}}, False),
        (401, {"error": {"message": "Authentication Fails"}}, False),
        (400, {"error": {"message": "Model Not Exist"}}, False),
        (413, "too large", False),
        (500, None, True),
        (503, None, True),
        (408, None, True),  # HTTP_408: unclassified, so its status decides
        (418, None, False),
    ],
)
def test_every_classified_http_failure(status: int, body: Any, retried: bool) -> None:
    failure = classify_http_error(status, body, {})
    assert RetryPolicy().is_retryable(failure) is retried, failure.code


def test_a_classified_code_wins_over_a_retryable_status() -> None:
    policy = RetryPolicy()
    assert 429 in DEFAULT_RETRYABLE_STATUSES and 503 in DEFAULT_RETRYABLE_STATUSES
    assert not policy.is_retryable(LlmFailure(message="", code="QUOTA", status=429))
    assert not policy.is_retryable(LlmFailure(message="", code="AUTH", status=503))
    assert policy.is_retryable(LlmFailure(message="", code="HTTP_504", status=504))
    assert not policy.is_retryable(LlmFailure(message="", code="HTTP_504"))  # no status


def test_the_providers_flag_is_trusted_first() -> None:
    policy = RetryPolicy(retryable_codes=frozenset(), retryable_statuses=frozenset())
    assert policy.is_retryable(LlmFailure(message="", code="ANYTHING", retryable=True))
    assert not policy.is_retryable(LlmFailure(message="", code="STREAM_CLOSED"))
    custom = RetryPolicy(retryable_codes=frozenset({"MY_CODE"}))
    assert custom.is_retryable(LlmFailure(message="", code="MY_CODE"))
    assert not custom.is_retryable(LlmFailure(message="", code="STREAM_CLOSED"))
