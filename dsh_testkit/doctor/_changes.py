"""What changed between a request and the one it is compared with, in wire terms.

:func:`compare` lists every :class:`Change` between a request and its parent (see
``_branches.py``) — parameters of the cache key, the system prompt (line, column, both sides
around the first difference, a volatile-looking span named only when the changed text itself
looks volatile), the tools as the template renders them, the history, and the echo of the
model's answer — each placed at the component of the prompt where it sits and marked with
whether DeepSeek's template renders it (a change that does not reach the prompt cannot cost a
hit). Which change, if any, cost tokens is decided later from the figures (``_attribution.py``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from dsh_core.providers._models import ChatTemplate

from ..prompt._wire_view import WireView, canonical_json, content_text, rendered_tool, tool_name
from ..traces import Exchange
from ._change import Change
from ._history import history_changes, rejected_at
from ._text import (
    clock_values,
    locate,
    text_diff,
    token_around,
    volatile_span,
    volatile_value,
)

__all__ = [
    "RISK_SIGNATURE",
    "clock_risk",
    "compare",
    "component_label",
    "component_text",
    "describe_components",
    "message_labels",
    "refusal_reason",
]

# ---------------------------------------------------------------------------------------------
# Parameters, system prompt, tools


def _params_changes(previous: WireView, current: WireView) -> list[Change]:
    out: list[Change] = []
    (old_model, old_user), (new_model, new_user) = previous.cache_key(), current.cache_key()
    if old_model != new_model:
        out.append(
            Change(
                code="params-changed",
                detail=(
                    f"model: {previous.model!r} → {current.model!r} (served by {old_model} → "
                    f"{new_model}): the cache is per serving model"
                ),
                where="model",
                signature=f"params-changed model {old_model}>{new_model}",
            )
        )
    if old_user != new_user:
        out.append(
            Change(
                code="params-changed",
                detail=f"user: {old_user!r} → {new_user!r}: the cache is per end user",
                where="user_id",
                signature=f"params-changed user {old_user}>{new_user}",
            )
        )
    if previous.thinking != current.thinking:
        out.append(
            Change(
                code="params-changed",
                detail=(
                    f"thinking mode {'on' if previous.thinking else 'off'} → "
                    f"{'on' if current.thinking else 'off'}: the prompt renders the history's "
                    "reasoning and the generation prefix differently"
                ),
                where="thinking",
                signature=f"params-changed thinking {previous.thinking}>{current.thinking}",
            )
        )
    return out


def _system_changes(previous: WireView, current: WireView, names: tuple[str, str]) -> list[Change]:
    if previous.system == current.system:
        return []
    old, new = previous.system_text, current.system_text
    moved_to = next(
        (
            i
            for i, m in enumerate(current.messages)
            if isinstance(m, Mapping)
            and m.get("role") in ("system", "developer")
            and old
            and content_text(m.get("content")) in previous.system
        ),
        None,
    )
    if moved_to is not None and len(current.system) < len(previous.system):
        where = f"messages[{current.wire_index(moved_to)}]"
        return [
            Change(
                code="system-moved",
                detail=(
                    f"the system message that led the previous request now stands at {where}, "
                    "after the history: the prompt no longer starts with it"
                ),
                evidence=(f"{names[0]}: system first", f"{names[1]}: system at {where}"),
                where=where,
                component=0,
                signature=f"system-moved {where}",
            )
        ]
    diff = text_diff(old, new)
    assert diff is not None
    location, (x, y) = locate(old, new)
    where = f"system {location}"
    evidence = (f"{names[0]}: {x}", f"{names[1]}: {y}")
    volatile = volatile_span(diff)
    if volatile is None:
        # A line added or removed whole is one long "token": search the changed span for what
        # a volatile value looks like (a date-time, a time with seconds, an id).
        old_value = volatile_value(diff.before, diff.start, diff.before_end)
        new_value = volatile_value(diff.after, diff.start, diff.after_end)
        if old_value is not None or new_value is not None:
            volatile = (
                f"{old_value!r} → {new_value!r}"
                if old_value is not None and new_value is not None
                else f"{new_value!r} added"
                if new_value is not None
                else f"{old_value!r} removed"
            )
    if volatile is not None:
        return [
            Change(
                code="volatile-system-text",
                detail=(
                    f"the system prompt changes at {location} in a volatile-looking span: "
                    f"{volatile}; move it out of the system prompt (e.g. into the latest user "
                    "message)"
                ),
                evidence=evidence,
                where=where,
                component=0,
                diff=diff,
                # one finding per volatile line, wherever its first changed character falls
                # (a running clock changes at a different digit each time)
                signature=f"volatile-system-text line {old.count(chr(10), 0, diff.start) + 1}",
            )
        ]
    spans = (
        token_around(diff.before, diff.start, diff.before_end),
        token_around(diff.after, diff.start, diff.after_end),
    )
    return [
        Change(
            code="system-changed",
            detail=f"the system prompt was edited at {location}: {spans[0]!r} → {spans[1]!r}",
            evidence=evidence,
            where=where,
            component=0,
            diff=diff,
            signature=f"system-changed {location} {spans[0]}>{spans[1]}",
        )
    ]


RISK_SIGNATURE = "volatile-system-text risk"
"""The signature of a volatile value named as a risk: found by what it is, before it changed."""


def clock_risk(view: WireView, started: float | None) -> Change | None:
    """The system prompt holds the request's own date or time (:func:`clock_values`): it will
    change on a later request or run, and nothing after it can be reused then. A risk named
    even while it has not changed yet (a fast run that never crossed a second)."""
    text = view.system_text
    found = clock_values(text, started) if text else []
    if not found:
        return None
    value, offset = found[0]
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    where = f"system line {line} column {column}"
    return Change(
        code="volatile-system-text",
        detail=(
            f"the system prompt holds the request's own {'time' if ':' in value else 'date'} "
            f"({value!r} at line {line} column {column}): it changes from one request or run to "
            "the next, and nothing after it can be reused then (a risk, not a loss yet); move it "
            "out of the system prompt (e.g. into the latest user message)"
        ),
        evidence=(f"system line {line}: {text.splitlines()[line - 1][:160]!r}",),
        where=where,
        component=0,
        signature=f"{RISK_SIGNATURE} line {line}",
    )


def _tools_change(previous: WireView, current: WireView) -> Change | None:
    if previous.rendered_tools() == current.rendered_tools():
        return None
    if isinstance(previous.tools, str) or isinstance(current.tools, str):
        return Change(
            code="tools-changed",
            detail="the tool list (a placeholder in the log) differs",
            evidence=(f"before: {previous.tools!r}"[:120], f"after:  {current.tools!r}"[:120]),
            where="tools",
            component=1,
            signature="tools-changed placeholder",
        )
    old_list = [rendered_tool(t) for t in previous.tools or ()]
    new_list = [rendered_tool(t) for t in current.tools or ()]
    old_names = [tool_name(t) for t in previous.tools or ()]
    new_names = [tool_name(t) for t in current.tools or ()]
    parts: list[str] = []
    first_changed = next(
        (i for i, (x, y) in enumerate(zip(old_list, new_list, strict=False)) if x != y),
        min(len(old_list), len(new_list)),
    )
    for name in (n for n in new_names if n not in old_names):
        at = new_names.index(name)
        parts.append(
            f"tool {name!r} appended at the end"
            if at >= len(old_names)
            else f"tool {name!r} inserted at position {at + 1} of {len(new_names)} (mid-list: "
            "every tool after it and the whole history are read again)"
        )
    parts += [f"tool {name!r} removed" for name in old_names if name not in new_names]
    kept_old = [n for n in old_names if n in new_names]
    kept_new = [n for n in new_names if n in old_names]
    if kept_old != kept_new:
        parts.append(f"tools reordered: {kept_old} → {kept_new}")
    for name in kept_new:
        if old_list[old_names.index(name)] != new_list[new_names.index(name)]:
            parts.append(f"tool {name!r} schema edited")
    if not parts:
        parts.append("the tool list differs")
    diff = None
    if first_changed < min(len(old_list), len(new_list)):
        diff = text_diff(
            canonical_json(old_list[first_changed]), canonical_json(new_list[first_changed])
        )
    return Change(
        code="tools-changed",
        detail="; ".join(parts),
        evidence=(f"before: {old_names}", f"after:  {new_names}"),
        where=f"tools[{first_changed}]",
        component=1,
        diff=diff,
        signature="tools-changed " + "; ".join(parts),
    )


def _gathered(view: WireView) -> list[str]:
    """Every system text of a request, as DeepSeek-V3's template gathered them into the head."""
    return [*view.system] + [
        content_text(m.get("content"))
        for m in view.messages
        if isinstance(m, Mapping) and m.get("role") in ("system", "developer")
    ]


