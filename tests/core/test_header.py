"""The request header (docs/design.md §1, §5, §11): config, tools, canonical form, equality, the
delta codec, the fold and the writer's decision. Laws are in ``test_header_properties.py``."""

from __future__ import annotations

import dataclasses
import math
import re
from typing import Any

import pytest

from dsh_core import (
    AddedTool,
    CorruptLogError,
    EpochHeader,
    Event,
    HeaderDelta,
    HeaderError,
    JsonValueError,
    LlmCallConfig,
    Session,
    SystemDelta,
    ToolSchema,
    ToolsDelta,
    ToolsPlaceholder,
    apply_header_delta,
    canonical_header,
    diff_header,
    fold_request_header,
    header_equals,
    plan_header_event,
)

CONFIG = LlmCallConfig(provider="deepseek", model="deepseek-v4-flash")


def tool(name: str, description: str = "", **props: str) -> ToolSchema:
    properties = {k: {"type": v} for k, v in props.items()}
    parameters: Any = {"type": "object", "properties": properties}  # frozen by ToolSchema
    return ToolSchema(name=name, description=description, parameters=parameters)


def header(
    system: str | None = None, tools: Any = None, config: LlmCallConfig = CONFIG
) -> EpochHeader:
    return EpochHeader(config=config, system=system, tools=tools)


def snapshot_event(seq: int, h: EpochHeader, reason: str = "initial") -> Event:
    return Event(
        type="request/header", seq=seq, time=0, data={"header": h.to_json(), "reason": reason}
    )


def delta_event(seq: int, d: HeaderDelta | dict[str, Any]) -> Event:
    data = d.to_json() if isinstance(d, HeaderDelta) else d
    return Event(type="request/header-delta", seq=seq, time=0, data=data)


# ------------------------------------------------------------------------------ LlmCallConfig


def test_call_config_round_trips_with_reference_field_names() -> None:
    raw = {
        "provider": "deepseek",
        "model": "m",
        "reasoningEffort": "high",
        "temperature": 0.5,
        "maxTokens": 99,
        "stop": ["<END>"],
    }
    config = LlmCallConfig.from_json(raw)
    assert config == LlmCallConfig(
        provider="deepseek",
        model="m",
        reasoning_effort="high",
        temperature=0.5,
        max_tokens=99,
        stop=("<END>",),
    )
    assert config.to_json() == raw
    assert LlmCallConfig(provider="p", model="m").to_json() == {"provider": "p", "model": "m"}


def test_stop_absent_and_empty_are_different_values() -> None:
    empty = LlmCallConfig(provider="p", model="m", stop=[])  # type: ignore[arg-type]
    assert empty.stop == ()
    assert empty.to_json()["stop"] == []
    assert empty != LlmCallConfig(provider="p", model="m")
    assert not header_equals(header(config=empty), header())


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"provider": "", "model": "m"}, "needs a non-empty provider and model"),
        ({"provider": "p", "model": ""}, "needs a non-empty provider and model"),
        ({"provider": 1, "model": "m"}, "needs a non-empty provider and model"),
        (
            {"provider": "p", "model": "m", "reasoning_effort": ""},
            "reasoningEffort must be a non-empty",
        ),
        (
            {"provider": "p", "model": "m", "temperature": math.nan},
            "temperature must be a finite number",
        ),
        (
            {"provider": "p", "model": "m", "temperature": True},
            "temperature must be a finite number",
        ),
        ({"provider": "p", "model": "m", "max_tokens": 1.5}, "maxTokens must be an integer"),
        ({"provider": "p", "model": "m", "stop": "<END>"}, "stop must be a sequence of strings"),
        ({"provider": "p", "model": "m", "stop": [1]}, "stop must hold strings only"),
    ],
)
def test_call_config_rejections(kwargs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(HeaderError) as info:
        LlmCallConfig(**kwargs)
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ([], "config must be a JSON object"),
        ({"provider": "p", "model": "m", "seed": 1}, "config has unknown keys ['seed']"),
        ({"model": "m"}, "config lacks provider/model"),
        ({"provider": "p", "model": "m", "reasoningEffort": 1}, "reasoningEffort must be a string"),
        ({"provider": "p", "model": "m", "temperature": "hot"}, "temperature must be a number"),
        ({"provider": "p", "model": "m", "maxTokens": True}, "maxTokens must be an integer"),
        ({"provider": "p", "model": "m", "stop": "x"}, "stop must be an array of strings"),
    ],
)
def test_call_config_json_rejections(raw: Any, fragment: str) -> None:
    with pytest.raises(HeaderError) as info:
        LlmCallConfig.from_json(raw)
    assert fragment in str(info.value)


