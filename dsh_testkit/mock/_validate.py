"""Request validation as the API does it, answered with the API's own error bodies.

The codec (``dsh_core.providers.deepseek.parse_request`` / ``anthropic.parse_request``) checks
every field's type and shape, as the server's deserializer does. This module checks what a
deserializer cannot: the conversation's meaning — tool messages answer the preceding calls, every
call is answered, tool schemas are well formed, ``tool_choice`` fits the tools and the mode, and
the thinking-mode rule that reasoning must be passed back (docs/wire.md §1.4). It reads the codec's
typed request (:class:`~dsh_core.providers.deepseek.ChatRequest` /
:class:`~dsh_core.providers.anthropic.AnthropicRequest`), so it relies on the shapes the codec checked.

Messages quoted from real DeepSeek answers are marked [observed] (docs/wire.md §1.3–§1.9 and public
issue threads); the rest are ours, in the API's style.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from dsh_core.providers import lacks_thinking
from dsh_core.providers._passback import PassbackRule, reasoning_required
from dsh_core.providers.anthropic import AnthropicMessage, AnthropicRequest
from dsh_core.providers.deepseek import ChatMessage, ChatRequest

from ._api_errors import ApiError

__all__ = ["ToolFacts", "validate_anthropic", "validate_chat"]

_TOOL_ORDER_MISSING: Final = (
    "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
    "'tool_call_id'. (insufficient tool messages following tool_calls message)"
)  # [observed]
_TOOL_ORDER_ORPHAN: Final = "Messages with role 'tool' must be a response to a preceding message with 'tool_calls'"  # [observed]
_PASSBACK: Final = "The `reasoning_content` in the thinking mode must be passed back to the API."  # [observed] docs/wire.md §1.4
_PASSBACK_ANTHROPIC: Final = "The `content[].thinking` in the thinking mode must be passed back to the API."  # [observed] docs/wire.md §3
_THINKING_TOOL_CHOICE: Final = "Thinking mode does not support this tool_choice"  # [observed]


def _bad(message: str, param: str | None = None) -> ApiError:
    return ApiError(status=400, message=message, param=param)


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolFacts:
    """What the default responder needs to know about the request's tools."""

    schemas: tuple[tuple[str, Mapping[str, Any]], ...] = ()
    """``(name, JSON Schema of the arguments)`` in request order."""
    forced: str | None = None
    """The tool ``tool_choice`` demands (``required``/``any`` → the first), else ``None``."""


def _check_schema(name: str, schema: object) -> ApiError | None:
    if not isinstance(schema, Mapping):
        return None  # an omitted schema declares a function without arguments
    kind = schema.get("type")
    if kind != "object":
        return _bad(
            f"Invalid schema for function '{name}': schema must be a JSON Schema of "
            f"'type: \"object\"', got 'type: \"{kind}\"'."
        )
    properties = schema.get("properties")
    if properties is not None and not isinstance(properties, Mapping):
        return _bad(f"Invalid schema for function '{name}': 'properties' must be an object")
    required = schema.get("required")
    if required is not None and (
        not isinstance(required, list) or not all(isinstance(r, str) for r in required)
    ):
        return _bad(f"Invalid schema for function '{name}': 'required' must be an array of strings")
    return None


def _check_max_tokens(value: int | None, limit: int) -> ApiError | None:
    if value is not None and not 1 <= value <= limit:
        return _bad(  # [observed]
            f"Invalid max_tokens value, the valid range of max_tokens is [1, {limit}]"
        )
    return None


def _chat_tool_choice(
    request: ChatRequest, names: Sequence[str], thinking: bool
) -> tuple[str | None, ApiError | None]:
    choice = request.tool_choice
    if choice is None:
        return None, None
    named: str | None = None
    if isinstance(choice, Mapping):
        named = str(choice["function"]["name"])  # the codec checked the shape
    if not names and choice != "none":
        return None, _bad(
            "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are "
            "specified.",
            "tool_choice",
        )
    if thinking and (choice == "required" or named is not None):
        return None, _bad(_THINKING_TOOL_CHOICE, "tool_choice")
    if choice == "required":
        return names[0], None
    if named is not None:
        if named not in names:
            return None, _bad(
                f"Invalid 'tool_choice': function '{named}' is not in 'tools'.", "tool_choice"
            )
        return named, None
    return None, None


def _chat_order(messages: Sequence[ChatMessage]) -> ApiError | None:
    pending: set[str] = set()
    answerable: set[str] | None = None  # ids of the assistant message a tool message may answer
    for message in messages:
        if message.role == "tool":
            call_id = message.tool_call_id
            if answerable is None:
                return _bad(_TOOL_ORDER_ORPHAN)
            if call_id not in answerable:
                return _bad(
                    f"Invalid parameter: 'tool_call_id' of '{call_id}' not found in "
                    "'tool_calls' of previous message."
                )
            pending.discard(call_id)
            continue
        if pending:
            return _bad(_TOOL_ORDER_MISSING)
        answerable = None
        if message.role == "assistant" and message.tool_calls:
            answerable = {c.id for c in message.tool_calls}
            pending = set(answerable)
    if pending:
        return _bad(_TOOL_ORDER_MISSING)
    return None


