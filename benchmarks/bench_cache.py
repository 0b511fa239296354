"""3. Prefix-cache simulator throughput: prompt tokens simulated per second.

A 200-request agent session whose prompt grows append-only to 1M tokens: each request resends
the previous prompt and reply and adds new input. Every request is one ``lookup`` (hash the
prompt, find the longest visible unit) and one ``commit`` (persist its units).
"""

from __future__ import annotations

import gc
import random
import time

from dsh_testkit.prompt._cache import PrefixCacheSimulator

from ._common import Figure, Section

__all__ = ["run"]

REQUESTS = 200
FINAL_PROMPT = 1_000_000
QUICK_REQUESTS = 20
QUICK_FINAL_PROMPT = 20_000
VOCAB = 129_280
REPEATS = 2


def _stream(requests: int, final_prompt: int) -> list[int]:
    """The whole conversation as one token stream: request i's prompt is its first
    ``i * growth`` tokens and its reply the next ``growth // 5`` (which request i+1 resends)."""
    rng = random.Random(7)
    return [rng.randrange(VOCAB) for _ in range(final_prompt + final_prompt // requests // 5)]


def _session(
    simulator: PrefixCacheSimulator, requests: int, final_prompt: int, stream: list[int]
) -> tuple[float, int, int, int]:
    """Run one session; returns (simulator seconds, prompt tokens, hit tokens, reusable tokens)."""
    growth = final_prompt // requests
    reply = growth // 5
    gc.collect()
    seconds = 0.0
    prompt_total = hit_total = reusable = 0
    previous_end = 0
    for i in range(1, requests + 1):
        length = i * growth
        prompt = stream[:length]
        completion = stream[length : length + reply]
        start = time.perf_counter()
        found = simulator.lookup("bench", prompt)
        simulator.commit(found, completion)
        seconds += time.perf_counter() - start
        prompt_total += length
        hit_total += found.usage.hit_tokens
        reusable += previous_end // simulator.granularity * simulator.granularity
        previous_end = length + reply
    return seconds, prompt_total, hit_total, reusable


def run(quick: bool) -> Section:
    requests = QUICK_REQUESTS if quick else REQUESTS
    final_prompt = QUICK_FINAL_PROMPT if quick else FINAL_PROMPT
    section = Section(
        key="cache",
        title="Prefix-cache simulator throughput",
        method=(
            f"One session of {requests} requests whose prompt grows append-only by "
            f"{final_prompt // requests:,} tokens per request to {final_prompt:,} tokens "
            "(each request resends the previous prompt and its reply, then new input; random "
            "token ids from a 129,280-id vocabulary, the DeepSeek-V4 size). Per request one "
            "`lookup` and one `commit` on `PrefixCacheSimulator` (token sequences, no rendering), "
            "timed with `perf_counter`; building the token lists is not timed. Throughput = "
            "prompt tokens of all requests / simulator time, the faster of "
            f"{REPEATS} runs of the session. Both rule sets, default settings (granularity 64, "
            "interval units every 4,096 tokens, at most 10,000 units per key)."
        ),
    )
    stream = _stream(requests, final_prompt)
    for rules in ("2026", "2024"):
        # Noise only ever slows a run down, so the faster of the repeats is the estimate (the
        # timeit rationale); hits are the same in every repeat (the simulation is deterministic).
        runs = [
            _session(PrefixCacheSimulator(rules=rules), requests, final_prompt, stream)
            for _ in range(REPEATS)
        ]
        seconds, prompt_total, hits, reusable = min(runs)
        section.figures.append(
            Figure(
                label=f'prompt tokens simulated per second (rules "{rules}")',
                value=prompt_total / seconds,
                unit="tokens/s",
                note=f"{prompt_total:,} prompt tokens in {seconds:.2f} s",
            )
        )
        section.figures.append(
            Figure(
                label=f'mean time per request (rules "{rules}")',
                value=seconds / requests * 1000,
                unit="ms",
                note=f"hits {hits:,} of {reusable:,} reusable tokens",
            )
        )
    return section
