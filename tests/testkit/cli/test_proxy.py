"""``dsh-testkit proxy`` run as a user runs it: the stop, a restart, a second proxy, the host.

Each test starts the command in a fresh Python, in front of the loopback mock, and reads its
stdout (where it listens, then the report) and stderr (the summary line and warnings).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from dsh_testkit.mock import MockDeepSeek, MockServer, Reply
from tests._support import run_cli
from tests.testkit.traces._agent import KEY

pytestmark = pytest.mark.slow  # each test starts a Python or two


@contextmanager
def proxy(*args: str) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """The proxy command with ``args``; yields the process and its base URL."""
    process = subprocess.Popen(
        [sys.executable, "-m", "dsh_testkit.cli", "proxy", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        match = re.fullmatch(r"(http://[\d.]+:\d+)\n", first)  # the base URL alone
        assert match, first + (process.stderr.read() if process.stderr else "")
        yield process, match.group(1)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate(timeout=30)


def stop(process: subprocess.Popen[str]) -> tuple[str, str]:
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    return out, err


def chat(base_url: str, content: str, *, stream: bool = False) -> httpx.Response:
    return httpx.post(
        base_url + "/chat/completions",
        json={
            "model": "deepseek-chat",
            "stream": stream,
            "messages": [{"role": "user", "content": content}],
        },
        headers={"authorization": f"Bearer {KEY}"},
        timeout=30,
    )


def test_an_answer_still_streaming_at_ctrl_c_is_recorded_as_interrupted(tmp_path: Path) -> None:
    out = tmp_path / "run.trace"
    slow = Reply(text=" ".join(f"word{i}" for i in range(400)), chunk_size=6, pace_ms=50)
    body = {
        "model": "deepseek-chat",
        "stream": True,
        "messages": [{"role": "user", "content": "go"}],
    }
    with (
        MockServer(MockDeepSeek([slow])) as upstream,
        proxy("--upstream", upstream.base_url, "--out", str(out), "--grace", "0.5") as (
            process,
            base,
        ),
        httpx.stream(
            "POST",
            base + "/chat/completions",
            json=body,
            headers={"authorization": f"Bearer {KEY}"},
            timeout=30,
        ) as response,
    ):
        pieces = response.iter_raw()
        next(pieces)  # the answer is streaming
        process.send_signal(signal.SIGINT)
        with pytest.raises(httpx.HTTPError):  # cut when the grace ends
            for _ in pieces:
                pass
        report, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert "1 interrupted: still in flight when the 0.5 s grace ended" in err
    assert "0 conversation(s)" not in report and "1 conversation(s)" in report
    (record,) = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()[1:]]
    assert record["outcome"] == "interrupted"
    assert record["response"]["content"].startswith("word0")
    assert KEY not in report + err + out.read_text(encoding="utf-8")


def test_an_empty_session_reports_an_empty_trace(tmp_path: Path) -> None:
    with (
        MockServer(MockDeepSeek()) as upstream,
        proxy("--upstream", upstream.base_url) as (
            process,
            _,
        ),
    ):
        report, err = stop(process)
    assert "the trace is empty: no model request was recorded" in report
    assert "conversation(s)" not in report
    assert "0 exchange(s) recorded this session" in err
    assert "a temporary file, now removed" in err


def test_a_restart_continues_the_file_and_a_second_proxy_on_it_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "run.trace"
    with MockServer(MockDeepSeek()) as upstream:
        with proxy("--upstream", upstream.base_url, "--out", str(out)) as (process, base):
            assert chat(base, "first").status_code == 200
            second = run_cli("proxy", "--upstream", upstream.base_url, "--out", str(out))
            assert second.returncode == 2
            assert "already open for writing by another writer" in second.stderr
            assert second.stdout == ""
            stop(process)
        with proxy("--upstream", upstream.base_url, "--out", str(out)) as (process, base):
            assert chat(base, "second").status_code == 200
            report, err = stop(process)
    assert f"continuing {out}: 1 exchange(s) already in it" in err
    assert "1 exchange(s) recorded this session" in err and "after the 1 already in it" in err
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3  # one header, both sessions' exchanges
    assert [json.loads(line)["index"] for line in lines[1:]] == [0, 1]
    assert "2 conversation(s)" in report  # both sessions, one request each


def test_a_non_loopback_host_needs_allow_remote_and_then_warns(tmp_path: Path) -> None:
    refused = run_cli("proxy", "--upstream", "http://127.0.0.1:9", "--host", "0.0.0.0")
    assert refused.returncode == 2
    assert "not a loopback address" in refused.stderr and "--allow-remote" in refused.stderr
    with proxy("--upstream", "http://127.0.0.1:9", "--host", "0.0.0.0", "--allow-remote") as (
        process,
        _,
    ):
        _, err = stop(process)
    assert "WARNING: listening on 0.0.0.0" in err
    assert "/_dsh/report" in err and "no authentication" in err