def _chat_passback(
    messages: Sequence[ChatMessage], *, has_tools: bool, rule: PassbackRule
) -> ApiError | None:
    for index, message in enumerate(messages):
        if message.role != "assistant":
            continue
        needs = reasoning_required(
            made_tool_calls=bool(message.tool_calls), request_has_tools=has_tools, rule=rule
        )
        # An empty string is accepted; only an absent (or null) value is refused [observed].
        if needs and message.reasoning_content is None:
            why = (
                "it made tool calls"
                if message.tool_calls
                else "the request carries tools (the strict pass-back rule)"
            )
            return ApiError(
                status=400,
                message=_PASSBACK,
                detail=(
                    f"messages[{index}] (assistant) has no reasoning_content, which thinking "
                    f"mode needs passed back because {why}; the client dropped the reasoning "
                    "the answer carried (an empty reasoning_content is often dropped)"
                ),
            )
    return None


def validate_chat(
    request: ChatRequest,
    *,
    thinking: bool,
    max_output_tokens: int,
    passback: PassbackRule = "strict",
) -> tuple[ToolFacts, ApiError | None]:
    """Check a parsed Chat Completions request; returns the tool facts and the first error."""
    tools = [(t.name, t.parameters) for t in request.tools or ()]
    names = [name for name, _ in tools]
    error: ApiError | None = None
    for name, schema in tools:
        error = _check_schema(name, schema)
        if error is not None:
            break
    forced: str | None = None
    if error is None:
        forced, error = _chat_tool_choice(request, names, thinking)
    facts = ToolFacts(
        schemas=tuple((n, s if isinstance(s, Mapping) else {}) for n, s in tools), forced=forced
    )
    if error is not None:
        return facts, error
    response_format = request.response_format
    if response_format is not None and response_format.get("type") not in ("text", "json_object"):
        return facts, _bad("This response_format type is unavailable now")  # [observed]
    if request.stream_options is not None and not request.stream:
        return facts, _bad(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
            "stream_options",
        )
    error = _check_max_tokens(request.max_tokens, max_output_tokens)
    if error is not None:
        return facts, error
    error = _chat_order(request.messages)
    if error is None and thinking:
        error = _chat_passback(request.messages, has_tools=bool(names), rule=passback)
    return facts, error


def _anthropic_order(messages: Sequence[AnthropicMessage]) -> ApiError | None:
    previous_uses: list[str] = []
    for i, message in enumerate(messages):
        blocks = message.blocks
        if message.role == "user":
            answered: set[str] = set()
            for j, block in enumerate(blocks):
                if block["type"] != "tool_result":
                    continue
                use_id = block["tool_use_id"]
                if use_id not in previous_uses:
                    return _bad(
                        f"messages.{i}.content.{j}: unexpected `tool_use_id` found in "
                        f"`tool_result` blocks: {use_id}. Each `tool_result` block must have a "
                        "corresponding `tool_use` block in the previous message."
                    )
                answered.add(use_id)
            missing = [u for u in previous_uses if u not in answered]
            if missing:
                return _missing_results(i - 1, missing)
            previous_uses = []
        else:
            if previous_uses:
                return _missing_results(i - 1, previous_uses)
            previous_uses = [str(b["id"]) for b in blocks if b["type"] == "tool_use"]
    if previous_uses:
        return _missing_results(len(messages) - 1, previous_uses)
    return None


def _missing_results(index: int, ids: Sequence[str]) -> ApiError:
    return _bad(
        f"messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately "
        f"after: {', '.join(ids)}. Each `tool_use` block must have a corresponding "
        "`tool_result` block in the next message."
    )


def _anthropic_passback(messages: Sequence[AnthropicMessage]) -> ApiError | None:
    for index, message in enumerate(messages):
        if message.role != "assistant":
            continue
        if lacks_thinking({b["type"] for b in message.blocks}):
            return ApiError(
                status=400,
                message=_PASSBACK_ANTHROPIC,
                detail=(
                    f"messages[{index}] (assistant) has tool_use blocks but no thinking block, "
                    "which thinking mode needs passed back"
                ),
            )
    return None


def validate_anthropic(
    request: AnthropicRequest, *, thinking: bool, max_output_tokens: int
) -> tuple[ToolFacts, ApiError | None]:
    """Check a parsed Anthropic-format request; returns the tool facts and the first error."""
    tools = [
        (str(t["name"]), t.get("input_schema"), t.get("type") in (None, "custom"))
        for t in request.tools or ()
    ]
    names = [name for name, _, _ in tools]
    error: ApiError | None = None
    for name, schema, custom in tools:
        if error is None and custom:
            error = _check_schema(name, schema)
    forced: str | None = None
    choice = request.tool_choice
    if error is None and choice is not None:
        kind = choice["type"]
        if kind in ("any", "tool"):
            if not names:
                error = _bad("tool_choice: requires `tools` to be specified", "tool_choice")
            elif thinking:
                error = _bad(_THINKING_TOOL_CHOICE, "tool_choice")
            elif kind == "any":
                forced = names[0]
            elif choice.get("name") in names:
                forced = str(choice["name"])
            else:
                error = _bad(
                    f"tool_choice: tool '{choice.get('name')}' is not in `tools`", "tool_choice"
                )
    facts = ToolFacts(
        schemas=tuple((n, s if isinstance(s, Mapping) else {}) for n, s, _ in tools),
        forced=forced,
    )
    if error is None:
        error = _check_max_tokens(request.max_tokens, max_output_tokens)
    if error is None:
        error = _anthropic_order(request.messages)
    if error is None and thinking:
        error = _anthropic_passback(request.messages)
    return facts, error