# --------------------------------------------------------------------------------- ToolSchema


def test_tool_schema_round_trips_and_freezes_parameters_in_order() -> None:
    raw = {
        "name": "read",
        "description": "Read a file",
        "parameters": {"type": "object", "required": ["p"]},
    }
    schema = ToolSchema.from_json(raw)
    assert schema.to_json() == raw
    assert list(schema.parameters) == ["type", "required"]
    with pytest.raises(TypeError):
        schema.parameters["type"] = "array"
    with pytest.raises(dataclasses.FrozenInstanceError):
        schema.name = "x"  # type: ignore[misc]
    assert ToolSchema.from_json({"name": "n", "parameters": {}}).description == ""
    source: Any = {"type": "object", "properties": {"a": {"type": "string"}}}
    built = ToolSchema(name="t", description="", parameters=source)
    source["properties"]["a"]["type"] = "integer"
    assert built.parameters["properties"]["a"]["type"] == "string"


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("read", "tool must be a JSON object"),
        ({"name": "n", "parameters": {}, "strict": True}, "tool has unknown keys ['strict']"),
        ({"name": 1, "parameters": {}}, "tool name must be a string"),
        ({"name": "", "parameters": {}}, "a tool needs a non-empty name"),
        (
            {"name": "n", "description": 2, "parameters": {}},
            "tool 'n': description must be a string",
        ),
        ({"name": "n", "parameters": []}, "tool 'n': parameters must be a JSON Schema object"),
        ({"name": "n", "parameters": {"x": math.nan}}, "tool 'n': parameters.x"),
    ],
)
def test_tool_schema_rejections(raw: Any, fragment: str) -> None:
    with pytest.raises(HeaderError) as info:
        ToolSchema.from_json(raw)
    assert fragment in str(info.value)


def test_tool_schema_constructor_checks_description_and_parameters() -> None:
    with pytest.raises(HeaderError, match="tool 'n': description must be a string"):
        ToolSchema(name="n", description=None, parameters={})  # type: ignore[arg-type]
    with pytest.raises(HeaderError, match="tool 'n': parameters must be a JSON Schema object"):
        ToolSchema(name="n", description="", parameters=[])  # type: ignore[arg-type]


def test_tool_schema_errors_are_value_errors_of_the_tree() -> None:
    with pytest.raises(ValueError):
        ToolSchema(name="n", description="", parameters={"a": (1,)})  # type: ignore[arg-type]
    assert not issubclass(HeaderError, JsonValueError)


# -------------------------------------------------------------------------------- EpochHeader


def test_epoch_header_round_trips() -> None:
    raw = {
        "config": {"provider": "deepseek", "model": "m"},
        "system": "You are terse.",
        "tools": [tool("a").to_json(), tool("b", "B").to_json()],
    }
    h = EpochHeader.from_json(raw)
    assert h.to_json() == raw
    assert [t.name for t in h.tool_list] == ["a", "b"]
    assert header().to_json() == {"config": {"provider": "deepseek", "model": "deepseek-v4-flash"}}


def test_tools_may_be_given_as_a_list_of_schemas_or_json() -> None:
    h = header(tools=[tool("a"), tool("b").to_json()])
    assert h.tools == (tool("a"), tool("b"))


def test_a_placeholder_tool_list_is_kept_and_compared_by_value() -> None:
    h = EpochHeader.from_json(
        {"config": CONFIG.to_json(), "system": "{{system}}", "tools": "{{tools}}"}
    )
    assert h.tools == ToolsPlaceholder(token="{{tools}}")
    assert h.tool_list == ()
    assert h.to_json()["tools"] == "{{tools}}"
    assert header_equals(h, EpochHeader.from_json(h.to_json()))
    assert not header_equals(h, header("{{system}}"))
    with pytest.raises(
        HeaderError, match="must be an array of tool schemas, got the string 'read'"
    ):
        header(tools="read")


