"""``dsh-testkit serve`` run as a user runs it: a subprocess that prints its URL and stops cleanly."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from dsh_testkit.cli import main
from dsh_testkit.mock import ErrorReply, Reply, Script
from tests.testkit.mock._helpers import API_KEY, chat_body

EXECUTABLE = Path(sys.executable).parent / "dsh-testkit"
AUTH = {"authorization": f"Bearer {API_KEY}"}


@contextmanager
def serving(
    *args: str, env: dict[str, str] | None = None
) -> Iterator[tuple[subprocess.Popen[str], str]]:
    process = subprocess.Popen(
        [str(EXECUTABLE), "serve", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=None if env is None else {**os.environ, **env},
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        yield process, url
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)
        for stream in (process.stdout, process.stderr):
            if stream is not None:
                stream.close()


@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_serve_prints_its_url_serves_and_stops_cleanly(signum: signal.Signals) -> None:
    with serving() as (process, url):
        assert url.startswith("http://127.0.0.1:")
        answer = httpx.post(url + "/chat/completions", json=chat_body(), headers=AUTH, timeout=10)
        assert answer.status_code == 200
        assert answer.json()["choices"][0]["message"]["content"].startswith("Mock DeepSeek reply")
        with (
            httpx.Client(base_url=url, timeout=10) as client,
            client.stream(
                "POST", "/chat/completions", json=chat_body(stream=True), headers=AUTH
            ) as stream,
        ):
            assert list(stream.iter_lines())[-2] == "data: [DONE]"
        process.send_signal(signum)
        assert process.wait(timeout=10) == 0
        assert process.stderr is not None
        errors = process.stderr.read()
        assert "Traceback" not in errors and "mock DeepSeek at" in errors
        assert API_KEY not in errors


def test_serve_loads_a_script_file_at_start(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(
        Script(entries=(ErrorReply(status=429, retry_after="4"), Reply(text="scripted"))).dumps(),
        encoding="utf-8",
    )
    with serving("--script", str(script), "--seed", "3") as (process, url):
        with httpx.Client(base_url=url, headers=AUTH, timeout=10) as client:
            limited = client.post("/chat/completions", json=chat_body())
            answered = client.post("/chat/completions", json=chat_body())
            log = client.get("/_dsh/requests").json()["requests"]
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    assert (limited.status_code, limited.headers["retry-after"]) == (429, "4")
    assert answered.json()["choices"][0]["message"]["content"] == "scripted"
    assert [r["scripted"] for r in log] == [True, True]


def test_serve_refuses_a_bad_script_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"version": 1, "entries": [{"fault": "explode"}]}), encoding="utf-8")
    assert main(["serve", "--script", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "dsh-testkit serve:" in err and "entries[0].fault: unknown fault 'explode'" in err


def test_serve_reports_a_port_it_cannot_bind(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--port", str(port)]) == 1
    assert "cannot listen" in capsys.readouterr().err


def test_serve_takes_its_keys_from_the_environment_too() -> None:
    # A key on the command line shows in ps; the environment's does not.
    with serving("--api-key", "cli-key", env={"DSH_MOCK_API_KEYS": "env-key-1, env-key-2"}) as (
        _,
        url,
    ):
        for key, status in (("cli-key", 200), ("env-key-2", 200), ("other", 401)):
            answer = httpx.post(
                url + "/chat/completions",
                json=chat_body(),
                headers={"authorization": f"Bearer {key}"},
                timeout=10,
            )
            assert answer.status_code == status, key


@pytest.mark.parametrize(
    ("port", "message"),
    [
        ("99999", "99999 is not a port (0 picks a free one; at most 65535)"),
        ("-1", "-1 is not a port"),
        ("x", "'x' is not a port number"),
    ],
)
def test_serve_and_proxy_refuse_a_port_that_is_none(
    port: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for command in (["serve"], ["proxy", "--upstream", "http://127.0.0.1:9"]):
        with pytest.raises(SystemExit) as stopped:
            main([*command, "--port", port])
        assert stopped.value.code == 2
        assert message in capsys.readouterr().err


def test_serve_beyond_loopback_needs_allow_remote_and_then_warns(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["serve", "--host", "0.0.0.0"]) == 1
    err = capsys.readouterr().err
    assert "not a loopback address" in err and "--allow-remote" in err
    with serving("--host", "0.0.0.0", "--allow-remote") as (process, url):
        port = url.rsplit(":", 1)[1]
        assert httpx.get(f"http://127.0.0.1:{port}/models", headers=AUTH).status_code == 200
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=30)
    assert "WARNING: listening on 0.0.0.0" in err and "no authentication" in err


@pytest.mark.parametrize("command", ["serve", "proxy"])
def test_allow_host_adds_names_and_a_refusal_names_the_flag(command: str) -> None:
    args = ["--allow-host", "mock.internal"]
    if command == "proxy":
        with serving() as (_, upstream):
            process = subprocess.Popen(
                [str(EXECUTABLE), "proxy", "--upstream", upstream, *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            assert process.stdout is not None
            url = process.stdout.readline().strip()
            statuses = _statuses(url)
            process.send_signal(signal.SIGINT)
            _, err = process.communicate(timeout=60)
    else:
        with serving(*args) as (process, url):
            statuses = _statuses(url)
            process.send_signal(signal.SIGTERM)
            _, err = process.communicate(timeout=30)
    assert statuses == {"127.0.0.1": 200, "mock.internal": 200, "evil.test": 421}
    assert "refused a request for Host 'evil.test" in err and "--allow-host evil.test" in err


def _statuses(url: str) -> dict[str, int]:
    port = int(url.rsplit(":", 1)[1])
    out = {}
    for host in ("127.0.0.1", "mock.internal", "evil.test"):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(
                f"GET /models HTTP/1.1\r\nHost: {host}:{port}\r\nauthorization: Bearer "
                f"{API_KEY}\r\nconnection: close\r\n\r\n".encode()
            )
            out[host] = int(sock.recv(100).split(b" ", 2)[1])
    return out


@pytest.mark.parametrize("command", [["serve"], ["proxy", "--upstream", "http://127.0.0.1:9"]])
def test_a_bad_allow_host_is_refused(
    command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*command, "--allow-host", "mock.internal:8080"]) == 2
    assert "--allow-host: 'mock.internal:8080' is not a host name" in capsys.readouterr().err