def _gathered_system_change(
    previous: WireView, current: WireView, names: tuple[str, str]
) -> Change | None:
    """Under DeepSeek-V3's template, a system message anywhere changes the prompt's head."""
    old, new = "\n\n".join(_gathered(previous)), "\n\n".join(_gathered(current))
    if old == new:
        return None
    at = next(
        (
            i
            for i, m in enumerate(current.messages)
            if isinstance(m, Mapping)
            and m.get("role") in ("system", "developer")
            and content_text(m.get("content")) not in _gathered(previous)
        ),
        None,
    )
    where = f"messages[{current.wire_index(at)}]" if at is not None else "system"
    place, (x, y) = locate(old, new)
    return Change(
        code="system-changed",
        detail=(
            f"the system message at {where} is gathered into the system prompt by this "
            f"request's template (DeepSeek-V3's), so the prompt's head changed at {place}"
        ),
        evidence=(f"{names[0]}: {x}", f"{names[1]}: {y}"),
        where=f"system {place}",
        component=0,
        diff=text_diff(old, new),
        signature=f"system-changed gathered {where}",
    )


def compare(
    previous: Exchange,
    previous_view: WireView,
    current: Exchange,
    current_view: WireView,
    *,
    template: ChatTemplate = "deepseek-v4",
) -> list[Change]:
    """Every change from ``previous`` (and its answer) to ``current``, in prompt order, as
    ``template`` renders them (the one the service used for ``current``)."""
    names = (f"request #{previous.index + 1}", f"request #{current.index + 1}")
    out = _params_changes(previous_view, current_view)
    out += _system_changes(previous_view, current_view, names)
    if template == "deepseek-v3" and not out:
        gathered = _gathered_system_change(previous_view, current_view, names)
        if gathered is not None:
            out.append(gathered)
    tools = _tools_change(previous_view, current_view)
    if tools is not None:
        out.append(tools)
    if not any(c.code == "system-moved" for c in out):
        out += history_changes(
            previous_view,
            current_view,
            previous.response,
            arguments_as_text=template == "deepseek-v3",
        )
    return sorted(out, key=lambda c: c.component)