def test_duplicate_tool_names_are_rejected_with_a_clear_error() -> None:
    with pytest.raises(HeaderError) as info:
        header(tools=[tool("read"), tool("write"), tool("read", "again")])
    assert (
        str(info.value)
        == "duplicate tool name 'read' in one header: a model cannot tell them apart"
    )
    raw = {"config": CONFIG.to_json(), "tools": [tool("x").to_json(), tool("x").to_json()]}
    with pytest.raises(HeaderError, match="duplicate tool name 'x'"):
        EpochHeader.from_json(raw)


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ([], "header must be a JSON object"),
        (
            {"config": CONFIG.to_json(), "extra": {}},
            "header has unknown keys ['extra']",
        ),
        ({"config": CONFIG.to_json(), "system": 1}, "header system must be a string, got a number"),
        ({"config": CONFIG.to_json(), "tools": {}}, "header tools must be an array, got an object"),
        ({"system": "x"}, "config must be a JSON object"),
    ],
)
def test_epoch_header_rejections(raw: Any, fragment: str) -> None:
    with pytest.raises(HeaderError) as info:
        EpochHeader.from_json(raw)
    assert fragment in str(info.value)


def test_epoch_header_rejects_a_non_string_system_when_built() -> None:
    with pytest.raises(HeaderError, match="header system must be a string"):
        EpochHeader(config=CONFIG, system=["x"])  # type: ignore[arg-type]


# --------------------------------------------------------------------- canonical and equality


def test_canonical_header_drops_empty_system_and_tools() -> None:
    h = header("", ())
    canonical = canonical_header(h)
    assert canonical == header()
    assert canonical.to_json() == {"config": CONFIG.to_json()}
    assert h.system == "" and h.tools == ()  # the input is not mutated
    populated = header("s", [tool("a")])
    assert canonical_header(populated) is populated
    assert canonical_header(header("s", ())) == header("s")


def test_canonical_header_keeps_config_as_given() -> None:
    config = LlmCallConfig(provider="p", model="m", stop=(), temperature=0)
    assert canonical_header(header(config=config)).config is config


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        (header(tools=None), header(tools=()), True),  # absent tools ≡ []
        (header(""), header(None), True),  # canonical: '' ≡ absent
        (header("s", [tool("a")]), header("s", [tool("a")]), True),
        (header(tools=[tool("a"), tool("b")]), header(tools=[tool("b"), tool("a")]), False),
        (header(tools=[tool("a", "x")]), header(tools=[tool("a", "y")]), False),  # description
        (header(tools=[tool("a", x="string")]), header(tools=[tool("a", x="integer")]), False),
        (header(tools=[]), header(tools=[tool("a")]), False),
        (header("a"), header("b"), False),
        (
            header(config=CONFIG),
            header(config=LlmCallConfig(provider="deepseek", model="other")),
            False,
        ),
        (
            header(config=CONFIG),
            header(
                config=LlmCallConfig(
                    provider="deepseek", model="deepseek-v4-flash", reasoning_effort="max"
                )
            ),
            False,
        ),
        (
            header(config=CONFIG),
            header(config=LlmCallConfig(provider="x", model="deepseek-v4-flash")),
            False,
        ),
        (
            header(config=LlmCallConfig(provider="p", model="m", temperature=0)),
            header(config=LlmCallConfig(provider="p", model="m")),
            False,
        ),
    ],
)
def test_header_equals(a: EpochHeader, b: EpochHeader, equal: bool) -> None:
    assert header_equals(a, b) is equal
    assert header_equals(b, a) is equal
    assert (diff_header(a, b) is None) is equal


def test_header_equals_is_key_order_sensitive_in_schemas() -> None:
    first: Any = {"type": "object", "properties": {}}
    second: Any = {"properties": {}, "type": "object"}
    a = ToolSchema(name="t", description="", parameters=first)
    b = ToolSchema(name="t", description="", parameters=second)
    assert a == b  # equal as Python values ...
    assert not header_equals(
        header(tools=[a]), header(tools=[b])
    )  # ... but not as the model sees them


