"""Hypothesis strategies for GenerateOptions as the loop builds them (text-only content)."""

from __future__ import annotations

from hypothesis import strategies as st

from dsh_core import (
    GenerateOptions,
    Message,
    ReasoningBlock,
    TextBlock,
    ToolCallBlock,
    ToolResultBlock,
    ToolSchema,
    assistant_message,
    freeze_json,
    user_message,
)

texts = st.text(max_size=20)
ids = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=12)
tool_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyzABC_-0123456789", min_size=1, max_size=16)
arguments = st.one_of(
    st.just(""),
    st.just("{}"),
    st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=3).map(
        lambda d: __import__("json").dumps(d)
    ),
    texts,  # the model's raw string, even when it is not JSON
)


@st.composite
def messages(draw: st.DrawFn) -> Message:
    kind = draw(st.sampled_from(["user", "assistant", "tool", "system"]))
    msg_id = draw(ids)
    if kind == "user":
        return user_message(
            [TextBlock(text=t) for t in draw(st.lists(texts, max_size=3))], id=msg_id
        )
    if kind == "tool":
        results = draw(
            st.lists(
                st.builds(
                    ToolResultBlock,
                    tool_call_id=ids,
                    content=st.lists(texts.map(lambda t: TextBlock(text=t)), max_size=2).map(tuple),
                    is_error=st.none() | st.booleans(),
                ),
                min_size=1,
                max_size=3,
            )
        )
        extra = [TextBlock(text=t) for t in draw(st.lists(texts, max_size=1))]
        return user_message([*results, *extra], id=msg_id)
    if kind == "system":
        base = user_message([TextBlock(text=draw(texts))], id=msg_id)
        return Message(id=msg_id, role="system", content=base.content, source=base.source)
    blocks = draw(
        st.lists(
            st.one_of(
                texts.map(lambda t: TextBlock(text=t)),
                texts.map(lambda t: ReasoningBlock(text=t)),
                st.builds(ToolCallBlock, id=ids, name=tool_names, arguments=arguments),
            ),
            min_size=1,
            max_size=4,
        )
    )
    return assistant_message(blocks, provider="deepseek", model="deepseek-v4-flash", id=msg_id)


schemas = st.builds(
    lambda props: freeze_json({"type": "object", "properties": props}),
    st.dictionaries(
        st.text(alphabet="abcxyz", min_size=1, max_size=4),
        st.sampled_from([{"type": "string"}, {"type": "integer"}]),
        max_size=3,
    ),
)


@st.composite
def tool_lists(draw: st.DrawFn) -> tuple[ToolSchema, ...] | None:
    names = draw(st.lists(tool_names, unique=True, max_size=4))
    if not names and draw(st.booleans()):
        return None
    return tuple(
        ToolSchema(name=n, description=draw(texts), parameters=draw(schemas)) for n in names
    )


generate_options = st.builds(
    GenerateOptions,
    provider=st.just("deepseek"),
    model=st.sampled_from(["deepseek-v4-flash", "deepseek-flash", "deepseek-v4-pro", "custom-x"]),
    messages=st.lists(messages(), min_size=1, max_size=6).map(tuple),
    reasoning_effort=st.sampled_from([None, "off", "low", "high", "max"]),
    system=st.none() | texts,
    tools=tool_lists(),
    temperature=st.none() | st.floats(min_value=0, max_value=2, allow_nan=False),
    max_tokens=st.none() | st.integers(min_value=1, max_value=393_216),
    stop=st.none() | st.lists(st.text(min_size=1, max_size=5), max_size=4).map(tuple),
    purpose=st.sampled_from([None, "compaction", "session-title"]),
    session_id=st.none() | ids,
)
