"""Strategies for the wire: Chat Completions (OpenAI-format) tools, messages and request bodies,
Anthropic-format request bodies, and the :class:`~dsh_core.GenerateOptions` a provider
serializes.

The bodies are plain JSON (what an OpenAI-SDK client sends), valid twice over: the codec
(:func:`dsh_core.providers.deepseek.parse_request`) accepts their structure, and the conversation
obeys the API's rules (each tool call answered by a tool message, reasoning passed back in
thinking mode, a ``tool_choice`` that fits the tools and the mode), so the mock DeepSeek answers
them with 200.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

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
from dsh_core.providers import MODELS, resolve_model, thinking_enabled

from ._values import _cached, json_values, tool_names

__all__ = [
    "anthropic_requests",
    "chat_messages",
    "chat_requests",
    "chat_tool_names",
    "chat_tools",
    "generate_options",
]

_NAME_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"
_WIRE_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max", "ultra")
_ID_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789_-"


# ------------------------------------------------------------------------------------- tools


@_cached
def chat_tool_names() -> st.SearchStrategy[str]:
    """Every name the API accepts: 1–128 characters of ``[a-zA-Z0-9_-]`` (leading digits and
    hyphens, upper case, the full 128 characters included)."""
    return st.one_of(
        st.text(_NAME_ALPHABET, min_size=1, max_size=24),
        st.text(_NAME_ALPHABET, min_size=1, max_size=4).map(lambda s: (s * 128)[:128]),
    )


@_cached
def _schemas() -> st.SearchStrategy[dict[str, Any]]:
    prop = st.fixed_dictionaries(
        {"type": st.sampled_from(["string", "integer", "boolean", "number"])},
        optional={"description": st.text(max_size=20)},
    )
    return st.dictionaries(tool_names(), prop, max_size=4).flatmap(
        lambda props: st.fixed_dictionaries(
            {"type": st.just("object"), "properties": st.just(props)},
            optional={
                "required": st.lists(st.sampled_from(sorted(props)), unique=True)
                if props
                else st.just([]),
                "additionalProperties": st.booleans(),
            },
        )
    )


@_cached
def _chat_tool(name: str) -> st.SearchStrategy[dict[str, Any]]:
    function = st.fixed_dictionaries(
        {"name": st.just(name)},
        optional={
            "description": st.text(max_size=40),
            "parameters": _schemas(),
            "strict": st.booleans(),
        },
    )
    return function.map(lambda f: {"type": "function", "function": f})


@_cached
def chat_tools(*, min_size: int = 0, max_size: int = 4) -> st.SearchStrategy[list[dict[str, Any]]]:
    """``tools`` arrays: ``{"type": "function", "function": {name, description?, parameters?,
    strict?}}`` with unique names (:func:`chat_tool_names`); a function without ``parameters``
    takes no arguments."""
    names = st.lists(chat_tool_names(), min_size=min_size, max_size=max_size, unique=True)
    return names.flatmap(lambda ns: st.tuples(*(_chat_tool(n) for n in ns)).map(list))


# ---------------------------------------------------------------------------------- messages


def _text_content(*, allow_parts: bool = True) -> st.SearchStrategy[Any]:
    text = st.text(max_size=30)
    if not allow_parts:
        return text
    parts = st.lists(text.map(lambda t: {"type": "text", "text": t}), min_size=1, max_size=3)
    return st.one_of(text, text, parts)


@st.composite
def _arguments(draw: st.DrawFn) -> str:
    """A call's ``arguments``: a JSON object as a string, compact or spaced."""
    value = draw(st.dictionaries(st.text(max_size=8), json_values(max_leaves=4), max_size=3))
    spaced = draw(st.booleans())
    return json.dumps(value, ensure_ascii=draw(st.booleans()), indent=None if not spaced else 1)