def test_canonical_text_is_cached_and_canonical() -> None:
    h = header("", [])
    assert h.canonical_text() == '{"config":{"provider":"deepseek","model":"deepseek-v4-flash"}}'
    assert h.canonical_text() is h.canonical_text()


# ------------------------------------------------------------------------------- SystemDelta


def _system_round_trip(before: str | None, after: str | None) -> SystemDelta:
    delta = diff_header(header(before), header(after))
    assert delta is not None and delta.system is not None
    assert apply_header_delta(header(before), delta) == canonical_header(header(after))
    return delta.system


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (
            "keep1\nold\nkeep2\nkeep3",
            "keep1\nnew A\nnew B\nkeep2\nkeep3",
            SystemDelta(keep_start=1, keep_end=2, insert=("new A", "new B")),
        ),
        (None, "x\ny", SystemDelta(keep_start=0, keep_end=0, insert=("x", "y"))),
        ("x\ny", None, SystemDelta(keep_start=0, keep_end=0, insert=())),
        ("a\na", "a\na\na", SystemDelta(keep_start=2, keep_end=0, insert=("a",))),
        ("a\na\na", "a\na", SystemDelta(keep_start=2, keep_end=0, insert=())),
        ("a\r\nb\r\n", "a\r\nc\r\n", SystemDelta(keep_start=1, keep_end=1, insert=("c\r",))),
        ("same\n", "same\n\n", SystemDelta(keep_start=2, keep_end=0, insert=("",))),
        ("", "x", SystemDelta(keep_start=0, keep_end=0, insert=("x",))),
    ],
)
def test_system_delta_cases(before: str | None, after: str | None, expected: SystemDelta) -> None:
    assert _system_round_trip(before, after) == expected


def test_system_delta_json() -> None:
    delta = SystemDelta(keep_start=1, keep_end=2, insert=("a",))
    assert delta.to_json() == {"keepStart": 1, "keepEnd": 2, "insert": ["a"]}
    assert SystemDelta.from_json(delta.to_json()) == delta


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ({"keepStart": -1, "keepEnd": 0, "insert": []}, "keepStart/keepEnd must be non-negative"),
        ({"keepStart": True, "keepEnd": 0, "insert": []}, "keepStart/keepEnd must be non-negative"),
        ({"keepStart": 0, "keepEnd": 0.0, "insert": []}, "keepStart/keepEnd must be non-negative"),
        ({"keepStart": 0, "keepEnd": 0, "insert": "x"}, "insert must be an array of strings"),
        ({"keepStart": 0, "keepEnd": 0, "insert": [1]}, "insert must be an array of strings"),
        ({"keepStart": 0, "keepEnd": 0, "insert": [], "x": 1}, "system delta has unknown keys"),
    ],
)
def test_system_delta_rejections(raw: Any, fragment: str) -> None:
    with pytest.raises(HeaderError) as info:
        SystemDelta.from_json(raw)
    assert fragment in str(info.value)


def test_a_system_delta_that_keeps_too_much_does_not_apply() -> None:
    delta = HeaderDelta(system=SystemDelta(keep_start=2, keep_end=1, insert=()))
    with pytest.raises(HeaderError, match="keeps 2\\+1 lines of a 2-line prompt"):
        apply_header_delta(header("a\nb"), delta)


# -------------------------------------------------------------------------------- ToolsDelta


def _tools_delta(before: list[ToolSchema], after: list[ToolSchema]) -> ToolsDelta:
    delta = diff_header(header(tools=before), header(tools=after))
    assert delta is not None and delta.tools is not None
    assert delta.system is None and delta.config is None
    assert apply_header_delta(header(tools=before), delta) == canonical_header(header(tools=after))
    return delta.tools


def test_a_tool_inserted_mid_list_carries_its_index() -> None:
    a, b, c = tool("a"), tool("b"), tool("c")
    delta = _tools_delta([a, c], [a, b, c])
    assert delta == ToolsDelta(added=(AddedTool(index=1, tool=b),))
    assert delta.to_json() == {
        "added": [{"index": 1, "tool": b.to_json()}],
        "removed": [],
        "changed": [],
    }


