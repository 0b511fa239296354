"""The wire golden writes each repeated part once: the history an earlier request showed, a
long message, the tool list; the references read back to the exact bodies (a round-trip law),
and a golden of a tool loop shrinks from the conversation's length squared."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_testkit.golden import SnapshotInputError, load_wire_requests, render_trace_requests
from dsh_testkit.golden._compact import REPEAT_MIN, compact_requests, expand_requests

ROOT = Path(__file__).resolve().parents[3]
LONG = "x" * REPEAT_MIN

json_leaves = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(["a", LONG]))
json_values = st.recursive(
    json_leaves,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.sampled_from(["k", "$history", "$literal", "$same_as", "$x"]), inner, max_size=2
        ),
    ),
    max_leaves=6,
)
messages = st.one_of(
    st.builds(
        lambda role, content: {"role": role, "content": content},
        st.sampled_from(["system", "user", "assistant"]),
        st.sampled_from(["hi", LONG, LONG + "!"]),
    ),
    json_values,
)


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Requests that extend, fork and restart each other, sharing tools and messages."""
    pool = draw(st.lists(messages, min_size=1, max_size=4))
    tools = draw(
        st.sampled_from([[{"name": LONG}], [{"name": "t"}], {"$same_as": 1}, {"$literal": 2}])
    )
    bodies: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(1, 5))):
        base: list[Any] = []
        extend = draw(st.booleans())
        if bodies and extend:
            earlier: dict[str, Any] = draw(st.sampled_from(bodies))
            base = list(earlier["messages"])
            base = base[: draw(st.integers(0, len(base)))]
        new = draw(st.lists(st.sampled_from(pool), max_size=3))
        body: dict[str, Any] = {"model": "m", "messages": base + new}
        if draw(st.booleans()):
            body["tools"] = tools
        if draw(st.booleans()):
            body["extra"] = draw(json_values)
        bodies.append(body)
    numbers = draw(st.permutations(range(1, len(bodies) + 1)))
    return [{"request": n, "body": b} for n, b in zip(numbers, bodies, strict=True)]


@given(conversations())
def test_references_read_back_to_the_exact_bodies(entries: list[dict[str, Any]]) -> None:
    compact = compact_requests(entries)
    # through JSON text, as the golden is stored
    assert expand_requests(json.loads(json.dumps(compact))) == entries


def test_each_repeated_part_is_written_once() -> None:
    system = {"role": "system", "content": "You are a careful assistant. " * 4}
    tools = [{"type": "function", "function": {"name": "read_file", "description": LONG}}]
    first = [system, {"role": "user", "content": "read a"}]
    second = [*first, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "b"}]
    sub_agent = [system, {"role": "user", "content": "summarize"}]
    entries = [
        {"request": 1, "body": {"model": "m", "messages": first, "tools": tools}},
        {"request": 2, "body": {"model": "m", "messages": second, "tools": tools}},
        {"request": 3, "body": {"model": "m", "messages": sub_agent, "tools": tools}},
        {
            "request": 4,
            "body": {"model": "m", "messages": [{"role": "user", "content": "x"}, system]},
        },
    ]
    compact = compact_requests(entries)
    assert compact[0] == entries[0]
    assert compact[1]["body"] == {
        "model": "m",
        "messages": [{"$history": {"request": 1, "messages": 2}}, *second[2:]],
        "tools": {"$same_as": 1},
    }
    # the sub-agent shares the system prompt: a history of one message of the latest request
    assert compact[2]["body"]["messages"][0] == {"$history": {"request": 2, "messages": 1}}
    # not at the start: the one message, by where it was shown
    assert compact[3]["body"]["messages"][1] == {"$message": {"request": 1, "index": 0}}
    assert expand_requests(compact) == entries


def test_a_tool_loop_golden_grows_by_what_is_new() -> None:
    text = render_trace_requests(ROOT / "cassettes" / "parallel-tool-calls.yaml")
    document = json.loads(text)
    assert document["version"] == 2
    assert text.count('"description": "Read a text file from the working directory."') == 1
    assert text.count("You are a terse assistant.") == 1
    bodies = [r["body"] for r in load_wire_requests(text)]
    assert bodies[1]["messages"][:2] == bodies[0]["messages"]
    assert bodies[1]["tools"] == bodies[0]["tools"]


def test_a_bad_reference_is_named() -> None:
    with pytest.raises(SnapshotInputError, match=r"request 1, tools: refers to request 2"):
        expand_requests([{"request": 1, "body": {"tools": {"$same_as": 2}}}])
    with pytest.raises(SnapshotInputError, match=r"\$history takes 1 to 1 messages, got 3"):
        expand_requests(
            [
                {"request": 1, "body": {"messages": [{"role": "user"}]}},
                {"request": 2, "body": {"messages": [{"$history": {"request": 1, "messages": 3}}]}},
            ]
        )
    with pytest.raises(SnapshotInputError, match="wire golden format 9"):
        load_wire_requests('{"format": "dsh-testkit wire requests", "version": 9, "requests": []}')
    with pytest.raises(SnapshotInputError, match="not a wire golden"):
        load_wire_requests("{")
