"""``diff_requests``: where a request differs from the log's, in this project's vocabulary.

Every wording is pinned by an example (the phrases come from ``dsh_core._differences``, whose
contract ``test_differences.py`` pins); the law (no differences exactly when the requests send
the same bytes, modulo empty ≡ absent system/tools) is a property over generated requests.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_core import (
    GenerateOptions,
    Message,
    ToolSchema,
    assistant_message,
    diff_requests,
    freeze_json,
    user_message,
)
from dsh_core._json_text import dumps_canonical
from dsh_testkit.strategies import generate_options

HI = user_message("hi", id="u1")
ANSWER = assistant_message("hello", provider="p", model="m1", id="a1")


def request(**overrides: Any) -> GenerateOptions:
    base: dict[str, Any] = {
        "provider": "p",
        "model": "m1",
        "messages": (HI, ANSWER),
        "session_id": "s1",
    }
    base.update(overrides)
    return GenerateOptions(**base)


def tool(name: str, description: str = "Does it.", **parameters: Any) -> ToolSchema:
    return ToolSchema(
        name=name,
        description=description,
        parameters=freeze_json(parameters or {"type": "object"}),
    )


def test_equal_requests_have_no_differences() -> None:
    assert diff_requests(request(), request()) == ()
    # Empty is the same as absent for the system prompt and the tool list.
    assert diff_requests(request(system=None, tools=None), request(system="", tools=())) == ()


# --------------------------------------------------------------------------------------------
# config


def test_a_config_field_only_in_the_log() -> None:
    assert diff_requests(request(temperature=0.5), request()) == (
        "config.temperature: only in expected (0.5)",
    )


def test_a_config_field_only_in_the_request() -> None:
    assert diff_requests(request(), request(max_tokens=99)) == (
        "config.maxTokens: only in actual (99)",
    )


def test_differing_config_fields_in_config_order() -> None:
    assert diff_requests(
        request(stop=("a",), reasoning_effort="high"), request(model="m2", stop=("b",))
    ) == (
        "config.model differs: expected: 'm1', actual: 'm2'",
        "config.reasoningEffort: only in expected ('high')",
        "config.stop[0] differs: expected: 'a', actual: 'b'",
    )


def test_an_int_and_a_float_are_different_bytes() -> None:
    assert diff_requests(request(temperature=1), request(temperature=1.0)) == (
        "config.temperature differs: expected: 1, actual: 1.0",
    )


def test_long_values_are_shown_around_their_first_difference() -> None:
    (line,) = diff_requests(request(model="x" * 100), request(model="y"))
    assert line == (
        f"config.model differs at line 1, column 1: expected: '{'x' * 32}'…, actual: 'y'"
    )
    (line,) = diff_requests(request(model="x" * 100 + "1"), request(model="x" * 100 + "2"))
    assert line == (
        "config.model differs at line 1, column 101: "
        f"expected: …'{'x' * 32}1', actual: …'{'x' * 32}2'"
    )


# --------------------------------------------------------------------------------------------
# system


def test_the_first_differing_system_line_is_named() -> None:
    assert diff_requests(request(system="a\nb\nc"), request(system="a\nB\nC")) == (
        "system line 2 differs: expected: 'b', actual: 'B'",
    )


def test_system_prompts_differing_in_length_count_lines() -> None:
    assert diff_requests(request(system="a\nb"), request(system="a\nb\n")) == (
        "system line 3 only in actual: '' (expected has 2 lines, actual has 3)",
    )
    assert diff_requests(request(), request(system="new")) == (
        "system line 1 only in actual: 'new' (expected has 0 lines, actual has 1)",
    )
    assert diff_requests(request(system="x\ny"), request(system="")) == (
        "system line 1 only in expected: 'x' (expected has 2 lines, actual has 0)",
    )


# --------------------------------------------------------------------------------------------
# tools


def test_a_tool_added_and_a_tool_missing() -> None:
    assert diff_requests(
        request(tools=(tool("read"), tool("write"))), request(tools=(tool("read"), tool("grep")))
    ) == (
        "tool 'grep' only in actual",
        "tool 'write' only in expected",
    )


def test_a_changed_tool_names_its_first_differing_schema_field() -> None:
    assert diff_requests(
        request(tools=(tool("read", "Read."),)), request(tools=(tool("read", "Read!"),))
    ) == ("tool 'read'.description differs: expected: 'Read.', actual: 'Read!'",)
    before = tool("read", type="object", properties={"path": {"type": "string"}})
    after = tool("read", type="object", properties={"path": {"type": "integer"}})
    assert diff_requests(request(tools=(before,)), request(tools=(after,))) == (
        "tool 'read'.parameters.properties.path.type differs: "
        "expected: 'string', actual: 'integer'",
    )


def test_a_schema_key_added_or_removed() -> None:
    strict = tool("read", type="object", required=["path"])
    loose = tool("read", type="object", additionalProperties=False)
    assert diff_requests(request(tools=(strict,)), request(tools=(loose,))) == (
        """tool 'read'.parameters.required: only in expected (["path"])""",
    )


def test_a_schema_s_key_order_alone_is_a_difference() -> None:
    """The model sees the schema's bytes: equal dicts in another key order are not the same."""
    logged = tool("read", type="object", properties={})
    sent = tool("read", properties={}, type="object")
    assert logged == sent  # dict equality would miss it
    assert diff_requests(request(tools=(logged,)), request(tools=(sent,))) == (
        "tool 'read'.parameters: same keys in another order "
        "(expected: ['type', 'properties'], actual: ['properties', 'type'])",
    )


