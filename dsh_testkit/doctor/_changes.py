"""What changed between a request and the one it is compared with, in wire terms.

:func:`compare` lists every :class:`Change` between a request and its parent (see
``_branches.py``) — parameters of the cache key, the system prompt (line, column, both sides
around the first difference, a volatile-looking span named only when the changed text itself
looks volatile), the tools as the template renders them, the history, and the echo of the
model's answer — each placed at the component of the prompt where it sits and marked with
whether DeepSeek's template renders it (a change that does not reach the prompt cannot cost a
hit). Which change, if any, cost tokens is decided later from the figures (``_engine.py``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from dsh_core import locate_text_difference
from dsh_core.providers import missing_reasoning

from .._wire_view import (
    WireView,
    canonical_json,
    content_text,
    rendered_arguments,
    rendered_tool,
    tool_name,
)
from ..traces import Exchange
from ._codes import CauseCode

__all__ = [
    "PARAMS_COMPONENT",
    "Change",
    "TextDiff",
    "compare",
    "component_text",
    "describe_components",
    "refusal_reason",
    "text_diff",
]

PARAMS_COMPONENT: Final = -1
"""The component of a change in the request's parameters (the cache key, thinking mode)."""

_EXCERPT: Final = 240
"""Characters of context kept on each side of a difference for the page."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TextDiff:
    """Two versions of one text, cut around their first difference, for highlighting."""

    before: str
    after: str
    start: int
    """Where the differing characters begin in both excerpts (the common prefix's length)."""
    before_end: int
    """Where they end in :attr:`before` (the common suffix starts there)."""
    after_end: int
    """Where they end in :attr:`after`."""

    @property
    def spans(self) -> tuple[str, str]:
        """The differing characters: ``(before, after)``."""
        return self.before[self.start : self.before_end], self.after[self.start : self.after_end]

    def to_json(self) -> dict[str, Any]:
        return {
            "before": self.before,
            "after": self.after,
            "start": self.start,
            "beforeEnd": self.before_end,
            "afterEnd": self.after_end,
        }


def text_diff(a: str, b: str) -> TextDiff | None:
    """The first difference of two texts with :data:`_EXCERPT` characters around it."""
    if a == b:
        return None
    limit = min(len(a), len(b))
    start = 0
    while start < limit and a[start] == b[start]:
        start += 1
    end = 0
    while end < limit - start and a[len(a) - 1 - end] == b[len(b) - 1 - end]:
        end += 1
    lo = max(0, start - _EXCERPT)
    a_hi = min(len(a), len(a) - end + _EXCERPT)
    b_hi = min(len(b), len(b) - end + _EXCERPT)
    return TextDiff(
        before=a[lo:a_hi],
        after=b[lo:b_hi],
        start=start - lo,
        before_end=len(a) - end - lo,
        after_end=len(b) - end - lo,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Change:
    """One difference between a request and the one it is compared with."""

    code: CauseCode
    detail: str
    """What happened, in wire terms (``tool 'grep' inserted at position 1 of 3``)."""
    evidence: tuple[str, ...] = ()
    """Lines showing it (both sides around the first difference, in the project's wording)."""
    where: str | None = None
    """The wire location (``system line 31 column 9``, ``tools[1]``, ``messages[3]``)."""
    component: int = PARAMS_COMPONENT
    """Which component of the request's prompt it sits in: 0 the system prompt, 1 the tools,
    2 + i the view's message i; :data:`PARAMS_COMPONENT` for parameters."""
    rendered: bool = True
    """Whether DeepSeek's chat template renders the difference (else it never reaches the
    prompt)."""
    rejected: bool = False
    """Whether the API refuses the request for it (the reasoning pass-back rule)."""
    diff: TextDiff | None = None
    """The differing text, when it is text."""
    signature: str = ""
    """What makes two findings "the same change" across requests (code, place and the
    differing text)."""


# ---------------------------------------------------------------------------------------------
# Text and volatile spans

_VOLATILE_TOKEN: Final = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?)?(?:Z|[+-]\d{2}:?\d{2})?"
    r"|\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?"
    r"|\d{1,2}/\d{1,2}/\d{2,4}"
    r"|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"|(?=[0-9a-fA-F]*[0-9])(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}"
    r"|[0-9]+(?:[.,][0-9]+)?"
    r"|(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day|(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)"
    r"|(?:January|February|March|April|May|June|July|August|September|October|November|"
    r"December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)"
    r"|(?:[A-Za-z]+[-_])?(?=[A-Za-z0-9_-]*[0-9])(?=[A-Za-z0-9_-]*[a-z])(?=[A-Za-z0-9_-]*[A-Z])"
    r"[A-Za-z0-9_-]{16,}"
)
"""What a volatile value looks like, as a whole token: a date or date-time, a time, a UUID, a
hex id, a number (a counter, a Unix time), a day or month name, a random id (16+ characters
mixing digits and both cases, optionally prefixed like ``req_``)."""

