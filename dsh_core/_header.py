"""The request header: everything a request carries besides its messages (its delta codec is
``_header_delta.py``).

An :class:`EpochHeader` (call config, rendered system prompt, tool schemas, an optional
request-only message prefix) is logged session state. Snapshots (``request/header``) anchor the fold; deltas (``request/header-delta``) amend it:
:class:`SystemDelta` trims a common line prefix and suffix, :class:`ToolsDelta` is name-keyed and
also records where added tools go and any reordering of kept tools, so every pair of valid headers
round-trips (the reference harness appended added tools at the end and fell back to a full
snapshot for any mid-list insertion or reorder). The config and the message prefix are replaced
whole.

Normalized logs (the reference harness's snapshot fixtures) elide content behind placeholders:
``"{{system}}"``, tools as ``"{{tools}}"`` or as a list of tool names (:class:`ToolsPlaceholder`),
prefix messages as ``"{{messagePrefix}}"``. They are kept and compared by value; filling them is
:class:`dsh_core.Sidecars`' job.

The writer (:func:`plan_header_event`) never trusts its encoder: a delta is written only after
applying it to the previous header is verified to reproduce the new one; otherwise it writes a
``fallback`` snapshot, so a well-formed log always folds.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from ._errors import DshError, HeaderError, JsonValueError
from ._json import FrozenDict, freeze_json, json_kind
from ._json_text import dumps_canonical
from ._messages import Message

__all__ = [
    "EpochHeader",
    "LlmCallConfig",
    "PrefixEntry",
    "ToolSchema",
    "ToolsPlaceholder",
    "canonical_header",
    "check_adapter_defaults",
    "check_keys",
    "check_unique_tools",
    "header_equals",
    "is_non_empty_str",
    "is_placeholder",
    "json_object",
    "prefix_entry",
    "prefix_from_json",
    "prefix_to_json",
    "tools_from_json",
]

_PLACEHOLDER = re.compile(r"^\{\{[A-Za-z0-9_.:-]+\}\}$")


def is_placeholder(value: object) -> bool:
    """Whether ``value`` is a placeholder token such as ``"{{system}}"`` (a normalized log's)."""
    return isinstance(value, str) and bool(_PLACEHOLDER.match(value))


def is_non_empty_str(value: object) -> bool:
    return isinstance(value, str) and bool(value)


def json_object(value: object, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise HeaderError(f"{what} must be a JSON object, got {json_kind(value)}")
    return value


def check_keys(obj: Mapping[str, Any], allowed: Iterable[str], what: str) -> None:
    extra = set(obj) - set(allowed)
    if extra:
        raise HeaderError(f"{what} has unknown keys {sorted(extra)}")


@dataclass(frozen=True, slots=True, kw_only=True)
class LlmCallConfig:
    """The call configuration of a conversation: the model and its sampling scalars."""

    provider: str
    """Which provider adapter serves the call, e.g. ``deepseek``."""
    model: str
    reasoning_effort: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] | None = None
    """``None`` (absent) and ``()`` are different values, as on the wire."""

    def __post_init__(self) -> None:
        if not is_non_empty_str(self.provider) or not is_non_empty_str(self.model):
            raise HeaderError(
                f"a call config needs a non-empty provider and model, got {self.provider!r}, "
                f"{self.model!r}"
            )
        if self.reasoning_effort is not None and not is_non_empty_str(self.reasoning_effort):
            raise HeaderError(
                f"reasoningEffort must be a non-empty string when present, got {self.reasoning_effort!r}"
            )
        if self.temperature is not None and (
            isinstance(self.temperature, bool)
            or not isinstance(self.temperature, (int, float))
            or not math.isfinite(self.temperature)
        ):
            raise HeaderError(f"temperature must be a finite number, got {self.temperature!r}")
        if self.max_tokens is not None and (
            isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int)
        ):
            raise HeaderError(f"maxTokens must be an integer, got {self.max_tokens!r}")
        if self.stop is not None:
            if isinstance(self.stop, str):
                raise HeaderError("stop must be a sequence of strings, not one string")
            if not isinstance(self.stop, tuple):
                object.__setattr__(self, "stop", tuple(self.stop))
            if not all(isinstance(s, str) for s in self.stop):
                raise HeaderError(f"stop must hold strings only, got {self.stop!r}")

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"provider": self.provider, "model": self.model}
        if self.reasoning_effort is not None:
            out["reasoningEffort"] = self.reasoning_effort
        if self.temperature is not None:
            out["temperature"] = self.temperature
        if self.max_tokens is not None:
            out["maxTokens"] = self.max_tokens
        if self.stop is not None:
            out["stop"] = list(self.stop)
        return out

    @classmethod
    def from_json(cls, obj: object) -> LlmCallConfig:
        o = json_object(obj, "config")
        check_keys(
            o,
            ("provider", "model", "reasoningEffort", "temperature", "maxTokens", "stop"),
            "config",
        )
        provider, model = o.get("provider"), o.get("model")
        if not isinstance(provider, str) or not isinstance(model, str):
            raise HeaderError("config lacks provider/model")
        effort = o.get("reasoningEffort")
        if effort is not None and not isinstance(effort, str):
            raise HeaderError(f"config.reasoningEffort must be a string, got {effort!r}")
        temperature = o.get("temperature")
        if temperature is not None and (
            isinstance(temperature, bool) or not isinstance(temperature, (int, float))
        ):
            raise HeaderError(f"config.temperature must be a number, got {temperature!r}")
        max_tokens = o.get("maxTokens")
        if max_tokens is not None and (
            isinstance(max_tokens, bool) or not isinstance(max_tokens, int)
        ):
            raise HeaderError(f"config.maxTokens must be an integer, got {max_tokens!r}")
        stop = o.get("stop")
        if stop is not None and (
            not isinstance(stop, list) or not all(isinstance(s, str) for s in stop)
        ):
            raise HeaderError(f"config.stop must be an array of strings, got {stop!r}")
        return cls(
            provider=provider,
            model=model,
            reasoning_effort=effort,
            temperature=temperature,
            max_tokens=max_tokens,
            stop=tuple(stop) if stop is not None else None,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolSchema:
    """A tool as the model sees it: name, description, JSON Schema of its arguments."""

    name: str
    description: str
    parameters: FrozenDict
    """JSON Schema of the arguments (frozen; its key order is part of what the model sees)."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise HeaderError(f"a tool needs a non-empty name, got {self.name!r}")
        if not isinstance(self.description, str):
            raise HeaderError(f"tool {self.name!r}: description must be a string")
        if not isinstance(self.parameters, Mapping):
            raise HeaderError(f"tool {self.name!r}: parameters must be a JSON Schema object")
        if type(self.parameters) is not FrozenDict:
            try:
                frozen = freeze_json(dict(self.parameters), path="parameters")
            except JsonValueError as exc:
                raise HeaderError(f"tool {self.name!r}: {exc}") from exc
            object.__setattr__(self, "parameters", frozen)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    @classmethod
    def from_json(cls, obj: object) -> ToolSchema:
        o = json_object(obj, "tool")
        check_keys(o, ("name", "description", "parameters"), "tool")
        name, description, parameters = o.get("name"), o.get("description", ""), o.get("parameters")
        if not isinstance(name, str):
            raise HeaderError(f"tool name must be a string, got {name!r}")
        if not isinstance(description, str):
            raise HeaderError(f"tool {name!r}: description must be a string")
        if not isinstance(parameters, Mapping):
            raise HeaderError(f"tool {name!r}: parameters must be a JSON Schema object")
        return cls(name=name, description=description, parameters=parameters)  # type: ignore[arg-type]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolsPlaceholder:
    """Tool schemas a normalized log elided; exactly one of ``token`` and ``names`` is set.

    - ``token``: one opaque placeholder for the whole list (``"{{tools}}"``);
    - ``names``: the tool names in the order the model saw them, schemas elided (the reference
      harness's ``"tools": ["job_list", …]``). A change of tool set or order stays visible.

    A request with placeholder tools can be rebuilt and compared, but not sent: a provider
    needs the schemas (fill them with :class:`dsh_core.Sidecars`).
    """

    token: str | None = None
    """The placeholder text, e.g. ``"{{tools}}"``."""
    names: tuple[str, ...] | None = None
    """The tool names in order (non-empty, unique)."""

    def __post_init__(self) -> None:
        if (self.token is None) == (self.names is None):
            raise HeaderError("a tools placeholder has either a token or a list of names")
        if self.token is not None and not is_placeholder(self.token):
            raise HeaderError(
                f"header tools must be an array of tool schemas, got the string {self.token[:40]!r}"
            )
        if self.names is not None:
            if not isinstance(self.names, tuple):
                object.__setattr__(self, "names", tuple(self.names))
            assert self.names is not None
            if not self.names or not all(isinstance(n, str) and n for n in self.names):
                raise HeaderError(
                    f"a tool-name list needs non-empty names, got {list(self.names)!r}"
                )
            if len(set(self.names)) != len(self.names):
                dup = next(n for n in self.names if self.names.count(n) > 1)
                raise HeaderError(
                    f"duplicate tool name {dup!r} in one header: a model cannot tell them apart"
                )

    def to_json(self) -> str | list[str]:
        """``"{{tools}}"`` or ``["name", …]``, as the log writes it."""
        return self.token if self.token is not None else list(self.names or ())

    def describe(self) -> str:
        """``the placeholder '{{tools}}'`` or ``the tool names ['a', 'b'] (schemas elided)``."""
        if self.token is not None:
            return f"the placeholder {self.token!r}"
        return f"the tool names {list(self.names or ())} (schemas elided)"

    @classmethod
    def of(cls, value: str | Sequence[str]) -> ToolsPlaceholder:
        """A token (a string) or a names list (a sequence of strings)."""
        if isinstance(value, str):
            return cls(token=value)
        return cls(names=tuple(value))


PrefixEntry: TypeAlias = "Message | str"
"""One message of a header's message prefix, or a placeholder token (``"{{messagePrefix}}"``)
standing for one elided message."""


def prefix_entry(value: object, index: int) -> Message | str:
    if isinstance(value, Message):
        return value
    if isinstance(value, str):
        if not is_placeholder(value):
            raise HeaderError(
                f"messagePrefix[{index}] must be a message or a placeholder such as "
                f"'{{{{messagePrefix}}}}', got the string {value[:40]!r}"
            )
        return value
    try:
        return Message.from_json(value)
    except DshError as exc:
        raise HeaderError(f"messagePrefix[{index}] is not a message: {exc}") from exc


def prefix_from_json(value: object) -> tuple[Message | str, ...]:
    if not isinstance(value, (list, tuple)):
        raise HeaderError(
            f"header messagePrefix must be an array of messages, got {json_kind(value)}"
        )
    return tuple(prefix_entry(v, i) for i, v in enumerate(value))


def prefix_to_json(prefix: Sequence[Message | str]) -> list[Any]:
    """A message prefix as the log writes it: messages as JSON, placeholders as strings."""
    return [m if isinstance(m, str) else m.to_json() for m in prefix]


def check_unique_tools(tools: Sequence[ToolSchema]) -> None:
    seen: set[str] = set()
    for tool in tools:
        if tool.name in seen:
            raise HeaderError(
                f"duplicate tool name {tool.name!r} in one header: a model cannot tell them apart"
            )
        seen.add(tool.name)


_ADAPTER_DEFAULT_FIELDS = {"reasoningEffort": "reasoning_effort", "maxTokens": "max_tokens"}


def check_adapter_defaults(value: object, config: LlmCallConfig | None = None) -> FrozenDict:
    """``adapterDefaults`` as the reference harness defines it: markers that are exactly ``true``,
    only for ``reasoningEffort`` / ``maxTokens``, and only for fields the config has."""
    if not isinstance(value, Mapping):
        raise HeaderError(f"header has invalid adapterDefaults: {value!r} is not an object")
    for key, marker in value.items():
        if key not in _ADAPTER_DEFAULT_FIELDS or marker is not True:
            raise HeaderError(
                f"header has invalid adapterDefaults: {key!r}: {marker!r} "
                "(allowed: reasoningEffort/maxTokens set to true)"
            )
        if config is not None and getattr(config, _ADAPTER_DEFAULT_FIELDS[key]) is None:
            raise HeaderError(
                f"header has invalid adapterDefaults: {key} is marked but the config has no {key}"
            )
    return value if isinstance(value, FrozenDict) else FrozenDict(dict(value))


@dataclass(frozen=True, slots=True, kw_only=True)
class EpochHeader:
    """Everything a request contains besides the messages."""

    config: LlmCallConfig
    adapter_defaults: FrozenDict | None = None
    """``{reasoningEffort?: true, maxTokens?: true}``: config fields the provider adapter filled in
    rather than the caller (the reference harness's current headers carry it). Empty ≡ absent."""
    system: str | None = None
    """The rendered system prompt; ``''`` is equivalent to absent (see :func:`canonical_header`)."""
    tools: tuple[ToolSchema, ...] | ToolsPlaceholder | None = None
    """Tool schemas in the order the model sees them, or a :class:`ToolsPlaceholder` (the
    reference harness's normalized logs), compared by value. A placeholder string given here
    (``"{{tools}}"``) becomes a token placeholder."""
    message_prefix: tuple[Message | str, ...] = ()
    """Request-only messages placed before the derived history in every request of this header
    epoch (right after the system prompt); message derivation never returns them, so the header
    is their only record. Placeholder strings stand for elided messages. Empty ≡ absent."""
    _text: list[str] = field(default_factory=list, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.adapter_defaults is not None:
            object.__setattr__(
                self,
                "adapter_defaults",
                check_adapter_defaults(self.adapter_defaults, self.config),
            )
        if self.system is not None and not isinstance(self.system, str):
            raise HeaderError(f"header system must be a string, got {json_kind(self.system)}")
        if not isinstance(self.message_prefix, tuple) or not all(
            isinstance(m, (Message, str)) for m in self.message_prefix
        ):
            object.__setattr__(self, "message_prefix", prefix_from_json(self.message_prefix))
        else:
            for i, entry in enumerate(self.message_prefix):
                prefix_entry(entry, i)
        if isinstance(self.tools, str):
            object.__setattr__(self, "tools", ToolsPlaceholder(token=self.tools))
        elif isinstance(self.tools, ToolsPlaceholder):
            pass
        elif self.tools is not None:
            if not isinstance(self.tools, tuple) or not all(
                isinstance(t, ToolSchema) for t in self.tools
            ):
                object.__setattr__(
                    self,
                    "tools",
                    tuple(
                        t if isinstance(t, ToolSchema) else ToolSchema.from_json(t)
                        for t in self.tools
                    ),
                )
            check_unique_tools(self.tools)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"config": self.config.to_json()}
        if self.adapter_defaults is not None:
            out["adapterDefaults"] = self.adapter_defaults
        if self.system is not None:
            out["system"] = self.system
        if self.tools is not None:
            out["tools"] = (
                self.tools.to_json()
                if isinstance(self.tools, ToolsPlaceholder)
                else [t.to_json() for t in self.tools]
            )
        if self.message_prefix:
            out["messagePrefix"] = prefix_to_json(self.message_prefix)
        return out

    def canonical_text(self) -> str:
        """Compact JSON of the canonical form; equal texts ⟺ equal headers (order-sensitive)."""
        if not self._text:
            self._text.append(dumps_canonical(canonical_header(self).to_json()))
        return self._text[0]

    @property
    def tool_list(self) -> tuple[ToolSchema, ...]:
        """The tools as a tuple (empty when absent or a placeholder)."""
        return self.tools if isinstance(self.tools, tuple) else ()

    @property
    def has_placeholders(self) -> bool:
        """Whether any part of this header is a normalized log's placeholder."""
        return (
            isinstance(self.tools, ToolsPlaceholder)
            or is_placeholder(self.system)
            or any(isinstance(m, str) for m in self.message_prefix)
        )

    @classmethod
    def from_json(cls, obj: object) -> EpochHeader:
        o = json_object(obj, "header")
        check_keys(o, ("config", "adapterDefaults", "system", "tools", "messagePrefix"), "header")
        system = o.get("system")
        if system is not None and not isinstance(system, str):
            raise HeaderError(f"header system must be a string, got {json_kind(system)}")
        tools = tools_from_json(o.get("tools"))
        prefix_raw = o.get("messagePrefix")
        if "messagePrefix" in o and prefix_raw is None:
            raise HeaderError("header has invalid messagePrefix: null (omit the key instead)")
        defaults = o.get("adapterDefaults")
        if "adapterDefaults" in o and defaults is None:
            raise HeaderError("header has invalid adapterDefaults: null (omit the key instead)")
        return cls(
            config=LlmCallConfig.from_json(o.get("config")),
            adapter_defaults=defaults if defaults is None else check_adapter_defaults(defaults),
            system=system,
            tools=tools,
            message_prefix=prefix_from_json(prefix_raw) if prefix_raw is not None else (),
        )


def tools_from_json(raw: object) -> tuple[ToolSchema, ...] | ToolsPlaceholder | None:
    """``null``/absent, a placeholder token, a list of names, or a list of schemas."""
    if raw is None:
        return None
    if isinstance(raw, str):
        return ToolsPlaceholder(token=raw)
    if not isinstance(raw, list):
        raise HeaderError(f"header tools must be an array, got {json_kind(raw)}")
    if raw and all(isinstance(t, str) for t in raw):
        return ToolsPlaceholder(names=tuple(raw))
    if any(isinstance(t, str) for t in raw):
        raise HeaderError(
            "header tools mixes tool names and tool schemas: a list is either all names "
            "(a normalized snapshot) or all schemas"
        )
    return tuple(ToolSchema.from_json(t) for t in raw)


def canonical_header(header: EpochHeader) -> EpochHeader:
    """Empty system, tools and message prefix are the same as absent; the rest is kept as given."""
    system = header.system or None
    tools = header.tools or None
    defaults = header.adapter_defaults or None
    if system is header.system and tools is header.tools and defaults is header.adapter_defaults:
        return header
    return EpochHeader(
        config=header.config,
        adapter_defaults=defaults,
        system=system,
        tools=tools,
        message_prefix=header.message_prefix,
    )


def header_equals(a: EpochHeader, b: EpochHeader) -> bool:
    """Canonical, order-sensitive equality: tool order and JSON key order are what the model sees."""
    return a is b or a.canonical_text() == b.canonical_text()
