"""The simulator's calibrated rules: 128-token units, per-kind visibility, block-level common
prefixes, and the inspection calls calibration uses (docs/fidelity.md)."""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

import httpx2
import openai
import pytest

from dsh_core.providers import MODELS, CacheFacts, UnitVisibility
from dsh_core.providers._models import CHAT_TEMPLATES, cache_model
from dsh_testkit.mock import MockDeepSeek, MockHandler
from dsh_testkit.prompt import PrefixCacheSimulator, PromptRenderer
from dsh_testkit.prompt._cache_values import CacheKey
from dsh_testkit.prompt._granularity import DEFAULT_GRANULARITY

KEY = "k"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def tokens(n: int, start: int = 0) -> list[int]:
    return list(range(start, start + n))


def test_default_granularity_is_128_and_hits_are_multiples_of_it() -> None:
    cache = PrefixCacheSimulator(clock=Clock())
    assert cache.granularity == DEFAULT_GRANULARITY == 128
    cache.process(KEY, tokens(300))
    usage = cache.process(KEY, [*tokens(300), 7, 7, 7])
    assert usage.unit_tokens == 300
    assert (usage.hit_tokens, usage.miss_tokens) == (256, 47)


def _table_with(model: str, facts: CacheFacts) -> MappingProxyType[str, object]:
    """The model table plus one model with its own cache facts."""
    entry = MODELS["deepseek-flash"]
    return MappingProxyType({**MODELS, model: replace(entry, id=model, cache=facts)})


def test_every_table_model_names_its_cache_facts() -> None:
    assert set(CHAT_TEMPLATES) <= PromptRenderer.TEMPLATES  # the mock renders each template
    for info in MODELS.values():
        assert info.cache.granularity == 128
        assert info.cache.template == "deepseek-v4"
        assert info.cache.visibility == UnitVisibility()
    with pytest.raises(ValueError, match="granularity must be >= 1"):
        CacheFacts(granularity=0)


def test_granularity_and_live_visibility_follow_the_keys_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Left unset, a key's granularity is its model's in the table; ``visibility="live"``
    takes the model's measured visibility. Settings given explicitly win for every key."""
    facts = CacheFacts(granularity=64, visibility=UnitVisibility(output=3.0))
    monkeypatch.setattr("dsh_testkit.prompt._cache.MODELS", _table_with("small-units", facts))
    clock = Clock()
    cache = PrefixCacheSimulator(clock=clock, visibility="live", interval_tokens=None)
    small = CacheKey(account="a", model="small-units")
    usual = CacheKey(account="a", model=cache_model("deepseek-v4-flash"))
    assert cache.granularity_for(small) == 64 and cache.granularity_for(usual) == 128
    assert cache.visibility_for(small).output == 3.0
    assert cache.visibility_for(usual) == MODELS["deepseek-flash"].cache.visibility
    for key in (small, usual):
        cache.process(key, tokens(300))
    assert cache.process(small, [*tokens(300), 9]).hit_tokens == 256  # 4 units of 64
    assert cache.process(usual, [*tokens(300), 9]).hit_tokens == 256  # 2 units of 128
    cache.process(small, tokens(200))
    assert cache.process(small, [*tokens(200), 9]).hit_tokens == 192  # 3 units of 64
    cache.process(usual, tokens(200))
    assert cache.process(usual, [*tokens(200), 9]).hit_tokens == 128
    # the output-end unit of the small-unit model waits its 3 s; the usual model's is reused
    # by the next request
    for key, wait, visible in ((small, 2.0, False), (small, 3.5, True), (usual, 1.5, True)):
        clock.now += 100
        prompt, reply = tokens(256, start=50_000), tokens(128, start=90_000)
        cache.commit(cache.lookup(key, prompt), reply)
        clock.now += wait
        follow = cache.lookup(key, [*prompt, *reply, 1])
        assert (follow.unit_kind == "output") is visible, (key, wait)
        cache.clear(key)
    fixed = PrefixCacheSimulator(granularity=32, visibility=UnitVisibility.uniform(0.5))
    assert fixed.granularity_for(small) == 32 and fixed.visibility_for(small).output == 0.5


