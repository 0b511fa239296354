"""The one wire view of a chat request: what the provider's prompt is made of.

A request body (Chat Completions or the Anthropic Messages shape), a logged
:class:`~dsh_core.GenerateOptions` or a trace exchange all come to one :class:`WireView`: the
parameters, the leading system texts, the tools, and the messages after them, with the index
each message has in the body it came from. Every part of the testkit that compares requests
reads this view: the cache doctor, the prefix assertions, the wire goldens and the cassette
mismatch wording (``_diff.py``), so a list-valued system message or an Anthropic ``system``
field means the same thing everywhere.

What the view keeps follows what DeepSeek's chat template renders (docs/wire.md §1.4,
docs/fidelity.md "The rules"):

- the system prompt is the text of the leading ``system`` (or ``developer``) messages, each
  message's text parts joined as the template joins them (with ``""``);
- a tool renders as its name, description and parameters (:func:`rendered_tool`): fields such
  as ``strict`` or ``type: "function"`` never reach the prompt, and the chat and Anthropic
  shapes of one tool render alike;
- a tool call's arguments render by value, one parameter per argument
  (:func:`rendered_arguments`), so ``{"q": "x"}`` and ``{"q":"x"}`` are one prompt;
- parameters split into those in the cache key (the serving model, ``user_id``), the one that
  changes the rendering (thinking mode, decided by the providers' one rule) and the rest,
  which never reach the prompt (:data:`CACHE_KEY_PARAMS`).

:meth:`WireView.parts` gives the prompt as comparable components (system, tools, then each
message), so the longest common prefix of two requests' parts is the part of the prompt a
prefix cache could share.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from dsh_core import GenerateOptions, ToolsPlaceholder
from dsh_core.providers import resolve_model, thinking_enabled
from dsh_core.providers._models import Endpoint, cache_model

__all__ = [
    "CACHE_KEY_PARAMS",
    "WireView",
    "canonical_json",
    "common_prefix",
    "content_text",
    "rendered_arguments",
    "rendered_tool",
    "tool_ids_renamed",
    "tool_name",
    "wire_view",
    "wire_view_of_options",
]


CACHE_KEY_PARAMS: Final = ("model", "user_id", "user")
"""Request fields the prefix cache is keyed by (docs/wire.md §2.1, docs/fidelity.md "Cache
key"): the serving model and the end user. A prompt cached under one key never hits under
another. (Anthropic's ``metadata.user_id`` is read as ``user_id``.)"""

_SYSTEM_ROLES: Final = ("system", "developer")

_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"))


def tool_ids_renamed(body: Any, rename: Callable[[str], str]) -> Any:
    """``body`` with every tool-call id replaced by ``rename(id)`` — the chat format's
    ``tool_calls[].id`` and ``tool_call_id``, Anthropic's ``tool_use`` ``id`` and
    ``tool_result`` ``tool_use_id`` — so ids the model makes up anew on every run can be told
    apart from what an agent sent. The messages are copied; ``body`` is not changed."""
    messages = body.get("messages") if isinstance(body, Mapping) else None
    if not isinstance(messages, list):
        return body

    def renamed(value: Any) -> Any:
        return rename(value) if isinstance(value, str) else value

    def block(item: Any) -> Any:
        if isinstance(item, Mapping) and item.get("type") == "tool_use" and "id" in item:
            return {**item, "id": renamed(item["id"])}
        if (
            isinstance(item, Mapping)
            and item.get("type") == "tool_result"
            and "tool_use_id" in item
        ):
            return {**item, "tool_use_id": renamed(item["tool_use_id"])}
        return item

    out = []
    for message in messages:
        if isinstance(message, Mapping):
            message = dict(message)
            if "tool_call_id" in message:
                message["tool_call_id"] = renamed(message["tool_call_id"])
            if isinstance(message.get("tool_calls"), list):
                message["tool_calls"] = [
                    {**call, "id": renamed(call.get("id"))} if isinstance(call, Mapping) else call
                    for call in message["tool_calls"]
                ]
            if isinstance(message.get("content"), list):
                message["content"] = [block(item) for item in message["content"]]
        out.append(message)
    return {**body, "messages": out}


def canonical_json(value: Any) -> str:
    """Compact JSON with sorted keys: equal values give equal text."""
    return _ENCODER.encode(value)


def content_text(content: Any) -> str:
    """The text of a message's content as the template joins it: text parts with ``""``.

    Non-text parts (images, tool results inside Anthropic content) are written as compact JSON
    so that a change in them still shows; ``None`` is empty.
    """
    if isinstance(content, str):
        return content
    if content is None:
        return ""
    if isinstance(content, list):
        out: list[str] = []
        for part in content:
            if isinstance(part, Mapping) and isinstance(part.get("text"), str):
                out.append(part["text"])
            elif isinstance(part, str):
                out.append(part)
            else:
                out.append(canonical_json(part))
        return "".join(out)
    return canonical_json(content)


def tool_name(tool: Any) -> str:
    """A tool definition's name in either shape (its JSON when it has none)."""
    if isinstance(tool, Mapping):
        function = tool.get("function")
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            return str(function["name"])
        if isinstance(tool.get("name"), str):
            return str(tool["name"])
    return canonical_json(tool)[:60]


def rendered_tool(tool: Any) -> dict[str, Any]:
    """The part of a tool definition the chat template renders: name, description, parameters.

    A chat tool (``{"type": "function", "function": {...}}``) and an Anthropic tool
    (``{"name", "description", "input_schema"}``) of one schema render alike; anything else in
    the definition (``strict``, ``cache_control``, ``type``) is not part of the prompt.
    """
    if isinstance(tool, Mapping):
        spec: Mapping[str, Any] = tool
        parameters: Any = None
        if isinstance(tool.get("function"), Mapping):
            spec = tool["function"]
            parameters = spec.get("parameters")
        elif "input_schema" in tool:
            parameters = tool.get("input_schema")
        else:
            parameters = tool.get("parameters")
        out: dict[str, Any] = {"name": spec.get("name")}
        if "description" in spec:
            out["description"] = spec["description"]
        if parameters is not None:
            out["parameters"] = parameters
        return out
    return {"name": None, "value": tool}


def rendered_arguments(arguments: Any) -> tuple[tuple[str, str], ...]:
    """A tool call's arguments as the template renders them: ``(name, value)`` per argument.

    A JSON object renders one parameter per key, in order, strings as they are and any other
    value as JSON; so spacing and escapes in the client's JSON text never reach the prompt, but
    key order does. Text that is not a JSON object (an empty string among them) renders as one
    ``arguments`` parameter holding the raw text.
    """
    parsed: Any = arguments
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except ValueError:
            return (("arguments", arguments),)
    if not isinstance(parsed, Mapping):
        return (("arguments", arguments if isinstance(arguments, str) else canonical_json(parsed)),)
    return tuple(
        (str(k), v if isinstance(v, str) else json.dumps(v, ensure_ascii=False))
        for k, v in parsed.items()
    )


def _thinking(params: Mapping[str, Any], endpoint: Endpoint) -> bool:
    model = params.get("model")
    thinking = params.get("thinking")
    kind = thinking.get("type") if isinstance(thinking, Mapping) else None
    effort: Any = params.get("reasoning_effort")
    reasoning = params.get("reasoning")
    if effort is None and isinstance(reasoning, Mapping):
        effort = reasoning.get("effort")
    return thinking_enabled(
        resolve_model(model, endpoint=endpoint) if isinstance(model, str) else None,
        thinking_type=kind if isinstance(kind, str) else None,
        effort=effort if isinstance(effort, str) else None,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class WireView:
    """One chat request as the provider reads it (see the module docstring)."""

    endpoint: Endpoint = "chat"
    params: Mapping[str, Any] = field(default_factory=dict)
    """Every request field except the system prompt, tools and messages."""
    system: tuple[str, ...] = ()
    """The text of each leading system message (or of the Anthropic ``system`` field)."""
    tools: tuple[Any, ...] | str | None = None
    """Tool definitions in request order; a placeholder text in normalized logs; ``None``
    when the request offers none."""
    messages: tuple[Any, ...] = ()
    """The messages after the leading system messages, as JSON."""
    message_offset: int = 0
    """How many entries of the body's ``messages`` precede ``messages[0]`` here (the leading
    system messages): add it to an index of :attr:`messages` to get the body's own index."""
    _parts: list[tuple[str, ...]] = field(
        default_factory=list, init=False, repr=False, compare=False
    )
    _tools_text: list[str] = field(default_factory=list, init=False, repr=False, compare=False)
    _thinking: list[bool] = field(default_factory=list, init=False, repr=False, compare=False)
    _cache_key: list[tuple[str | None, str | None]] = field(
        default_factory=list, init=False, repr=False, compare=False
    )

    @property
    def system_text(self) -> str:
        """The system prompt as one text (several system messages one a line), for diffs."""
        return "\n".join(self.system)

    @property
    def thinking(self) -> bool:
        """Whether the request runs in thinking mode (the providers' one rule)."""
        if not self._thinking:  # asked of each request several times by the doctor: once
            self._thinking.append(_thinking(self.params, self.endpoint))
        return self._thinking[0]

    @property
    def model(self) -> str | None:
        model = self.params.get("model")
        return model if isinstance(model, str) else None

    def cache_key(self) -> tuple[str | None, str | None]:
        """``(serving model, end user)``: requests under different keys share no cache.

        The serving model is the end of the model's alias chain (``dsh_core.providers._models.cache_model``): aliases of
        one model (``deepseek-chat``, ``deepseek-reasoner``, ``deepseek-v4-flash``) share its
        units (docs/fidelity.md, "Cache key").
        """
        if self._cache_key:  # asked of a request as a child and again as a parent: once
            return self._cache_key[0]
        model = self.model
        info = resolve_model(model, endpoint=self.endpoint) if model is not None else None
        served = cache_model(info.id) if info is not None else model
        user = self.params.get("user_id", self.params.get("user"))
        metadata = self.params.get("metadata")
        if user is None and isinstance(metadata, Mapping):
            user = metadata.get("user_id")
        key = served, None if user is None else str(user)
        self._cache_key.append(key)
        return key

    def rendered_tools(self) -> str:
        """The tools as the template renders them (compact JSON of :func:`rendered_tool` each)."""
        if self.tools is None:
            return ""
        if isinstance(self.tools, str):
            return self.tools
        if not self._tools_text:  # each child compares its tools with its parent's: once each
            self._tools_text.append(canonical_json([rendered_tool(t) for t in self.tools]))
        return self._tools_text[0]

    def parts(self, memo: dict[int, tuple[Any, str]] | None = None) -> tuple[str, ...]:
        """The prompt as comparable components: system, tools, then each message.

        The system texts and the rendered tools are compared as the template renders them;
        each message as its compact JSON with sorted keys. The longest common prefix of two
        requests' parts is what a prefix cache could share between them (memoized). ``memo``
        (message id → ``(message, text)``) lets requests that share their history's message
        objects encode each message once.
        """
        if not self._parts:
            if memo is None:
                texts = tuple(canonical_json(m) for m in self.messages)
            else:
                out = []
                for message in self.messages:
                    found = memo.get(id(message))
                    if found is None or found[0] is not message:
                        found = memo[id(message)] = (message, canonical_json(message))
                    out.append(found[1])
                texts = tuple(out)
            self._parts.append(("\x1e".join(self.system), self.rendered_tools(), *texts))
        return self._parts[0]

    def wire_index(self, position: int) -> int:
        """The body's own index of :attr:`messages` ``[position]``."""
        return position + self.message_offset


def wire_view(body: Any, *, endpoint: Endpoint | None = None) -> WireView | None:
    """A request body (parsed JSON, or its text or bytes) as a :class:`WireView`.

    ``endpoint`` is detected when not given: a top-level ``system`` field or Anthropic content
    blocks mean the Messages shape. ``None`` when the body is not a chat request (no
    ``messages`` list).
    """
    if isinstance(body, (bytes, str)):
        try:
            body = json.loads(body)
        except ValueError:
            return None
    if not isinstance(body, Mapping) or not isinstance(body.get("messages"), list):
        return None
    if endpoint is None:
        endpoint = "anthropic" if _looks_anthropic(body) else "chat"
    messages = list(body["messages"])
    system: list[str] = []
    if "system" in body and body["system"] is not None:
        system.append(content_text(body["system"]))
    offset = 0
    while (
        offset < len(messages)
        and isinstance(messages[offset], Mapping)
        and messages[offset].get("role") in _SYSTEM_ROLES
    ):
        system.append(content_text(messages[offset].get("content")))
        offset += 1
    tools = body.get("tools")
    return WireView(
        endpoint=endpoint,
        params={k: v for k, v in body.items() if k not in ("messages", "system", "tools")},
        system=tuple(system),
        tools=tuple(tools) if isinstance(tools, list) and tools else None,
        messages=tuple(messages[offset:]),
        message_offset=offset,
    )


def _looks_anthropic(body: Mapping[str, Any]) -> bool:
    if "system" in body:
        return True
    for message in body.get("messages") or ():
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, list) and any(
            isinstance(b, Mapping) and b.get("type") in ("tool_use", "tool_result", "thinking")
            for b in content
        ):
            return True
    return False


def wire_view_of_options(options: GenerateOptions) -> WireView:
    """A logged :class:`~dsh_core.GenerateOptions` as a :class:`WireView` (ids and sources
    dropped: they never reach the wire). Message indexes are those of ``options.messages``."""
    tools: tuple[Any, ...] | str | None
    if options.tools is None or (
        not isinstance(options.tools, ToolsPlaceholder) and not options.tools
    ):
        tools = None
    elif isinstance(options.tools, ToolsPlaceholder):
        placeholder = options.tools.to_json()
        tools = placeholder if isinstance(placeholder, str) else canonical_json(placeholder)
    else:
        tools = tuple(t.to_json() for t in options.tools)
    messages = []
    for message in options.messages:
        as_json = dict(message.to_json())
        as_json.pop("id", None)
        as_json.pop("source", None)
        messages.append(as_json)
    return WireView(
        endpoint="anthropic" if options.provider == "anthropic" else "chat",
        params=dict(options.config.to_json()),
        system=() if options.system is None else (options.system,),
        tools=tools,
        messages=tuple(messages),
    )


def common_prefix(a: Sequence[Any], b: Sequence[Any]) -> int:
    """How many leading items two sequences share."""
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n
