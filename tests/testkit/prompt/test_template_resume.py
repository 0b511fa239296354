"""Rendering a request that extends another from where that one left off gives exactly the
tokens, boundaries and marks of a full render (the doctor relies on it to stay linear)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from dsh_testkit.prompt import PromptRenderer
from dsh_testkit.strategies import chat_requests


def _leading(messages: list[Any]) -> int:
    n = 0
    while (
        n < len(messages)
        and isinstance(messages[n], dict)
        and messages[n].get("role")
        in (
            "system",
            "developer",
        )
    ):
        n += 1
    return n


@given(chat_requests(), st.data())
def test_a_resumed_render_is_the_full_render(body: dict[str, Any], data: st.DataObject) -> None:
    renderer = PromptRenderer()
    messages = body["messages"]
    leading = _leading(messages)
    cut = data.draw(st.integers(min_value=leading, max_value=len(messages)), label="cut")
    prefix_body = {**body, "messages": messages[:cut]}
    thinking = data.draw(st.booleans(), label="thinking")
    previous = renderer.render_chat(prefix_body, thinking=thinking)
    full = renderer.render_chat(body, thinking=thinking)
    resumed = renderer.render_chat(body, thinking=thinking, resume=(previous, cut - leading))
    assert resumed.tokens == full.tokens
    assert resumed.marks == full.marks
    assert resumed.input_ends == full.input_ends
    assert resumed.output_ends == full.output_ends
    assert resumed.input_end == full.input_end
