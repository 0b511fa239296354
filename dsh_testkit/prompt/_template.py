"""The chat template: wire bodies rendered to tokens with a DeepSeek chat-template approximation.

The prefix-cache simulator (:mod:`._cache`) works in token space, as the real server does after
chat templating, so this module turns a request body — the chat-completions JSON the OpenAI SDK
sends, or the Anthropic messages JSON — into a token sequence with boundary marks, and a model
reply into the tokens that extend it.

The template (DeepSeek-V4's encoding, as its public encoder writes it)::

    <｜begin▁of▁sentence｜> {leading system texts} [\n\n## Tools … {one tool schema a line} …]
    <｜User｜> {user text | <tool_result>{tool output}</tool_result> | image} …   ← input end
    <｜Assistant｜> [<think>{reasoning}]</think> {content}
        [\n\n<｜DSML｜tool_calls> <｜DSML｜invoke name=…> <｜DSML｜parameter …>… ] <｜end▁of▁sentence｜>
                                                                           ← output end
    … further turns …
    <｜Assistant｜> <think>            (generation prefix; ``</think>`` when thinking is off)

- The tool preamble is V4's: how to call tools in DSML, then each schema as ``json.dumps`` with
  its default spacing, one a line. A call renders one ``parameter`` per argument (a string as
  it is with ``string="true"``, any other value as JSON with ``string="false"``); arguments
  that are not a JSON object render as one ``arguments`` parameter.
- A run of consecutive user / tool / image inputs opens with one ``<｜User｜>``; a system message
  after the leading ones renders as plain text where it stands.
- Reasoning pass-back (:data:`ReasoningRule`, default ``"tool-turns"``, DeepSeek's documented
  rule): a history assistant turn keeps its reasoning (``<think>{reasoning}</think>``) only when
  thinking is on and that turn made tool calls; otherwise it renders as ``</think>{content}``.
- A reply rendered by :meth:`PromptRenderer.render_completion` is exactly what the next request
  renders for that assistant turn when it is sent back unchanged and keeps its reasoning
  (non-thinking, or a turn with tool calls) — that is what lets the "end of model output"
  cache unit hit.
- Every text segment is encoded on its own and the segments are concatenated, so an append-only
  conversation renders to token sequences that extend each other (prefix stability), and the
  same conversation in the chat and Anthropic shapes renders to the same tokens: text blocks of
  one message are joined with ``""`` first, tool-call ids are not rendered, Anthropic
  ``tool_use.input`` renders as its parameters, Anthropic ``input_schema`` as chat
  ``parameters``, and images by their source (a base64 source as the ``data:`` URL the chat
  shape would carry). Segments are cut where the real tokenizer cuts the whole text anyway (a
  newline stays with the ``>`` before it), so counts match the real tokenizer's closely.
- Template markers use the DeepSeek-V4 vocabulary's ids (``<｜User｜>`` = 128803, …) whatever the
  tokenizer.

With the real tokenizer, prompt growth per tool step matches live ``usage.prompt_tokens`` to a
few tokens (docs/fidelity.md); an image is a fixed :data:`IMAGE_TOKENS`.

Text between the markers goes through a pluggable :class:`~dsh_testkit.prompt._tokenizers.Tokenizer`
(:class:`~dsh_testkit.prompt._tokenizers.HeuristicTokenizer` by default).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from dsh_core.providers._models import ChatTemplate

from ._template_tokens import (
    END_THINK,
    EOS,
    ReasoningRule,
    RenderedCompletion,
    RenderedPrompt,
    ToolCallSpec,
    _Builder,
    _image_source,
    _is_image,
    _joined_text,
    _json_text,
    _makes_calls,
    _schema_text,
    default_thinking,
)
from ._tokenizers import HeuristicTokenizer, Tokenizer

__all__ = ["PromptRenderer"]


class PromptRenderer:
    """Renders wire bodies and replies to tokens with one tokenizer and a segment memo.

    Text segments (message contents, tool schemas, …) are memoized, so a session that resends
    its growing history tokenizes each message once. ``memo_entries`` bounds the memo (oldest
    entries go first). One renderer per mock server or test is the intended use; it is not
    thread-safe (the mock is single-threaded asyncio).

    It renders the chat template :attr:`TEMPLATES` names, which every model of the model table
    names in its :attr:`~dsh_core.providers.CacheFacts.template`.
    """

    __slots__ = ("_memo", "_memo_entries", "reasoning_rule", "tokenizer")

    TEMPLATES: ClassVar[frozenset[ChatTemplate]] = frozenset({"deepseek-v3", "deepseek-v4"})
    """The chat templates this renderer implements."""

    def __init__(
        self,
        tokenizer: Tokenizer | None = None,
        *,
        memo_entries: int = 16384,
        reasoning_rule: ReasoningRule = "tool-turns",
    ) -> None:
        if memo_entries < 1:
            raise ValueError(f"memo_entries must be at least 1, got {memo_entries}")
        if reasoning_rule not in ("tool-turns", "with-tools"):
            raise ValueError(
                f'reasoning_rule must be "tool-turns" or "with-tools", got {reasoning_rule!r}'
            )
        self.reasoning_rule: ReasoningRule = reasoning_rule
        """Which history reasoning the prompt keeps (:data:`ReasoningRule`)."""
        self.tokenizer: Tokenizer = tokenizer if tokenizer is not None else HeuristicTokenizer()
        """The tokenizer text segments go through."""
        self._memo: dict[str, tuple[int, ...]] = {}
        self._memo_entries = memo_entries

    def __repr__(self) -> str:
        return f"PromptRenderer(tokenizer={self.tokenizer!r})"

    def encode(self, text: str) -> tuple[int, ...]:
        """The (memoized) ids of one text segment."""
        memo = self._memo
        ids = memo.get(text)
        if ids is None:
            ids = tuple(self.tokenizer.encode(text))
            if len(memo) >= self._memo_entries:
                del memo[next(iter(memo))]
            memo[text] = ids
        return ids

    def count(self, text: str) -> int:
        """Number of tokens of ``text`` alone (no template)."""
        return len(self.encode(text))

    def _kept_reasoning(
        self, messages: Sequence[Any], thinking: bool, has_tools: bool, *, anthropic: bool
    ) -> frozenset[int]:
        """Positions of the history assistant messages whose reasoning stays in the prompt.

        Rule ``"tool-turns"``: the reasoning of an assistant turn that made tool calls is kept;
        that of a turn without tool calls (a final answer) is dropped (DeepSeek's thinking-mode
        guide; measured: live prompt tokens drop exactly that reasoning, also for the final
        answer of a turn whose earlier steps called tools). Rule ``"with-tools"``: every
        reasoning is kept when the request carries tools. Nothing is kept with thinking off.
        """
        if not thinking:
            return frozenset()
        if self.reasoning_rule == "with-tools":
            if not has_tools:
                return frozenset()
            return frozenset(i for i, m in enumerate(messages) if _role(m) == "assistant")
        return frozenset(
            i
            for i, m in enumerate(messages)
            if _role(m) == "assistant" and _makes_calls(m, anthropic=anthropic)
        )

    # -- chat completions -------------------------------------------------------------------

    def render_chat(
        self,
        body: Mapping[str, Any],
        *,
        thinking: bool | None = None,
        template: ChatTemplate = "deepseek-v4",
        resume: tuple[RenderedPrompt, int] | None = None,
    ) -> RenderedPrompt:
        """Render a chat-completions request body (``messages``, ``tools``, …) to tokens.

        ``thinking`` defaults to :func:`default_thinking` of the body. The body is assumed
        validated; unexpected shapes render deterministically (non-text values as JSON).
        ``template="deepseek-v3"`` renders the two ways the V3-era service differed for prefix
        caching (the cache doctor reads older traffic with it): every system message is gathered
        into the leading system prompt (``"\n\n"``-joined), and a tool call's arguments are
        written as their text.

        ``resume=(previous, count)`` renders a body that extends the one ``previous`` rendered
        (same system prompt, tools, thinking mode and template; its first ``count`` messages
        after the leading system messages are that body's) from where ``previous`` left off,
        in time proportional to the new messages only: the tokens are those of a full render.
        """
        if thinking is None:
            thinking = default_thinking(body)
        tools = body.get("tools")
        messages = body.get("messages")
        messages = messages if isinstance(messages, list) else []
        gathered = template == "deepseek-v3"
        if resume is not None and resume[0].open_state is not None and not gathered:
            return self._resume_chat(messages, resume[0], resume[1], thinking, tools)
        tool_texts = [self._chat_tool_text(t) for t in tools] if isinstance(tools, list) else []
        kept = self._kept_reasoning(messages, thinking, bool(tool_texts), anthropic=False)
        builder = _Builder(self.encode)
        builder.arguments_as_text = gathered
        index = 0
        builder.mark()
        if gathered:
            texts = [
                _joined_text(m.get("content"))[0]
                for m in messages
                if _role(m) in ("system", "developer")
            ]
            if texts:
                builder.system("\n\n".join(texts))
        while index < len(messages) and _role(messages[index]) in ("system", "developer"):
            if not gathered:
                builder.system(_joined_text(messages[index].get("content"))[0])
            index += 1
        builder.mark()
        builder.tools(tool_texts)
        prefix = self._chat_messages(builder, messages, index, kept, thinking, gathered=gathered)
        return builder.finish(thinking=thinking, prefix=prefix)

    def _chat_messages(
        self,
        builder: _Builder,
        messages: Sequence[Any],
        start: int,
        kept: frozenset[int],
        thinking: bool,
        *,
        gathered: bool,
    ) -> bool:
        """Render ``messages[start:]`` into ``builder``; whether the last is a chat prefix."""
        prefix = False
        for position in range(start, len(messages)):
            builder.mark()
            message = messages[position]
            if not isinstance(message, Mapping):
                builder.user_text(_json_text(message))
                continue
            role = message.get("role")
            if role in ("system", "developer"):
                if not gathered:  # V3 gathered it into the leading system prompt
                    builder.system(_joined_text(message.get("content"))[0])
            elif role == "assistant":
                text, _ = _joined_text(message.get("content"))
                reasoning = message.get("reasoning_content")
                reasoning = reasoning if isinstance(reasoning, str) else ""
                if message.get("prefix") is True and position == len(messages) - 1:
                    builder.prefix_assistant(reasoning=reasoning, content=text, thinking=thinking)
                    prefix = True
                else:
                    builder.assistant(
                        reasoning=reasoning,
                        content=text,
                        calls=_chat_calls(message.get("tool_calls")),
                        keep_reasoning=position in kept,
                    )
            elif role == "tool":
                builder.tool_result(_result_parts(message.get("content")))
            elif role == "latest_reminder":
                builder.reminder(_joined_text(message.get("content"))[0])
            else:
                _user_content(builder, message.get("content"))
        return prefix

    def _resume_chat(
        self,
        messages: Sequence[Any],
        previous: RenderedPrompt,
        count: int,
        thinking: bool,
        tools: Any,
    ) -> RenderedPrompt:
        leading = 0
        while leading < len(messages) and _role(messages[leading]) in ("system", "developer"):
            leading += 1
        start = leading + count
        builder = _Builder(self.encode)
        builder.resume(previous)
        rest = messages[start:]
        kept = frozenset(
            start + i
            for i in self._kept_reasoning(
                rest, thinking, isinstance(tools, list) and bool(tools), anthropic=False
            )
        )
        prefix = self._chat_messages(builder, messages, start, kept, thinking, gathered=False)
        return builder.finish(thinking=thinking, prefix=prefix)

    def _chat_tool_text(self, tool: Any) -> str:
        if isinstance(tool, Mapping) and isinstance(tool.get("function"), Mapping):
            function = tool["function"]
            return _schema_text(
                _normal_tool(function.get("name"), function, function.get("parameters"))
            )
        return _schema_text(tool)

    # -- anthropic messages -----------------------------------------------------------------

    def render_anthropic(
        self,
        body: Mapping[str, Any],
        *,
        thinking: bool | None = None,
        template: ChatTemplate = "deepseek-v4",
    ) -> RenderedPrompt:
        """Render an Anthropic messages body (``system``, ``messages``, ``tools``) to tokens.

        The same conversation renders to the same tokens as its chat-completions form.
        """
        if thinking is None:
            thinking = default_thinking(body)
        tools = body.get("tools")
        tool_texts = (
            [self._anthropic_tool_text(t) for t in tools] if isinstance(tools, list) else []
        )
        builder = _Builder(self.encode)
        builder.arguments_as_text = template == "deepseek-v3"
        builder.mark()
        system = body.get("system")
        if system is not None:
            builder.system(_joined_text(system)[0])
        builder.mark()
        builder.tools(tool_texts)
        messages = body.get("messages")
        messages = messages if isinstance(messages, list) else []
        kept = self._kept_reasoning(messages, thinking, bool(tool_texts), anthropic=True)
        for position, message in enumerate(messages):
            builder.mark()
            if not isinstance(message, Mapping):
                builder.user_text(_json_text(message))
            elif message.get("role") == "assistant":
                self._anthropic_assistant(builder, message.get("content"), position in kept)
            else:
                _user_content(builder, message.get("content"))
        return builder.finish(thinking=thinking, prefix=False)

    def _anthropic_tool_text(self, tool: Any) -> str:
        if isinstance(tool, Mapping) and "input_schema" in tool:
            return _schema_text(_normal_tool(tool.get("name"), tool, tool.get("input_schema")))
        return _schema_text(tool)

    @staticmethod
    def _anthropic_assistant(builder: _Builder, content: Any, keep_reasoning: bool) -> None:
        reasoning, text, calls = _anthropic_reply_parts(content)
        builder.assistant(
            reasoning=reasoning, content=text, calls=calls, keep_reasoning=keep_reasoning
        )

    # -- replies ----------------------------------------------------------------------------

    def render_completion(
        self,
        *,
        reasoning: str = "",
        content: str = "",
        tool_calls: Sequence[ToolCallSpec] = (),
        thinking: bool,
    ) -> RenderedCompletion:
        """Render a reply as the tokens that follow the prompt's generation prefix.

        Thinking: ``{reasoning}</think>{content}{tool calls}<｜end▁of▁sentence｜>``; otherwise
        the same without the reasoning part. ``tool_calls`` are ``(name, arguments)`` pairs:
        pass what the client will send back — the arguments string on the chat endpoint, the
        parsed ``input`` object on the Anthropic one — so the reply renders as the next
        request's history will.
        """
        builder = _Builder(self.encode)
        builder.out.clear()
        reasoning_tokens = 0
        if thinking:
            builder.text(reasoning)
            reasoning_tokens = len(builder.out)
            builder.out.append(END_THINK)
        builder.text(content)
        builder.tool_calls(tool_calls)
        builder.out.append(EOS)
        return RenderedCompletion(
            tokens=tuple(builder.out), reasoning_tokens=reasoning_tokens, thinking=thinking
        )

    def render_chat_completion(
        self, message: Mapping[str, Any], *, thinking: bool
    ) -> RenderedCompletion:
        """Render a chat-completions response ``message`` (content, reasoning, tool calls)."""
        reasoning = message.get("reasoning_content")
        return self.render_completion(
            reasoning=reasoning if isinstance(reasoning, str) else "",
            content=_joined_text(message.get("content"))[0],
            tool_calls=_chat_calls(message.get("tool_calls")),
            thinking=thinking,
        )

    def render_anthropic_completion(self, content: Any, *, thinking: bool) -> RenderedCompletion:
        """Render an Anthropic response's ``content`` blocks (thinking, text, tool_use)."""
        reasoning, text, calls = _anthropic_reply_parts(content)
        return self.render_completion(
            reasoning=reasoning, content=text, tool_calls=calls, thinking=thinking
        )


def _user_content(builder: _Builder, content: Any) -> None:
    """A user message's content in order: adjacent text parts joined, then each other part."""
    if not isinstance(content, list):
        builder.user_text(_joined_text(content)[0])
        return
    if not content:
        builder.user_text("")
        return
    texts: list[str] = []
    for part in content:
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind == "text":
            texts.append(str(part.get("text", "")))
            continue
        if texts:
            builder.user_text("".join(texts))
            texts.clear()
        if kind == "tool_result":
            builder.tool_result(_result_parts(part.get("content")))
        elif kind in ("image", "image_url"):
            builder.image(_image_source(part))
        else:
            builder.user_text(_json_text(part))
    if texts:
        builder.user_text("".join(texts))


def _role(message: Any) -> Any:
    return message.get("role") if isinstance(message, Mapping) else None


def _normal_tool(name: Any, spec: Mapping[str, Any], parameters: Any) -> dict[str, Any]:
    """The shape-neutral tool definition both wire shapes render to."""
    tool: dict[str, Any] = {"name": name}
    if "description" in spec:
        tool["description"] = spec["description"]
    if parameters is not None:
        tool["parameters"] = parameters
    return tool


def _chat_calls(tool_calls: Any) -> list[ToolCallSpec]:
    calls: list[ToolCallSpec] = []
    if not isinstance(tool_calls, list):
        return calls
    for call in tool_calls:
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            arguments = function.get("arguments", "")
            calls.append(
                (
                    str(function.get("name", "")),
                    arguments if isinstance(arguments, str) else _json_text(arguments),
                )
            )
        else:
            calls.append(("", _json_text(call)))
    return calls


def _result_parts(content: Any) -> list[tuple[str, str]]:
    """A tool result's content as ``("text", …)`` / ``("image", source)`` parts in order."""
    if content is None:
        return []
    if isinstance(content, str):
        return [("text", content)]
    parts: list[tuple[str, str]] = []
    texts: list[str] = []
    for part in content if isinstance(content, list) else [content]:
        if isinstance(part, Mapping) and part.get("type") == "text":
            texts.append(str(part.get("text", "")))
            continue
        if texts:
            parts.append(("text", "".join(texts)))
            texts = []
        if isinstance(part, Mapping) and _is_image(part):
            parts.append(("image", _image_source(part)))
        else:
            parts.append(("text", _json_text(part)))
    if texts:
        parts.append(("text", "".join(texts)))
    return parts


def _anthropic_reply_parts(content: Any) -> tuple[str, str, list[ToolCallSpec]]:
    """``(reasoning, text, tool calls)`` of an Anthropic assistant content value."""
    if not isinstance(content, list):
        return "", _joined_text(content)[0], []
    reasoning: list[str] = []
    texts: list[str] = []
    calls: list[ToolCallSpec] = []
    for block in content:
        if not isinstance(block, Mapping):
            texts.append(_json_text(block))
            continue
        kind = block.get("type")
        if kind == "thinking":
            reasoning.append(str(block.get("thinking", "")))
        elif kind == "redacted_thinking":
            continue
        elif kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "tool_use":
            tool_input = block.get("input")
            calls.append(
                (
                    str(block.get("name", "")),
                    tool_input if isinstance(tool_input, Mapping | str) else _json_text(tool_input),
                )
            )
        else:
            texts.append(_json_text(block))
    return "".join(reasoning), "".join(texts), calls
