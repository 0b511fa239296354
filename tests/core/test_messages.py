"""Content blocks, :class:`Message` and the per-node projection ``derive_event_message``
(docs/design.md §1, §4)."""

from __future__ import annotations

import dataclasses
import math
import uuid
from typing import Any

import pytest
from hypothesis import given

from dsh_core import (
    Event,
    FrozenDict,
    InvalidEventError,
    JsonValueError,
    Message,
    OpaqueBlock,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    assistant_message,
    derive_event_message,
    freeze_json,
    tool_result_message,
    user_message,
)
from dsh_core._messages import block_from_json
from dsh_testkit.strategies import content_blocks, messages


def _event(type_: str, data: Any, seq: int = 0, **kw: Any) -> Event:
    return Event(type=type_, seq=seq, time=0, data=data, **kw)


USER = {
    "id": "u1",
    "role": "user",
    "content": [{"type": "text", "text": "hi"}],
    "source": {"kind": "user"},
}
ASSISTANT = {
    "id": "a1",
    "role": "assistant",
    "content": [
        {"type": "reasoning", "text": "think"},
        {"type": "text", "text": "I'll look."},
        {"type": "tool-call", "id": "c1", "name": "read", "arguments": '{"path":'},
    ],
    "source": {"kind": "model", "provider": "deepseek", "model": "deepseek-v4-flash"},
}
RESULT = {
    "id": "r1",
    "role": "user",
    "content": [
        {
            "type": "tool-result",
            "toolCallId": "c1",
            "content": [{"type": "text", "text": "file body"}],
            "isError": False,
        }
    ],
    "source": {"kind": "tool", "callId": "c1"},
}


# ------------------------------------------------------------------------------------ blocks


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"type": "text", "text": "a"}, TextBlock(text="a")),
        ({"type": "reasoning", "text": "r"}, ReasoningBlock(text="r")),
        (
            {"type": "tool-call", "id": "c", "name": "n", "arguments": "not json {"},
            ToolCallBlock(id="c", name="n", arguments="not json {"),
        ),
        (
            {"type": "tool-result", "toolCallId": "c", "content": [{"type": "text", "text": "x"}]},
            ToolResultBlock(tool_call_id="c", content=(TextBlock(text="x"),)),
        ),
        (
            {"type": "tool-result", "toolCallId": "c", "content": [], "isError": True},
            ToolResultBlock(tool_call_id="c", content=(), is_error=True),
        ),
    ],
)
def test_blocks_parse_and_round_trip(raw: dict[str, Any], expected: Any) -> None:
    block = block_from_json(raw)
    assert block == expected
    assert block.to_json() == raw


def test_tool_call_arguments_stay_raw_text() -> None:
    block = block_from_json({"type": "tool-call", "id": "c", "name": "n", "arguments": '{"a": 1}'})
    assert isinstance(block, ToolCallBlock)
    assert block.arguments == '{"a": 1}'


def test_unknown_blocks_are_carried_opaquely() -> None:
    raw = {"type": "image", "attachment": {"digest": "abc", "mediaType": "image/png"}}
    block = block_from_json(raw)
    assert isinstance(block, OpaqueBlock)
    assert block.type == "image"
    assert block.to_json() == raw
    with pytest.raises(TypeError):
        block.data["attachment"]["digest"] = "x"


