"""Real DeepSeek traffic replayed through the mock: accepted or refused exactly as the live API did.

The recordings (``../shared/fixtures/real-deepseek-wire/``, beside the checkout; see its README)
are chat-completions requests other public projects' test suites sent to the live API, with its
answers. A representative sample is replayed: every refused request, and an even spread of the
accepted ones (every source, streaming or not, with tools, with reasoning). Skipped, with the
reason, where the recordings are absent.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from dsh_testkit.mock import MockDeepSeek

from ._helpers import payload, request

WIRE = Path(__file__).resolve().parents[3].parent / "shared" / "fixtures" / "real-deepseek-wire"

MASSIVE_TEXT = "a" * 1_000_000
"""What ruby_llm's recorder stored as ``<MASSIVE_TEXT>``: its context-overflow test's string (the
live API counted 125,000 tokens for it, as DeepSeek's tokenizer does)."""

ACCEPTED_SAMPLE = 60
"""How many accepted requests to replay, spread evenly over the recordings."""

CONTEXT_MESSAGE = re.compile(
    r"^This model's maximum context length is \d+ tokens\. However, you requested (\d+) tokens "
    r"\((\d+) in the messages, (\d+) in the completion\)\. Please reduce the length of the "
    r"messages or completion\.$"
)

pytestmark = pytest.mark.skipif(
    not WIRE.is_dir(), reason=f"the real recordings are not beside the checkout ({WIRE})"
)


def recordings() -> Iterator[dict[str, Any]]:
    for path in sorted(WIRE.glob("*.jsonl.gz")):
        with gzip.open(path, "rt", encoding="utf-8") as lines:
            for line in lines:
                record = json.loads(line)
                body = (record.get("request") or {}).get("body")
                if body:  # the vercel/ai fixtures hold no request
                    yield record


def body_bytes(record: dict[str, Any]) -> bytes:
    body = record["request"]["body"]
    text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
    return text.replace("<MASSIVE_TEXT>", MASSIVE_TEXT).encode("utf-8")


def sample() -> list[dict[str, Any]]:
    if not WIRE.is_dir():
        return []
    every = list(recordings())
    refused = [r for r in every if r["response"]["status"] != 200]
    accepted = [r for r in every if r["response"]["status"] == 200]
    step = max(1, len(accepted) // ACCEPTED_SAMPLE)
    return refused + accepted[::step]


def record_id(record: dict[str, Any]) -> str:
    return f"{record['response']['status']}-{record['id'][:60]}"


SAMPLE = sample()


def test_the_sample_covers_every_kind_of_answer() -> None:
    statuses = {r["response"]["status"] for r in SAMPLE}
    assert {200, 400, 401}.issubset(statuses)
    sources = {r["source"]["repo"] for r in SAMPLE}
    assert len(sources) >= 3


@pytest.mark.slow
@pytest.mark.parametrize("record", SAMPLE, ids=record_id)
def test_the_mock_accepts_or_refuses_as_the_live_api_did(record: dict[str, Any]) -> None:
    live = record["response"]
    status = live["status"]
    valid_key = "sk-the-valid-key"
    mock = MockDeepSeek(api_keys=[valid_key])  # the default tokenizer, as a user gets it
    key = "not-the-valid-key" if status == 401 else valid_key
    plan = mock.handle(request(record["endpoint"], body_bytes(record), key=key))
    assert plan.header("x-ds-trace-id") is not None  # as every real answer carries
    assert plan.header("x-request-id") is None  # which DeepSeek never sends
    if status == 200:
        assert plan.status == 200, plan.body_bytes[:400]
        live_model = _live_model(live.get("body"))
        if live_model is not None and live_model.startswith("deepseek-v4"):
            assert _mock_model(plan) == live_model  # V4-era answers name the serving model
        return
    error = payload(plan)["error"]
    if status == 401:
        assert (plan.status, error["type"]) == (401, "authentication_error")
        assert error["message"].startswith("Authentication Fails")
    elif status == 422:
        # 2024–2025 answered deserialization errors with a plain-text 422; 2026 with a JSON 400
        # (docs/wire.md §7). The mock models 2026, and refuses with the same sentence.
        assert plan.status == 400
        assert error["message"].startswith("Failed to deserialize the JSON body")
    else:
        live_error = json.loads(live["body"])["error"]
        assert plan.status == 400
        assert (error["type"], error["code"]) == (live_error["type"], live_error["code"])
        if CONTEXT_MESSAGE.match(live_error["message"]):
            mine, theirs = (
                CONTEXT_MESSAGE.match(error["message"]),
                CONTEXT_MESSAGE.match(live_error["message"]),
            )
            assert mine is not None and theirs is not None, error["message"]
            # DeepSeek's count, within the template's few tokens of framing
            assert abs(int(mine[2]) - int(theirs[2])) <= 64
            assert mine[3] == theirs[3]


def _live_model(body: Any) -> str | None:
    if isinstance(body, dict):
        model = body.get("model")
        return model if isinstance(model, str) else None
    if not isinstance(body, str):
        return None
    try:
        parsed = json.loads(body)
    except ValueError:
        for line in body.splitlines():
            if line.startswith("data: {"):
                model = json.loads(line[6:]).get("model")
                return model if isinstance(model, str) else None
        return None
    return parsed.get("model") if isinstance(parsed, dict) else None


def _mock_model(plan: Any) -> str | None:
    return _live_model(plan.body_bytes.decode("utf-8"))


def test_the_scripted_context_overflow_uses_deepseeks_wording() -> None:
    from dsh_testkit.mock import ErrorReply
    from dsh_testkit.mock._script import BEHAVIOURS

    entry = BEHAVIOURS["context_overflow"]
    assert isinstance(entry, ErrorReply) and entry.message is not None
    assert CONTEXT_MESSAGE.match(entry.message)
    assert (entry.type, entry.code) == ("invalid_request_error", "invalid_request_error")
