"""The V4 chat template's token-level pieces: the special tokens, the rendered prompt and completion
values, and the builder that lays turns out token by token (docs/wire.md §1.4, docs/fidelity.md)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from ._tokenizers import hashed_id

__all__ = [
    "IMAGE_TOKENS",
    "ReasoningRule",
    "RenderedCompletion",
    "RenderedPrompt",
    "ToolCallSpec",
    "default_thinking",
]

BOS = 0
"""``<｜begin▁of▁sentence｜>`` in the DeepSeek-V4 vocabulary."""
EOS = 1
"""``<｜end▁of▁sentence｜>``: closes every assistant turn."""
USER = 128803
"""``<｜User｜>``: opens a run of user / tool inputs."""
ASSISTANT = 128804
"""``<｜Assistant｜>``: opens an assistant turn and the generation prefix."""
THINK = 128821
"""``<think>``."""
END_THINK = 128822
"""``</think>``."""
DSML = 128825
"""``｜DSML｜``: the tool-call markup token."""
LATEST_REMINDER = 128828
"""``<｜latest_reminder｜>``: the V4 mid-conversation reminder role."""
IMAGE = 129279
"""``<｜image｜>``: starts an image's placeholder tokens."""

IMAGE_TOKENS = 256
"""Tokens an image counts for (marker + source id + padding). Real V4.1 images cost ≤ 1024."""

ToolCallSpec: TypeAlias = tuple[str, "str | Mapping[str, Any]"]
"""``(name, arguments)`` of one tool call: the chat JSON-string arguments or Anthropic input."""


@dataclass(frozen=True, slots=True, kw_only=True)
class RenderedPrompt:
    """A request body rendered to tokens, with the boundaries the cache simulator cuts at."""

    tokens: tuple[int, ...] = field(repr=False)
    """The whole prompt, generation prefix included; its length is ``prompt_tokens``."""
    input_end: int
    """Where the request's input ends: before the generation prefix ``<｜Assistant｜><think>``
    (the whole length for a chat-prefix completion). The "end of user input" cache unit."""
    input_ends: tuple[int, ...]
    """End of every input run (user / tool / system text before an assistant turn), ascending;
    the last one is ``input_end``."""
    output_ends: tuple[int, ...]
    """End of every history assistant turn (just after its ``<｜end▁of▁sentence｜>``)."""
    thinking: bool
    """Whether the prompt was rendered for thinking mode (generation prefix ``<think>``)."""
    marks: tuple[int, ...] = ()
    """Where each component of the request starts, in tokens: the system prompt, the tools,
    then each message after the leading system messages (the components of
    ``WireView.parts``), then the end of the prompt. Lets a comparison made on the request's
    JSON be placed in the prompt."""
    open_state: tuple[int, int, int, bool, bool] | None = field(
        default=None, repr=False, compare=False
    )
    """The builder's state after the last message, before the generation prefix: ``(tokens,
    input ends, output ends, in a user run, input pending)``, so a request that extends this
    one can be rendered from here (:meth:`PromptRenderer.render_chat`'s ``resume``)."""

    @property
    def prompt_tokens(self) -> int:
        """Number of prompt tokens (DeepSeek ``usage.prompt_tokens``)."""
        return len(self.tokens)


@dataclass(frozen=True, slots=True, kw_only=True)
class RenderedCompletion:
    """A model reply rendered as the tokens that follow its prompt."""

    tokens: tuple[int, ...] = field(repr=False)
    """``{reasoning}</think>`` (thinking mode) + content + tool calls + ``<｜end▁of▁sentence｜>``."""
    reasoning_tokens: int
    """Tokens of the reasoning text alone (0 without thinking)."""
    thinking: bool
    """Whether the reply was rendered for thinking mode."""

    @property
    def completion_tokens(self) -> int:
        """Number of completion tokens (DeepSeek ``usage.completion_tokens``)."""
        return len(self.tokens)


def default_thinking(body: Mapping[str, Any]) -> bool:
    """Whether a request body runs in thinking mode, as V4-era DeepSeek decides by default.

    ``thinking.type`` wins (``"disabled"`` / ``"enabled"``); then an effort of ``"none"``
    (``reasoning_effort`` on chat, ``reasoning.effort`` on the Anthropic shape) turns it off;
    then the legacy alias ``deepseek-chat`` is non-thinking; everything else thinks.
    """
    thinking = body.get("thinking")
    if isinstance(thinking, Mapping):
        kind = thinking.get("type")
        if kind == "disabled":
            return False
        if kind == "enabled":
            return True
    if body.get("reasoning_effort") == "none":
        return False
    reasoning = body.get("reasoning")
    if isinstance(reasoning, Mapping) and reasoning.get("effort") == "none":
        return False
    return body.get("model") != "deepseek-chat"


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


ReasoningRule: TypeAlias = Literal["tool-turns", "with-tools"]
"""Which earlier ``reasoning_content`` a thinking-mode prompt keeps. ``"tool-turns"`` (the
default, DeepSeek's documented rule): the reasoning of assistant turns that made tool calls;
the rest is dropped. ``"with-tools"``: all of it whenever the request carries tools (how the public V4
encoder behaves when tools are present)."""