def test_an_opaque_block_built_by_hand_is_frozen() -> None:
    block = OpaqueBlock(type="image", data={"type": "image", "n": [1]})  # type: ignore[arg-type]
    assert type(block.data) is FrozenDict
    with pytest.raises(TypeError):
        block.data["n"].append(2)
    with pytest.raises(JsonValueError):
        OpaqueBlock(type="x", data={"type": "x", "bad": math.nan})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("text", "must be an object with a string type"),
        ({"text": "no type"}, "must be an object with a string type"),
        ({"type": 3}, "must be an object with a string type"),
        ({"type": "text"}, "block.text must be a string"),
        ({"type": "reasoning", "text": 1}, "block.text must be a string"),
        ({"type": "tool-call", "id": "c", "name": "n"}, "block.arguments must be a string"),
        ({"type": "tool-call", "id": "c", "arguments": ""}, "block.name must be a string"),
        (
            {"type": "tool-result", "toolCallId": "c", "content": "x"},
            "block.content must be an array",
        ),
        ({"type": "tool-result", "content": []}, "block.toolCallId must be a string"),
        (
            {"type": "tool-result", "toolCallId": "c", "content": [], "isError": "no"},
            "block.isError must be a boolean",
        ),
        (
            {"type": "tool-result", "toolCallId": "c", "content": [{"type": "text"}]},
            "block.content[0].text must be a string",
        ),
    ],
)
def test_block_rejections(raw: Any, fragment: str) -> None:
    with pytest.raises(InvalidEventError) as info:
        block_from_json(raw)
    assert fragment in str(info.value)


BLOCK_CLASSES: dict[str, Any] = {
    "text": TextBlock,
    "reasoning": ReasoningBlock,
    "tool-call": ToolCallBlock,
    "tool-result": ToolResultBlock,
}


@given(content_blocks())
def test_each_block_class_parses_its_own_json_and_round_trips(raw: dict[str, Any]) -> None:
    cls = BLOCK_CLASSES.get(raw["type"], OpaqueBlock)
    block = cls.from_json(raw)
    assert type(block) is cls
    assert block == block_from_json(raw)  # one parser: the class method reuses block_from_json
    assert block.to_json() == raw
    assert cls.from_json(block.to_json()) == block


SAMPLE_BLOCKS: dict[str, dict[str, Any]] = {
    "text": {"type": "text", "text": "a"},
    "reasoning": {"type": "reasoning", "text": "r"},
    "tool-call": {"type": "tool-call", "id": "c", "name": "n", "arguments": "{}"},
    "tool-result": {"type": "tool-result", "toolCallId": "c", "content": []},
}


@pytest.mark.parametrize(
    ("own", "other"),
    [(own, other) for own in BLOCK_CLASSES for other in [*SAMPLE_BLOCKS, "image"] if own != other],
)
def test_a_block_class_refuses_another_type(own: str, other: str) -> None:
    cls = BLOCK_CLASSES[own]
    raw = SAMPLE_BLOCKS.get(other, {"type": "image", "src": "x"})
    with pytest.raises(InvalidEventError) as info:
        cls.from_json(raw)
    assert str(info.value) == (
        f"{cls.__name__}.from_json needs a block of type {own!r}, got type {other!r}; "
        "use block_from_json to parse a block of any type"
    )


@pytest.mark.parametrize("cls", [*BLOCK_CLASSES.values(), OpaqueBlock])
@pytest.mark.parametrize("raw", ["text", None, [], {"text": "no type"}, {"type": 3}])
def test_a_block_class_refuses_json_that_is_not_a_typed_block(cls: Any, raw: Any) -> None:
    with pytest.raises(InvalidEventError, match="block must be an object with a string type"):
        cls.from_json(raw)


@pytest.mark.parametrize("kind", sorted(SAMPLE_BLOCKS))
def test_an_opaque_block_refuses_a_modeled_type(kind: str) -> None:
    with pytest.raises(InvalidEventError) as info:
        OpaqueBlock.from_json(SAMPLE_BLOCKS[kind])
    assert str(info.value) == (
        f"OpaqueBlock.from_json got a {kind!r} block, which this build models; "
        "parse it with block_from_json (or its own class)"
    )


def test_a_block_class_reports_the_field_errors_of_its_own_type() -> None:
    with pytest.raises(InvalidEventError, match=r"block\.arguments must be a string"):
        ToolCallBlock.from_json({"type": "tool-call", "id": "c", "name": "n"})
    with pytest.raises(InvalidEventError, match=r"block\.content\[0\]\.text must be a string"):
        ToolResultBlock.from_json(
            {"type": "tool-result", "toolCallId": "c", "content": [{"type": "text"}]}
        )
    opaque = OpaqueBlock.from_json({"type": "image", "n": [1]})
    assert opaque == OpaqueBlock(type="image", data=freeze_json({"type": "image", "n": [1]}))
    assert opaque.to_json() == {"type": "image", "n": [1]}


