"""The reasoning pass-back rule: which earlier reasoning a thinking-mode request must resend.

In thinking mode, DeepSeek answers 400 when an assistant turn that the rule covers comes back
without its reasoning (docs/wire.md §1.4; §3 for the Anthropic format's ``thinking`` blocks). The
mock refuses such a request and the cache doctor explains it with this one rule, so the two can
never disagree about what the API accepts.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any, Literal, TypeAlias

__all__ = ["PassbackRule", "lacks_thinking", "missing_reasoning", "reasoning_required"]

PassbackRule: TypeAlias = Literal["strict", "tool-calls", "off"]
"""When thinking-mode reasoning must come back (docs/wire.md §1.4, §7: the rule changed in 2026).

``strict`` (default): an assistant message needs its reasoning when it made tool calls (V4
wording) or when the request carries tools (V4.1 wording). ``tool-calls``: only assistant
messages that made tool calls. ``off``: never checked."""


def reasoning_required(
    *, made_tool_calls: bool, request_has_tools: bool, rule: PassbackRule = "strict"
) -> bool:
    """Whether a thinking-mode request must resend this assistant turn's reasoning."""
    if rule == "off":
        return False
    return made_tool_calls or (rule == "strict" and request_has_tools)


def lacks_thinking(block_types: Collection[object]) -> bool:
    """Whether an Anthropic-format assistant turn with these content block types is refused in
    thinking mode: it made tool calls (``tool_use``) and carries no ``thinking`` block. A
    ``redacted_thinking`` block does not count: DeepSeek does not support it (docs/wire.md §3)."""
    return "tool_use" in block_types and "thinking" not in block_types


def missing_reasoning(
    messages: Sequence[Any],
    *,
    thinking: bool,
    has_tools: bool,
    anthropic: bool = False,
    rule: PassbackRule = "strict",
) -> int | None:
    """The index (in ``messages``, wire JSON) of the first assistant turn the API refuses for
    lack of its reasoning; ``None`` when the request passes the rule.

    Chat: ``reasoning_content`` absent or ``null`` (an empty string is accepted). Anthropic: a
    turn with ``tool_use`` blocks and no ``thinking`` block.
    """
    if not thinking:
        return None
    for index, message in enumerate(messages):
        if not isinstance(message, Mapping) or message.get("role") != "assistant":
            continue
        if anthropic:
            content = message.get("content")
            kinds = (
                {b.get("type") for b in content if isinstance(b, Mapping)}
                if isinstance(content, list)
                else set()
            )
            if lacks_thinking(kinds):
                return index
            continue
        needs = reasoning_required(
            made_tool_calls=bool(message.get("tool_calls")),
            request_has_tools=has_tools,
            rule=rule,
        )
        if needs and message.get("reasoning_content") is None:
            return index
    return None