def _makes_calls(message: Any, *, anthropic: bool) -> bool:
    if not isinstance(message, Mapping):
        return False
    if not anthropic:
        return bool(message.get("tool_calls"))
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(b, Mapping) and b.get("type") == "tool_use" for b in content
    )


def _schema_text(value: Any) -> str:
    """A tool schema as V4's template writes it: ``json.dumps`` with its default spacing."""
    return json.dumps(value, ensure_ascii=False)


def _parameters(arguments: str | Mapping[str, Any]) -> list[tuple[str, str, bool]]:
    """``(name, value text, is a string)`` per argument of a call. Arguments that are not a
    JSON object render as one ``arguments`` parameter holding the raw text."""
    parsed: Any = arguments
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except ValueError:
            parsed = None
    if not isinstance(parsed, Mapping):
        return [("arguments", _arguments_text(arguments), True)]
    return [
        (str(key), value if isinstance(value, str) else _schema_text(value), isinstance(value, str))
        for key, value in parsed.items()
    ]


_TOOLS_HEAD = (
    "## Tools\n\n"
    "You have access to a set of tools to help answer the user's question. You can invoke "
    'tools by writing a "<｜DSML｜tool_calls>" block like the following:\n\n'
    "<｜DSML｜tool_calls>\n"
    '<｜DSML｜invoke name="$TOOL_NAME">\n'
    '<｜DSML｜parameter name="$PARAMETER_NAME" string="true|false">$PARAMETER_VALUE'
    "</｜DSML｜parameter>\n"
    "...\n"
    "</｜DSML｜invoke>\n"
    '<｜DSML｜invoke name="$TOOL_NAME2">\n'
    "...\n"
    "</｜DSML｜invoke>\n"
    "</｜DSML｜tool_calls>\n\n"
    'String parameters should be specified as is and set `string="true"`. For all other types '
    "(numbers, booleans, arrays, objects), pass the value in JSON format and set "
    '`string="false"`.\n\n'
    "If thinking_mode is enabled (triggered by <think>), you MUST output your complete "
    "reasoning inside <think>...</think> BEFORE any tool calls or final response.\n\n"
    "Otherwise, output directly after </think> with tool calls or final response.\n\n"
    "### Available Tool Schemas\n\n"
)
"""V4's tool preamble up to the schemas (the public V4 encoding's tools template, in our words
only where it is not the model-visible text itself: that text must match to count tokens)."""

_TOOLS_TAIL = (
    "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke "
    "tool calls.\n"
)


def _arguments_text(arguments: str | Mapping[str, Any]) -> str:
    if isinstance(arguments, str):
        return arguments
    return json.dumps(arguments, ensure_ascii=False)


def _image_source(part: Mapping[str, Any]) -> str:
    """A shape-neutral description of an image: its URL, or a ``data:`` URL for base64."""
    image_url = part.get("image_url")
    if isinstance(image_url, Mapping):
        return str(image_url.get("url", ""))
    if isinstance(image_url, str):
        return image_url
    source = part.get("source")
    if isinstance(source, Mapping):
        if source.get("type") == "base64":
            return f"data:{source.get('media_type', '')};base64,{source.get('data', '')}"
        if "url" in source:
            return str(source["url"])
        return _json_text(source)
    return _json_text(part)


