"""The shared-history reader: each trace line parsed against the lines before it.

The law: :func:`read_trace_lines` gives exactly the records a plain parse of each line gives
(values, types, key order, and the ``_mayHoldKey`` mark the secret sniff sets), however the
conversations in the file extend, diverge, reorder or repeat, and whatever key-shaped text
their new or resent parts hold. Only object identity differs: a resent message is the earlier
line's object.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import event, given
from hypothesis import strategies as st

from dsh_testkit.scrub._scrubber import may_hold_secret
from dsh_testkit.traces._file import TRACE_FORMAT_VERSION, read_trace_lines
from dsh_testkit.traces._shared_history import SharedHistory

HEADER = json.dumps({"format": "dsh-trace", "version": TRACE_FORMAT_VERSION, "source": "proxy"})

KEY = "sk-" + "a1B2c3D4" * 4
TEXTS = st.one_of(
    st.text(max_size=12),
    st.text(min_size=40, max_size=60),
    st.sampled_from(
        [
            KEY,
            f"my key is {KEY}.",
            "Bearer abcdefghijklmnop",
            "sk%2D" + "Zz9" * 10,  # percent-encoded key shape
            "\\u0073k-" + "Qq7" * 10,  # an escaped one
            "c2stYWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXo=",  # base64 of a key shape
            "%41%42 &amp; &#115;",
            "plain words",
            "a longer message, long enough that its array is worth sharing on its own: " * 2,
            "",
        ]
    ),
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.sampled_from([1.0, 0.5, -0.0, 1e300]),
    TEXTS,
)
MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "user", "assistant", "tool"]), "content": TEXTS},
    optional={"name": SCALARS, "extra": st.lists(SCALARS, max_size=2)},
)
ELEMENT = st.one_of(MESSAGE, MESSAGE, MESSAGE, SCALARS, st.lists(MESSAGE, max_size=2))

# What a step does to its conversation's messages before the line is written.
STEP = st.tuples(
    st.integers(0, 2),  # which conversation
    st.sampled_from(["extend", "extend", "extend", "repeat", "diverge", "reorder", "truncate"]),
    st.lists(ELEMENT, min_size=1, max_size=3),
    st.integers(0, 50),  # where a divergence or reorder happens
    st.sampled_from(["compact"] * 6 + ["spaced", "ascii", "keys-first", "odd"]),
)


def _line(index: int, messages: list[Any], style: str, extra: Any) -> str:
    request: dict[str, Any] = {"model": "deepseek-chat", "messages": messages}
    record: dict[str, Any] = {"index": index, "endpoint": "chat", "request": request}
    if style == "keys-first":
        record = {"messages": extra, "request": {"messages": messages, "model": "m"}, "x": 1}
    if style == "odd":
        # a "messages" key elsewhere, an escaped quote before one, a nested request
        record = {
            '"messages': [extra],
            "response": {"messages": messages[:1], "request": {"messages": messages}},
            "request": request,
        }
    if style == "spaced":
        return json.dumps(record, separators=(", ", ": "), ensure_ascii=False)
    return json.dumps(record, separators=(",", ":"), ensure_ascii=style == "ascii")


@st.composite
def trace_texts(draw: st.DrawFn) -> str:
    conversations: list[list[Any]] = [[] for _ in range(4)]
    lines = [HEADER]
    for index, (which, action, new, at, style) in enumerate(
        draw(st.lists(STEP, min_size=1, max_size=16))
    ):
        messages = conversations[which]
        if action == "diverge" and messages:
            messages[at % len(messages)] = new[0]
        elif action == "reorder" and len(messages) > 1:
            i = at % len(messages)
            messages[i], messages[-1] = messages[-1], messages[i]
        elif action == "truncate" and messages:
            del messages[at % len(messages) :]
        elif action != "repeat" or not messages:
            messages.extend(new)
        lines.append(_line(index, list(messages), style, new[-1]))
    return "\n".join(lines) + "\n"


def _records(text: str, *, share: bool) -> list[tuple[int, str]]:
    _, read, notes = read_trace_lines(text, share_history=share)
    records = list(read)
    if share:  # how many resent messages were shared (the law must be tested where it bites)
        event_shared(records)
    assert notes == []
    # json.dumps tells 1 from 1.0 from True and keeps key order: the records' exact values
    return [(number, json.dumps(record)) for number, record in records]


def event_shared(records: list[tuple[int, Any]]) -> None:
    seen: set[int] = set()
    shared = 0
    for _, record in records:
        request = record.get("request")
        for message in request.get("messages", []) if isinstance(request, dict) else []:
            shared += id(message) in seen and isinstance(message, dict)
            seen.add(id(message))
    event("messages shared" if shared else "nothing shared")


@given(trace_texts())
def test_records_equal_a_plain_parse(text: str) -> None:
    assert _records(text, share=True) == _records(text, share=False)


@given(trace_texts())
def test_bytes_read_as_text(text: str) -> None:
    data = text.encode("utf-8")
    _, shared, _ = read_trace_lines(data)
    _, plain, _ = read_trace_lines(data, share_history=False)
    assert [json.dumps(r) for _, r in shared] == [json.dumps(r) for _, r in plain]


def _conversation_lines(*contents: str) -> list[str]:
    messages: list[dict[str, str]] = []
    lines = []
    for i, content in enumerate(contents):
        messages.append({"role": "user", "content": content})
        record = {"index": i, "request": {"model": "m", "messages": messages}}
        lines.append(json.dumps(record, separators=(",", ":")))
    return lines


def test_a_resent_message_is_the_earlier_lines_object() -> None:
    reader = SharedHistory(may_hold_secret)
    records = []
    for line in _conversation_lines("a" * 70, "b", "c"):
        records.append(reader.load(line))
        assert not reader.may_hold_secret()  # files the line's messages as its tip
    first, second, third = records
    assert second["request"]["messages"][0] is first["request"]["messages"][0]
    assert third["request"]["messages"][1] is second["request"]["messages"][1]
    assert third["request"]["messages"] is not second["request"]["messages"]  # a list each


def test_only_the_new_part_is_sniffed_after_a_clean_line() -> None:
    seen: list[str] = []

    def sniff(text: str) -> bool:
        seen.append(text)
        return may_hold_secret(text)

    reader = SharedHistory(sniff)
    lines = _conversation_lines("x" * 500, f"now {KEY}", "after")
    flags = []
    for line in lines:
        reader.load(line)
        flags.append(reader.may_hold_secret())
    assert flags == [False, True, True]
    assert seen[0] == lines[0]
    assert "x" * 500 not in seen[1]  # the shared first message was not read again
    assert KEY in seen[1]
    assert seen[2] == lines[2]  # its shared part came from a flagged line: the whole line


def test_user_rules_sniff_the_whole_line() -> None:
    seen: list[str] = []

    def sniff(text: str) -> bool:
        seen.append(text)
        return False

    reader = SharedHistory(sniff, splice=False)
    lines = _conversation_lines("a", "b")
    for line in lines:
        assert reader.load(line)["request"]["messages"]
        reader.may_hold_secret()
    assert seen == lines


def test_invalid_lines_raise_what_the_plain_parser_raises() -> None:
    reader = SharedHistory(may_hold_secret)
    good = _conversation_lines("a", "b")
    reader.load(good[0])
    reader.may_hold_secret()
    for bad in (good[1][:-2], good[1] + "x", good[1].replace("]", ",]"), "\ufeff" + good[1]):
        try:
            json.loads(bad)
        except ValueError as expected:
            try:
                reader.load(bad)
            except ValueError as got:
                assert type(got) is type(expected)
                assert str(got) == str(expected)
            else:
                raise AssertionError(f"{bad!r} read")


def test_the_fast_path_takes_only_its_own_placeholder() -> None:
    """The fast path puts a placeholder number where the first ``"messages":[`` array was and
    parses the rest at once; it keeps the result only when that placeholder comes back as
    ``request.messages``. A line whose ``request.messages`` is the placeholder's *value* written
    otherwise, after an array under another ``messages`` key, is read the careful way."""
    tricky = [
        '{"request":{"tools":[{"messages":[{"role":"user","content":"x"}]}],'
        '"messages":-7.32177709370e-299}}',
        '{"request":{"tools":[{"messages":[{"role":"user","content":"x"}]}],'
        '"messages":-7.3217770937e-299}}',
        '{"request":{"messages":[{"role":"user","content":"a"}],"messages":[1]}}',
        '{"response":{"messages":[{"role":"user","content":"a"}]},"request":{"messages":[2]}}',
        '{"request":{"messages":[{"role":"user","content":"\\"messages\\":[x"}]}}',
    ]
    text = "\n".join([HEADER, *tricky]) + "\n"
    shared = [json.dumps(r) for _, r in read_trace_lines(text, share_history=True)[1]]
    plain = [json.dumps(r) for _, r in read_trace_lines(text, share_history=False)[1]]
    assert shared == plain
    assert json.loads(shared[0])["request"]["messages"] == -7.3217770937e-299
