"""The pass-back check read from the parent: a request that resends its parent's history is
refused at the turn a whole reading finds (issue 37: only the new turns are read)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from dsh_core.providers._passback import missing_reasoning
from dsh_testkit.doctor._history import rejected_at
from dsh_testkit.prompt._wire_view import WireView, wire_view

TURN = st.one_of(
    st.builds(lambda t: {"role": "user", "content": t}, st.sampled_from(["a", "b"])),
    st.builds(
        lambda r, calls: {
            "role": "assistant",
            "content": "ok",
            **({"reasoning_content": r} if r is not None else {}),
            **({"tool_calls": [{"id": "1", "type": "function"}]} if calls else {}),
        },
        st.sampled_from([None, "", "thought"]),
        st.booleans(),
    ),
)
THINKING = st.sampled_from(
    [{}, {"thinking": {"type": "enabled"}}, {"thinking": {"type": "disabled"}}]
)


def _view(messages: list[dict[str, Any]], params: dict[str, Any], tools: bool) -> WireView:
    body: dict[str, Any] = {"model": "deepseek-v4-flash", "messages": messages, **params}
    if tools:
        body["tools"] = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    view = wire_view(body, endpoint="chat")
    assert view is not None
    return view


@given(
    st.lists(TURN, max_size=6),
    st.lists(TURN, max_size=4),
    THINKING,
    THINKING,
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
def test_read_from_the_parent_equals_a_whole_reading(
    history: list[dict[str, Any]],
    new: list[dict[str, Any]],
    parent_params: dict[str, Any],
    params: dict[str, Any],
    parent_tools: bool,
    tools: bool,
    edited: bool,
) -> None:
    parent = _view(history, parent_params, parent_tools)
    rejected_at(parent)  # the parent was checked first, as the doctor checks it
    sent = [dict(m) for m in history]
    if edited and sent:
        sent[0] = {"role": "assistant", "content": "edited"}  # a history that departs
    current = _view([*sent, *new], params, tools)
    whole = missing_reasoning(
        current.messages,
        thinking=current.thinking,
        has_tools=bool(current.tools),
        anthropic=False,
    )
    assert rejected_at(current, parent) == whole
    assert rejected_at(current) == whole  # remembered
