"""The request header's delta codec: diff, apply, fold, and the writer's plan.

Snapshots (``request/header``) anchor the fold; deltas (``request/header-delta``) amend it:
:class:`SystemDelta` trims a common line prefix and suffix, :class:`ToolsDelta` is name-keyed and
also records where added tools go and any reordering of kept tools, so every pair of valid headers
round-trips. The config and the message prefix are replaced whole.

The writer (:func:`plan_header_event`) never trusts its encoder: a delta is written only after
applying it to the previous header is verified to reproduce the new one; otherwise it writes a
``fallback`` snapshot, so a well-formed log always folds.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias, TypeGuard

from ._errors import CorruptLogError, HeaderError
from ._events import Event
from ._header import (
    EpochHeader,
    LlmCallConfig,
    ToolSchema,
    ToolsPlaceholder,
    canonical_header,
    check_adapter_defaults,
    check_keys,
    check_unique_tools,
    header_equals,
    json_object,
    prefix_entry,
    prefix_from_json,
    prefix_to_json,
)
from ._json import FrozenDict, freeze_json
from ._json_text import dumps_canonical
from ._messages import Message

__all__ = [
    "AddedTool",
    "HeaderDelta",
    "HeaderEventPlan",
    "SystemDelta",
    "ToolsDelta",
    "apply_header_delta",
    "diff_header",
    "fold_request_header",
    "plan_header_event",
]


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
        o = json_object(obj, "system delta")
        check_keys(o, ("keepStart", "keepEnd", "insert"), "system delta")
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
        o = json_object(obj, "tools delta")
        check_keys(o, ("added", "removed", "changed", "order"), "tools delta")
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
            item = json_object(item, "added tool")
            if "tool" in item:
                check_keys(item, ("index", "tool"), "added tool")
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
            object.__setattr__(self, "message_prefix", prefix_from_json(self.message_prefix))
        elif self.message_prefix is not None:
            for i, entry in enumerate(self.message_prefix):
                prefix_entry(entry, i)

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
        o = json_object(obj, "header delta")
        check_keys(
            o, ("system", "tools", "config", "adapterDefaults", "messagePrefix"), "header delta"
        )
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
            adapter_defaults=check_adapter_defaults(defaults, config) if defaults else None,
            message_prefix=prefix_from_json(prefix_raw) if prefix_raw is not None else None,
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
    check_unique_tools(current)
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
                    EpochHeader.from_json(json_object(event.data, "data").get("header"))
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
