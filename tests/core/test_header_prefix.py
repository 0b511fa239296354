"""The header's message prefix and the tool-name-list placeholder: types, canonical form, codec.

A message prefix is request-only: it rides on the header (snapshot or delta, replaced whole) and
is placed before the derived history in every request of its header epoch. Tools written as a
list of names (a normalized snapshot) are a :class:`ToolsPlaceholder` that keeps names and order.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_core import (
    EpochHeader,
    Event,
    FrozenDict,
    GenerateOptions,
    HeaderDelta,
    HeaderError,
    LlmCallConfig,
    Message,
    ToolSchema,
    ToolsPlaceholder,
    apply_header_delta,
    canonical_header,
    diff_header,
    fold_request_header,
    freeze_json,
    header_equals,
    plan_header_event,
    user_message,
)
from dsh_core._json_text import dumps_canonical, loads_json
from dsh_core.providers.anthropic import serialize_request as anthropic_body
from dsh_core.providers.deepseek import serialize_request as deepseek_body
from dsh_testkit.strategies import epoch_headers, header_pairs, messages

CONFIG = LlmCallConfig(provider="deepseek", model="deepseek-chat")


def prefix_entries() -> st.SearchStrategy[tuple[Message | str, ...]]:
    entry: st.SearchStrategy[Message | str] = st.one_of(
        messages(), st.sampled_from(["{{messagePrefix}}", "{{skills}}"])
    )
    return st.lists(entry, max_size=3).map(tuple)


def through_json(data: dict[str, Any]) -> Any:
    return loads_json(dumps_canonical(data))


@given(pair=header_pairs(max_edits=2), before=prefix_entries(), after=prefix_entries())
def test_a_header_with_a_message_prefix_round_trips_through_the_delta_codec(
    pair: tuple[EpochHeader, EpochHeader],
    before: tuple[Message | str, ...],
    after: tuple[Message | str, ...],
) -> None:
    a = replace(pair[0], message_prefix=before)
    b = replace(pair[1], message_prefix=after)
    delta = diff_header(a, b)
    if header_equals(a, b):
        assert delta is None
        return
    assert delta is not None
    # The prefix is in the delta exactly when it changed, and then whole.
    changed = dumps_canonical(a.to_json().get("messagePrefix")) != dumps_canonical(
        b.to_json().get("messagePrefix")
    )
    assert (delta.message_prefix is not None) == changed
    decoded = HeaderDelta.from_json(through_json(delta.to_json()))
    assert decoded == delta
    rebuilt = apply_header_delta(a, decoded)
    assert header_equals(rebuilt, b)
    assert rebuilt == canonical_header(b)
    # The snapshot form round-trips too, and the writer never needs its fallback for a prefix.
    assert EpochHeader.from_json(through_json(b.to_json())) == b
    plan = plan_header_event(a, b, first_of_instance=False)
    assert plan is not None and plan[0] == "request/header-delta"


@given(header=epoch_headers(), prefix=prefix_entries())
def test_the_fold_carries_the_prefix_and_requests_carry_it_apart_from_history(
    header: EpochHeader, prefix: tuple[Message | str, ...]
) -> None:
    header = replace(header, message_prefix=prefix)
    event = Event(
        type="request/header",
        seq=0,
        time=0,
        data=through_json({"header": header.to_json(), "reason": "initial"}),
    )
    folded = fold_request_header([event])
    assert folded is not None and folded.message_prefix == prefix
    history = (user_message("hi", id="u1"),)
    request = GenerateOptions.from_header(folded, history)
    assert request.message_prefix == prefix and tuple(request.messages) == history
    assert GenerateOptions.from_json(through_json(request.to_json())) == request


def test_an_empty_prefix_is_canonical_absence() -> None:
    bare = EpochHeader(config=CONFIG, system="s")
    empty = EpochHeader.from_json({"config": CONFIG.to_json(), "system": "s", "messagePrefix": []})
    assert header_equals(bare, empty) and "messagePrefix" not in empty.to_json()
    assert diff_header(bare, empty) is None


def test_clearing_a_prefix_is_a_delta_with_an_empty_list() -> None:
    with_prefix = EpochHeader(config=CONFIG, message_prefix=("{{messagePrefix}}",))
    cleared = EpochHeader(config=CONFIG)
    delta = diff_header(with_prefix, cleared)
    assert delta is not None and delta.to_json() == {"messagePrefix": []}
    assert apply_header_delta(
        with_prefix, HeaderDelta.from_json(freeze_json({"messagePrefix": []}))
    )
    assert apply_header_delta(with_prefix, delta) == cleared


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("{{messagePrefix}}", "messagePrefix must be an array of messages, got a string"),
        (["plain text"], "messagePrefix[0] must be a message or a placeholder"),
        ([{"role": "user"}], "messagePrefix[0] is not a message: a message needs a non-empty"),
        (None, "invalid messagePrefix: null"),
    ],
)
def test_a_bad_prefix_is_a_header_error_naming_the_entry(raw: Any, fragment: str) -> None:
    with pytest.raises(HeaderError) as caught:
        EpochHeader.from_json({"config": CONFIG.to_json(), "messagePrefix": raw})
    assert fragment in str(caught.value)


def test_providers_send_the_prefix_after_the_system_prompt_and_refuse_its_placeholders() -> None:
    opener = user_message("<skills>read, grep</skills>", id="p1")
    header = EpochHeader(config=CONFIG, system="be brief", message_prefix=(opener,))
    request = GenerateOptions.from_header(header, (user_message("hi", id="u1"),))
    body = deepseek_body(request)
    assert [m["role"] for m in body["messages"]] == ["system", "user", "user"]
    assert body["messages"][1]["content"] == "<skills>read, grep</skills>"
    assert [m["content"][0]["text"] for m in anthropic_body(request)["messages"]] == [
        "<skills>read, grep</skills>",
        "hi",
    ]
    placeholder = replace(request, message_prefix=("{{messagePrefix}}",))
    for serialize in (deepseek_body, anthropic_body):
        with pytest.raises(Exception, match=r"placeholder '\{\{messagePrefix\}\}'"):
            serialize(placeholder)


# --------------------------------------------------------------------------------------------
# Tools as a list of names


def test_a_tool_name_list_is_a_placeholder_keeping_names_and_order() -> None:
    header = EpochHeader.from_json(
        {"config": CONFIG.to_json(), "tools": ["job_list", "cordis_run"]}
    )
    assert header.tools == ToolsPlaceholder(names=("job_list", "cordis_run"))
    assert header.to_json()["tools"] == ["job_list", "cordis_run"]
    assert header.tool_list == () and header.has_placeholders
    reordered = EpochHeader.from_json(
        {"config": CONFIG.to_json(), "tools": ["cordis_run", "job_list"]}
    )
    assert not header_equals(header, reordered)
    # A names list cannot be encoded as a delta: the writer falls back to a snapshot.
    plan = plan_header_event(header, reordered, first_of_instance=False)
    assert plan is not None and plan[0] == "request/header" and plan[1]["reason"] == "fallback"


@pytest.mark.parametrize(
    ("tools", "fragment"),
    [
        (["a", {"name": "b", "parameters": {}}], "mixes tool names and tool schemas"),
        (["a", "a"], "duplicate tool name 'a'"),
        (["a", ""], "non-empty names"),
        ("tools", "got the string 'tools'"),
    ],
)
def test_bad_tool_lists_are_header_errors(tools: Any, fragment: str) -> None:
    with pytest.raises(HeaderError) as caught:
        EpochHeader.from_json({"config": CONFIG.to_json(), "tools": tools})
    assert fragment in str(caught.value)


def test_a_request_with_tool_names_can_be_rebuilt_but_not_sent() -> None:
    header = EpochHeader(config=CONFIG, tools=ToolsPlaceholder(names=("read",)))
    request = GenerateOptions.from_header(header, (user_message("hi", id="u"),))
    assert request.to_json()["tools"] == ["read"]
    for serialize in (deepseek_body, anthropic_body):
        with pytest.raises(Exception, match=r"the tool names \['read'\] \(schemas elided\)"):
            serialize(request)
    schemas = EpochHeader(
        config=CONFIG, tools=(ToolSchema(name="read", description="", parameters=FrozenDict()),)
    )
    assert not header_equals(header, schemas)


def test_diff_requests_names_a_prefix_difference() -> None:
    from dsh_core import diff_requests

    history = (user_message("hi", id="u1"),)
    opener = user_message("<skills>read</skills>", id="p1")
    base = GenerateOptions.from_header(EpochHeader(config=CONFIG), history)
    with_prefix = replace(base, message_prefix=(opener,))
    assert diff_requests(base, base) == ()
    (line,) = diff_requests(with_prefix, base)
    assert line.startswith(
        "messagePrefix: expected has 1, actual has 0 (first missing: messagePrefix[0]"
    )
    other = replace(base, message_prefix=(user_message("<skills>grep</skills>", id="p1"),))
    (line,) = diff_requests(with_prefix, other, model_visible_only=True)
    assert line.startswith("messagePrefix[0].content[0].text differs")