# ------------------------------------------------------------------------------------ messages


@pytest.mark.parametrize("raw", [USER, ASSISTANT, RESULT])
def test_messages_round_trip(raw: dict[str, Any]) -> None:
    message = Message.from_json(raw)
    assert message.to_json() == raw
    assert Message.from_json(message.to_json()) == message


def test_message_helpers() -> None:
    message = Message.from_json(ASSISTANT)
    assert message.text == "I'll look."
    assert message.tool_calls == (ToolCallBlock(id="c1", name="read", arguments='{"path":'),)
    assert message.canonical_json() == message.canonical_json()
    assert message.canonical_json().startswith('{"id":"a1","role":"assistant","content":[')


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ([], "a message must be an object"),
        ({**USER, "id": ""}, "a message needs a non-empty string id"),
        ({k: v for k, v in USER.items() if k != "id"}, "a message needs a non-empty string id"),
        ({**USER, "role": "tool"}, "role must be system|user|assistant, got 'tool'"),
        ({**USER, "content": "hi"}, "content must be an array"),
        ({**USER, "source": "user"}, "source must be an object with a kind"),
        ({**USER, "source": {}}, "source must be an object with a kind"),
        ({**USER, "content": [{"type": "text", "text": 5}]}, "content[0].text must be a string"),
    ],
)
def test_message_rejections(raw: Any, fragment: str) -> None:
    with pytest.raises(InvalidEventError) as info:
        Message.from_json(raw)
    assert fragment in str(info.value)


def test_constructors_mint_uuid_ids_and_set_sources() -> None:
    user = user_message("hello")
    assert uuid.UUID(user.id).version == 4
    assert user.role == "user"
    assert user.content == (TextBlock(text="hello"),)
    assert user.source == {"kind": "user"}
    plugin = user_message(
        [TextBlock(text="ctx")], id="p1", source={"kind": "plugin", "plugin": "x"}
    )
    assert (plugin.id, plugin.source) == ("p1", {"kind": "plugin", "plugin": "x"})
    reply = assistant_message("ok", provider="deepseek", model="m")
    assert reply.role == "assistant"
    assert reply.source == {"kind": "model", "provider": "deepseek", "model": "m"}
    result = tool_result_message("c9", "done", is_error=True, id="r9")
    assert result.to_json() == {
        "id": "r9",
        "role": "user",
        "content": [
            {
                "type": "tool-result",
                "toolCallId": "c9",
                "content": [{"type": "text", "text": "done"}],
                "isError": True,
            }
        ],
        "source": {"kind": "tool", "callId": "c9"},
    }
    assert tool_result_message("c", "x").to_json()["content"][0]["isError"] is False
    assert user_message("a").id != user_message("a").id


def test_messages_are_immutable_all_the_way_down() -> None:
    message = Message.from_json(RESULT)
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.role = "assistant"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        message.content.append(TextBlock(text="x"))  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        message.content[0] = TextBlock(text="x")  # type: ignore[index]
    block = message.content[0]
    assert isinstance(block, ToolResultBlock)
    with pytest.raises(dataclasses.FrozenInstanceError):
        block.tool_call_id = "other"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        block.content.append(TextBlock(text="x"))  # type: ignore[attr-defined]
    with pytest.raises(dataclasses.FrozenInstanceError):
        block.content[0].text = "x"  # type: ignore[union-attr, misc]
    with pytest.raises(TypeError):
        message.source["kind"] = "user"


