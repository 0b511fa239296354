"""The prefix-cache simulator: the documented DeepSeek examples, its knobs and its laws."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_testkit.prompt._cache import PrefixCacheSimulator
from dsh_testkit.prompt._cache_values import (
    CacheKey,
    CacheUsage,
    anthropic_usage,
    deepseek_usage,
)
from dsh_testkit.prompt._template import PromptRenderer
from dsh_testkit.prompt._template_tokens import RenderedPrompt

KEY = CacheKey.for_request("sk-test-0001")
RENDERER = PromptRenderer()

WORDS = [
    *("cache", "prefix", "unit", "token", "request", "model", "output", "input", "system"),
    *("document", "question", "answer", "harness", "agent", "tool", "result", "stream"),
    *("reasoning", "history", "session", "context", "window", "budget"),
]


def prose(seed: int, words: int) -> str:
    """Deterministic filler text, different for each seed."""
    return " ".join(WORDS[(seed * 7 + i * (seed + 3)) % len(WORDS)] for i in range(words)) + "."


SYSTEM_A = "You are a careful assistant. " + prose(1, 300)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def simulator(**options: Any) -> PrefixCacheSimulator:
    """The documented 2026 rules taken literally, at the 2024 unit of 64 tokens: the examples
    below pin those rules' arithmetic. The calibrated defaults (128 tokens, block-level common
    prefixes) have their own tests in tests/testkit/prompt/test_cache_calibrated.py."""
    options.setdefault("clock", FakeClock())
    options.setdefault("granularity", 64)
    if options.get("rules", "2026") == "2026":
        options.setdefault("common_prefix", "detected")
    return PrefixCacheSimulator(**options)


def chat(*messages: dict[str, Any], **extra: Any) -> RenderedPrompt:
    body = {"model": "deepseek-v4-flash", "messages": list(messages), **extra}
    return RENDERER.render_chat(body)


def system(text: str) -> dict[str, Any]:
    return {"role": "system", "content": text}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def aligned(length: int, granularity: int = 64) -> int:
    return length // granularity * granularity


def common_prefix(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    length = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        length += 1
    return length


# -- the documented sequences (docs/wire.md §2.1) -------------------------------------------------


def test_doc_a_b_then_a_b_c_hits_a_b() -> None:
    cache = simulator()
    first = chat(system(SYSTEM_A), user("B: " + prose(2, 40)))
    second = chat(system(SYSTEM_A), user("B: " + prose(2, 40)), user("C: and one more thing."))
    assert cache.process(KEY, first).hit_tokens == 0
    usage = cache.process(KEY, second)
    assert usage.unit_tokens == first.input_end  # exactly the unit "A+B"
    assert usage.hit_tokens == aligned(first.input_end) > 0
    assert usage.miss_tokens == second.prompt_tokens - usage.hit_tokens


def test_doc_a_b_then_a_c_misses_then_a_d_hits_a() -> None:
    cache = simulator()
    a_b = chat(system(SYSTEM_A), user("Bravo " + prose(3, 30)))
    a_c = chat(system(SYSTEM_A), user("Charlie " + prose(4, 30)))
    a_d = chat(system(SYSTEM_A), user("Delta " + prose(5, 30)))
    assert cache.process(KEY, a_b).hit_tokens == 0
    assert cache.process(KEY, a_c).hit_tokens == 0  # A+C does not fully match the unit A+B
    shared = common_prefix(a_b.tokens, a_c.tokens)  # A (system prompt and the user marker)
    assert shared == common_prefix(a_d.tokens, a_b.tokens)
    usage = cache.process(KEY, a_d)
    assert usage.hit_tokens == aligned(shared) > 0
    assert usage.hit_tokens == usage.unit_tokens
    assert [unit.length for unit in cache.units(KEY) if unit.kind == "common"] == [aligned(shared)]


def test_doc_multi_round_chat_reuses_the_first_request() -> None:
    cache = simulator()
    first_messages = [system(SYSTEM_A), user("What is the capital of France?")]
    first = chat(*first_messages, thinking={"type": "disabled"})
    answer = "The capital of France is Paris. " + prose(6, 60)
    completion = RENDERER.render_completion(content=answer, thinking=False)
    assert cache.process(KEY, first, completion).hit_tokens == 0
    second = chat(
        *first_messages,
        {"role": "assistant", "content": answer},
        user("And of Germany?"),
        thinking={"type": "disabled"},
    )
    usage = cache.process(KEY, second)
    whole = first.prompt_tokens + completion.completion_tokens
    assert usage.unit_tokens == whole  # the "end of model output" unit of request 1
    assert usage.hit_tokens == aligned(whole)
    assert usage.prompt_tokens == second.prompt_tokens


def test_doc_long_document_qa_first_two_miss_third_hits() -> None:
    cache = simulator()
    document = "Report. " + prose(7, 1200)

    def ask(question: str) -> RenderedPrompt:
        return chat(
            system("You answer questions about the document."),
            user(f"{document}\n\nQuestion: {question}"),
        )

    first, second, third = ask("Who wrote it?"), ask("When was it written?"), ask("Why?")
    reply = RENDERER.render_completion(content="Unknown.", thinking=False)
    assert cache.process(KEY, first, reply).hit_tokens == 0
    assert cache.process(KEY, second, reply).hit_tokens == 0
    usage = cache.process(KEY, third, reply)
    shared = common_prefix(first.tokens, second.tokens)
    assert usage.hit_tokens == aligned(shared)
    assert usage.hit_tokens >= aligned(RENDERER.count(document))  # system + document hit


# -- more of §2.4 ----------------------------------------------------------------------------


def test_thinking_without_tools_falls_back_to_the_input_unit() -> None:
    cache = simulator()
    first_messages = [system(SYSTEM_A), user("Question one?")]
    first = chat(*first_messages)
    completion = RENDERER.render_completion(reasoning="Let me think.", content="42", thinking=True)
    cache.process(KEY, first, completion)
    second = chat(
        *first_messages,
        {"role": "assistant", "content": "42", "reasoning_content": "Let me think."},
        user("Question two?"),
    )
    usage = cache.process(KEY, second)
    assert usage.unit_tokens == first.input_end  # reasoning is dropped, the output unit misses


def test_thinking_with_tools_hits_the_output_unit() -> None:
    cache = simulator()
    tools = [{"type": "function", "function": {"name": "read", "parameters": {}}}]
    first_messages = [system(SYSTEM_A), user("Read a.txt")]
    first = chat(*first_messages, tools=tools)
    call = {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{}"}}
    reply = {
        "role": "assistant",
        "content": "",
        "reasoning_content": "Read it.",
        "tool_calls": [call],
    }
    completion = RENDERER.render_chat_completion(reply, thinking=True)
    cache.process(KEY, first, completion)
    second = chat(
        *first_messages, reply, {"role": "tool", "tool_call_id": "c1", "content": "x"}, tools=tools
    )
    usage = cache.process(KEY, second)
    assert usage.unit_tokens == first.prompt_tokens + completion.completion_tokens


def test_a_unit_is_never_used_partially() -> None:
    cache = simulator(interval_tokens=None)
    base = list(range(1000, 1300))
    cache.process(KEY, base)
    changed = [*base[:-1], 7]  # differs only in the last token
    assert cache.process(KEY, changed).hit_tokens == 0


def test_hit_is_the_longest_matching_unit() -> None:
    cache = simulator(interval_tokens=None)
    short, long = list(range(100)), list(range(300))
    cache.process(KEY, short)
    cache.process(KEY, long)
    usage = cache.process(KEY, [*range(300), 5, 6])
    assert (usage.unit_tokens, usage.hit_tokens) == (300, 256)
    # 300 does not match in full, so the request falls back to the shorter unit...
    assert cache.process(KEY, [*range(200), 9]).unit_tokens == 100
    # ...and the common prefix it shares with earlier prompts becomes a unit of its own.
    assert cache.process(KEY, [*range(200), 8]).unit_tokens == 192


def test_fixed_interval_units_inside_long_inputs() -> None:
    cache = simulator(interval_tokens=256)
    cache.process(KEY, list(range(1000)))
    assert [unit.length for unit in cache.units(KEY) if unit.kind == "interval"] == [256, 512, 768]
    usage = cache.process(KEY, [*range(600), -1, -2])  # no boundary unit matches in full
    assert (usage.unit_tokens, usage.hit_tokens) == (512, 512)
    assert cache.process(KEY, [*range(600), -3]).hit_tokens == 576  # now the common prefix


def test_interval_units_cover_the_output_too() -> None:
    cache = simulator(interval_tokens=128)
    cache.process(KEY, list(range(100)), list(range(5000, 5200)))
    lengths = [unit.length for unit in cache.units(KEY) if unit.kind == "interval"]
    assert lengths == [128, 256]


def test_granularity_rounds_hits_down() -> None:
    cache = simulator(granularity=128, interval_tokens=None)
    cache.process(KEY, list(range(300)))
    usage = cache.process(KEY, [*range(300), 1])
    assert (usage.unit_tokens, usage.hit_tokens, usage.miss_tokens) == (300, 256, 45)
    assert cache.granularity == 128


def test_units_shorter_than_the_granularity_are_not_kept() -> None:
    cache = simulator()
    cache.process(KEY, list(range(40)), list(range(10)))
    assert cache.units(KEY) == ()
    assert cache.process(KEY, list(range(60))).hit_tokens == 0


def test_commit_without_completion_keeps_only_input_units() -> None:
    cache = simulator()
    prompt = chat(system(SYSTEM_A), user("hi"))
    found = cache.lookup(KEY, prompt)
    cache.commit(found, None)
    assert [unit.kind for unit in cache.units(KEY)] == ["input"]
    assert found.prompt is prompt
    assert found.usage == CacheUsage(
        prompt_tokens=prompt.prompt_tokens, hit_tokens=0, miss_tokens=prompt.prompt_tokens
    )


def test_commit_accepts_raw_completion_tokens() -> None:
    cache = simulator(interval_tokens=None)
    cache.process(KEY, list(range(100)), [7] * 50)
    assert [(u.length, u.kind) for u in cache.units(KEY)] == [(100, "input"), (150, "output")]


def test_concurrent_requests_both_miss() -> None:
    cache = simulator()
    prompt = chat(system(SYSTEM_A), user("same"))
    one, two = cache.lookup(KEY, prompt), cache.lookup(KEY, prompt)
    cache.commit(one, None)
    cache.commit(two, None)
    assert one.usage.hit_tokens == two.usage.hit_tokens == 0
    assert cache.lookup(KEY, prompt).usage.hit_tokens == aligned(prompt.input_end)


def test_isolation_by_account_and_user_id() -> None:
    cache = simulator()
    prompt = chat(system(SYSTEM_A), user("same"))
    cache.process(CacheKey.for_request("sk-a", "alice"), prompt)
    assert cache.process(CacheKey.for_request("sk-a", "bob"), prompt).hit_tokens == 0
    assert cache.process(CacheKey.for_request("sk-b", "alice"), prompt).hit_tokens == 0
    assert cache.process(CacheKey.for_request("sk-a", "alice"), prompt).hit_tokens > 0


def test_cache_key_keeps_only_a_digest_of_the_api_key() -> None:
    key = CacheKey.for_request("sk-very-secret-key", None)
    assert "sk-very-secret" not in repr(key)
    assert key == CacheKey.for_request("sk-very-secret-key", "")
    assert len(key.account) == 16 and key.user_id == ""
    assert CacheKey.for_request("sk-very-secret-key", "u1").user_id == "u1"


# -- time: visibility, TTL, eviction ---------------------------------------------------------


def test_units_become_visible_after_the_delay() -> None:
    clock = FakeClock()
    cache = simulator(clock=clock, visibility_delay=2.0)
    prompt = list(range(200))
    cache.process(KEY, prompt)
    clock.now = 1.9
    assert cache.lookup(KEY, prompt).usage.hit_tokens == 0
    clock.now = 2.0
    assert cache.lookup(KEY, prompt).usage.hit_tokens == 192


def test_idle_units_expire_and_hits_refresh_them() -> None:
    clock = FakeClock()
    cache = simulator(clock=clock, ttl=10.0, interval_tokens=None)
    prompt = list(range(200))
    cache.process(KEY, prompt)
    clock.now = 8.0
    assert cache.lookup(KEY, prompt).usage.hit_tokens == 192  # refreshes the unit
    clock.now = 17.0
    assert cache.lookup(KEY, prompt).usage.hit_tokens == 192
    clock.now = 28.0
    assert cache.lookup(KEY, prompt).usage.hit_tokens == 0
    assert cache.units(KEY) == ()


def test_sweep_forgets_expired_units_and_prompts() -> None:
    clock = FakeClock()
    cache = simulator(clock=clock, ttl=10.0, interval_tokens=None)
    cache.process(KEY, list(range(200)))
    clock.now = 50.0
    cache.process(KEY, [*range(100), -1])  # commit sweeps: the old prompt is forgotten
    assert [unit.length for unit in cache.units(KEY)] == [101]
    assert cache.process(KEY, [*range(100), -2]).hit_tokens == 64  # common with request 2 only


def test_no_ttl_never_expires() -> None:
    clock = FakeClock()
    cache = simulator(clock=clock, ttl=None)
    cache.process(KEY, list(range(200)))
    clock.now = 1e9
    assert cache.process(KEY, list(range(200))).hit_tokens == 192


def test_least_recently_used_units_are_evicted() -> None:
    cache = simulator(max_units_per_key=2, interval_tokens=None)
    first, second = list(range(100)), list(range(500, 600))
    cache.process(KEY, first)
    cache.process(KEY, second)
    cache.lookup(KEY, first)  # first is now the most recently used
    cache.process(KEY, list(range(900, 1000)))
    assert cache.lookup(KEY, first).usage.hit_tokens == 64
    assert cache.lookup(KEY, second).usage.hit_tokens == 0


def test_recent_prompt_index_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from dsh_testkit.prompt import _cache

    monkeypatch.setattr(_cache, "_RECENT_BLOCKS_PER_KEY", 3)
    cache = simulator(interval_tokens=None)
    cache.process(KEY, [*range(256), 77])  # 4 full blocks; the deepest is forgotten first
    cache.process(KEY, [*range(256), 1])
    assert max(u.length for u in cache.units(KEY) if u.kind == "common") == 192


def test_clear() -> None:
    cache = simulator()
    other = CacheKey.for_request("sk-other")
    for key in (KEY, other):
        cache.process(key, list(range(200)))
    cache.clear(KEY)
    assert cache.units(KEY) == () and cache.units(other) != ()
    cache.clear()
    assert cache.units(other) == ()


# -- rules 2024 ------------------------------------------------------------------------------


def test_2024_long_document_second_request_already_hits() -> None:
    cache = simulator(rules="2024")
    document = prose(8, 800)
    first = chat(system(document), user("Question: who?"))
    second = chat(system(document), user("Question: when?"))
    assert cache.process(KEY, first).hit_tokens == 0
    usage = cache.process(KEY, second)
    assert usage.hit_tokens == aligned(common_prefix(first.tokens, second.tokens)) > 0
    assert usage.unit_tokens == usage.hit_tokens
    assert cache.rules == "2024"


def test_2024_few_shot_prefix_hits() -> None:
    cache = simulator(rules="2024")
    shots = [
        m for i in range(4) for m in (user(prose(i, 30)), {"role": "assistant", "content": "ok"})
    ]
    first = chat(*shots, user("Final question one"))
    second = chat(*shots, user("Another final question"))
    cache.process(KEY, first)
    assert cache.process(KEY, second).hit_tokens == aligned(
        common_prefix(first.tokens, second.tokens)
    )


def test_2024_outputs_are_cached_and_short_prompts_are_not() -> None:
    cache = simulator(rules="2024")
    assert cache.process(KEY, list(range(60))).hit_tokens == 0
    assert cache.units(KEY) == ()
    cache.process(KEY, list(range(60)), list(range(60, 200)))
    assert cache.process(KEY, list(range(180))).hit_tokens == 128
    assert {unit.kind for unit in cache.units(KEY)} == {"block"}


def test_2024_evicts_the_deepest_blocks_first() -> None:
    cache = simulator(rules="2024", max_units_per_key=2)
    cache.process(KEY, list(range(256)))  # 4 blocks, only the 2 shortest prefixes stay
    assert [unit.length for unit in cache.units(KEY)] == [64, 128]
    assert cache.process(KEY, list(range(256))).hit_tokens == 128


def test_2024_respects_visibility_and_ttl() -> None:
    clock = FakeClock()
    cache = simulator(rules="2024", clock=clock, visibility_delay=1.0, ttl=5.0)
    cache.process(KEY, list(range(200)))
    assert cache.lookup(KEY, list(range(200))).usage.hit_tokens == 0
    clock.now = 1.0
    assert cache.lookup(KEY, list(range(200))).usage.hit_tokens == 192
    clock.now = 100.0
    assert cache.lookup(KEY, list(range(200))).usage.hit_tokens == 0


# -- configuration ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"rules": "2025"}, 'rules must be "2026" or "2024", got \'2025\''),
        ({"granularity": 0}, "granularity must be a positive number of tokens, got 0"),
        (
            {"interval_tokens": 100},
            r"interval_tokens must be a positive multiple of granularity \(64\) or None",
        ),
        ({"interval_tokens": 0}, "interval_tokens must be a positive multiple"),
        ({"visibility_delay": -1}, "visibility_delay must be >= 0 seconds, got -1"),
        ({"ttl": 0}, "ttl must be > 0 seconds or None for no expiry, got 0"),
        ({"max_units_per_key": 0}, "max_units_per_key must be at least 1, got 0"),
    ],
)
def test_invalid_configuration(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PrefixCacheSimulator(**{"granularity": 64, **options})


def test_repr_names_the_configuration() -> None:
    assert repr(PrefixCacheSimulator()) == (
        "PrefixCacheSimulator(rules='2026', granularity=None, interval_tokens=4096, "
        "visibility=UnitVisibility(input=0.0, output=0.0, common=0.0, interval=0.0), "
        "common_prefix='blocks', ttl=21600.0, max_units_per_key=10000, keys=0)"
    )


def test_lookup_repr_hides_tokens() -> None:
    found = simulator().lookup(KEY, list(range(1000, 1010)))
    assert "1000" not in repr(found) and "chain" not in repr(found)


# -- usage objects ---------------------------------------------------------------------------


def test_deepseek_usage_matches_a_real_v4_capture() -> None:
    cache = CacheUsage(prompt_tokens=306, hit_tokens=256, miss_tokens=50)
    usage = deepseek_usage(cache, completion_tokens=85, reasoning_tokens=31)
    assert json.dumps(usage, separators=(",", ":")) == (
        '{"prompt_tokens":306,"completion_tokens":85,"total_tokens":391,'
        '"prompt_tokens_details":{"cached_tokens":256},'
        '"completion_tokens_details":{"reasoning_tokens":31},'
        '"prompt_cache_hit_tokens":256,"prompt_cache_miss_tokens":50}'
    )


def test_deepseek_usage_without_thinking_has_no_completion_details() -> None:
    cache = CacheUsage(prompt_tokens=14, hit_tokens=0, miss_tokens=14)
    assert deepseek_usage(cache, completion_tokens=43) == {
        "prompt_tokens": 14,
        "completion_tokens": 43,
        "total_tokens": 57,
        "prompt_tokens_details": {"cached_tokens": 0},
        "prompt_cache_hit_tokens": 0,
        "prompt_cache_miss_tokens": 14,
    }


def test_anthropic_usage_reports_hits_as_cache_reads() -> None:
    cache = CacheUsage(prompt_tokens=1000, hit_tokens=896, miss_tokens=104)
    assert list(anthropic_usage(cache, output_tokens=12).items()) == [
        ("input_tokens", 104),
        ("cache_creation_input_tokens", 0),
        ("cache_read_input_tokens", 896),
        ("output_tokens", 12),
    ]


# -- laws ------------------------------------------------------------------------------------


@given(
    prompts=st.lists(st.lists(st.integers(0, 3), min_size=0, max_size=300), min_size=1, max_size=8),
    rules=st.sampled_from(["2026", "2024"]),
    granularity=st.sampled_from([1, 8, 64]),
    output=st.lists(st.integers(0, 3), max_size=40),
)
def test_hits_are_whole_units_within_the_prompt(
    prompts: list[list[int]], rules: str, granularity: int, output: list[int]
) -> None:
    cache = PrefixCacheSimulator(
        rules=rules,  # type: ignore[arg-type]
        granularity=granularity,
        interval_tokens=granularity * 4,
        clock=FakeClock(),
    )
    for prompt in prompts:
        usage = cache.process(KEY, prompt, output)
        assert 0 <= usage.hit_tokens <= usage.prompt_tokens == len(prompt)
        assert usage.hit_tokens % granularity == 0
        assert usage.hit_tokens + usage.miss_tokens == usage.prompt_tokens
        assert usage.hit_tokens <= usage.unit_tokens <= len(prompt)


_texts = st.text(alphabet="ab cd\n", max_size=40)


@given(
    turns=st.lists(
        st.tuples(_texts, _texts, _texts, st.booleans(), _texts), min_size=1, max_size=6
    ),
    thinking=st.booleans(),
    with_tools=st.booleans(),
    rules=st.sampled_from(["2026", "2024"]),
    granularity=st.sampled_from([4, 16]),
    interval=st.sampled_from([None, 1, 3]),
)
def test_append_only_conversation_hits_never_decrease(
    turns: list[tuple[str, str, str, bool, str]],
    thinking: bool,
    with_tools: bool,
    rules: str,
    granularity: int,
    interval: int | None,
) -> None:
    cache = PrefixCacheSimulator(
        rules=rules,  # type: ignore[arg-type]
        granularity=granularity,
        interval_tokens=None if interval is None else interval * granularity,
        clock=FakeClock(),
    )
    tools = [{"type": "function", "function": {"name": "f"}}] if with_tools else []
    messages: list[dict[str, Any]] = [system("sys " * 5)]
    previous = 0
    for question, reasoning, content, calls_tool, result in turns:
        messages.append(user(question))
        prompt = RENDERER.render_chat({"messages": messages, "tools": tools}, thinking=thinking)
        calls = [("f", '{"x": 1}')] if calls_tool else []
        completion = RENDERER.render_completion(
            reasoning=reasoning, content=content, tool_calls=calls, thinking=thinking
        )
        usage = cache.process(KEY, prompt, completion)
        assert previous <= usage.hit_tokens <= usage.prompt_tokens
        previous = usage.hit_tokens
        reply: dict[str, Any] = {"role": "assistant", "content": content}
        reply["reasoning_content"] = reasoning
        if calls:
            reply["tool_calls"] = [
                {"id": "c", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}
            ]
        messages.append(reply)
        if calls:
            messages.append({"role": "tool", "tool_call_id": "c", "content": result})