def test_the_same_tools_in_another_order() -> None:
    assert diff_requests(
        request(tools=(tool("a"), tool("b"))), request(tools=(tool("b"), tool("a")))
    ) == ("tools: order differs: expected: ['a', 'b'], actual: ['b', 'a']",)


@pytest.mark.parametrize(
    ("logged", "sent", "line"),
    [
        (
            "{{tools}}",
            (tool("read"),),
            "tools differ: expected: the placeholder '{{tools}}', actual: ['read']",
        ),
        (
            (tool("read"),),
            "{{tools}}",
            "tools differ: expected: ['read'], actual: the placeholder '{{tools}}'",
        ),
        (
            "{{tools}}",
            "{{tools:v2}}",
            "tools differ: expected: the placeholder '{{tools}}', "
            "actual: the placeholder '{{tools:v2}}'",
        ),
        (None, (tool("read"),), "tool 'read' only in actual"),
        ((tool("read"),), (), "tool 'read' only in expected"),
    ],
)
def test_a_placeholder_or_no_tools_on_one_side(logged: Any, sent: Any, line: str) -> None:
    assert diff_requests(request(tools=logged), request(tools=sent)) == (line,)


def test_the_same_placeholder_is_equal() -> None:
    assert diff_requests(request(tools="{{tools}}"), request(tools="{{tools}}")) == ()


# --------------------------------------------------------------------------------------------
# messages


def with_messages(*messages: Message) -> GenerateOptions:
    return request(messages=messages)


def test_the_first_differing_message_field_is_named_and_only_the_first() -> None:
    edited = user_message("HI", id="u1")
    other_answer = assistant_message("bye", provider="p", model="m1", id="a1")
    assert diff_requests(with_messages(HI, ANSWER), with_messages(edited, other_answer)) == (
        "messages[0].content[0].text differs: expected: 'hi', actual: 'HI'",
    )


def test_ids_roles_and_sources_are_compared() -> None:
    assert diff_requests(with_messages(HI), with_messages(user_message("hi", id="u2"))) == (
        "messages[0].id differs: expected: 'u1', actual: 'u2'",
    )
    as_plugin = user_message("hi", id="u1", source={"kind": "plugin"})
    assert diff_requests(with_messages(HI), with_messages(as_plugin)) == (
        "messages[0].source.kind differs: expected: 'user', actual: 'plugin'",
    )
    system = Message(id="u1", role="system", content=HI.content, source=HI.source)
    assert diff_requests(with_messages(HI), with_messages(system)) == (
        "messages[0].role differs: expected: 'user', actual: 'system'",
    )


def test_a_json_key_order_only_difference_is_named() -> None:
    a = user_message("hi", id="u1", source={"kind": "user", "via": "cli"})
    b = user_message("hi", id="u1", source={"via": "cli", "kind": "user"})
    assert diff_requests(with_messages(a), with_messages(b)) == (
        "messages[0].source: same keys in another order "
        "(expected: ['kind', 'via'], actual: ['via', 'kind'])",
    )


def test_content_of_another_length() -> None:
    two = user_message([*HI.content, *HI.content], id="u1")
    assert diff_requests(with_messages(HI), with_messages(two)) == (
        "messages[0].content: expected has 1 item, actual has 2",
    )
    # A difference inside the shared items is named before the length.
    changed = user_message([*user_message("HI").content, *HI.content], id="u1")
    assert diff_requests(with_messages(HI), with_messages(changed)) == (
        "messages[0].content[0].text differs: expected: 'hi', actual: 'HI'",
    )


def test_a_value_of_another_type() -> None:
    one = user_message("hi", id="u1", source={"kind": "user", "n": 1})
    for other, shown in [(1.5, "1.5"), ("1", "'1'"), ([1], "[1]"), ({"v": 1}, '{"v":1}')]:
        changed = user_message("hi", id="u1", source={"kind": "user", "n": other})
        assert diff_requests(with_messages(one), with_messages(changed)) == (
            f"messages[0].source.n differs: expected: 1, actual: {shown}",
        )


