"""assert_cache_friendly: per conversation, cause codes and evidence, allow-lists, clean tracebacks."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_testkit.capture import CacheUnfriendly, assert_cache_friendly
from dsh_testkit.traces import CacheUnfriendly as FromTraces
from tests.testkit.traces._agent import RULES

pytest_plugins = ["pytester"]


def body(system: str, *messages: str) -> dict[str, Any]:
    return {
        "model": "deepseek-v4-flash",
        "messages": [
            {"role": "system", "content": system},
            *(
                {"role": "user" if i % 2 == 0 else "assistant", "content": m}
                for i, m in enumerate(messages)
            ),
        ],
    }


def test_a_growing_conversation_is_cache_friendly() -> None:
    assert_cache_friendly(
        [body(RULES, "a"), body(RULES, "a", "b", "c"), body(RULES, "a", "b", "c", "d", "e")]
    )


def test_a_volatile_system_prompt_fails_with_the_code_and_the_evidence() -> None:
    bodies = [
        body(RULES + "\nrequest id 7f3a9c2e41", "a"),
        body(RULES + "\nrequest id 0b81d4ff93", "a", "b", "c"),
    ]
    with pytest.raises(CacheUnfriendly) as caught:
        assert_cache_friendly(bodies)
    error = caught.value
    assert FromTraces is CacheUnfriendly and isinstance(error, AssertionError)
    assert error.conversation == "#1"
    assert [f.code for f in error.findings] == ["volatile-system-text"]
    text = str(error)
    assert "request #2 volatile-system-text at system line 31 column 12" in text
    assert "'7f3a9c2e41' → '0b81d4ff93'" in text
    assert "request #1: 'request id 7f3a9c2e41'" in text
    assert "request #2: 'request id 0b81d4ff93'" in text
    assert_cache_friendly(bodies, allow=["volatile-system-text"])


def test_unrelated_conversations_are_each_friendly() -> None:
    other = "\n".join(f"Guideline {i}: you are a summarizer sub-agent." for i in range(30))
    assert_cache_friendly(
        [body(RULES, "a"), body(other, "x"), body(RULES, "a", "b", "c"), body(other, "x", "y", "z")]
    )


def test_a_capture_checks_itself() -> None:
    import json

    from dsh_testkit.capture import CapturedRequest, RequestCapture

    capture = RequestCapture()
    for b in (body(RULES + "\nrun 1", "a"), body(RULES + "\nrun 2", "a", "b", "c")):
        capture.requests.append(
            CapturedRequest(
                method="POST",
                url="http://x/chat/completions",
                headers=(),
                body=json.dumps(b).encode(),
            )
        )
    with pytest.raises(CacheUnfriendly, match="volatile-system-text"):
        capture.assert_cache_friendly()
    capture.assert_cache_friendly(allow=["volatile-system-text"])


def test_an_unknown_allowed_code_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown cause code"):
        assert_cache_friendly([body(RULES, "a")], allow=["cache-busted"])


def test_the_failure_points_at_the_users_line(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(
        test_agent="""
from dsh_testkit.capture import assert_cache_friendly

RULES = "\\\\n".join(f"Rule {i}: keep answers short and precise." for i in range(30))

def test_agent():
    first = {"model": "m", "messages": [{"role": "system", "content": RULES + " 2026-01-01"}, {"role": "user", "content": "hi"}]}
    second = {"model": "m", "messages": [{"role": "system", "content": RULES + " 2026-01-02"}, {"role": "user", "content": "hi"}]}
    assert_cache_friendly([first, second])  # the user's line
"""
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "assert_cache_friendly([first, second])  # the user's line" in out
    assert "volatile-system-text" in out
    assert "report = diagnose(" not in out  # our frames are hidden