def refusal_reason(view: WireView) -> str | None:
    """Why the API refuses this request, when the pass-back rule says it does."""
    at = rejected_at(view)
    if at is None:
        return None
    return (
        f"messages[{view.wire_index(at)}] is an assistant turn without its reasoning in "
        "thinking mode (the pass-back rule)"
    )


def component_label(view: WireView, component: int) -> str:
    """One component's label (``system``, ``tools``, ``messages[2] user``)."""
    if component == 0:
        return "system"
    if component == 1:
        return "tools"
    index = component - 2
    if 0 <= index < len(view.messages):
        return message_labels(view, index, index + 1)[0]
    return "the end of the prompt"


def describe_components(view: WireView) -> list[str]:
    """Labels of the view's components, in prompt order (``system``, ``tools``,
    ``messages[2] user``, …)."""
    return ["system", "tools", *message_labels(view, 0, len(view.messages))]


def message_labels(view: WireView, start: int, stop: int) -> list[str]:
    """:func:`component_label` of messages ``start`` to ``stop`` (positions in
    :attr:`~WireView.messages`), in one pass: every request's prompt bar labels its messages."""
    offset = view.message_offset
    messages = view.messages
    out = []
    for i in range(start, stop):
        message = messages[i]
        # (a dict first: the ABC check costs more than the label)
        role = (
            message.get("role") if type(message) is dict or isinstance(message, Mapping) else None
        )
        out.append(f"messages[{i + offset}] {role or '?'}")
    return out


def component_text(view: WireView, component: int) -> str:
    """One component's text, for a diff (the system prompt, the rendered tools, a message)."""
    if component == 0:
        return view.system_text
    if component == 1:
        return view.rendered_tools()
    index = component - 2
    if 0 <= index < len(view.messages):
        message = view.messages[index]
        if isinstance(message, Mapping):
            return json.dumps(message, ensure_ascii=False, indent=1, sort_keys=True)
        return canonical_json(message)
    return ""
