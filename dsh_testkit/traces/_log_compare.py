"""What changed between two headers or two requests, in words (shared by audit and cache-report).

The wording is the core's (:func:`dsh_core._differences.first_json_difference`,
:func:`dsh_core._differences.system_difference`, the words :func:`dsh_core.diff_requests` uses): header changes name the field
(``config.model differs: previous: 'a', this: 'b'``, ``system line 12 differs at column 201:
…``, ``tool 'grep' added``), message changes name the first differing JSON path
(``messages[3].content[0].text differs: …``). Unlike ``diff_requests`` (which compares a
request with the log's expectation), these describe how a log moved from one state to the
next, so the two sides are called "previous" and "this".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from dsh_core import (
    EpochHeader,
    GenerateOptions,
    HeaderDelta,
    Message,
    MessageView,
    SystemDelta,
    ToolSchema,
    ToolsDelta,
    ToolsPlaceholder,
    canonical_header,
    diff_header,
    header_equals,
)
from dsh_core._differences import (
    config_differences,
    first_json_difference,
    preview_value,
    system_difference,
    tools_differences,
)
from dsh_core._json_text import dumps_canonical

__all__ = [
    "RequestComparison",
    "compare_requests",
    "header_changes",
    "header_of",
    "header_summary",
    "message_history",
    "same_header",
    "shared_history",
]


_SIDES = ("previous", "this")
"""How a log's consecutive states are called in a difference."""


def header_of(request: GenerateOptions) -> EpochHeader:
    """The canonical header a request was built from (its config, system and tools)."""
    return canonical_header(
        EpochHeader(config=request.config, system=request.system, tools=request.tools)
    )


def header_summary(header: EpochHeader) -> str:
    """``deepseek/deepseek-chat · system 40 lines · 3 tools`` (placeholders shown as they are)."""
    config = header.config
    parts = [f"{config.provider}/{config.model}"]
    extras = [
        f"{k}={preview_value(v, 24)}"
        for k, v in config.to_json().items()
        if k not in {"provider", "model"}
    ]
    if extras:
        parts.append(" ".join(extras))
    system = header.system
    if system is None:
        parts.append("no system")
    elif system.startswith("{{") and system.endswith("}}") and "\n" not in system:
        parts.append(f"system {system}")
    else:
        n = len(system.split("\n"))
        parts.append(f"system {n} line{'s' if n != 1 else ''}")
    tools = header.tools
    if tools is None:
        parts.append("no tools")
    elif isinstance(tools, ToolsPlaceholder) and tools.token is not None:
        parts.append(f"tools {tools.token}")
    elif isinstance(tools, ToolsPlaceholder):
        count = len(tools.names or ())
        parts.append(f"{count} tool{'s' if count != 1 else ''} (names only)")
    else:
        parts.append(f"{len(tools)} tool{'s' if len(tools) != 1 else ''}")
    return " · ".join(parts)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def _system_change(previous: str | None, current: str | None, delta: SystemDelta) -> str:
    old_lines = len(previous.split("\n")) if previous else 0
    first = delta.keep_start + 1
    removed = old_lines - delta.keep_start - delta.keep_end
    inserted = len(delta.insert)
    if removed == 0:
        where = "at the start" if delta.keep_start == 0 else f"after line {delta.keep_start}"
        return f"system: {_plural(inserted, 'line')} inserted {where}"
    span = f"line {first}" if removed == 1 else f"lines {first}–{first + removed - 1}"
    if inserted == 0:
        return f"system {span} removed"
    # What differs first, with the differing characters visible (a timestamp appended to a
    # long line reads as "line 1 changed" otherwise).
    detail = system_difference(previous, current, _SIDES) or f"system {span} changed"
    if removed == inserted == 1:
        return detail
    return f"system {span} replaced by {_plural(inserted, 'line')} (first difference: {detail})"


def _tool_changes(previous: tuple[ToolSchema, ...], delta: ToolsDelta) -> list[str]:
    old = {t.name: t for t in previous}
    out = [f"tool {a.tool.name!r} added" for a in delta.added]
    out.extend(f"tool {name!r} removed" for name in delta.removed)
    for tool in delta.changed:
        detail = first_json_difference(
            f"tool {tool.name!r}", old[tool.name].to_json(), tool.to_json(), _SIDES
        )
        out.append(detail or f"tool {tool.name!r} changed")
    if delta.order is not None:
        out.append(f"tools reordered ({', '.join(delta.order)})")
    return out


def _tool_pairs(
    tools: tuple[ToolSchema, ...] | ToolsPlaceholder | None,
) -> list[tuple[str, Any]] | str | None:
    if tools is None:
        return None
    if isinstance(tools, ToolsPlaceholder):
        return tools.token or dumps_canonical(list(tools.names or ()))
    return [(t.name, t.to_json()) for t in tools]