def test_a_pure_reorder_is_expressible() -> None:
    a, b, c = tool("a"), tool("b"), tool("c")
    delta = _tools_delta([a, b, c], [c, a, b])
    assert delta == ToolsDelta(order=("c", "a", "b"))
    assert delta.to_json()["order"] == ["c", "a", "b"]


def test_removed_and_changed_are_name_keyed() -> None:
    a, b, c = tool("a"), tool("b"), tool("c")
    b2 = tool("b", "new description")
    delta = _tools_delta([a, b, c], [b2, c])
    assert delta == ToolsDelta(removed=("a",), changed=(b2,))


def test_a_changed_and_moved_tool() -> None:
    a, b, c = tool("a"), tool("b"), tool("c")
    c2 = tool("c", x="string")
    delta = _tools_delta([a, b, c], [c2, a, b])
    assert delta == ToolsDelta(changed=(c2,), order=("c", "a", "b"))


def test_everything_at_once() -> None:
    a, b, c, d, e = (tool(n) for n in "abcde")
    _tools_delta([a, b, c, d], [e, d, tool("b", "B"), a])


def test_all_tools_removed_and_added_from_absent() -> None:
    a, b = tool("a"), tool("b")
    assert _tools_delta([a, b], []) == ToolsDelta(removed=("a", "b"))
    assert _tools_delta([], [a, b]) == ToolsDelta(
        added=(AddedTool(index=0, tool=a), AddedTool(index=1, tool=b))
    )


def test_tools_delta_json_round_trip_including_the_reference_form() -> None:
    a, b = tool("a"), tool("b")
    delta = ToolsDelta(
        added=(AddedTool(index=0, tool=a),), removed=("x",), changed=(b,), order=("b",)
    )
    assert ToolsDelta.from_json(delta.to_json()) == delta
    # Generation B wrote added tools as bare schemas, appended at the end on apply.
    reference = {"added": [a.to_json()], "removed": [], "changed": []}
    parsed = ToolsDelta.from_json(reference)
    assert parsed.added == (AddedTool(index=-1, tool=a),)
    assert parsed.to_json() == reference
    assert apply_header_delta(header(tools=[b]), HeaderDelta(tools=parsed)).tools == (b, a)
    assert ToolsDelta.from_json({}) == ToolsDelta()


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ({"added": {}}, "added/changed must be arrays"),
        ({"changed": "x"}, "added/changed must be arrays"),
        ({"removed": [1]}, "removed must be an array of names"),
        ({"order": "ab"}, "order must be an array of names"),
        (
            {"added": [{"index": -1, "tool": {"name": "a", "parameters": {}}}]},
            "index must be a non-negative",
        ),
        (
            {"added": [{"index": True, "tool": {"name": "a", "parameters": {}}}]},
            "index must be a non-negative",
        ),
        ({"added": [{"index": 0, "tool": {}, "x": 1}]}, "added tool has unknown keys"),
        ({"added": ["a"]}, "added tool must be a JSON object"),
        ({"renamed": []}, "tools delta has unknown keys ['renamed']"),
    ],
)
def test_tools_delta_rejections(raw: Any, fragment: str) -> None:
    with pytest.raises(HeaderError) as info:
        ToolsDelta.from_json(raw)
    assert fragment in str(info.value)


def test_added_tool_index_is_checked() -> None:
    with pytest.raises(
        HeaderError, match="added tool index must be -1 or a non-negative integer, got -2"
    ):
        AddedTool(index=-2, tool=tool("a"))


@pytest.mark.parametrize(
    ("delta", "fragment"),
    [
        (ToolsDelta(removed=("zz",)), "tools delta removes 'zz', which the header does not have"),
        (
            ToolsDelta(changed=(tool("zz"),)),
            "tools delta changes 'zz', which the header does not have",
        ),
        (
            ToolsDelta(order=("a",)),
            "tools delta order ['a'] is not a permutation of the kept tools",
        ),
        (ToolsDelta(order=("a", "a")), "is not a permutation"),
        (
            ToolsDelta(added=(AddedTool(index=0, tool=tool("a")),)),
            "tools delta adds 'a', which the header already has",
        ),
        (
            ToolsDelta(added=(AddedTool(index=5, tool=tool("z")),)),
            "adds 'z' at index 5 of a 2-tool list",
        ),
        (ToolsDelta(added=(AddedTool(index=-1, tool=tool("b")),)), "duplicate tool name 'b'"),
    ],
)
def test_a_tools_delta_that_does_not_fit(delta: ToolsDelta, fragment: str) -> None:
    with pytest.raises(HeaderError) as info:
        apply_header_delta(header(tools=[tool("a"), tool("b")]), HeaderDelta(tools=delta))
    assert fragment in str(info.value)


