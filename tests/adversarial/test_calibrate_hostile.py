"""``dsh-testkit calibrate`` on hostile files, run as a user runs it: each one is skipped with a
one-line reason that names what is wrong, the good logs beside them are still compared, nothing
prints a traceback and no file is touched."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests._support import REFERENCE_LOGS, run_cli

from .test_cli_corrupt import CORRUPT

_CHAT = "http://127.0.0.1:1/chat/completions"


def _har(*entries: object) -> bytes:
    return json.dumps({"log": {"version": "1.2", "entries": list(entries)}}).encode()


def _entry(request_text: str, response_text: str, **extra: object) -> dict[str, object]:
    return {
        "startedDateTime": "2026-12-01T10:00:00Z",
        "time": 5,
        "request": {"method": "POST", "url": _CHAT, "postData": {"text": request_text}},
        "response": {
            "status": 200,
            "content": {"mimeType": "application/json", "text": response_text},
        },
        **extra,
    }


HOSTILE_TRACES: dict[str, tuple[bytes, str]] = {
    "entries-are-strings.har": (_har("x", 1, None), "is not a HAR entry"),
    "truncated.har": (b'{"log":{"version":"1.2","entries":[{"req', "does not parse"),
    "binary.har": (b"\x00\xff\xfe" * 100, "not a recognized trace"),
    "empty.har": (b"", "not a recognized trace"),
    "usage-of-strings.har": (
        _har(
            _entry(
                '{"model":5,"messages":"no"}',
                '{"choices":[{"message":{"role":"assistant","content":7}}],'
                '"usage":{"prompt_tokens":"12","prompt_cache_hit_tokens":-5}}',
            )
        ),
        "no exchange carrying live cache figures",
    ),
    "trace-bad-line.jsonl": (
        b'{"format":"dsh-trace","version":1}\n'
        b'{"index":0,"endpoint":"chat","request":{"model":"m","messages":[]},'
        b'"usage":{"promptTokens":10,"hitTokens":"x"}}\n',
        "line 2",
    ),
}


def test_hostile_files_are_skipped_one_line_each_and_good_logs_still_compared(
    tmp_path: Path,
) -> None:
    if not REFERENCE_LOGS.is_dir():
        pytest.skip(f"reference logs not found at {REFERENCE_LOGS}")
    folder = tmp_path / "mixed"
    folder.mkdir()
    written: dict[str, bytes] = {}
    for name, (data, _line) in CORRUPT.items():
        written[f"{name}.jsonl"] = data
    for name, (data, _why) in HOSTILE_TRACES.items():
        written[name] = data
    for name, data in written.items():
        (folder / name).write_bytes(data)
    shutil.copy(REFERENCE_LOGS / "multi-turn" / "session.jsonl", folder / "good.jsonl")
    done = run_cli("calibrate", str(folder), "--json", "--tokenizer", "heuristic")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr + done.stdout
    doc = json.loads(done.stdout)
    assert {r["log"] for r in doc["perRequest"]} == {"good.jsonl"}
    assert doc["requests"] == 2 and doc["logs"] == 1
    reasons = {s["log"]: s["reason"] for s in doc["skipped"]}
    assert set(reasons) == set(written)
    for reason in reasons.values():
        assert "\n" not in reason and reason
    for name, (_data, line) in CORRUPT.items():
        reason = reasons[f"{name}.jsonl"]
        assert reason.startswith("a session log that does not read: "), reason
        assert f"line {line}" in reason
    for name, (_data, why) in HOSTILE_TRACES.items():
        assert why in reasons[name], reasons[name]
    for name, data in written.items():
        assert (folder / name).read_bytes() == data  # calibration never touches a file