class _Builder:
    """Accumulates one prompt's tokens and boundaries (one per render call)."""

    __slots__ = (
        "_encode",
        "_in_user_run",
        "_pending_input",
        "arguments_as_text",
        "input_ends",
        "marks",
        "out",
        "output_ends",
    )

    def __init__(self, encode: Callable[[str], tuple[int, ...]]) -> None:
        self._encode = encode
        self.out: list[int] = [BOS]
        self.input_ends: list[int] = []
        self.output_ends: list[int] = []
        self.marks: list[int] = []
        self.arguments_as_text = False
        """DeepSeek-V3's template: a call's arguments are written as the client sent their text,
        not one parameter per argument."""
        self._in_user_run = False
        self._pending_input = False

    def text(self, text: str) -> None:
        if text:
            self.out.extend(self._encode(text))

    def system(self, text: str) -> None:
        self.text(text)
        self._pending_input = True

    def tools(self, tools: Sequence[str]) -> None:
        """V4's tool preamble after the system text: how to call, then one schema a line."""
        if not tools:
            return
        self.text("\n\n")
        self.text(_TOOLS_HEAD)
        for index, tool in enumerate(tools):
            if index:
                self.text("\n")
            self.text(tool)
        self.text(_TOOLS_TAIL)

    def _open_user_run(self) -> None:
        if not self._in_user_run:
            self.out.append(USER)
            self._in_user_run = True
        self._pending_input = True

    def user_text(self, text: str) -> None:
        self._open_user_run()
        self.text(text)

    def reminder(self, text: str) -> None:
        self.out.append(LATEST_REMINDER)
        self.text(text)
        self._pending_input = True

    def image(self, source: str) -> None:
        self._open_user_run()
        self.out.append(IMAGE)
        self.out.append(hashed_id(source))
        self.out.extend([IMAGE] * (IMAGE_TOKENS - 2))

    def tool_result(self, parts: Iterable[tuple[str, str]]) -> None:
        """``parts``: ``("text", text)`` or ``("image", source)`` in order."""
        self._open_user_run()
        self.text("<tool_result>")
        for kind, value in parts:
            if kind == "image":
                self.image(value)
            else:
                self.text(value)
        self.text("</tool_result>")

    def _end_input(self) -> None:
        if self._pending_input:
            self.input_ends.append(len(self.out))
            self._pending_input = False
        self._in_user_run = False

    def tool_calls(self, calls: Sequence[ToolCallSpec]) -> None:
        """V4's DSML block: ``<｜DSML｜tool_calls>``, one ``invoke`` per call, one ``parameter``
        per argument (strings as they are, other values as JSON).

        Text is cut into segments where the real tokenizer cuts the whole block anyway: a
        newline stays with the ``>`` before it, a ``<`` or ``</`` with the marker after it."""
        if not calls:
            return
        self.text("\n\n<")
        self.out.append(DSML)
        self.text("tool_calls>\n")
        for name, arguments in calls:
            self.text("<")
            self.out.append(DSML)
            self.text(f'invoke name="{name}">\n')
            parameters = (
                [("arguments", _arguments_text(arguments), True)]
                if self.arguments_as_text
                else _parameters(arguments)
            )
            if not parameters:
                self.text("\n")
            for key, value, is_string in parameters:
                self.text("<")
                self.out.append(DSML)
                self.text(f'parameter name="{key}" string="{"true" if is_string else "false"}">')
                self.text(value)
                self.text("</")
                self.out.append(DSML)
                self.text("parameter>\n")
            self.text("</")
            self.out.append(DSML)
            self.text("invoke>\n")
        self.text("</")
        self.out.append(DSML)
        self.text("tool_calls>")

    def assistant(
        self,
        *,
        reasoning: str,
        content: str,
        calls: Sequence[ToolCallSpec],
        keep_reasoning: bool,
    ) -> None:
        self._end_input()
        self.out.append(ASSISTANT)
        if keep_reasoning:
            self.out.append(THINK)
            self.text(reasoning)
        self.out.append(END_THINK)
        self.text(content)
        self.tool_calls(calls)
        self.out.append(EOS)
        self.output_ends.append(len(self.out))

    def prefix_assistant(self, *, reasoning: str, content: str, thinking: bool) -> None:
        """A beta chat-prefix assistant message: the reply continues it, so no ``EOS``."""
        self._end_input()
        self.out.append(ASSISTANT)
        if thinking:
            self.out.append(THINK)
            self.text(reasoning)
            if content:
                self.out.append(END_THINK)
                self.text(content)
        else:
            self.out.append(END_THINK)
            self.text(content)

    def mark(self) -> None:
        """Note where the next component starts (see :attr:`RenderedPrompt.marks`)."""
        self.marks.append(len(self.out))

    def resume(self, previous: RenderedPrompt) -> None:
        """Continue from the end of ``previous``'s messages (see ``RenderedPrompt.open_state``)."""
        assert previous.open_state is not None
        length, inputs, outputs, in_run, pending = previous.open_state
        self.out = list(previous.tokens[:length])
        self.input_ends = list(previous.input_ends[:inputs])
        self.output_ends = list(previous.output_ends[:outputs])
        self.marks = list(previous.marks[:-1])
        self._in_user_run = in_run
        self._pending_input = pending

    def finish(self, *, thinking: bool, prefix: bool) -> RenderedPrompt:
        state = (
            len(self.out),
            len(self.input_ends),
            len(self.output_ends),
            self._in_user_run,
            self._pending_input,
        )
        if prefix:  # the assistant prefix is input too: it ends where generation starts
            input_end = len(self.out)
            self.input_ends.append(input_end)
        else:
            self._end_input()
            input_end = len(self.out)
            if not self.input_ends or self.input_ends[-1] != input_end:
                self.input_ends.append(input_end)
            self.out.append(ASSISTANT)
            self.out.append(THINK if thinking else END_THINK)
        return RenderedPrompt(
            tokens=tuple(self.out),
            input_end=input_end,
            input_ends=tuple(self.input_ends),
            output_ends=tuple(self.output_ends),
            thinking=thinking,
            marks=(*self.marks, len(self.out)),
            open_state=None if prefix else state,
        )


def _joined_text(content: Any) -> tuple[str, list[Mapping[str, Any]]]:
    """Text of a content value (string or parts) and its non-text parts, in order."""
    if content is None:
        return "", []
    if isinstance(content, str):
        return content, []
    if isinstance(content, Sequence):
        texts: list[str] = []
        others: list[Mapping[str, Any]] = []
        for part in content:
            if isinstance(part, Mapping) and part.get("type") == "text":
                texts.append(str(part.get("text", "")))
            elif isinstance(part, Mapping):
                others.append(part)
            else:
                texts.append(_json_text(part))
        return "".join(texts), others
    return _json_text(content), []


def _is_image(part: Mapping[str, Any]) -> bool:
    return part.get("type") in ("image", "image_url")