def test_a_tools_delta_cannot_apply_to_a_placeholder() -> None:
    with pytest.raises(
        HeaderError, match=re.escape("cannot apply a tools delta to the placeholder '{{tools}}'")
    ):
        apply_header_delta(header(tools="{{tools}}"), HeaderDelta(tools=ToolsDelta()))


# ------------------------------------------------------------------------------- HeaderDelta


def test_header_delta_to_json_is_the_event_data() -> None:
    before = header("a\nb", [tool("x")])
    after = header("a\nc", [tool("x"), tool("y")], LlmCallConfig(provider="deepseek", model="m2"))
    delta = diff_header(before, after)
    assert delta is not None
    data = delta.to_json()
    assert data == {
        "system": {"keepStart": 1, "keepEnd": 0, "insert": ["c"]},
        "tools": {
            "added": [{"index": 1, "tool": tool("y").to_json()}],
            "removed": [],
            "changed": [],
        },
        "config": {"provider": "deepseek", "model": "m2"},
    }
    session = Session.create("s")
    session.append("request/header", {"header": before.to_json(), "reason": "initial"})
    event = session.append("request/header-delta", data)
    assert event.data == data
    assert HeaderDelta.from_json(event.data) == delta
    assert header_equals(session.request_header(), after)  # type: ignore[arg-type]


def test_a_config_only_change_replaces_the_config_whole() -> None:
    before = header(config=LlmCallConfig(provider="p", model="m", temperature=0.5, stop=("x",)))
    after = header(config=LlmCallConfig(provider="p", model="m"))
    delta = diff_header(before, after)
    assert delta == HeaderDelta(config=after.config)
    assert apply_header_delta(before, delta) == after


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("x", "header delta must be a JSON object"),
        ({"messagePrefix": None}, "messagePrefix is an array ([] clears it), not null"),
        ({"systemPrompt": []}, "header delta has unknown keys ['systemPrompt']"),
        ({"config": {"model": "m"}}, "config lacks provider/model"),
    ],
)
def test_header_delta_rejections(raw: Any, fragment: str) -> None:
    with pytest.raises(HeaderError) as info:
        HeaderDelta.from_json(raw)
    assert fragment in str(info.value)


def test_header_delta_null_parts_mean_absent() -> None:
    assert HeaderDelta.from_json({"system": None, "tools": None, "config": None}) == HeaderDelta()
    assert apply_header_delta(header("s"), HeaderDelta()) == header("s")


def test_diff_of_equal_headers_is_none() -> None:
    h = header("s", [tool("a")])
    assert diff_header(h, h) is None
    assert diff_header(header("", ()), header()) is None


def test_a_placeholder_change_is_refused_by_the_encoder() -> None:
    with pytest.raises(HeaderError, match="cannot be encoded as a delta"):
        diff_header(header(tools="{{tools}}"), header(tools=[tool("a")]))


# ------------------------------------------------------------------------------------- fold


def test_fold_without_header_events() -> None:
    start = header("s")
    assert fold_request_header([]) is None
    assert fold_request_header([Event(type="todo/write", seq=0, time=0, data={})]) is None
    assert fold_request_header([], start) is start


def test_fold_takes_snapshots_and_applies_deltas() -> None:
    first = header("a\nb", [tool("x"), tool("y")])
    second = header("a\nc", [tool("y"), tool("x")])
    last = header("z")
    delta = diff_header(first, second)
    assert delta is not None
    events = [
        snapshot_event(0, first),
        delta_event(1, delta),
        Event(type="turn/start", seq=2, time=0, data={"turn": 1}),
    ]
    assert fold_request_header(events) == second
    assert fold_request_header([*events, snapshot_event(3, last, "change")]) == last
    canonical = fold_request_header([snapshot_event(0, header("", ()))])
    assert canonical == header()