def test_live_visibility_follows_the_services_eras() -> None:
    """Measured on live traffic: until mid-July 2026 output-end units became reusable about
    1.45 s after the reply's last chunk; since then by the next request. ``live_at`` picks the
    era for a simulation on a log's clock; unset, today's."""
    facts = MODELS["deepseek-flash"].cache
    before = 1_783_352_165.0  # 2026-07-06
    after = 1_785_498_765.0  # 2026-07-31
    assert facts.visibility_at(before) == UnitVisibility(output=1.45)
    assert facts.visibility_at(after) == facts.visibility_at(None) == UnitVisibility()
    ((until, _),) = facts.earlier_visibility
    assert until == "2026-07-11T00:00:00Z"
    usual = CacheKey(account="a", model=cache_model("deepseek-v4-flash"))
    prompt, reply = tokens(256), tokens(128, start=90_000)
    for live_at, visible in ((before, False), (after, True), (None, True)):
        clock = Clock()
        cache = PrefixCacheSimulator(
            clock=clock, visibility="live", live_at=live_at, interval_tokens=None
        )
        cache.commit(cache.lookup(usual, prompt), reply)
        clock.now += 0.9  # a tool step 0.9 s after the reply
        follow = cache.lookup(usual, [*prompt, *reply, 1])
        assert (follow.unit_kind == "output") is visible, live_at
        assert follow.usage.hit_tokens == (384 if visible else 256)
        clock.now += 1.0  # 1.9 s after: reused in either era
        assert cache.lookup(usual, [*prompt, *reply, 1]).unit_kind == "output"


def test_the_default_visibility_is_immediate_for_every_kind() -> None:
    cache = PrefixCacheSimulator(clock=Clock())
    assert cache.visibility == UnitVisibility.uniform(0.0)


def test_input_units_are_visible_at_once_output_units_after_their_delay() -> None:
    clock = Clock()
    rule = UnitVisibility(output=1.1)
    cache = PrefixCacheSimulator(clock=clock, visibility=rule, interval_tokens=None)
    assert cache.visibility.output == 1.1 and cache.visibility.input == 0.0
    prompt = tokens(400)
    reply = tokens(200, start=10_000)
    found = cache.lookup(KEY, prompt)
    clock.now = 5.0  # the reply's last chunk
    cache.commit(found, reply)
    follow_up = [*prompt, *reply, 1, 2, 3]
    clock.now = 5.5  # 0.5 s after the reply: only the input-end unit
    early = cache.lookup(KEY, follow_up)
    assert (early.usage.unit_tokens, early.unit_kind) == (400, "input")
    clock.now = 6.2  # 1.2 s after the reply: the output-end unit too
    late = cache.lookup(KEY, follow_up)
    assert (late.usage.unit_tokens, late.unit_kind) == (600, "output")
    assert late.usage.hit_tokens == 512


def test_input_units_count_from_the_lookup_not_the_commit() -> None:
    clock = Clock()
    rule = UnitVisibility(input=2.0, output=0.0, common=0.0, interval=0.0)
    cache = PrefixCacheSimulator(clock=clock, visibility=rule, interval_tokens=None)
    found = cache.lookup(KEY, tokens(300))
    clock.now = 10.0
    cache.commit(found, None)
    (unit,) = cache.units(KEY)
    assert (unit.kind, unit.visible_at) == ("input", 2.0)


def test_interval_units_inside_the_prompt_and_inside_the_reply() -> None:
    clock = Clock()
    rule = UnitVisibility(input=0.0, output=0.0, common=0.0, interval=1.0)
    cache = PrefixCacheSimulator(clock=clock, visibility=rule, interval_tokens=256)
    found = cache.lookup(KEY, tokens(300))
    clock.now = 4.0
    cache.commit(found, tokens(300, start=10_000))
    intervals = {u.length: u.visible_at for u in cache.units(KEY) if u.kind == "interval"}
    # 256 lies in the prompt (read at 0), 512 in the reply (committed at 4)
    assert intervals == {256: 1.0, 512: 5.0}


def test_a_uniform_legacy_delay_counts_from_the_commit() -> None:
    clock = Clock()
    cache = PrefixCacheSimulator(clock=clock, visibility_delay=3.0, interval_tokens=None)
    found = cache.lookup(KEY, tokens(300))
    clock.now = 1.0
    cache.commit(found, None)
    assert [u.visible_at for u in cache.units(KEY)] == [4.0]
    assert cache.visibility == UnitVisibility.uniform(3.0)


def test_block_level_common_prefix_hits_on_the_first_shared_request() -> None:
    """Measured: a second session hits the 128-aligned prefix it shares with the first one."""
    shared = tokens(700)
    cache = PrefixCacheSimulator(clock=Clock())
    cache.process(KEY, [*shared, *tokens(50, start=5000)])
    found = cache.lookup(KEY, [*shared, *tokens(60, start=9000)])
    assert (found.usage.hit_tokens, found.unit_kind) == (640, "common")