_WORD: Final = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_:.+/,")


def _token_around(text: str, lo: int, hi: int) -> str:
    """The word-like token ``text[lo:hi]`` sits in (extended over letters, digits, ``-_:.+/,``)."""
    while lo > 0 and text[lo - 1] in _WORD:
        lo -= 1
    while hi < len(text) and text[hi] in _WORD:
        hi += 1
    token = text[lo:hi].strip(".,:;/")
    return token


def _looks_volatile(token: str) -> bool:
    return bool(token) and _VOLATILE_TOKEN.fullmatch(token) is not None


def _volatile_span(diff: TextDiff) -> str | None:
    """``'old' → 'new'`` when the changed token on each side looks volatile, else ``None``."""
    old = _token_around(diff.before, diff.start, diff.before_end)
    new = _token_around(diff.after, diff.start, diff.after_end)
    if not old and not new:
        return None
    if (old and not _looks_volatile(old)) or (new and not _looks_volatile(new)):
        return None
    if not old:
        return f"{new!r} added"
    if not new:
        return f"{old!r} removed"
    return f"{old!r} → {new!r}"


def _location(a: str, b: str) -> tuple[str, tuple[str, str]]:
    found = locate_text_difference(a, b)
    if found is None:
        return "", ("", "")
    return f"line {found.line} column {found.column}", (found.expected, found.actual)


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
    location, (x, y) = _location(old, new)
    where = f"system {location}"
    evidence = (f"{names[0]}: {x}", f"{names[1]}: {y}")
    volatile = _volatile_span(diff)
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
                signature=f"volatile-system-text {location}",
            )
        ]
    spans = (
        _token_around(diff.before, diff.start, diff.before_end),
        _token_around(diff.after, diff.start, diff.after_end),
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


# ---------------------------------------------------------------------------------------------
# History and the echo of the model's answer


def _calls(message: Mapping[str, Any]) -> list[tuple[str, Any]]:
    out = []
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            out.append((str(function.get("name")), function.get("arguments")))
    return out


def _rendered_message(message: Any, *, keep_reasoning: bool) -> Any:
    """What the template renders of one history message (chat shape)."""
    if not isinstance(message, Mapping):
        return message
    role = message.get("role")
    out: dict[str, Any] = {"role": role, "content": content_text(message.get("content"))}
    if role == "assistant":
        calls = _calls(message)
        out["calls"] = [(name, rendered_arguments(args)) for name, args in calls]
        reasoning = message.get("reasoning_content")
        if keep_reasoning and calls and isinstance(reasoning, str):
            out["reasoning"] = reasoning
    return out


def _reasoning_rendered(current: WireView, message: Mapping[str, Any]) -> bool:
    """Whether this assistant turn's reasoning reaches the prompt (DeepSeek's rule: a turn that
    made tool calls keeps it, in thinking mode)."""
    return current.thinking and bool(message.get("tool_calls"))


def _echo_changes(
    produced: Mapping[str, Any],
    sent: Any,
    position: int,
    current: WireView,
    rejected_at: int | None,
) -> list[Change]:
    """Compare the assistant turn the model produced with the one the client sent back."""
    if not isinstance(sent, Mapping) or sent.get("role") != "assistant":
        return []
    where = f"messages[{current.wire_index(position)}]"
    component = 2 + position
    out: list[Change] = []
    reasoning = produced.get("reasoning_content")
    sent_reasoning = sent.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning and not isinstance(sent_reasoning, str):
        rejected = rejected_at == position
        out.append(
            Change(
                code="reasoning-dropped",
                detail=(
                    f"{where} was sent without the model's reasoning_content ({len(reasoning)} "
                    "characters)"
                    + (
                        "; the API refuses this request (400: reasoning_content must be passed "
                        "back in thinking mode)"
                        if rejected
                        else ""
                    )
                ),
                evidence=(f"produced: reasoning_content {reasoning[:60]!r}", "sent: (absent)"),
                where=f"{where}.reasoning_content",
                component=component,
                rendered=_reasoning_rendered(current, produced),
                rejected=rejected,
                signature="reasoning-dropped",
            )
        )
    elif (
        isinstance(reasoning, str)
        and isinstance(sent_reasoning, str)
        and reasoning != sent_reasoning
    ):
        location, (x, y) = _location(reasoning, sent_reasoning)
        out.append(
            Change(
                code="reasoning-altered",
                detail=f"{where}.reasoning_content differs from the model's at {location}",
                evidence=(f"produced: {x}", f"sent:     {y}"),
                where=f"{where}.reasoning_content",
                component=component,
                rendered=_reasoning_rendered(current, produced),
                diff=text_diff(reasoning, sent_reasoning),
                signature="reasoning-altered",
            )
        )
    for i, ((name, made), (_, echoed)) in enumerate(
        zip(_calls(produced), _calls(sent), strict=False)
    ):
        if made == echoed:
            continue
        made_text = made if isinstance(made, str) else canonical_json(made)
        echoed_text = echoed if isinstance(echoed, str) else canonical_json(echoed)
        try:
            same = _as_object(made_text) == _as_object(echoed_text)
        except ValueError:
            same = False
        if not same:
            continue
        out.append(
            Change(
                code="tool-args-reserialized",
                detail=(
                    f"{where}.tool_calls[{i}] ({name!r}): the arguments mean the same JSON but "
                    "are written differently"
                ),
                evidence=(f"produced: {made_text}", f"sent:     {echoed_text}"),
                where=f"{where}.tool_calls[{i}].function.arguments",
                component=component,
                rendered=rendered_arguments(made_text) != rendered_arguments(echoed_text),
                diff=text_diff(made_text, echoed_text),
                signature="tool-args-reserialized",
            )
        )
    return out


def _meaning(message: Mapping[str, Any]) -> tuple[str, list[tuple[str, Any]]]:
    """An assistant turn's text and tool calls, arguments by value (their spelling aside)."""
    calls = []
    for name, arguments in _calls(message):
        value = arguments
        if isinstance(arguments, str):
            try:
                value = canonical_json(_as_object(arguments))
            except ValueError:
                value = arguments
        elif arguments is not None:
            value = canonical_json(arguments)
        calls.append((name, value))
    return content_text(message.get("content")), calls


def _answer_edited(
    produced: Mapping[str, Any], sent: Any, position: int, current: WireView
) -> list[Change]:
    """The model's answer resent with other content or other tool calls than it produced (the
    reasoning and the spelling of arguments are :func:`_echo_changes`' to judge)."""
    if not isinstance(sent, Mapping) or sent.get("role") != "assistant":
        return []
    if _meaning(produced) == _meaning(sent):
        return []
    where = f"messages[{current.wire_index(position)}]"
    field, evidence, diff = _message_diff(
        *({k: v for k, v in m.items() if k != "reasoning_content"} for m in (produced, sent))
    )
    return [
        Change(
            code="history-rewritten",
            detail=f"{where} is the model's answer resent edited: it is not what the model produced",
            evidence=tuple(
                e.replace("before:", "produced:", 1).replace("after: ", "sent:    ", 1)
                for e in evidence
            ),
            where=where + field,
            component=2 + position,
            diff=diff,
            signature=f"history-rewritten answer {where}{field}",
        )
    ]


def _as_object(text: str) -> Any:
    """Arguments text as a value; an empty text means no arguments (``{}``)."""
    return {} if text.strip() == "" else json.loads(text)


def _message_diff(old: Any, new: Any) -> tuple[str, tuple[str, ...], TextDiff | None]:
    """The first differing field of two messages, with the differing text visible."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        for key in dict.fromkeys([*old, *new]):
            a, b = old.get(key), new.get(key)
            if a == b:
                continue
            if isinstance(a, str) and isinstance(b, str):
                location, (x, y) = _location(a, b)
                return f".{key} {location}", (f"before: {x}", f"after:  {y}"), text_diff(a, b)
            a_text, b_text = content_text(a), content_text(b)
            return (
                f".{key}",
                (f"before: {a_text[:100]!r}", f"after:  {b_text[:100]!r}"),
                text_diff(a_text, b_text),
            )
    a_text, b_text = canonical_json(old), canonical_json(new)
    return "", (f"before: {a_text[:100]}", f"after:  {b_text[:100]}"), text_diff(a_text, b_text)


def _same_turn(produced: Mapping[str, Any], sent: Any) -> bool:
    """Whether ``sent`` is the model's answer resent (content and tool-call names agree)."""
    if not isinstance(sent, Mapping) or sent.get("role") != "assistant":
        return False
    names = [name for name, _ in _calls(produced)]
    sent_names = [name for name, _ in _calls(sent)]
    return content_text(produced.get("content")) == content_text(sent.get("content")) and (
        names == sent_names
    )


def _rejected_at(current: WireView) -> int | None:
    return missing_reasoning(
        current.messages,
        thinking=current.thinking,
        has_tools=bool(current.tools),
        anthropic=current.endpoint == "anthropic",
    )


def _history_changes(
    previous: WireView, current: WireView, answer: Mapping[str, Any] | None
) -> list[Change]:
    old, new = list(previous.messages), list(current.messages)
    rejected_at = _rejected_at(current)
    same = 0
    for x, y in zip(old, new, strict=False):
        if x != y:
            break
        same += 1
    out: list[Change] = []
    if same < len(old):
        where = f"messages[{current.wire_index(same)}]"
        component = 2 + same
        if same < len(new):
            a, b = old[same], new[same]
            if (
                isinstance(a, Mapping)
                and isinstance(b, Mapping)
                and a.get("role") == b.get("role") == "assistant"
            ):
                echo = _echo_changes(a, b, same, current, rejected_at)
                stripped = [
                    {k: v for k, v in m.items() if k not in ("reasoning_content", "tool_calls")}
                    for m in (a, b)
                ]
                if echo and stripped[0] == stripped[1]:
                    return echo
            later = next((j for j in range(same + 1, len(old)) if old[j] == b), None)
            if later is not None or (answer is not None and _same_turn(answer, b)):
                removed = (later if later is not None else len(old)) - same
                return [
                    Change(
                        code="history-rewritten",
                        detail=(
                            f"{removed} message(s) from {where} on were removed (truncation): "
                            f"the previous request had {len(old) + previous.message_offset} "
                            "messages"
                        ),
                        evidence=(f"removed: {canonical_json(old[same])[:80]}",),
                        where=where,
                        component=component,
                        signature=f"history-rewritten removed {where}",
                    )
                ]
            field, evidence, diff = _message_diff(a, b)
            keep = current.thinking
            rendered = _rendered_message(a, keep_reasoning=keep) != _rendered_message(
                b, keep_reasoning=keep
            )
            kind = (
                "replaced by a message the previous request did not have, and the history "
                "shortened (truncation, summarization or compaction)"
                if len(new) < len(old)
                else "edited"
            )
            return [
                Change(
                    code="history-rewritten",
                    detail=f"{where} was {kind}",
                    evidence=evidence,
                    where=where + field,
                    component=component,
                    rendered=rendered,
                    diff=diff,
                    signature=f"history-rewritten {where}{field}",
                )
            ]
        return [
            Change(
                code="history-rewritten",
                detail=(
                    f"the history was cut: the previous request had "
                    f"{len(old) + previous.message_offset} messages, this one "
                    f"{len(new) + current.message_offset} (truncation)"
                ),
                where=where,
                component=min(component, 2 + len(new)),
                signature="history-rewritten cut",
            )
        ]
    if answer is not None and len(new) > len(old):
        out += _echo_changes(answer, new[len(old)], len(old), current, rejected_at)
        out += _answer_edited(answer, new[len(old)], len(old), current)
    if (
        rejected_at is not None
        and rejected_at >= len(old)
        and not any(c.code == "reasoning-dropped" for c in out)
    ):
        where = f"messages[{current.wire_index(rejected_at)}]"
        out.append(
            Change(
                code="reasoning-dropped",
                detail=(
                    f"{where} is an assistant turn sent without its reasoning in thinking "
                    "mode; the API refuses this request (400: reasoning_content must be "
                    "passed back)"
                ),
                evidence=(f"sent: {canonical_json(new[rejected_at])[:100]}",),
                where=f"{where}.reasoning_content",
                component=2 + rejected_at,
                rendered=_reasoning_rendered(current, new[rejected_at]),
                rejected=True,
                signature="reasoning-dropped rejected",
            )
        )
    return out


def compare(
    previous: Exchange,
    previous_view: WireView,
    current: Exchange,
    current_view: WireView,
) -> list[Change]:
    """Every change from ``previous`` (and its answer) to ``current``, in prompt order."""
    names = (f"request #{previous.index + 1}", f"request #{current.index + 1}")
    out = _params_changes(previous_view, current_view)
    out += _system_changes(previous_view, current_view, names)
    tools = _tools_change(previous_view, current_view)
    if tools is not None:
        out.append(tools)
    if not any(c.code == "system-moved" for c in out):
        out += _history_changes(previous_view, current_view, previous.response)
    return sorted(out, key=lambda c: c.component)


def refusal_reason(view: WireView) -> str | None:
    """Why the API refuses this request, when the pass-back rule says it does."""
    at = _rejected_at(view)
    if at is None:
        return None
    return (
        f"messages[{view.wire_index(at)}] is an assistant turn without its reasoning in "
        "thinking mode (the pass-back rule)"
    )


def describe_components(view: WireView) -> list[str]:
    """Labels of the view's components, in prompt order (``system``, ``tools``,
    ``messages[2] user``, …)."""
    out = ["system", "tools"]
    for i, message in enumerate(view.messages):
        role = message.get("role") if isinstance(message, Mapping) else None
        out.append(f"messages[{view.wire_index(i)}] {role or '?'}")
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