def test_a_delta_before_any_snapshot_is_a_corrupt_log() -> None:
    with pytest.raises(CorruptLogError) as info:
        fold_request_header([Event(type="todo/write", seq=0, time=0, data={}), delta_event(1, {})])
    assert info.value.seq == 1
    assert (
        str(info.value)
        == "request/header-delta at seq 1 before any request/header snapshot: corrupt log"
    )


def test_an_invalid_snapshot_or_delta_is_a_corrupt_log() -> None:
    bad_snapshot = Event(type="request/header", seq=4, time=0, data={"header": {"system": "x"}})
    with pytest.raises(
        CorruptLogError, match="request/header at seq 4 is invalid: config must be"
    ) as info:
        fold_request_header([bad_snapshot])
    assert info.value.seq == 4
    with pytest.raises(CorruptLogError, match="request/header at seq 0 is invalid: data must be"):
        fold_request_header([Event(type="request/header", seq=0, time=0, data=[])])
    bad_delta = delta_event(1, {"tools": {"removed": ["nope"]}})
    with pytest.raises(
        CorruptLogError, match="request/header-delta at seq 1 does not apply: tools delta removes"
    ) as info:
        fold_request_header([snapshot_event(0, header()), bad_delta])
    assert info.value.seq == 1


# ---------------------------------------------------------------------------- the writer


def test_plan_initial_and_resume_snapshots() -> None:
    h = header("s", [tool("a")])
    assert plan_header_event(None, h, first_of_instance=True) == (
        "request/header",
        {"header": h.to_json(), "reason": "initial"},
    )
    # A new loop instance records its boundary even when nothing changed.
    assert plan_header_event(h, h, first_of_instance=True) == (
        "request/header",
        {"header": h.to_json(), "reason": "resume"},
    )
    assert plan_header_event(None, h, first_of_instance=False) == (
        "request/header",
        {"header": h.to_json(), "reason": "initial"},
    )


def test_plan_writes_canonical_snapshots() -> None:
    plan = plan_header_event(None, header("", ()), first_of_instance=True)
    assert plan == ("request/header", {"header": {"config": CONFIG.to_json()}, "reason": "initial"})


def test_plan_nothing_when_equal() -> None:
    assert plan_header_event(header("s"), header("s", ()), first_of_instance=False) is None


def test_plan_a_verified_delta() -> None:
    before, after = header("a\nb", [tool("a")]), header("a\nB", [tool("b"), tool("a")])
    plan = plan_header_event(before, after, first_of_instance=False)
    delta = diff_header(before, after)
    assert delta is not None
    assert plan == ("request/header-delta", delta.to_json())


def test_plan_snapshots_only_writes_change() -> None:
    plan = plan_header_event(header("a"), header("b"), first_of_instance=False, snapshots_only=True)
    assert plan == ("request/header", {"header": header("b").to_json(), "reason": "change"})
    assert (
        plan_header_event(header("a"), header("a"), first_of_instance=False, snapshots_only=True)
        is None
    )


def test_plan_falls_back_when_the_change_is_not_expressible() -> None:
    before, after = header(tools="{{tools}}"), header(tools=[tool("a")])
    assert plan_header_event(before, after, first_of_instance=False) == (
        "request/header",
        {"header": after.to_json(), "reason": "fallback"},
    )


def _raising(a: EpochHeader, b: EpochHeader) -> HeaderDelta | None:
    raise KeyError("encoder bug")


def _lossy(a: EpochHeader, b: EpochHeader) -> HeaderDelta | None:
    return HeaderDelta(system=SystemDelta(keep_start=0, keep_end=0, insert=("wrong",)))


def _none(a: EpochHeader, b: EpochHeader) -> HeaderDelta | None:
    return None


def _not_a_delta(a: EpochHeader, b: EpochHeader) -> HeaderDelta | None:
    return {"system": None}  # type: ignore[return-value]


def _unfit(a: EpochHeader, b: EpochHeader) -> HeaderDelta | None:
    return HeaderDelta(tools=ToolsDelta(removed=("nope",)))