def test_detected_common_prefix_needs_two_requests() -> None:
    shared = tokens(700)
    cache = PrefixCacheSimulator(clock=Clock(), common_prefix="detected")
    cache.process(KEY, [*shared, *tokens(50, start=5000)])
    assert cache.process(KEY, [*shared, *tokens(60, start=9000)]).hit_tokens == 0
    assert cache.process(KEY, [*shared, *tokens(70, start=7000)]).hit_tokens == 640


def test_common_blocks_wait_for_their_visibility_delay() -> None:
    clock = Clock()
    rule = UnitVisibility(input=0.0, output=0.0, common=2.0, interval=0.0)
    cache = PrefixCacheSimulator(clock=clock, visibility=rule)
    shared = tokens(700)
    cache.process(KEY, [*shared, 1])
    clock.now = 1.0
    assert cache.lookup(KEY, [*shared, 2]).usage.hit_tokens == 0
    clock.now = 2.5
    assert cache.lookup(KEY, [*shared, 2]).usage.hit_tokens == 640


def test_matching_units_lists_held_units_visible_or_not() -> None:
    clock = Clock()
    rule = UnitVisibility(output=1.1)
    cache = PrefixCacheSimulator(clock=clock, visibility=rule, interval_tokens=None)
    prompt, reply = tokens(300), tokens(100, start=10_000)
    cache.commit(cache.lookup(KEY, prompt), reply)
    units = cache.matching_units(KEY, [*prompt, *reply, 5])
    assert [(u.length, u.kind) for u in units] == [(300, "input"), (400, "output")]
    assert units[1].visible_at == pytest.approx(1.1)
    assert cache.matching_units(KEY, tokens(10, start=50_000)) == ()
    assert cache.matching_units("other", prompt) == ()
    assert PrefixCacheSimulator(rules="2024").matching_units(KEY, prompt) == ()


def test_a_miss_has_no_unit_kind_and_2024_hits_are_blocks() -> None:
    cache = PrefixCacheSimulator(rules="2024", clock=Clock())
    assert cache.lookup(KEY, tokens(300)).unit_kind is None
    cache.process(KEY, tokens(300))
    assert cache.lookup(KEY, tokens(300)).unit_kind == "block"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"visibility": UnitVisibility(), "visibility_delay": 1.0}, "not both"),
        ({"common_prefix": "sometimes"}, 'common_prefix must be "blocks" or "detected"'),
    ],
)
def test_invalid_calibrated_settings(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PrefixCacheSimulator(**options)  # type: ignore[arg-type]


def test_negative_visibility_is_refused() -> None:
    with pytest.raises(ValueError, match=r"UnitVisibility.output must be >= 0 seconds, got -1"):
        UnitVisibility(output=-1)


# -- the cache key -----------------------------------------------------------------------------


def test_aliases_share_their_serving_models_cache_and_other_models_do_not() -> None:
    assert cache_model("deepseek-chat") == cache_model("deepseek-v4-flash") == "deepseek-flash"
    assert cache_model("deepseek-reasoner") == "deepseek-flash"
    assert cache_model("deepseek-v4-pro") == "deepseek-v4-pro"
    assert cache_model("not-in-the-table") == "not-in-the-table"
    chat = CacheKey.for_request("sk-a", "u", model="deepseek-chat")
    assert chat == CacheKey.for_request("sk-a", "u", model="deepseek-v4-flash")
    assert chat != CacheKey.for_request("sk-a", "u", model="deepseek-v4-pro")
    assert "sk-a" not in repr(chat)


def _ask(client: openai.OpenAI, model: str) -> int:
    reply = client.chat.completions.create(
        model=model,
        messages=[{"role": "system", "content": "rules " * 400}, {"role": "user", "content": "q"}],
        extra_body={"thinking": {"type": "disabled"}},
    )
    assert reply.usage is not None
    hit = reply.usage.prompt_cache_hit_tokens  # type: ignore[attr-defined]
    assert isinstance(hit, int)
    return hit


def test_the_mock_keys_its_cache_by_serving_model() -> None:
    mock = MockDeepSeek(api_keys={"sk-test"})
    http = httpx2.Client(transport=httpx2.MockTransport(MockHandler(mock)))
    with openai.OpenAI(
        base_url="https://api.deepseek.com", api_key="sk-test", http_client=http, max_retries=0
    ) as client:
        assert _ask(client, "deepseek-chat") == 0
        assert _ask(client, "deepseek-v4-flash") > 0  # an alias of the same model
        assert _ask(client, "deepseek-v4-pro") == 0  # another model's cache
