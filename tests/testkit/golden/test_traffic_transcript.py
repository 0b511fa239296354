"""The readable transcript of any traffic — a capture, the mock, a cassette, a trace file — as
the session transcript is for our own loop: each request shows what it adds, then its answer."""

from __future__ import annotations

from pathlib import Path

import httpx2
import openai
import pytest

from dsh_testkit.capture import RequestCapture
from dsh_testkit.golden import SnapshotInputError, TranscriptExtension, render_traffic
from dsh_testkit.mock import MockDeepSeek, MockServer, Reply, ToolCall
from dsh_testkit.traces import load_trace
from tests.testkit.traces._agent import KEY, run_agent

pytest_plugins = ["pytester"]
CASSETTES = Path(__file__).resolve().parents[3] / "cassettes"


def test_a_cassette_reads_as_a_story() -> None:
    assert render_traffic(CASSETTES / "parallel-tool-calls.yaml") == "\n".join(
        [
            "# dsh-testkit traffic transcript · format 1",
            "# normalized: ids → {{kind-n}} in first-seen order · times dropped · working "
            "directory → {{cwd}} · other UUIDs → {{uuid-n}}",
            "2 requests · 1 conversation",
            "",
            "conversation cassette-scenario",
            "",
            "  request 1 · chat",
            "    model: deepseek-v4-flash",
            "    tools: read_file",
            '      read_file: {"type":"function","function":{"name":"read_file","description":'
            '"Read a text file from the working directory.","parameters":{"type":"object",'
            '"properties":{"path":{"type":"string","description":"Relative path of the file."}},'
            '"required":["path"]}}}',
            '    options: {"stream":true,"stream_options":{"include_usage":true}}',
            "    system: |-",
            "      You are a terse assistant.",
            "      Answer in one short sentence.",
            '    user: "What do a.txt and b.txt say? Read both with read_file in parallel."',
            "    → answer · status 200",
            '      reasoning: "Read both files at once."',
            '      call {{call-1}} read_file {"path":"a.txt"}',
            '      call {{call-2}} read_file {"path":"b.txt"}',
            "      usage: prompt 334 · cache hit 0 · output 86",
            "",
            "  request 2 · chat",
            "    tools: same as request 1",
            "    history: the first 2 messages of request 1",
            "    assistant: the answer of request 1, sent back",
            '    tool result {{call-1}}: "alpha"',
            '    tool result {{call-2}}: "beta"',
            "    → answer · status 200",
            '      reasoning: "The tool results are in; I can answer now."',
            '      text: "a.txt says alpha and b.txt says beta."',
            "      usage: prompt 441 · cache hit 384 · output 25",
            "",
        ]
    )


def test_a_refused_request_and_its_retry() -> None:
    text = render_traffic(CASSETTES / "rate-limit-retry.yaml")
    assert '    → refused · status 429 · "Rate Limit Reached"\n' in text
    assert "  request 2 · chat\n    history: the first 2 messages of request 1\n" in text


def test_the_openai_sdk_on_loopback_reads_the_same_from_every_recording(tmp_path: Path) -> None:
    call = ToolCall(name="read_file", arguments='{"path": "a.txt"}')
    mock = MockDeepSeek([Reply(reasoning="r", tool_calls=(call,)), Reply(text="done")])
    capture = RequestCapture()
    with MockServer(mock) as server:
        client = openai.OpenAI(
            base_url=server.base_url,
            api_key=KEY,
            http_client=httpx2.Client(transport=capture.transport(httpx2.HTTPTransport())),
        )
        run_agent(client, ["read a.txt"])
    path = tmp_path / "capture.trace"
    capture.save(path)
    extension = TranscriptExtension()
    text = extension.serialize(capture)
    assert text == extension.serialize(path) == extension.serialize(load_trace(path))
    assert text == extension.serialize(mock)
    assert isinstance(text, str) and KEY not in text
    assert '    → answer · status 200\n      reasoning: "r"\n' in text
    assert '      call {{call-1}} read_file {"path": "a.txt"}\n' in text
    assert "    assistant: the answer of request 1, sent back\n" in text
    assert '      text: "done"\n' in text


def test_unreadable_traffic_is_a_snapshot_input_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{}", encoding="utf-8")
    with pytest.raises(SnapshotInputError, match="cannot read the traffic"):
        render_traffic(bad)


def test_syrupy_writes_and_checks_a_traffic_transcript(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    pytester.makepyfile(
        test_golden=f"""
from pathlib import Path
from dsh_testkit.golden import TranscriptExtension

def test_agent(snapshot):
    cassette = Path({str(CASSETTES / "one-tool-call.yaml")!r})
    assert cassette == snapshot(extension_class=TranscriptExtension)
"""
    )
    pytester.runpytest_inprocess("-p", "no:cacheprovider", "--snapshot-update").assert_outcomes(
        passed=1
    )
    (written,) = pytester.path.glob("__snapshots__/**/*.transcript.txt")
    assert written.read_text(encoding="utf-8").startswith(
        "# dsh-testkit traffic transcript · format 1\n"
    )
    pytester.runpytest_inprocess("-p", "no:cacheprovider").assert_outcomes(passed=1)
