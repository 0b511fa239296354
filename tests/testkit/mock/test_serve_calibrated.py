"""``dsh-testkit serve``'s calibrated-rule options, run as a user runs them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import httpx

SYSTEM = "rules " * 600


def _ask(client: httpx.Client, user: str) -> int:
    body = {
        "model": "deepseek-v4-flash",
        "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}],
        "thinking": {"type": "disabled"},
    }
    answer = client.post("/chat/completions", json=body, headers={"authorization": "Bearer k"})
    assert answer.status_code == 200, answer.text
    hit = answer.json()["usage"]["prompt_cache_hit_tokens"]
    assert isinstance(hit, int)
    return hit


def _serve(*options: str) -> list[int]:
    """Hits of three requests sharing the system prompt, on a server with ``options``."""
    process = subprocess.Popen(
        [sys.executable, "-m", "dsh_testkit.cli", "serve", *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        assert process.stdout is not None
        base = process.stdout.readline().strip()
        with httpx.Client(base_url=base, timeout=10) as client:
            return [_ask(client, f"question {i}") for i in range(3)]
    finally:
        process.send_signal(signal.SIGTERM)
        process.communicate(timeout=30)


def test_the_calibrated_rules_are_serve_options() -> None:
    blocks = _serve("--cache-visibility", "live", "--reasoning-rule", "with-tools")
    detected = _serve("--cache-common-prefix", "detected")
    # block level: the second request already hits the shared system prompt; detected: only
    # the third, once two requests shared it
    assert blocks[0] == detected[0] == 0
    assert blocks[1] > 0 and blocks[1] % 128 == 0
    assert detected[1] == 0 and detected[2] == blocks[1]
