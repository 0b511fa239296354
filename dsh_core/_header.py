"""The request header: everything a request carries besides its messages, and its delta codec.

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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias, TypeGuard

from ._errors import CorruptLogError, DshError, HeaderError, JsonValueError
from ._events import Event
from ._json import FrozenDict, dumps_canonical, freeze_json
from ._messages import Message

__all__ = [
    "AddedTool",
    "EpochHeader",
    "HeaderDelta",
    "HeaderEventPlan",
    "LlmCallConfig",
    "PrefixEntry",
    "SystemDelta",
    "ToolSchema",
    "ToolsDelta",
    "ToolsPlaceholder",
    "apply_header_delta",
    "canonical_header",
    "diff_header",
    "fold_request_header",
    "header_equals",
    "is_placeholder",
    "plan_header_event",
]

_PLACEHOLDER = re.compile(r"^\{\{[A-Za-z0-9_.:-]+\}\}$")


def is_placeholder(value: object) -> bool:
    """Whether ``value`` is a placeholder token such as ``"{{system}}"`` (a normalized log's)."""
    return isinstance(value, str) and bool(_PLACEHOLDER.match(value))


def _non_empty_str(value: object) -> bool:
    return isinstance(value, str) and bool(value)


def _obj(value: object, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise HeaderError(f"{what} must be a JSON object, got {type(value).__name__}")
    return value


def _keys(obj: Mapping[str, Any], allowed: Iterable[str], what: str) -> None:
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
        if not _non_empty_str(self.provider) or not _non_empty_str(self.model):
            raise HeaderError(
                f"a call config needs a non-empty provider and model, got {self.provider!r}, "
                f"{self.model!r}"
            )
        if self.reasoning_effort is not None and not _non_empty_str(self.reasoning_effort):
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
        o = _obj(obj, "config")
        _keys(
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
        o = _obj(obj, "tool")
        _keys(o, ("name", "description", "parameters"), "tool")
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


def _prefix_entry(value: object, index: int) -> Message | str:
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


def _prefix_from_json(value: object) -> tuple[Message | str, ...]:
    if not isinstance(value, (list, tuple)):
        raise HeaderError(
            f"header messagePrefix must be an array of messages, got {type(value).__name__}"
        )
    return tuple(_prefix_entry(v, i) for i, v in enumerate(value))


def prefix_to_json(prefix: Sequence[Message | str]) -> list[Any]:
    """A message prefix as the log writes it: messages as JSON, placeholders as strings."""
    return [m if isinstance(m, str) else m.to_json() for m in prefix]


def _check_unique(tools: Sequence[ToolSchema]) -> None:
    seen: set[str] = set()
    for tool in tools:
        if tool.name in seen:
            raise HeaderError(
                f"duplicate tool name {tool.name!r} in one header: a model cannot tell them apart"
            )
        seen.add(tool.name)


_ADAPTER_DEFAULT_FIELDS = {"reasoningEffort": "reasoning_effort", "maxTokens": "max_tokens"}


def _check_adapter_defaults(value: object, config: LlmCallConfig | None = None) -> FrozenDict:
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
                _check_adapter_defaults(self.adapter_defaults, self.config),
            )
        if self.system is not None and not isinstance(self.system, str):
            raise HeaderError(f"header system must be a string, got {type(self.system).__name__}")
        if not isinstance(self.message_prefix, tuple) or not all(
            isinstance(m, (Message, str)) for m in self.message_prefix
        ):
            object.__setattr__(self, "message_prefix", _prefix_from_json(self.message_prefix))
        else:
            for i, entry in enumerate(self.message_prefix):
                _prefix_entry(entry, i)
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
            _check_unique(self.tools)

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
        o = _obj(obj, "header")
        _keys(o, ("config", "adapterDefaults", "system", "tools", "messagePrefix"), "header")
        system = o.get("system")
        if system is not None and not isinstance(system, str):
            raise HeaderError(f"header system must be a string, got {type(system).__name__}")
        tools = _tools_from_json(o.get("tools"))
        prefix_raw = o.get("messagePrefix")
        if "messagePrefix" in o and prefix_raw is None:
            raise HeaderError("header has invalid messagePrefix: null (omit the key instead)")
        defaults = o.get("adapterDefaults")
        if "adapterDefaults" in o and defaults is None:
            raise HeaderError("header has invalid adapterDefaults: null (omit the key instead)")
        return cls(
            config=LlmCallConfig.from_json(o.get("config")),
            adapter_defaults=defaults if defaults is None else _check_adapter_defaults(defaults),
            system=system,
            tools=tools,
            message_prefix=_prefix_from_json(prefix_raw) if prefix_raw is not None else (),
        )


def _tools_from_json(raw: object) -> tuple[ToolSchema, ...] | ToolsPlaceholder | None:
    """``null``/absent, a placeholder token, a list of names, or a list of schemas."""
    if raw is None:
        return None
    if isinstance(raw, str):
        return ToolsPlaceholder(token=raw)
    if not isinstance(raw, list):
        raise HeaderError(f"header tools must be an array, got {type(raw).__name__}")
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


# --------------------------------------------------------------------------------------------
# Deltas


def _count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


@dataclass(frozen=True, slots=True, kw_only=True)
class SystemDelta:
    """Keep ``keep_start`` leading and ``keep_end`` trailing lines, put ``insert`` between them.

    Lines are split on ``\\n`` only, so ``\\r`` stays inside its line and CRLF text round-trips.
    """

    keep_start: int
    keep_end: int
    insert: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"keepStart": self.keep_start, "keepEnd": self.keep_end, "insert": list(self.insert)}

    @classmethod
    def from_json(cls, obj: object) -> SystemDelta:
        o = _obj(obj, "system delta")
        _keys(o, ("keepStart", "keepEnd", "insert"), "system delta")
        ks, ke, ins = o.get("keepStart"), o.get("keepEnd"), o.get("insert")
        if not (_count(ks) and _count(ke)):
            raise HeaderError("system delta keepStart/keepEnd must be non-negative integers")
        if not isinstance(ins, list) or not all(isinstance(x, str) for x in ins):
            raise HeaderError("system delta insert must be an array of strings")
        return cls(keep_start=ks, keep_end=ke, insert=tuple(ins))


@dataclass(frozen=True, slots=True, kw_only=True)
class AddedTool:
    """A tool added by a delta, and its index in the new tool list."""

    index: int
    """Position in the new tool list; ``-1`` appends at the end (the reference harness's
    generation-B form, written back as a bare schema)."""
    tool: ToolSchema

    def __post_init__(self) -> None:
        if isinstance(self.index, bool) or not isinstance(self.index, int) or self.index < -1:
            raise HeaderError(
                f"added tool index must be -1 or a non-negative integer, got {self.index!r}"
            )

    def to_json(self) -> dict[str, Any]:
        if self.index < 0:
            return self.tool.to_json()
        return {"index": self.index, "tool": self.tool.to_json()}


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolsDelta:
    """Name-keyed tool changes that also say where added tools go and how kept tools reorder.

    Apply order: drop ``removed``; swap ``changed`` schemas in place; if ``order`` is present,
    put the kept tools in that order; insert each ``added`` tool at its ``index`` (ascending).
    """

    added: tuple[AddedTool, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[ToolSchema, ...] = ()
    order: tuple[str, ...] | None = None
    """The kept tools' names in their new relative order; absent when that order is unchanged."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "added": [a.to_json() for a in self.added],
            "removed": list(self.removed),
            "changed": [t.to_json() for t in self.changed],
        }
        if self.order is not None:
            out["order"] = list(self.order)
        return out

    @classmethod
    def from_json(cls, obj: object) -> ToolsDelta:
        o = _obj(obj, "tools delta")
        _keys(o, ("added", "removed", "changed", "order"), "tools delta")
        added_raw, removed, changed = o.get("added", []), o.get("removed", []), o.get("changed", [])
        order = o.get("order")
        if not isinstance(added_raw, list) or not isinstance(changed, list):
            raise HeaderError("tools delta added/changed must be arrays")
        if not isinstance(removed, list) or not all(isinstance(n, str) for n in removed):
            raise HeaderError("tools delta removed must be an array of names")
        if order is not None and (
            not isinstance(order, list) or not all(isinstance(n, str) for n in order)
        ):
            raise HeaderError("tools delta order must be an array of names")
        added: list[AddedTool] = []
        for item in added_raw:
            item = _obj(item, "added tool")
            if "tool" in item:
                _keys(item, ("index", "tool"), "added tool")
                index = item.get("index")
                if not isinstance(index, int) or isinstance(index, bool) or index < 0:
                    raise HeaderError("added tool index must be a non-negative integer")
                added.append(AddedTool(index=index, tool=ToolSchema.from_json(item["tool"])))
            else:
                # The reference harness's generation-B form: a bare schema, appended at the end.
                added.append(AddedTool(index=-1, tool=ToolSchema.from_json(item)))
        return cls(
            added=tuple(added),
            removed=tuple(removed),
            changed=tuple(ToolSchema.from_json(t) for t in changed),
            order=tuple(order) if order is not None else None,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class HeaderDelta:
    """An amendment to a header; ``to_json()`` is exactly a ``request/header-delta`` event's data."""

    system: SystemDelta | None = None
    tools: ToolsDelta | None = None
    config: LlmCallConfig | None = None
    """Replaces the config whole when present (and, with it, its ``adapterDefaults``)."""
    adapter_defaults: FrozenDict | None = None
    """The new config's adapter-default markers (only with ``config``; absent = none)."""
    message_prefix: tuple[Message | str, ...] | None = None
    """Replaces the message prefix whole when present; ``()`` clears it (``None``: unchanged)."""

    def __post_init__(self) -> None:
        if self.message_prefix is not None and (
            not isinstance(self.message_prefix, tuple)
            or not all(isinstance(m, (Message, str)) for m in self.message_prefix)
        ):
            object.__setattr__(self, "message_prefix", _prefix_from_json(self.message_prefix))
        elif self.message_prefix is not None:
            for i, entry in enumerate(self.message_prefix):
                _prefix_entry(entry, i)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.system is not None:
            out["system"] = self.system.to_json()
        if self.tools is not None:
            out["tools"] = self.tools.to_json()
        if self.config is not None:
            out["config"] = self.config.to_json()
            if self.adapter_defaults:
                out["adapterDefaults"] = self.adapter_defaults
        if self.message_prefix is not None:
            out["messagePrefix"] = prefix_to_json(self.message_prefix)
        return out

    @classmethod
    def from_json(cls, obj: object) -> HeaderDelta:
        o = _obj(obj, "header delta")
        _keys(o, ("system", "tools", "config", "adapterDefaults", "messagePrefix"), "header delta")
        config = LlmCallConfig.from_json(o["config"]) if o.get("config") is not None else None
        defaults = o.get("adapterDefaults")
        if defaults is not None and config is None:
            raise HeaderError("a header delta carries adapterDefaults only with a config")
        prefix_raw = o.get("messagePrefix")
        if "messagePrefix" in o and prefix_raw is None:
            raise HeaderError("a header delta's messagePrefix is an array ([] clears it), not null")
        return cls(
            system=SystemDelta.from_json(o["system"]) if o.get("system") is not None else None,
            tools=ToolsDelta.from_json(o["tools"]) if o.get("tools") is not None else None,
            config=config,
            adapter_defaults=_check_adapter_defaults(defaults, config) if defaults else None,
            message_prefix=_prefix_from_json(prefix_raw) if prefix_raw is not None else None,
        )


def _lines(system: str | None) -> list[str]:
    return system.split("\n") if system else []


def _diff_system(prev: str | None, nxt: str | None) -> SystemDelta:
    a, b = _lines(prev), _lines(nxt)
    start = 0
    limit = min(len(a), len(b))
    while start < limit and a[start] == b[start]:
        start += 1
    end = 0
    while end < len(a) - start and end < len(b) - start and a[-1 - end] == b[-1 - end]:
        end += 1
    return SystemDelta(keep_start=start, keep_end=end, insert=tuple(b[start : len(b) - end]))


def _apply_system(prev: str | None, delta: SystemDelta) -> str | None:
    a = _lines(prev)
    if delta.keep_start + delta.keep_end > len(a):
        raise HeaderError(
            f"system delta keeps {delta.keep_start}+{delta.keep_end} lines of a {len(a)}-line prompt"
        )
    lines = a[: delta.keep_start] + list(delta.insert) + a[len(a) - delta.keep_end :]
    return "\n".join(lines) if lines else None


def _tool_text(tool: ToolSchema) -> str:
    return dumps_canonical(tool.to_json())


def _diff_tools(prev: Sequence[ToolSchema], nxt: Sequence[ToolSchema]) -> ToolsDelta:
    prev_by_name = {t.name: t for t in prev}
    next_names = {t.name for t in nxt}
    removed = tuple(t.name for t in prev if t.name not in next_names)
    added = tuple(
        AddedTool(index=i, tool=t) for i, t in enumerate(nxt) if t.name not in prev_by_name
    )
    changed = tuple(
        t
        for t in nxt
        if t.name in prev_by_name and _tool_text(prev_by_name[t.name]) != _tool_text(t)
    )
    kept_prev_order = [t.name for t in prev if t.name in next_names]
    kept_next_order = [t.name for t in nxt if t.name in prev_by_name]
    order = tuple(kept_next_order) if kept_prev_order != kept_next_order else None
    return ToolsDelta(added=added, removed=removed, changed=changed, order=order)


def _apply_tools(prev: Sequence[ToolSchema], delta: ToolsDelta) -> tuple[ToolSchema, ...]:
    names = [t.name for t in prev]
    for name in delta.removed:
        if name not in names:
            raise HeaderError(f"tools delta removes {name!r}, which the header does not have")
    removed = set(delta.removed)
    current = [t for t in prev if t.name not in removed]
    position = {t.name: i for i, t in enumerate(current)}
    for tool in delta.changed:
        if tool.name not in position:
            raise HeaderError(f"tools delta changes {tool.name!r}, which the header does not have")
        current[position[tool.name]] = tool
    if delta.order is not None:
        if sorted(delta.order) != sorted(position):
            raise HeaderError(
                f"tools delta order {list(delta.order)} is not a permutation of the kept tools"
            )
        by_name = {t.name: t for t in current}
        current = [by_name[n] for n in delta.order]
    appended = [a for a in delta.added if a.index < 0]
    for item in sorted((a for a in delta.added if a.index >= 0), key=lambda a: a.index):
        if item.tool.name in {t.name for t in current}:
            raise HeaderError(f"tools delta adds {item.tool.name!r}, which the header already has")
        if item.index > len(current):
            raise HeaderError(
                f"tools delta adds {item.tool.name!r} at index {item.index} of a {len(current)}-tool list"
            )
        current.insert(item.index, item.tool)
    current.extend(a.tool for a in appended)
    _check_unique(current)
    return tuple(current)


def diff_header(prev: EpochHeader, nxt: EpochHeader) -> HeaderDelta | None:
    """The delta from ``prev`` to ``nxt``; ``None`` exactly when :func:`header_equals`."""
    a, b = canonical_header(prev), canonical_header(nxt)
    if header_equals(a, b):
        return None
    system = _diff_system(a.system, b.system) if a.system != b.system else None
    tools: ToolsDelta | None = None
    if isinstance(a.tools, ToolsPlaceholder) or isinstance(b.tools, ToolsPlaceholder):
        if a.tools != b.tools:
            raise HeaderError(
                "a tools placeholder (as in normalized reference logs) cannot be encoded as a "
                f"delta: {_placeholder_text(a.tools)} → {_placeholder_text(b.tools)}; "
                "write a snapshot"
            )
    elif dumps_canonical([t.to_json() for t in a.tool_list]) != dumps_canonical(
        [t.to_json() for t in b.tool_list]
    ):
        tools = _diff_tools(a.tool_list, b.tool_list)
    same_config = dumps_canonical(
        [a.config.to_json(), a.adapter_defaults or {}]
    ) == dumps_canonical([b.config.to_json(), b.adapter_defaults or {}])
    config = None if same_config else b.config
    defaults = None if same_config else b.adapter_defaults
    prefix = (
        b.message_prefix
        if dumps_canonical(prefix_to_json(a.message_prefix))
        != dumps_canonical(prefix_to_json(b.message_prefix))
        else None
    )
    return HeaderDelta(
        system=system,
        tools=tools,
        config=config,
        adapter_defaults=defaults,
        message_prefix=prefix,
    )


def _placeholder_text(tools: tuple[ToolSchema, ...] | ToolsPlaceholder | None) -> str:
    if isinstance(tools, ToolsPlaceholder):
        return tools.describe()
    return "no tools" if not tools else f"{len(tools)} tools"


def apply_header_delta(prev: EpochHeader, delta: HeaderDelta) -> EpochHeader:
    """Apply ``delta`` to ``prev``; raises :class:`HeaderError` when it does not fit."""
    base = canonical_header(prev)
    system = _apply_system(base.system, delta.system) if delta.system is not None else base.system
    tools: tuple[ToolSchema, ...] | ToolsPlaceholder | None = base.tools
    if delta.tools is not None:
        if isinstance(base.tools, ToolsPlaceholder):
            raise HeaderError(f"cannot apply a tools delta to {base.tools.describe()}")
        tools = _apply_tools(base.tool_list, delta.tools)
    if delta.config is not None:
        config, defaults = delta.config, delta.adapter_defaults
    else:
        config, defaults = base.config, base.adapter_defaults
    prefix = base.message_prefix if delta.message_prefix is None else delta.message_prefix
    return canonical_header(
        EpochHeader(
            config=config,
            adapter_defaults=defaults,
            system=system,
            tools=tools or None,
            message_prefix=prefix,
        )
    )


def fold_request_header(
    events: Iterable[Event], start: EpochHeader | None = None
) -> EpochHeader | None:
    """Fold header events: snapshots replace the state, deltas amend it.

    Returns ``start`` (by identity) when there is no header event. A delta before any snapshot,
    or one that does not apply, raises :class:`CorruptLogError` naming its seq.
    """
    state = start
    for event in events:
        if event.type == "request/header":
            try:
                state = canonical_header(
                    EpochHeader.from_json(_obj(event.data, "data").get("header"))
                )
            except HeaderError as exc:
                raise CorruptLogError(
                    f"request/header at seq {event.seq} is invalid: {exc}", seq=event.seq
                ) from exc
        elif event.type == "request/header-delta":
            if state is None:
                raise CorruptLogError(
                    f"request/header-delta at seq {event.seq} before any request/header snapshot: corrupt log",
                    seq=event.seq,
                )
            try:
                state = apply_header_delta(state, HeaderDelta.from_json(event.data))
            except HeaderError as exc:
                raise CorruptLogError(
                    f"request/header-delta at seq {event.seq} does not apply: {exc}", seq=event.seq
                ) from exc
    return state


HeaderEventPlan: TypeAlias = tuple[
    Literal["request/header", "request/header-delta"], dict[str, Any]
]
"""``(event_type, data)`` the writer owes the log before a request."""

HeaderEncoder: TypeAlias = Callable[[EpochHeader, EpochHeader], "HeaderDelta | None"]


def plan_header_event(
    previous: EpochHeader | None,
    header: EpochHeader,
    *,
    first_of_instance: bool,
    snapshots_only: bool = False,
    encoder: HeaderEncoder = diff_header,
) -> HeaderEventPlan | None:
    """The writer's decision: which header event (if any) a request owes the log.

    - first request of a loop instance: a snapshot, reason ``initial`` (no header logged yet) or
      ``resume`` (even when unchanged: the instance boundary is a recorded fact);
    - later: nothing when equal; a delta when applying it to ``previous`` is verified to
      reproduce ``header`` exactly (after a JSON round trip, as a reader will see it); otherwise
      a snapshot with reason ``fallback``. With ``snapshots_only`` changes are written as
      snapshots with reason ``change`` (for readers that cannot fold deltas).
    """
    header = canonical_header(header)

    def snapshot(reason: str) -> HeaderEventPlan:
        return ("request/header", {"header": header.to_json(), "reason": reason})

    if first_of_instance:
        return snapshot("initial" if previous is None else "resume")
    if previous is None:
        return snapshot("initial")
    if header_equals(previous, header):
        return None
    if snapshots_only:
        return snapshot("change")
    try:
        delta = encoder(previous, header)
        if delta is not None:
            data = delta.to_json()
            # Verify what a reader will fold: the frozen JSON form, decoded again.
            replayed = apply_header_delta(previous, HeaderDelta.from_json(freeze_json(data)))
            if header_equals(replayed, header):
                return ("request/header-delta", data)
    except Exception:  # an encoder bug of any kind must only cost a snapshot, never a request
        pass
    return snapshot("fallback")