def header_changes(previous: EpochHeader | None, header: EpochHeader) -> tuple[str, ...]:
    """Every change from ``previous`` to ``header``, one phrase each; ``()`` when equal.

    Config fields first (``config.model differs: previous: 'a', this: 'b'``), then the system
    prompt by line (the first differing line with its column when long), then tools by name
    (added, removed, changed, reordered). With no previous header: ``()``.
    """
    if previous is None:
        return ()
    a, b = canonical_header(previous), canonical_header(header)
    if header_equals(a, b):
        return ()
    placeholders = isinstance(a.tools, ToolsPlaceholder) or isinstance(b.tools, ToolsPlaceholder)
    # A placeholder cannot be encoded as a delta: diff the rest without the tools.
    delta = (
        diff_header(replace(a, tools=None), replace(b, tools=None))
        if placeholders
        else diff_header(a, b)
    ) or HeaderDelta()
    out = config_differences(a.config.to_json(), b.config.to_json(), _SIDES)
    if delta.system is not None:
        out.append(_system_change(a.system, b.system, delta.system))
    if placeholders:
        old_names, new_names = _tool_names(a.tools), _tool_names(b.tools)
        if old_names is not None and new_names is not None:
            # Names on both sides (schemas elided on one at least): added, removed, reordered.
            out.extend(_name_changes(old_names, new_names))
        else:
            out.extend(
                tools_differences(
                    _tool_pairs(a.tools),
                    _tool_pairs(b.tools),
                    _SIDES,
                )
            )
    elif delta.tools is not None:
        out.extend(_tool_changes(a.tool_list, delta.tools))
    if delta.message_prefix is not None:
        old_n, new_n = len(a.message_prefix), len(b.message_prefix)
        out.append(
            f"messagePrefix: {_plural(old_n, 'message')} → {_plural(new_n, 'message')}"
            if old_n != new_n
            else f"messagePrefix changed ({_plural(new_n, 'message')})"
        )
    return tuple(out)


def _tool_names(tools: tuple[ToolSchema, ...] | ToolsPlaceholder | None) -> list[str] | None:
    """The tool names in order, when known (schemas or a names list); ``None`` for a token."""
    if isinstance(tools, ToolsPlaceholder):
        return list(tools.names) if tools.names is not None else None
    return [t.name for t in tools or ()]


def _name_changes(old: list[str], new: list[str]) -> list[str]:
    """Added, removed and reordered tools, by name (schemas may be elided on either side)."""
    out = [f"tool {n!r} added" for n in new if n not in old]
    out.extend(f"tool {n!r} removed" for n in old if n not in new)
    kept_old = [n for n in old if n in new]
    kept_new = [n for n in new if n in old]
    if kept_old != kept_new:
        out.append(f"tools reordered ({', '.join(kept_new)})")
    if not out and old == new:
        out.append("tools: schemas elided on one side (names unchanged)")
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestComparison:
    """How a request relates to the one before it."""

    extends: bool
    """Same header, and the previous request's messages are a prefix of this one's."""
    differences: tuple[str, ...]
    """Header changes (``header: …``), then the first message difference; ``()`` when it extends."""
    shared_messages: int
    """How many leading messages the two requests share."""


def _messages_equal(a: Message, b: Message) -> bool:
    if a is b or a.canonical_json() == b.canonical_json():
        return True
    return a.role == b.role and a.content == b.content


def _same_value(a: object, b: object) -> bool:
    """Equal as canonical JSON, decided without serializing: ``False`` means "not sure".

    Floats only count when identical (``0.0 == -0.0`` but their JSON differs); a header folded
    once hands the same objects to every request built from it, so identity is the common case.
    """
    return a is b or (type(a) is type(b) and not isinstance(a, float) and a == b)


def same_header(previous: GenerateOptions, request: GenerateOptions) -> bool:
    """Whether two requests certainly share their header, decided in O(1) for folded requests.

    Requests rebuilt from one log share the folded header's ``system`` and ``tools`` objects
    until a header event, so identity answers without serializing either header. ``False``
    means "not sure": compare :func:`header_of` both (see :func:`compare_requests`).
    """
    return (
        previous.system is request.system
        and previous.tools is request.tools
        and all(
            _same_value(a, b)
            for a, b in (
                (previous.provider, request.provider),
                (previous.model, request.model),
                (previous.reasoning_effort, request.reasoning_effort),
                (previous.temperature, request.temperature),
                (previous.max_tokens, request.max_tokens),
                (previous.stop, request.stop),
            )
        )
    )


def message_history(messages: Sequence[Message]) -> Sequence[Message] | None:
    """The append-only list a :class:`dsh_core.MessageView` reads; ``None`` for other sequences.

    Its identity says "same history": views over one list hold the same message objects up to
    the shorter one's length (the list only grows until a surface replace starts a new one).
    """
    return messages.backing if isinstance(messages, MessageView) else None


def shared_history(old: Sequence[Message], new: Sequence[Message]) -> int | None:
    """How many leading messages two views of one append-only history share, in O(1).

    Requests of one ``reconstruct_requests`` fold read the same list until a surface replace.
    ``None`` when that cannot be told without comparing messages (different lists after a
    replace, or plain tuples).
    """
    return old.shared_prefix(new) if isinstance(old, MessageView) else None


def compare_requests(previous: GenerateOptions, request: GenerateOptions) -> RequestComparison:
    """Is ``request`` an append-only extension of ``previous``? If not, what differs first.

    Linear in the new messages for requests of one fold (see :func:`same_header` and
    :func:`shared_history`); otherwise the headers are diffed and the messages compared from
    the first.
    """
    differences = (
        []
        if same_header(previous, request)
        else [f"header: {c}" for c in header_changes(header_of(previous), header_of(request))]
    )
    old: Sequence[Message] = previous.messages
    new: Sequence[Message] = request.messages
    limit = min(len(old), len(new))
    known = shared_history(old, new)
    shared = known if known is not None else 0
    while shared < limit and _messages_equal(old[shared], new[shared]):
        shared += 1
    if shared < len(old):
        if shared < len(new):
            detail = first_json_difference(
                f"messages[{shared}]",
                old[shared].visible_json(),
                new[shared].visible_json(),
                _SIDES,
            )
            differences.append(detail or f"messages[{shared}] differs")
        else:
            differences.append(
                f"messages: {len(old) - shared} of the previous request's {len(old)} are gone"
            )
    return RequestComparison(
        extends=not differences, differences=tuple(differences), shared_messages=shared
    )
