"""What reading an OpenTelemetry export holds in memory.

An export's calls share the messages they resend, as a dsh-trace file's do. Every span writes
its call's whole history again; read naively, each call held its own copy of every earlier
message. The reader keeps one object per distinct message, and "distinct" is type-strict:
``1``, ``1.0`` and ``True`` are equal in Python but different JSON, so messages that differ
only so stay apart, as do ones whose keys come in another order. And a JSON Lines export is
walked a line at a time, not as a list of its lines beside its text.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from benchmarks.bench_traces import write_otlp
from dsh_testkit.traces import load_trace, loads_trace
from dsh_testkit.traces._readers._otlp import OtlpRecords, _json, trace_of_records
from dsh_testkit.traces._readers._otlp._common import SharedMessages


def test_resent_history_is_one_object_per_message(tmp_path: Path) -> None:
    path = tmp_path / "export.otlp.jsonl"
    write_otlp(path, 200)
    trace = load_trace(path)
    by_conversation: dict[str, list[Any]] = {}
    for exchange in trace:
        messages = exchange.body["messages"]
        first = messages[0]["content"][:12]  # "Agent N: you": one conversation's system prompt
        by_conversation.setdefault(first, []).append(messages)
    assert len(by_conversation) > 1
    resent = 0
    for requests in by_conversation.values():
        for earlier, later in itertools.pairwise(requests):
            assert len(later) > len(earlier)
            for old, new in zip(earlier, later, strict=False):
                if json.dumps(old) == json.dumps(new):  # (a timestamped system prompt is not)
                    assert new is old  # the same object, not an equal copy
                    resent += 1
    assert resent > len(trace)  # the history: several messages a request
    # distinct messages stay distinct
    every = [m for e in trace for m in e.body["messages"]]
    assert len({id(m) for m in every}) == len({json.dumps(m) for m in every})


def test_equal_in_python_but_not_in_json_is_not_shared() -> None:
    shared = SharedMessages()
    first = shared.share([{"role": "user", "content": "a", "n": 1}])
    for other in (
        {"role": "user", "content": "a", "n": 1.0},
        {"role": "user", "content": "a", "n": True},
        {"content": "a", "role": "user", "n": 1},  # the same keys in another order
        {"role": "user", "content": ("a",), "n": 1},
    ):
        found = shared.share([other])
        assert found[0] is other and found[0] is not first[0]
    again = {"role": "user", "content": "a", "n": 1}
    assert shared.share([again])[0] is first[0]


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(-2, 2) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner),
    max_leaves=8,
)


@given(st.lists(_JSON, max_size=12))
def test_a_shared_message_is_always_the_same_json(messages: list[Any]) -> None:
    shared = SharedMessages()
    out = shared.share(messages)
    assert len(out) == len(messages)
    for before, after in zip(messages, out, strict=True):
        assert json.dumps(after) == json.dumps(before)
        assert repr(after) == repr(before)


def test_a_message_nested_too_deep_to_repr_is_kept_as_it_is() -> None:
    deep: Any = "x"
    for _ in range(100_000):
        deep = [deep]
    message = {"role": "user", "content": deep}
    assert SharedMessages().share([message])[0] is message


def test_a_message_at_the_edge_of_what_repr_walks_never_raises() -> None:
    """The check of a kept message runs a frame deeper than the first ``repr``: at the one depth
    where only the second fails, the message is kept as it is (the call is still read)."""

    def nested(depth: int) -> dict[str, Any]:
        value: Any = "x"
        for _ in range(depth):
            value = [value]
        return {"role": "user", "content": value}

    for depth in range(800, 1200, 2):
        shared = SharedMessages()
        first = nested(depth)
        assert shared.share([first])[0] is first
        second = nested(depth)
        found = shared.share([second])[0]
        assert found is first or found is second  # (identity: == would recurse as deep)


@given(st.text(alphabet="a {}\n\r\t\x0b\x1c\u2028\u00a0", max_size=40))
def test_an_exports_lines_are_split_as_str_split_splits_them(text: str) -> None:
    """The JSON reader walks an export's lines one at a time (not a list of every line beside
    the text) and finds the last line with content without a copy: as before, exactly."""
    assert list(_json._lines(text)) == text.split("\n")
    by_definition = max(
        (n for n, line in enumerate(text.split("\n"), 1) if line.strip()), default=0
    )
    assert _json._last_line(text) == by_definition


_PIECES = ['{"a": 1}', '{"é": "\u2028"}', "[1, 2]", '{"a":', "{", '"b": 2', "}", "", " ", "\u00a0"]
_PIECES += ["\u2028", "\x85", "\r", "\t", "nope"]


def _outcome(found: Any, notes: list[str]) -> Any:
    try:
        return [*list(found), *notes]
    except Exception as exc:  # (what either way raises, compared)
        return f"{type(exc).__name__}: {exc}"


@given(
    st.lists(st.sampled_from(_PIECES), max_size=8),
    st.booleans(),
    st.integers(0, 2),
)
def test_an_export_read_from_its_bytes_is_read_as_from_its_text(
    pieces: list[str], newline_at_end: bool, boms: int
) -> None:
    """A line at a time from the bytes gives the documents, notes and errors the decoded text
    gives: torn last lines, blank and white-space lines, a file that is one document."""
    text = "\n".join(pieces) + ("\n" if newline_at_end else "")
    data = "\ufeff".encode() * boms + text.encode()
    start = 3 * boms
    by_text: list[str] = []
    by_bytes: list[str] = []
    assert _outcome(_json.documents_of_bytes(data, by_bytes, start=start), by_bytes) == _outcome(
        _json.documents(text, by_text), by_text
    )


def test_a_file_read_whole_or_by_lines_is_the_same_trace(tmp_path: Path) -> None:
    path = tmp_path / "export.otlp.jsonl"
    write_otlp(path, 120)
    data = path.read_bytes()
    lines = data.split(b"\n")
    torn = b"\n".join([*lines[:-2], lines[-2][:-40]])  # the export stopped mid-line
    for variant in (data, b"\xef\xbb\xbf" + data, torn):
        records, notes = OtlpRecords(), list[str]()  # the file's text read whole, as before
        text = variant.decode("utf-8").removeprefix("\ufeff")
        for number, document in _json.documents(text, notes):
            records.add_document(document, f"line {number}")
        assert loads_trace(variant, path="x") == trace_of_records(records, path="x", notes=notes)
    assert loads_trace(torn, path="x").notes[0].startswith("an unfinished last line")
