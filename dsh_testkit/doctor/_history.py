"""What changed in the history: the messages resent, and the echo of the model's answer.

A request resends the earlier messages and the model's answer to the request it extends; this
module finds where that history departs (an edit, a removal, a truncation) and how the resent
answer differs from what the model produced (re-serialized arguments, reasoning dropped or
altered), and whether the pass-back rule makes the API refuse it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from dsh_core.providers._passback import missing_reasoning

from ..prompt._wire_view import WireView, canonical_json, content_text, rendered_arguments
from ._change import Change
from ._text import TextDiff, locate, text_diff

__all__ = ["history_changes", "rejected_at"]


def _calls(message: Mapping[str, Any]) -> list[tuple[str, Any]]:
    out = []
    for call in message.get("tool_calls") or ():
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping):
            out.append((str(function.get("name")), function.get("arguments")))
    return out


def _reasoning_of(message: Mapping[str, Any]) -> str | None:
    """A turn's reasoning: ``reasoning_content`` (chat), or its ``thinking`` blocks' text
    (Anthropic content blocks); ``None`` when it carries none."""
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str):
        return reasoning
    content = message.get("content")
    if not isinstance(content, list):
        return None
    blocks = [b for b in content if isinstance(b, Mapping) and b.get("type") == "thinking"]
    if not blocks:
        return None
    return "".join(str(b.get("thinking") or "") for b in blocks)


def _without_reasoning(message: Mapping[str, Any]) -> dict[str, Any]:
    """The turn without its reasoning, in either shape (what the echo checks compare)."""
    out = {k: v for k, v in message.items() if k != "reasoning_content"}
    content = out.get("content")
    if isinstance(content, list):
        out["content"] = [
            b for b in content if not (isinstance(b, Mapping) and b.get("type") == "thinking")
        ]
    return out


def _reasoning_words(current: WireView) -> tuple[str, str]:
    """How the request's own format names a turn's reasoning: the path suffix and the words
    (``reasoning_content`` on chat completions; thinking blocks in ``content`` on Anthropic's)."""
    if current.endpoint == "anthropic":
        return ".content", "thinking blocks"
    return ".reasoning_content", "reasoning_content"


def _rendered_message(message: Any, *, keep_reasoning: bool, arguments_as_text: bool) -> Any:
    """What the template renders of one history message (chat shape)."""
    if not isinstance(message, Mapping):
        return message
    role = message.get("role")
    out: dict[str, Any] = {"role": role, "content": content_text(message.get("content"))}
    if role == "assistant":
        calls = _calls(message)
        out["calls"] = [
            (name, args if arguments_as_text else rendered_arguments(args)) for name, args in calls
        ]
        reasoning = message.get("reasoning_content")
        if keep_reasoning and calls and isinstance(reasoning, str):
            out["reasoning"] = reasoning
    return out


def _reasoning_rendered(current: WireView, message: Mapping[str, Any]) -> bool:
    """Whether this assistant turn's reasoning reaches the prompt (DeepSeek's rule: a turn that
    made tool calls keeps it, in thinking mode)."""
    content = message.get("content")
    uses_tools = bool(message.get("tool_calls")) or (
        isinstance(content, list)
        and any(isinstance(b, Mapping) and b.get("type") == "tool_use" for b in content)
    )
    return current.thinking and uses_tools


def _echo_changes(
    produced: Mapping[str, Any],
    sent: Any,
    position: int,
    current: WireView,
    refused_at: int | None,
    *,
    arguments_as_text: bool,
) -> list[Change]:
    """Compare the assistant turn the model produced with the one the client sent back."""
    if not isinstance(sent, Mapping) or sent.get("role") != "assistant":
        return []
    where = f"messages[{current.wire_index(position)}]"
    component = 2 + position
    out: list[Change] = []
    reasoning = _reasoning_of(produced)
    sent_reasoning = _reasoning_of(sent)
    suffix, words = _reasoning_words(current)
    if isinstance(reasoning, str) and reasoning and not isinstance(sent_reasoning, str):
        rejected = refused_at == position
        out.append(
            Change(
                code="reasoning-dropped",
                detail=(
                    f"{where} was sent without the model's {words} ({len(reasoning)} "
                    "characters)"
                    + (
                        f"; the API refuses this request (400: {words} must be passed "
                        "back in thinking mode)"
                        if rejected
                        else ""
                    )
                ),
                evidence=(f"produced: {words} {reasoning[:60]!r}", "sent: (absent)"),
                where=f"{where}{suffix}",
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
        location, (x, y) = locate(reasoning, sent_reasoning)
        out.append(
            Change(
                code="reasoning-altered",
                detail=f"{where}: the {words} differ from the model's at {location}",
                evidence=(f"produced: {x}", f"sent:     {y}"),
                where=f"{where}{suffix}",
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
                rendered=arguments_as_text
                or rendered_arguments(made_text) != rendered_arguments(echoed_text),
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
    produced, sent = _without_reasoning(produced), _without_reasoning(sent)
    if _meaning(produced) == _meaning(sent):
        return []
    where = f"messages[{current.wire_index(position)}]"
    field, evidence, diff = _message_diff(produced, sent)
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
                location, (x, y) = locate(a, b)
                return f".{key} {location}", (f"before: {x}", f"after:  {y}"), text_diff(a, b)
            a_text, b_text = content_text(a), content_text(b)
            return (
                f".{key}",
                (f"before: {a_text[:100]!r}", f"after:  {b_text[:100]!r}"),
                text_diff(a_text, b_text),
            )
    a_text, b_text = canonical_json(old), canonical_json(new)
    return "", (f"before: {a_text[:100]}", f"after:  {b_text[:100]}"), text_diff(a_text, b_text)


_REMOVED_SHOWN = 4
"""Removed messages a truncation's evidence lists one by one; the rest are counted."""


def _removed(old: list[Any], start: int, count: int, previous: WireView) -> tuple[str, ...]:
    """One evidence line per removed message of the previous request (its index there, role,
    and the start of its text or its tool calls), the first :data:`_REMOVED_SHOWN` of them."""
    lines = []
    for position in range(start, start + min(count, _REMOVED_SHOWN)):
        message = old[position]
        where = f"messages[{previous.wire_index(position)}]"
        if not isinstance(message, Mapping):
            lines.append(f"removed {where}: {canonical_json(message)[:60]}")
            continue
        text = content_text(message.get("content"))
        shown = repr(text[:60]) + ("…" if len(text) > 60 else "")
        calls = [name for name, _ in _calls(message)]
        if calls:
            shown += f", calls {', '.join(repr(name) for name in calls)}"
        lines.append(f"removed {where} ({message.get('role', 'no role')}): {shown}")
    if count > _REMOVED_SHOWN:
        lines.append(f"… and {count - _REMOVED_SHOWN} more")
    return tuple(lines)


def _same_turn(produced: Mapping[str, Any], sent: Any) -> bool:
    """Whether ``sent`` is the model's answer resent (content and tool-call names agree)."""
    if not isinstance(sent, Mapping) or sent.get("role") != "assistant":
        return False
    names = [name for name, _ in _calls(produced)]
    sent_names = [name for name, _ in _calls(sent)]
    return content_text(produced.get("content")) == content_text(sent.get("content")) and (
        names == sent_names
    )


def rejected_at(current: WireView, previous: WireView | None = None) -> int | None:
    """The index (in ``current.messages``) of the first assistant turn the pass-back rule
    refuses; ``None`` when it passes. Remembered per view; with ``previous`` (the request
    ``current`` extends), only the messages after the history both share are read."""
    found = _REJECTED.get(id(current))
    if found is not None and found[0] is current:
        return found[1]
    at = _rejected_after(current, previous)
    if len(_REJECTED) >= _REJECTED_ENTRIES:
        _REJECTED.clear()
    _REJECTED[id(current)] = (current, at)
    return at


def _rejected_after(current: WireView, previous: WireView | None) -> int | None:
    thinking, has_tools = current.thinking, bool(current.tools)
    anthropic = current.endpoint == "anthropic"
    start = 0
    if previous is not None:
        known = _REJECTED.get(id(previous))
        count = len(previous.messages)
        if (
            known is not None
            and known[0] is previous
            and (previous.thinking, bool(previous.tools), previous.endpoint)
            == (thinking, has_tools, current.endpoint)
            and current.messages[:count] == previous.messages  # in C; shared objects at once
        ):
            if known[1] is not None:
                return known[1]  # the rule reads each turn alone: the same turn is refused
            start = count
    at = missing_reasoning(
        current.messages[start:], thinking=thinking, has_tools=has_tools, anthropic=anthropic
    )
    return None if at is None else start + at


_REJECTED: dict[int, tuple[WireView, int | None]] = {}
"""Each view's answer (view id → ``(view, index)``): a request is asked more than once, and a
parent's answer starts its children's."""
_REJECTED_ENTRIES = 4096


def history_changes(
    previous: WireView,
    current: WireView,
    answer: Mapping[str, Any] | None,
    *,
    arguments_as_text: bool = False,
) -> list[Change]:
    """Where the resent history departs from ``previous`` and its ``answer``; with
    ``arguments_as_text`` (DeepSeek-V3's template) a call's arguments render as their text."""
    old, new = list(previous.messages), list(current.messages)
    refused_at = rejected_at(current, previous)
    same = 0
    if len(new) >= len(old) and old == new[: len(old)]:
        same = len(old)  # the whole history resent (compared in C; shared objects at once)
    else:
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
                echo = _echo_changes(
                    a, b, same, current, refused_at, arguments_as_text=arguments_as_text
                )
                stripped = [
                    {k: v for k, v in _without_reasoning(m).items() if k != "tool_calls"}
                    for m in (a, b)
                ]
                if echo and stripped[0] == stripped[1]:
                    return echo
            later = next((j for j in range(same + 1, len(old)) if old[j] == b), None)
            if later is not None or (answer is not None and _same_turn(answer, b)):
                removed = (later if later is not None else len(old)) - same
                were = "message was" if removed == 1 else "messages were"
                return [
                    Change(
                        code="history-rewritten",
                        detail=(
                            f"{removed} {were} removed from {where} on (truncation): the "
                            f"previous request had {len(old) + previous.message_offset} messages"
                        ),
                        evidence=_removed(old, same, removed, previous),
                        where=where,
                        component=component,
                        signature=f"history-rewritten removed {where}",
                    )
                ]
            field, evidence, diff = _message_diff(a, b)
            keep = current.thinking
            rendered = _rendered_message(
                a, keep_reasoning=keep, arguments_as_text=arguments_as_text
            ) != _rendered_message(b, keep_reasoning=keep, arguments_as_text=arguments_as_text)
            if not rendered:
                return []  # a difference the template never renders (content "" vs null)
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
        out += _echo_changes(
            answer,
            new[len(old)],
            len(old),
            current,
            refused_at,
            arguments_as_text=arguments_as_text,
        )
        out += _answer_edited(answer, new[len(old)], len(old), current)
    if (
        refused_at is not None
        and refused_at >= len(old)
        and not any(c.code == "reasoning-dropped" for c in out)
    ):
        where = f"messages[{current.wire_index(refused_at)}]"
        suffix, words = _reasoning_words(current)
        out.append(
            Change(
                code="reasoning-dropped",
                detail=(
                    f"{where} is an assistant turn sent without its reasoning in thinking "
                    f"mode; the API refuses this request (400: {words} must be "
                    "passed back)"
                ),
                evidence=(f"sent: {canonical_json(new[refused_at])[:100]}",),
                where=f"{where}{suffix}",
                component=2 + refused_at,
                rendered=_reasoning_rendered(current, new[refused_at]),
                rejected=True,
                signature="reasoning-dropped rejected",
            )
        )
    return out