@st.composite
def _conversation(
    draw: st.DrawFn, names: tuple[str, ...], thinking: bool, max_turns: int
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    if draw(st.booleans()):
        out.append({"role": "system", "content": draw(_text_content())})
    ids = iter(range(1_000_000))

    def assistant(content: str | None, calls: list[dict[str, Any]] | None) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": content}
        # Thinking mode: every assistant turn passes its reasoning back ("" when it had none),
        # which satisfies both the V4 and the V4.1 wording of the rule. Otherwise it may or may
        # not be sent (the API ignores it).
        if thinking or draw(st.booleans()):
            message["reasoning_content"] = draw(st.text(max_size=30))
        if calls is not None:
            message["tool_calls"] = calls
        return message

    last = draw(st.integers(1, max_turns)) - 1
    for turn in range(last + 1):
        user: dict[str, Any] = {"role": "user", "content": draw(_text_content())}
        if draw(st.integers(0, 4)) == 0:
            user["name"] = draw(st.text(_ID_ALPHABET, min_size=1, max_size=8))
        out.append(user)
        steps = draw(st.integers(0, 2)) if names else 0
        for _ in range(steps):
            calls = [
                {
                    "id": f"call_{next(ids):02d}_{draw(st.text(_ID_ALPHABET, max_size=6))}",
                    "type": "function",
                    "function": {
                        "name": draw(st.sampled_from(names)),
                        "arguments": draw(_arguments()),
                    },
                }
                for _ in range(draw(st.integers(1, 3)))
            ]
            content = draw(st.one_of(st.just(""), st.none(), st.text(max_size=20)))
            out.append(assistant(content, calls))
            for call in draw(st.permutations(calls)):
                out.append(
                    {
                        "role": "tool",
                        "tool_call_id": call["id"],
                        "content": draw(_text_content()),
                    }
                )
        if turn < last or draw(st.booleans()):
            # Earlier turns end with the model's answer; the last one may instead end at the
            # user message or the tool results the request asks the model to answer.
            out.append(assistant(draw(st.text(max_size=30)), None))
    return out


@_cached
def chat_messages(
    *, tools: tuple[str, ...] = (), thinking: bool = True, max_turns: int = 3
) -> st.SearchStrategy[list[dict[str, Any]]]:
    """``messages`` arrays of a conversation the API accepts: an optional system message, then
    turns of a user message (text or text parts, sometimes a ``name``), tool-call steps naming
    ``tools`` (each call answered by a ``tool`` message, in any order) and an assistant answer.

    With ``thinking``, every assistant message carries ``reasoning_content`` (``""`` included),
    as the pass-back rule demands. The last message is a user message, a tool result, or an
    assistant answer (a follow-up request may repeat one).
    """
    return _conversation(tuple(tools), thinking, max_turns)


# ---------------------------------------------------------------------------------- requests


def _number(low: float, high: float) -> st.SearchStrategy[float | int]:
    return st.one_of(
        st.integers(int(low), int(high)),
        st.floats(low, high, allow_nan=False).map(lambda x: x + 0.0),
    )


@st.composite
def _chat_request(
    draw: st.DrawFn, models: tuple[str, ...], stream: bool | None, max_turns: int
) -> dict[str, Any]:
    model = draw(st.sampled_from(models))
    thinking = draw(st.one_of(st.none(), st.sampled_from(["enabled", "disabled"])))
    effort = draw(st.one_of(st.none(), st.sampled_from(_WIRE_EFFORTS)))
    on = thinking_enabled(resolve_model(model), thinking_type=thinking, effort=effort)
    tools = draw(chat_tools())
    names = tuple(t["function"]["name"] for t in tools)
    body: dict[str, Any] = {
        "model": model,
        "messages": draw(chat_messages(tools=names, thinking=on, max_turns=max_turns)),
    }
    if stream is not None:
        body["stream"] = stream
    elif draw(st.booleans()):
        body["stream"] = draw(st.booleans())
    if body.get("stream") is True and draw(st.booleans()):
        # stream_options only with stream: true (the API refuses it otherwise)
        body["stream_options"] = {"include_usage": draw(st.booleans())}
    if thinking is not None:
        body["thinking"] = {"type": thinking}
    if effort is not None:
        body["reasoning_effort"] = effort
    empty_tools: bool = draw(st.booleans())  # an empty ``tools`` array is valid too
    if tools or empty_tools:
        body["tools"] = tools
    choices: list[Any] = ["none"]
    if names:
        choices.append("auto")
        if not on:  # thinking mode refuses a forced call
            choices.append("required")
            choices.extend({"type": "function", "function": {"name": n}} for n in names)
    if draw(st.booleans()):
        body["tool_choice"] = draw(st.sampled_from(choices))
    info = resolve_model(model)
    optional: dict[str, st.SearchStrategy[Any]] = {
        "temperature": _number(0, 2),
        "top_p": _number(0, 1),
        "max_tokens": st.integers(1, info.max_output_tokens if info else 8192),
        "stop": st.one_of(
            st.text(min_size=1, max_size=5), st.lists(st.text(min_size=1, max_size=5), max_size=4)
        ),
        "frequency_penalty": _number(-2, 2),
        "presence_penalty": _number(-2, 2),
        "response_format": st.sampled_from([{"type": "text"}, {"type": "json_object"}]),
        "logprobs": st.booleans(),
        "top_logprobs": st.integers(0, 20),
        "user_id": st.text(_ID_ALPHABET, min_size=1, max_size=16),
        "user": st.text(max_size=10),
    }
    for key in draw(st.lists(st.sampled_from(sorted(optional)), unique=True, max_size=5)):
        body[key] = draw(optional[key])
    return body


def chat_requests(
    *,
    models: Sequence[str] | None = None,
    stream: bool | None = None,
    max_turns: int = 3,
) -> st.SearchStrategy[dict[str, Any]]:
    """Chat Completions request bodies as plain JSON, accepted by the codec and by the API's
    conversation rules (see the module docstring).

    ``models`` defaults to every id of :data:`dsh_core.providers.MODELS`; ``stream`` fixes
    ``stream`` (``None``: absent, true or false). The thinking switch (``thinking``,
    ``reasoning_effort``, the model's default) decides whether reasoning is passed back and
    which ``tool_choice`` values are drawn. Optional fields (sampling, ``stop``,
    ``response_format``, ``logprobs``, ``user_id``, …) appear in any combination, within their
    ranges. Bodies carry no ``null`` fields, so ``parse_request(body).to_json() == body``.
    """
    chosen = tuple(models) if models is not None else tuple(MODELS)
    return _chat_request(chosen, stream, max_turns)


# ----------------------------------------------------------------- Anthropic-format requests

_CLAUDE_NAMES = ("claude-sonnet-4-6", "claude-opus-4-1", "claude-haiku-4-5")


def _text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


@st.composite
def _anthropic_conversation(
    draw: st.DrawFn, names: tuple[str, ...], thinking: bool, max_turns: int
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    ids = iter(range(1_000_000))
    text = st.text(max_size=30)
    blocks = st.lists(text.map(_text_block), min_size=1, max_size=2)
    last = draw(st.integers(1, max_turns)) - 1
    for turn in range(last + 1):
        out.append({"role": "user", "content": draw(st.one_of(text, blocks))})
        for _ in range(draw(st.integers(0, 2)) if names else 0):
            uses = [
                {
                    "type": "tool_use",
                    "id": f"toolu_{next(ids):02d}",
                    "name": draw(st.sampled_from(names)),
                    "input": draw(
                        st.dictionaries(st.text(max_size=8), json_values(max_leaves=3), max_size=3)
                    ),
                }
                for _ in range(draw(st.integers(1, 3)))
            ]
            content: list[dict[str, Any]] = []
            # Thinking mode: a tool-use turn passes its thinking block back ("" included).
            if thinking or draw(st.booleans()):
                thought: dict[str, Any] = {"type": "thinking", "thinking": draw(text)}
                if draw(st.booleans()):
                    thought["signature"] = draw(st.text(_ID_ALPHABET, max_size=16))
                content.append(thought)
            if draw(st.booleans()):
                content.append(_text_block(draw(text)))
            out.append({"role": "assistant", "content": [*content, *uses]})
            results = []
            for use in draw(st.permutations(uses)):
                result: dict[str, Any] = {
                    "type": "tool_result",
                    "tool_use_id": use["id"],
                    "content": draw(st.one_of(text, blocks)),
                }
                if draw(st.booleans()):
                    result["is_error"] = draw(st.booleans())
                results.append(result)
            out.append({"role": "user", "content": results})
        if turn < last or draw(st.booleans()):
            out.append({"role": "assistant", "content": draw(st.one_of(text, blocks))})
            if turn == last:
                break
    if (
        out[-1]["role"] == "assistant"
        and isinstance(out[-1]["content"], str)
        and draw(st.booleans())
    ):
        out.pop()  # mostly end at the user's side: the request asks for the next answer
    return out


@st.composite
def _anthropic_request(
    draw: st.DrawFn, models: tuple[str, ...], stream: bool | None, max_turns: int
) -> dict[str, Any]:
    model = draw(st.sampled_from(models))
    info = resolve_model(model, endpoint="anthropic")
    thinking = draw(st.one_of(st.none(), st.sampled_from(["enabled", "disabled", "adaptive"])))
    effort = draw(st.one_of(st.none(), st.sampled_from(["none", "low", "high", "max"])))
    on = thinking_enabled(info, thinking_type=thinking, effort=effort)
    names = tuple(draw(st.lists(chat_tool_names(), unique=True, max_size=3)))
    body: dict[str, Any] = {
        "model": model,
        "max_tokens": draw(st.integers(1, info.max_output_tokens if info else 8192)),
    }
    if draw(st.booleans()):
        body["system"] = draw(
            st.one_of(
                st.text(max_size=40),
                st.lists(st.text(max_size=20).map(_text_block), min_size=1, max_size=2),
            )
        )
    body["messages"] = draw(_anthropic_conversation(names, on, max_turns))
    empty_tools: bool = draw(st.booleans())  # an empty ``tools`` array is valid too
    if names or empty_tools:
        body["tools"] = [
            {
                "name": n,
                **draw(st.fixed_dictionaries({}, optional={"description": st.text(max_size=20)})),
                "input_schema": draw(_schemas()),
            }
            for n in names
        ]
    choices: list[dict[str, Any]] = [{"type": "auto"}, {"type": "none"}]
    if names and not on:  # thinking mode refuses a forced tool
        choices.append({"type": "any"})
        choices.extend({"type": "tool", "name": n} for n in names)
    send_choice: bool = draw(st.booleans())
    if names and send_choice:
        body["tool_choice"] = draw(st.sampled_from(choices))
    if thinking is not None:
        body["thinking"] = {"type": thinking}
    if effort is not None:
        body["reasoning"] = {"effort": effort}
    optional: dict[str, st.SearchStrategy[Any]] = {
        "output_config": st.sampled_from(["low", "high", "max"]).map(lambda e: {"effort": e}),
        "temperature": _number(0, 2),
        "top_p": _number(0, 1),
        "top_k": st.integers(0, 500),
        "stop_sequences": st.lists(st.text(min_size=1, max_size=5), max_size=3),
        "metadata": st.text(_ID_ALPHABET, min_size=1, max_size=12).map(lambda u: {"user_id": u}),
    }
    for key in draw(st.lists(st.sampled_from(sorted(optional)), unique=True, max_size=4)):
        body[key] = draw(optional[key])
    if stream is not None:
        body["stream"] = stream
    elif draw(st.booleans()):
        body["stream"] = draw(st.booleans())
    return body


def anthropic_requests(
    *,
    models: Sequence[str] | None = None,
    stream: bool | None = None,
    max_turns: int = 3,
) -> st.SearchStrategy[dict[str, Any]]:
    """Messages API bodies for DeepSeek's Anthropic-format endpoint, as plain JSON, accepted by
    ``dsh_core.providers.anthropic.parse_request`` and by the API's conversation rules: every
    ``tool_use`` answered by a ``tool_result`` in the next user message, thinking blocks passed
    back on tool turns in thinking mode, no forced ``tool_choice`` while thinking.

    ``models`` defaults to the model table's ids and the Claude names the endpoint maps
    (``claude-sonnet-…`` → flash, ``claude-opus-…`` → pro). The thinking switch is drawn from
    ``thinking.type`` (``enabled`` / ``disabled`` / ``adaptive``), ``reasoning.effort`` and the
    model's default, through :func:`dsh_core.providers.thinking_enabled`. Bodies carry no
    ``null`` fields, so ``parse_request(body).to_json() == body``.
    """
    chosen = tuple(models) if models is not None else (*MODELS, *_CLAUDE_NAMES)
    return _anthropic_request(chosen, stream, max_turns)


# ------------------------------------------------------------------------ GenerateOptions

_TEXTS = st.text(max_size=20)
_IDS = st.text(_ID_ALPHABET, min_size=1, max_size=12)
_RAW_ARGUMENTS = st.one_of(
    st.just(""),
    st.just("{}"),
    st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=3).map(
        json.dumps
    ),
    _TEXTS,  # the model's raw string, even when it is not JSON
)


@st.composite
def _log_message(draw: st.DrawFn) -> Message:
    kind = draw(st.sampled_from(["user", "assistant", "tool", "system"]))
    msg_id = draw(_IDS)
    if kind == "user":
        texts = draw(st.lists(_TEXTS, max_size=3))
        return user_message([TextBlock(text=t) for t in texts], id=msg_id)
    if kind == "tool":
        result = st.builds(
            ToolResultBlock,
            tool_call_id=_IDS,
            content=st.lists(_TEXTS.map(lambda t: TextBlock(text=t)), max_size=2).map(tuple),
            is_error=st.none() | st.booleans(),
        )
        results = draw(st.lists(result, min_size=1, max_size=3))
        extra = [TextBlock(text=t) for t in draw(st.lists(_TEXTS, max_size=1))]
        return user_message([*results, *extra], id=msg_id)
    if kind == "system":
        base = user_message([TextBlock(text=draw(_TEXTS))], id=msg_id)
        return Message(id=msg_id, role="system", content=base.content, source=base.source)
    block = st.one_of(
        _TEXTS.map(lambda t: TextBlock(text=t)),
        _TEXTS.map(lambda t: ReasoningBlock(text=t)),
        st.builds(ToolCallBlock, id=_IDS, name=chat_tool_names(), arguments=_RAW_ARGUMENTS),
    )
    blocks = draw(st.lists(block, min_size=1, max_size=4))
    return assistant_message(blocks, provider="deepseek", model="deepseek-v4-flash", id=msg_id)


@st.composite
def _tool_schemas(draw: st.DrawFn) -> tuple[ToolSchema, ...] | None:
    names = draw(st.lists(chat_tool_names(), unique=True, max_size=4))
    if not names and draw(st.booleans()):
        return None
    return tuple(
        ToolSchema(name=n, description=draw(_TEXTS), parameters=freeze_json(draw(_schemas())))
        for n in names
    )


def generate_options(
    *,
    models: Sequence[str] = ("deepseek-v4-flash", "deepseek-flash", "deepseek-v4-pro", "custom-x"),
) -> st.SearchStrategy[GenerateOptions]:
    """:class:`~dsh_core.GenerateOptions` as the agent loop hands them to a provider, text only:
    any mix of user, assistant (text, reasoning, tool calls with raw argument strings, even
    non-JSON ones), tool-result and system messages; tools or none; every ``reasoning_effort``
    and ``purpose``; sampling options in range. Both providers' ``serialize_request`` accept
    them, so they drive serializer properties (byte stability, parse round trips)."""
    return st.builds(
        GenerateOptions,
        provider=st.just("deepseek"),
        model=st.sampled_from(tuple(models)),
        messages=st.lists(_log_message(), min_size=1, max_size=6).map(tuple),
        reasoning_effort=st.sampled_from([None, "off", "low", "high", "max"]),
        system=st.none() | _TEXTS,
        tools=_tool_schemas(),
        temperature=st.none() | st.floats(min_value=0, max_value=2, allow_nan=False),
        max_tokens=st.none() | st.integers(min_value=1, max_value=393_216),
        stop=st.none() | st.lists(st.text(min_size=1, max_size=5), max_size=4).map(tuple),
        purpose=st.sampled_from([None, "compaction", "session-title"]),
        session_id=st.none() | _IDS,
    )