def _non_json(a: EpochHeader, b: EpochHeader) -> HeaderDelta | None:
    return HeaderDelta(system=SystemDelta(keep_start=0, keep_end=0, insert=(b"x",)))  # type: ignore[arg-type]


@pytest.mark.parametrize("encoder", [_raising, _lossy, _none, _not_a_delta, _unfit, _non_json])
def test_a_broken_encoder_only_costs_a_fallback_snapshot(encoder: Any) -> None:
    before, after = header("a"), header("b", [tool("t")])
    plan = plan_header_event(before, after, first_of_instance=False, encoder=encoder)
    assert plan == ("request/header", {"header": after.to_json(), "reason": "fallback"})
    session = Session.create("s")
    session.append("request/header", {"header": before.to_json(), "reason": "initial"})
    session.append(*plan)
    assert header_equals(session.request_header(), after)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# adapterDefaults (the reference harness's current headers) and tool placeholders


def _config(**fields: object) -> dict[str, object]:
    return {"provider": "deepseek", "model": "deepseek-v4-flash", **fields}


def test_adapter_defaults_are_read_kept_and_compared() -> None:
    marked = EpochHeader.from_json(
        {"config": _config(maxTokens=256000), "adapterDefaults": {"maxTokens": True}}
    )
    plain = EpochHeader.from_json({"config": _config(maxTokens=256000)})
    assert marked.to_json() == {
        "config": _config(maxTokens=256000),
        "adapterDefaults": {"maxTokens": True},
    }
    assert not header_equals(marked, plain)  # docs/design.md §5
    empty = EpochHeader.from_json({"config": _config(), "adapterDefaults": {}})
    assert canonical_header(empty).to_json() == {"config": _config()}
    assert header_equals(empty, EpochHeader.from_json({"config": _config()}))


@pytest.mark.parametrize(
    ("defaults", "message"),
    [
        (None, "null"),
        ([], "is not an object"),
        ({"temperature": True}, "'temperature'"),
        ({"maxTokens": False}, "'maxTokens': False"),
        (
            {"reasoningEffort": True},
            "reasoningEffort is marked but the config has no reasoningEffort",
        ),
    ],
)
def test_invalid_adapter_defaults_are_refused(defaults: object, message: str) -> None:
    with pytest.raises(HeaderError, match="invalid adapterDefaults") as caught:
        EpochHeader.from_json({"config": _config(), "adapterDefaults": defaults})
    assert message in str(caught.value)


def test_a_marker_change_round_trips_through_a_delta_with_the_config() -> None:
    before = EpochHeader.from_json(
        {"config": _config(reasoningEffort="high"), "adapterDefaults": {"reasoningEffort": True}}
    )
    after = EpochHeader.from_json({"config": _config(reasoningEffort="max")})
    delta = diff_header(before, after)
    assert delta is not None and delta.to_json() == {"config": _config(reasoningEffort="max")}
    assert header_equals(apply_header_delta(before, delta), after)
    back = diff_header(after, before)
    assert back is not None and back.to_json()["adapterDefaults"] == {"reasoningEffort": True}
    replayed = apply_header_delta(after, HeaderDelta.from_json(back.to_json()))
    assert header_equals(replayed, before)
    with pytest.raises(HeaderError, match="only with a config"):
        HeaderDelta.from_json({"adapterDefaults": {"maxTokens": True}})


def test_a_tools_placeholder_cannot_be_a_delta_so_the_writer_writes_a_snapshot() -> None:
    opaque = EpochHeader.from_json({"config": _config(), "tools": "{{tools}}"})
    real = EpochHeader.from_json(
        {"config": _config(), "tools": [{"name": "a", "description": "", "parameters": {}}]}
    )
    with pytest.raises(HeaderError, match=r"placeholder .* cannot be encoded as a delta"):
        diff_header(opaque, real)
    plan = plan_header_event(opaque, real, first_of_instance=False)
    assert plan is not None
    assert plan[0] == "request/header" and plan[1]["reason"] == "fallback"
    same = diff_header(
        opaque, EpochHeader.from_json({"config": _config(model="m2"), "tools": "{{tools}}"})
    )
    assert same is not None and same.tools is None and same.config is not None
