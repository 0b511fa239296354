"""Hostile recordings: keys in every field, malformed cassettes, YAML aliases, wrong-typed and
impossible fields, a byte order mark. Every reader either reads the file (no key in anything it
hands out, no impossible figure) or refuses it with one located :class:`TraceError`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from dsh_testkit.cassettes._format import CassetteSerializer
from dsh_testkit.doctor import diagnose, report_text
from dsh_testkit.traces import TraceError, load_trace, loads_trace
from tests._support import run_cli

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"

SHAPED = "sk-" + "FAKE-REPLYLEAK-0000111122223333"  # fake: no key-shaped literal stored
"""A key in the shape the scrubber knows, in the answer and the error body."""
SESSION = "sk-" + "FAKE-SESSIONLEAK-00001111222233"  # fake, as above
"""A key sent as the session header (the conversation key)."""
BEARER = "dskey_NOTSKSHAPED_abcdef123456"
"""A key of no known shape, known only from the Authorization header, repeated in the body."""
QUERY = "qkey_plain_value_7654321"
"""A key of no known shape, known only from the api_key query parameter, repeated in the body."""
SECRETS = (SHAPED, SESSION, BEARER, QUERY)

SYSTEM = "You are a careful agent. " * 40
URL = f"https://api.deepseek.com/chat/completions?api_key={QUERY}"
HEADERS = [
    ("authorization", f"Bearer {BEARER}"),
    ("x-session-id", SESSION),
    ("content-type", "application/json"),
]


def _requests() -> list[dict[str, Any]]:
    first = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"my key is {BEARER}, the other {QUERY}"},
    ]
    second = [
        *first,
        {"role": "assistant", "content": "noted"},
        {"role": "user", "content": f"again {BEARER}"},
    ]
    return [
        {"model": "deepseek-v4-flash", "messages": first},
        {"model": "deepseek-v4-flash", "messages": second},
    ]


ANSWER = {"role": "assistant", "content": f"your key {SHAPED} and {BEARER} work"}
ERROR_BODY = {"error": {"message": f"Authentication Fails, your api key: {SHAPED} is invalid"}}


def _completion() -> dict[str, Any]:
    return {
        "choices": [{"index": 0, "message": ANSWER, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 300, "prompt_cache_hit_tokens": 0, "completion_tokens": 5},
    }


def _har() -> bytes:
    entries = []
    for number, (body, status) in enumerate(zip(_requests(), (200, 401), strict=True)):
        answer = _completion() if status == 200 else ERROR_BODY
        entries.append(
            {
                "startedDateTime": f"2026-12-02T17:00:0{number}.000Z",
                "time": 100,
                "request": {
                    "method": "POST",
                    "url": URL,
                    "headers": [{"name": k, "value": v} for k, v in HEADERS],
                    "postData": {"mimeType": "application/json", "text": json.dumps(body)},
                },
                "response": {
                    "status": status,
                    "content": {"mimeType": "application/json", "text": json.dumps(answer)},
                },
                "timings": {"wait": 50},
            }
        )
    return json.dumps({"log": {"version": "1.2", "entries": entries}}).encode()


def _cassette() -> bytes:
    interactions = []
    for body, status in zip(_requests(), (200, 401), strict=True):
        answer = _completion() if status == 200 else ERROR_BODY
        interactions.append(
            {
                "request": {
                    "method": "POST",
                    "uri": URL,
                    "headers": dict(HEADERS),
                    "body": {"json": json.dumps(body)},
                },
                "response": {
                    "status": {"code": status, "message": "x"},
                    "headers": {"content-type": "application/json"},
                    "body": {"json": json.dumps(answer)},
                },
            }
        )
    document = {"format": "dsh-cassette", "version": 2, "interactions": interactions}
    return yaml.safe_dump(document, sort_keys=False).encode()


def _trace_lines(records: list[dict[str, Any]]) -> bytes:
    header = {"format": "dsh-trace", "version": 2, "source": "proxy"}
    lines = "".join(json.dumps(r) + "\n" for r in [header, *records])
    return lines.replace("Infinity", "1e400").encode()  # a number JSON reads as infinite


def _trace() -> bytes:
    records = []
    for index, (body, status) in enumerate(zip(_requests(), (200, 401), strict=True)):
        record: dict[str, Any] = {
            "index": index,
            "endpoint": "chat",
            "url": URL,
            "status": status,
            "request": body,
            "headers": [list(pair) for pair in HEADERS],
            "started": 1796319646.0 + index,
            "finished": 1796319646.5 + index,
        }
        if status == 200:
            record["response"] = ANSWER
            record["usage"] = {"promptTokens": 300, "hitTokens": 0, "completionTokens": 5}
        else:
            record["error"] = ERROR_BODY["error"]["message"]
        records.append(record)
    return _trace_lines(records)


def _mock_log() -> bytes:
    records = []
    for seq, (body, status) in enumerate(zip(_requests(), (200, 401), strict=True)):
        record: dict[str, Any] = {
            "seq": seq,
            "endpoint": "chat",
            "method": "POST",
            "path": URL,
            "body": body,
            "headers": [list(pair) for pair in HEADERS],
            "status": status,
        }
        if status == 200:
            record.update(response=ANSWER, promptTokens=300, cacheHitTokens=0)
        else:
            record["error"] = ERROR_BODY
        records.append(record)
    return json.dumps({"requests": records}).encode()


LEAKY: dict[str, Callable[[], bytes]] = {
    "leaky.har": _har,
    "leaky.yaml": _cassette,
    "leaky.trace": _trace,
    "leaky-requests.json": _mock_log,
}


@pytest.mark.parametrize("name", sorted(LEAKY))
def test_no_key_leaves_a_reader(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(LEAKY[name]())
    trace = load_trace(path)
    assert len(trace) == 2
    assert trace[0].response is not None and trace[1].error is not None  # read, not dropped
    assert trace[0].conversation is not None
    handed_out = repr(trace.exchanges)
    report = diagnose(path)
    everything = (handed_out, json.dumps(report.to_json()), report_text(report))
    for secret in SECRETS:
        for text in everything:
            assert secret not in text


def test_a_conversation_key_that_held_a_key_keeps_conversations_apart(tmp_path: Path) -> None:
    records = []
    for index, session in enumerate((SESSION, SESSION.replace("0", "9"))):
        body = _requests()[0]
        records.append(
            {
                "index": index,
                "endpoint": "chat",
                "request": body,
                "headers": [["x-session-id", session]],
            }
        )
    trace = loads_trace(_trace_lines(records))
    first, second = (e.conversation for e in trace)
    assert first and second and first != second
    assert SESSION not in first + second


def test_a_credential_named_later_is_removed_from_earlier_exchanges() -> None:
    first, second = _requests()
    records = [
        {"index": 0, "endpoint": "chat", "request": second},  # names no credential
        {"index": 1, "endpoint": "chat", "request": first, "headers": [list(HEADERS[0])]},
    ]
    trace = loads_trace(_trace_lines(records))
    assert BEARER not in repr(trace.exchanges)


# ------------------------------------------------------------------------ malformed cassettes

_GOOD_INTERACTION = (
    "  - request: {method: POST, uri: 'https://h/chat/completions', headers: {}}\n"
    "    response: {status: {code: 200, message: OK}, headers: {}}\n"
)
MALFORMED_CASSETTES = {
    "bad-yaml": ("format: dsh-cassette\nversion: 2\ninteractions: [\n  -\n", "not valid YAML"),
    "version-99": ("format: dsh-cassette\nversion: 99\ninteractions: []\n", "version 99"),
    "version-missing": ("format: dsh-cassette\ninteractions: []\n", "version None"),
    "interactions-mapping": (
        "format: dsh-cassette\nversion: 2\ninteractions: {a: 1}\n",
        "'interactions' must be a list",
    ),
    "interactions-number": (
        "format: dsh-cassette\nversion: 2\ninteractions: 5\n",
        "'interactions' must be a list",
    ),
    "interaction-empty": (
        "format: dsh-cassette\nversion: 2\ninteractions: [{}]\n",
        "interactions[0]",
    ),
    "interaction-number": (
        "format: dsh-cassette\nversion: 2\ninteractions: [5]\n",
        "interactions[0]",
    ),
    "request-string": (
        "format: dsh-cassette\nversion: 2\ninteractions: [{request: x, response: y}]\n",
        "interactions[0].request must be a mapping",
    ),
    "headers-list": (
        "format: dsh-cassette\nversion: 2\ninteractions:\n"
        "  - request: {method: POST, uri: u, headers: [1]}\n"
        "    response: {status: {code: 200}}\n",
        "interactions[0]",
    ),
    "status-infinite": (
        "format: dsh-cassette\nversion: 2\ninteractions:\n"
        "  - request: {method: POST, uri: u}\n"
        "    response: {status: {code: .inf}}\n",
        "interactions[0]",
    ),
    "second-interaction": (
        f"format: dsh-cassette\nversion: 2\ninteractions:\n{_GOOD_INTERACTION}  - 7\n",
        "interactions[1]",
    ),
    "metadata-list": (
        "format: dsh-cassette\nversion: 2\nmetadata: [1]\ninteractions: []\n",
        "'metadata' must be a mapping",
    ),
    "python-tag": (
        "format: dsh-cassette\nversion: 2\ninteractions:\n"
        "  - !!python/object/apply:os.system ['true']\n",
        "could not determine a constructor",
    ),
}


@pytest.mark.parametrize("name", sorted(MALFORMED_CASSETTES))
def test_a_malformed_cassette_is_one_located_trace_error(tmp_path: Path, name: str) -> None:
    text, where = MALFORMED_CASSETTES[name]
    path = tmp_path / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TraceError) as caught:
        load_trace(path)
    assert caught.value.path == str(path)
    assert where in caught.value.reason
    assert "\n" not in str(caught.value)


def test_the_cli_says_one_line_for_a_malformed_cassette(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(MALFORMED_CASSETTES["request-string"][0], encoding="utf-8")
    done = run_cli("cache-report", str(path))
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().count("\n") == 0, done.stderr
    assert str(path) in done.stderr and "interactions[0]" in done.stderr


# ------------------------------------------------------------------------------ YAML aliases


def _aliased(count: int) -> str:
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "x" * 2000}]})
    return (
        "format: dsh-cassette\nversion: 2\ninteractions:\n"
        "  - &I\n"
        f"    request: {{method: POST, uri: 'https://h/chat/completions', headers: {{}}, "
        f"body: {{json: {json.dumps(body)}}}}}\n"
        "    response: {status: {code: 200, message: OK}, headers: {}}\n" + "  - *I\n" * count
    )


def test_a_cassette_with_aliases_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "aliases.yaml"
    path.write_text(_aliased(5000), encoding="utf-8")
    with pytest.raises(TraceError, match="YAML alias"):
        load_trace(path)


def test_the_persister_refuses_aliases_too(tmp_path: Path) -> None:
    from dsh_testkit.cassettes import CassetteFormatError
    from dsh_testkit.cassettes._format import CassettePersister

    path = tmp_path / "aliases.yaml"
    path.write_text(_aliased(2), encoding="utf-8")
    with pytest.raises(CassetteFormatError, match="YAML alias"):
        CassettePersister().load_cassette(path, CassetteSerializer)


def test_an_anchor_without_alias_still_reads() -> None:
    text = _aliased(0).replace("&I", "&I  # an ampersand & no alias")
    document = CassetteSerializer.deserialize(text)
    assert len(document["interactions"]) == 1


def test_the_writer_never_emits_anchors() -> None:
    shared = ["a", "b"]  # one list object in two interactions: PyYAML would anchor it
    interaction = {
        "request": {"method": "POST", "uri": "u", "headers": {"x-many": shared}, "body": None},
        "response": {"status": {"code": 200, "message": "OK"}, "headers": {"x-many": shared}},
    }
    text = CassetteSerializer.serialize({"interactions": [interaction, interaction]})
    assert "&id" not in text and "*id" not in text
    assert len(CassetteSerializer.deserialize(text)["interactions"]) == 2


# ------------------------------------------------------------- wrong-typed and impossible fields


def _record(**fields: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "index": 0,
        "endpoint": "chat",
        "url": "http://h/chat/completions",
        "status": 200,
        "request": _requests()[0],
        "response": {"role": "assistant", "content": "ok"},
        "usage": {"promptTokens": 300, "hitTokens": 128, "completionTokens": 5},
        "started": 1796319646.0,
        "finished": 1796319647.0,
    }
    record.update(fields)
    return record


def _usage(**fields: Any) -> dict[str, Any]:
    return {"promptTokens": 300, "hitTokens": 128, "completionTokens": 5, **fields}


WRONG_TYPES = {
    "status-string": (_record(status="12"), "line 2: status must be an integer, not '12'"),
    "status-list": (_record(status=[200]), "line 2: status must be an integer"),
    "status-bool": (_record(status=True), "line 2: status must be an integer"),
    "started-string": (_record(started="12"), "line 2: started must be a number of seconds"),
    "finished-list": (_record(finished=[1]), "line 2: finished must be a number of seconds"),
    "conversation-list": (_record(conversation=[1]), "line 2: conversation must be a string"),
    "response-string": (_record(response="12"), "line 2: response must be a JSON object"),
    "response-list": (_record(response=[1]), "line 2: response must be a JSON object"),
    "response-number": (_record(response=12), "line 2: response must be a JSON object"),
    "url-huge": (_record(url=10**100), "line 2: url must be a string"),
    "url-bool": (_record(url=True), "line 2: url must be a string"),
    "usage-list": (_record(usage=[1]), "line 2: usage must be a JSON object"),
    "prompt-infinite": (
        _record(usage=_usage(promptTokens=1e400)),
        "line 2: usage.promptTokens must be an integer",
    ),
    "prompt-bool": (
        _record(usage=_usage(promptTokens=True)),
        "line 2: usage.promptTokens must be an integer",
    ),
    "prompt-float": (
        _record(usage=_usage(promptTokens=12.5)),
        "line 2: usage.promptTokens must be an integer",
    ),
    "hit-string": (_record(usage=_usage(hitTokens="12")), "line 2: usage.hitTokens must be an"),
}


@pytest.mark.parametrize("name", sorted(WRONG_TYPES))
def test_a_wrong_typed_trace_field_is_a_located_trace_error(name: str) -> None:
    record, message = WRONG_TYPES[name]
    with pytest.raises(TraceError) as caught:
        loads_trace(_trace_lines([record]), path="x.trace")
    assert caught.value.reason.startswith(message), caught.value.reason
    assert caught.value.path == "x.trace"


IMPOSSIBLE = {
    "prompt-negative": (_record(usage=_usage(promptTokens=-5)), "usage", "not a token count"),
    "completion-negative": (
        _record(usage=_usage(completionTokens=-5)),
        "usage",
        "not a token count",
    ),
    "prompt-huge": (_record(usage=_usage(promptTokens=10**100)), "usage", "not a token count"),
    "hit-negative": (_record(usage=_usage(hitTokens=-1)), "usage", "not a token count"),
    "hit-over-prompt": (
        _record(usage=_usage(hitTokens=10**6)),
        "hit",
        "a cache-read count exceeds the input tokens",
    ),
    "started-huge": (_record(started=1e100), "started", "not UNIX seconds"),
    "started-milliseconds": (_record(started=1e12), "started", "not UNIX seconds"),
    "finished-negative": (_record(finished=-1), "finished", "not UNIX seconds"),
    "status-12": (_record(status=12), "status", "not an HTTP status"),
}


@pytest.mark.parametrize("name", sorted(IMPOSSIBLE))
def test_an_impossible_figure_is_left_out_with_a_note(name: str) -> None:
    record, field, note = IMPOSSIBLE[name]
    trace = loads_trace(_trace_lines([record, {**record, "index": 1}]))
    exchange = trace[0]
    if field == "usage":
        assert exchange.usage is None
    elif field == "hit":
        assert exchange.usage is not None and exchange.usage.hit_tokens is None
    else:
        assert getattr(exchange, field) is None
    (line,) = [n for n in trace.notes if note in n]
    assert "(2 exchange(s); first: line 2)" in line
    report = diagnose(trace).to_json()
    rates = [r["hitRate"] for c in report["conversations"] for r in c["requests"]]
    assert len(rates) == 2
    assert all(rate is None or 0 <= rate <= 1 for rate in [*rates, report["hitRate"]])


MOCK_WRONG_TYPES: dict[str, tuple[dict[str, Any], str]] = {
    "status-string": ({"status": "200"}, "request record 0: status must be an integer"),
    "path-number": ({"path": 5}, "request record 0: path must be a string"),
    "response-string": ({"response": "x"}, "request record 0: response must be a JSON object"),
    "prompt-string": ({"promptTokens": "12"}, "request record 0: promptTokens must be an integer"),
    "hit-bool": ({"cacheHitTokens": True}, "request record 0: cacheHitTokens must be an"),
}


@pytest.mark.parametrize("name", sorted(MOCK_WRONG_TYPES))
def test_a_wrong_typed_mock_record_field_is_a_located_trace_error(name: str) -> None:
    fields, message = MOCK_WRONG_TYPES[name]
    record = {
        "seq": 1,
        "endpoint": "chat",
        "path": "/chat/completions",
        "body": _requests()[0],
        "headers": [],
        "status": 200,
        "promptTokens": 300,
        "cacheHitTokens": 0,
        **fields,
    }
    with pytest.raises(TraceError) as caught:
        loads_trace(json.dumps({"requests": [record]}))
    assert caught.value.reason.startswith(message), caught.value.reason


def test_impossible_mock_figures_are_left_out() -> None:
    record = {
        "seq": 1,
        "endpoint": "chat",
        "path": "/chat/completions",
        "body": _requests()[0],
        "status": 200,
        "promptTokens": 10**100,
        "cacheHitTokens": -5,
    }
    trace = loads_trace(json.dumps({"requests": [record]}))
    assert trace[0].usage is None
    assert any("not a token count" in n for n in trace.notes)


# ------------------------------------------------------------------------------ byte order mark

BOM = b"\xef\xbb\xbf"


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(lambda: _trace_lines([_record()]), id="dsh-trace"),
        pytest.param(_har, id="har"),
        pytest.param(_mock_log, id="mock-requests"),
        pytest.param(_cassette, id="cassette"),
        pytest.param(
            lambda: (
                FIXTURES / "reference-forms" / "plugin-compaction" / "session.jsonl"
            ).read_bytes(),
            id="session-log",
        ),
    ],
)
def test_a_byte_order_mark_is_skipped(content: Callable[[], bytes]) -> None:
    data = content()
    plain = loads_trace(data)
    marked = loads_trace(BOM + data)
    assert marked.source == plain.source
    assert [e.body for e in marked] == [e.body for e in plain]
    assert len(marked) > 0