def test_extra_messages_in_the_request_show_the_first_extra() -> None:
    sneaky = user_message("unlogged " + "x" * 80, id="sneaky")
    (line,) = diff_requests(with_messages(HI), with_messages(HI, sneaky, ANSWER))
    assert line == (
        "messages: expected has 1, actual has 3 "
        "(first extra: messages[1] 'unlogged " + "x" * 49 + "…)"
    )


def test_missing_messages_in_the_request() -> None:
    assert diff_requests(with_messages(HI, ANSWER), with_messages(HI)) == (
        "messages: expected has 2, actual has 1 (first missing: messages[1] 'hello')",
    )


def test_a_difference_and_a_count_difference_are_both_reported() -> None:
    assert diff_requests(with_messages(HI, ANSWER), with_messages(user_message("x", id="u1"))) == (
        "messages[0].content[0].text differs: expected: 'hi', actual: 'x'",
        "messages: expected has 2, actual has 1 (first missing: messages[1] 'hello')",
    )


def test_known_equal_messages_are_not_compared() -> None:
    tampered = user_message("tampered", id="u1")
    logged, sent = with_messages(HI, ANSWER), with_messages(tampered, ANSWER)
    assert diff_requests(logged, sent) != ()
    assert diff_requests(logged, sent, known_equal_messages=1) == ()
    # Never past the end of either list: a count difference is still reported.
    assert diff_requests(logged, with_messages(tampered), known_equal_messages=5) == (
        "messages: expected has 2, actual has 1 (first missing: messages[1] 'hello')",
    )


def test_model_visible_only_compares_role_and_content() -> None:
    replayed = user_message("hi", id="minted-again", source={"kind": "plugin"})
    assert diff_requests(with_messages(HI), with_messages(replayed)) != ()
    assert diff_requests(with_messages(HI), with_messages(replayed), model_visible_only=True) == ()
    changed = user_message("bye", id="other")
    assert diff_requests(with_messages(HI), with_messages(changed), model_visible_only=True) == (
        "messages[0].content[0].text differs: expected: 'hi', actual: 'bye'",
    )
    system = Message(id="u1", role="system", content=HI.content, source=HI.source)
    assert diff_requests(with_messages(HI), with_messages(system), model_visible_only=True) == (
        "messages[0].role differs: expected: 'user', actual: 'system'",
    )


# --------------------------------------------------------------------------------------------
# envelope, and everything at once


def test_the_envelope_names_session_id_and_purpose() -> None:
    assert diff_requests(request(), request(session_id="s2", purpose="compaction")) == (
        "envelope differs: expected: sessionId='s1' purpose=None, "
        "actual: sessionId='s2' purpose='compaction'",
    )


def test_differences_come_config_system_tools_messages_envelope() -> None:
    logged = request(system="a", tools=(tool("read"),))
    sent = request(
        model="m2",
        system="b",
        tools=(),
        messages=(HI,),
        session_id=None,
    )
    assert diff_requests(logged, sent) == (
        "config.model differs: expected: 'm1', actual: 'm2'",
        "system line 1 differs: expected: 'a', actual: 'b'",
        "tool 'read' only in expected",
        "messages: expected has 2, actual has 1 (first missing: messages[1] 'hello')",
        "envelope differs: expected: sessionId='s1' purpose=None, actual: sessionId=None purpose=None",
    )


# --------------------------------------------------------------------------------------------
# The laws

FIELDS = [
    "model",
    "messages",
    "reasoning_effort",
    "system",
    "tools",
    "temperature",
    "max_tokens",
    "stop",
    "purpose",
    "session_id",
]


def _wire(options: GenerateOptions, *, visible_only: bool = False) -> str:
    normal = dataclasses.replace(
        options, system=options.system or None, tools=options.tools or None
    )
    body = normal.to_json()
    if visible_only:
        body["messages"] = [{"role": m["role"], "content": m["content"]} for m in body["messages"]]
    return dumps_canonical(body)


@st.composite
def pairs(draw: st.DrawFn) -> tuple[GenerateOptions, GenerateOptions]:
    a, other = draw(generate_options()), draw(generate_options())
    taken = draw(st.sets(st.sampled_from(FIELDS), max_size=3))
    b = dataclasses.replace(a, **{f: getattr(other, f) for f in taken})
    return a, b


@given(generate_options())
def test_a_request_does_not_differ_from_itself(options: GenerateOptions) -> None:
    assert diff_requests(options, options) == ()
    copy = GenerateOptions(
        **{f.name: getattr(options, f.name) for f in dataclasses.fields(options)}
    )
    assert diff_requests(options, copy) == ()


@given(pairs())
def test_no_differences_exactly_when_the_same_bytes_are_sent(
    pair: tuple[GenerateOptions, GenerateOptions],
) -> None:
    a, b = pair
    assert (diff_requests(a, b) == ()) == (_wire(a) == _wire(b))
    assert (diff_requests(a, b, model_visible_only=True) == ()) == (
        _wire(a, visible_only=True) == _wire(b, visible_only=True)
    )