def test_a_message_built_by_hand_is_frozen_too() -> None:
    source = {"kind": "user"}
    content = [TextBlock(text="x")]
    message = Message(id="m", role="user", content=content, source=source)  # type: ignore[arg-type]
    source["kind"] = "plugin"
    content.append(TextBlock(text="y"))
    assert message.source == {"kind": "user"}
    assert message.content == (TextBlock(text="x"),)
    with pytest.raises(TypeError):
        message.source["kind"] = "plugin"
    inner = [TextBlock(text="z")]
    block = ToolResultBlock(tool_call_id="c", content=inner)  # type: ignore[arg-type]
    inner.clear()
    assert block.content == (TextBlock(text="z"),)


@given(messages())
def test_any_message_round_trips(message: Message) -> None:
    assert Message.from_json(message.to_json()) == message
    assert hash(Message.from_json(message.to_json())) == hash(message)


@given(content_blocks())
def test_any_block_round_trips(raw: dict[str, Any]) -> None:
    assert block_from_json(raw).to_json() == raw


# ------------------------------------------------------------------------ derive_event_message


def test_user_message_projects_its_data() -> None:
    event = _event("user/message", USER, surface_op="append")
    message = derive_event_message(event)
    assert message == Message.from_json(USER)


def test_assistant_message_and_tool_result_project_data_message() -> None:
    assistant = _event("assistant/message", {"turn": 1, "step": 1, "message": ASSISTANT})
    assert derive_event_message(assistant) == Message.from_json(ASSISTANT)
    result = _event("tool/result", {"turn": 1, "step": 1, "message": RESULT, "meta": [1]})
    assert derive_event_message(result) == Message.from_json(RESULT)


def test_an_empty_assistant_message_projects_to_nothing() -> None:
    empty = {**ASSISTANT, "content": []}
    event = _event("assistant/message", {"turn": 1, "step": 1, "message": empty, "usage": {}})
    assert derive_event_message(event) is None


def test_an_empty_user_message_still_projects() -> None:
    """Only an empty ASSISTANT message projects to nothing; an empty user message is kept."""
    message = derive_event_message(_event("user/message", {**USER, "content": []}))
    assert message is not None
    assert (message.id, message.role, message.content) == ("u1", "user", ())
    assert message.source == {"kind": "user"}
    assert message.to_json() == {**USER, "content": []}


@pytest.mark.parametrize(
    "type_",
    [
        "turn/start",
        "turn/end",
        "step/start",
        "assistant/chunk",
        "tool/call",
        "request/header",
        "x/y",
    ],
)
def test_other_types_project_to_nothing(type_: str) -> None:
    assert derive_event_message(_event(type_, {"message": ASSISTANT})) is None


def test_projection_reuses_frozen_content() -> None:
    event = _event("user/message", {**USER, "source": {"kind": "plugin", "plugin": "p"}})
    message = derive_event_message(event)
    assert message is not None
    assert message.source is event.data["source"]


def test_an_unprojectable_message_names_the_event() -> None:
    event = _event("tool/result", {"turn": 1, "step": 1}, seq=7)
    with pytest.raises(InvalidEventError) as info:
        derive_event_message(event)
    assert str(info.value) == "tool/result at seq 7: a message must be an object, got NoneType"
    assert (info.value.seq, info.value.event_type) == (7, "tool/result")
    with pytest.raises(InvalidEventError, match="assistant/message at seq 0"):
        derive_event_message(_event("assistant/message", [1, 2]))


def test_the_visible_json_is_what_a_provider_sees_and_is_computed_once() -> None:
    message = user_message("hi", id="u1", source={"kind": "plugin"})
    assert message.visible_json() == {"role": "user", "content": [{"type": "text", "text": "hi"}]}
    text = message.visible_canonical_json()
    assert text == '{"role":"user","content":[{"type":"text","text":"hi"}]}'
    assert message.visible_canonical_json() is text


def test_a_replaced_copy_does_not_share_the_cached_texts() -> None:
    message = user_message("hi", id="u1")
    message.canonical_json(), message.visible_canonical_json()
    copy = dataclasses.replace(message, id="u2", content=user_message("bye").content)
    assert '"id":"u2"' in copy.canonical_json() and "bye" in copy.canonical_json()
    assert "bye" in copy.visible_canonical_json()
    assert '"id":"u1"' in message.canonical_json()
