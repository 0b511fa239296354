"""The cache doctor's evidence: cause codes, and where and why one request departs from another.

:func:`compare_exchanges` compares a request with the previous one of its conversation in wire
terms — parameters, the system prompt (line, column, both sides around the first difference,
volatile spans named), the tool list, the history and the echo of the model's last answer — and
returns the divergence and the findings (:class:`Finding`); :mod:`._doctor` adds the figures.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from dsh_core import locate_text_difference

from ..traces import Endpoint, Exchange
from ..traces._model import common_prefix_length

__all__ = ["CAUSE_CODES", "CauseCode", "Finding", "compare_exchanges", "text_divergence"]

CauseCode: TypeAlias = Literal[
    "volatile-system-text",
    "system-changed",
    "tools-changed",
    "tool-args-reserialized",
    "reasoning-dropped",
    "reasoning-altered",
    "history-rewritten",
    "params-changed",
    "below-cache-unit",
    "not-yet-persisted",
    "provider-miss",
]

CAUSE_CODES: Final[Mapping[str, str]] = {
    "volatile-system-text": "The system prompt changes in a volatile-looking span (a timestamp, "
    "date, UUID, counter or random id), so nothing after that point can be reused.",
    "system-changed": "The system prompt was edited, so nothing after the edit can be reused.",
    "tools-changed": "The tool list changed; tools are part of the prompt, so everything after "
    "the first changed tool (the later tools and the whole history) is read again.",
    "tool-args-reserialized": "The client resent the model's tool-call arguments with different "
    "JSON formatting, so the cache unit that ends at the model's output can never be reused.",
    "reasoning-dropped": "The model's reasoning_content was not sent back with its turn.",
    "reasoning-altered": "The reasoning_content sent back differs from what the model produced.",
    "history-rewritten": "An earlier message was edited or removed, so the prompt diverges "
    "there and everything after it is read again.",
    "params-changed": "A prefix-relevant parameter changed (model, thinking mode, reasoning "
    "effort, user_id); the cache is not shared across them.",
    "below-cache-unit": "The shared prefix is shorter than one cache unit, so it cannot hit.",
    "not-yet-persisted": "The request was sent before the cache could hold the one it extends.",
    "provider-miss": "A pure extension still missed: the provider's cache is best-effort "
    "(eviction, another replica).",
}
"""Every cause code and its sentence (stable: codes are never renamed)."""

_CHANGE_CODES: Final = frozenset(
    {
        "volatile-system-text",
        "system-changed",
        "tools-changed",
        "history-rewritten",
        "params-changed",
        "reasoning-altered",
    }
)
_PARAMS: Final = ("model", "thinking", "reasoning_effort", "user_id", "user")

_VOLATILE: Final = re.compile(
    r"\d{4}-\d{2}-\d{2}(?:[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?"
    r"|\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?"
    r"|[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
    r"|\b(?=[0-9a-fA-F]*\d)[0-9a-fA-F]{8,}\b"
    r"|\b\d+\b"
    r"|\b(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*\b"
    r"|\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\b"
)
"""What looks volatile in a system prompt: dates, times, UUIDs, hex ids, counters, day/month names."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    """One cause of a lost (or at-risk) cache hit, with the evidence."""

    code: CauseCode
    detail: str
    """What happened here, in wire terms (``tool 'grep' inserted at position 1 of 3``)."""
    evidence: tuple[str, ...] = ()
    """Lines showing it: both sides of the differing text around the first difference (the
    project's one wording, :func:`dsh_core.locate_text_difference`), the arguments as produced
    and as resent, the timing."""
    where: str | None = None
    """The wire location (``system line 31``, ``tools[1]``, ``messages[3].reasoning_content``)."""
    rejected: bool | None = None
    """For ``reasoning-dropped``: whether the API answers 400 for this request."""

    @property
    def sentence(self) -> str:
        return CAUSE_CODES[self.code]

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "sentence": self.sentence,
            "detail": self.detail,
            "where": self.where,
            "evidence": list(self.evidence),
            "rejected": self.rejected,
        }


def _split_system(body: Mapping[str, Any]) -> tuple[str, list[Any]]:
    messages = body.get("messages")
    messages = list(messages) if isinstance(messages, list) else []
    parts: list[str] = []
    if "system" in body:
        system = body["system"]
        parts.append(
            system
            if isinstance(system, str)
            else "\n".join(str(b.get("text", "")) for b in system or () if isinstance(b, Mapping))
        )
    while (
        messages
        and isinstance(messages[0], Mapping)
        and messages[0].get("role") in ("system", "developer")
    ):
        content = messages.pop(0).get("content")
        parts.append(content if isinstance(content, str) else json.dumps(content))
    return "\n".join(parts), messages


def text_divergence(a: str, b: str) -> tuple[str, tuple[str, str], tuple[str, str]]:
    """Where two texts first differ and the differing spans, in the project's one wording.

    Returns ``(location, (span_a, span_b), (excerpt_a, excerpt_b))``: location is ``line L
    column C`` and the excerpts are :func:`dsh_core.locate_text_difference`'s (the differing
    line around that column on both sides, so the differing characters are visible); the spans
    are what differs between the common prefix and the common suffix (what the doctor inspects
    for volatile-looking text). Equal texts give an empty location.
    """
    found = locate_text_difference(a, b)
    if found is None:
        return "", ("", ""), ("", "")
    start = found.offset
    limit = min(len(a), len(b))
    end = 0
    while end < limit - start and a[len(a) - 1 - end] == b[len(b) - 1 - end]:
        end += 1
    return (
        f"line {found.line} column {found.column}",
        (a[start : len(a) - end], b[start : len(b) - end]),
        (found.expected, found.actual),
    )


def _volatile_token(text: str, lo: int, hi: int) -> str | None:
    """The volatile-looking token overlapping ``text[lo:hi]`` (or touching it when empty)."""
    for match in _VOLATILE.finditer(text, max(0, lo - 40), min(len(text), hi + 40)):
        if match.start() <= hi and match.end() >= lo and match.group():
            if match.end() == lo and match.start() == hi == lo:
                continue
            return match.group()
    return None


def _volatile_span(a: str, b: str, span_a: str, span_b: str, start: int) -> str | None:
    """The volatile-looking span on both sides, as ``'old' → 'new'`` (``None`` if not volatile)."""
    old = _volatile_token(a, start, start + len(span_a)) if a else None
    new = _volatile_token(b, start, start + len(span_b)) if b else None
    if old is None and new is None:
        return None
    if old is None:
        return f"{new!r} added"
    if new is None:
        return f"{old!r} removed"
    return f"{old!r} → {new!r}"


def _first_diff_start(a: str, b: str) -> int:
    return common_prefix_length(a, b)


def _tool_name(tool: Any) -> str:
    if isinstance(tool, Mapping):
        function = tool.get("function")
        if isinstance(function, Mapping) and isinstance(function.get("name"), str):
            return str(function["name"])
        if isinstance(tool.get("name"), str):
            return str(tool["name"])
    return json.dumps(tool, sort_keys=True)[:40]


def _tools_finding(old: Any, new: Any) -> Finding:
    old_list = list(old) if isinstance(old, list) else []
    new_list = list(new) if isinstance(new, list) else []
    old_names = [_tool_name(t) for t in old_list]
    new_names = [_tool_name(t) for t in new_list]
    added = [n for n in new_names if n not in old_names]
    removed = [n for n in old_names if n not in new_names]
    parts: list[str] = []
    first_changed = next(
        (
            i
            for i, (x, y) in enumerate(zip(old_list, new_list, strict=False))
            if json.dumps(x, sort_keys=True) != json.dumps(y, sort_keys=True)
        ),
        min(len(old_list), len(new_list)),
    )
    for name in added:
        at = new_names.index(name)
        where = (
            "appended at the end"
            if at >= len(old_names)
            else (
                f"inserted at position {at + 1} of {len(new_names)} (mid-list: every tool after it "
                "and the whole history are read again)"
            )
        )
        parts.append(f"tool {name!r} {where}")
    parts += [f"tool {name!r} removed" for name in removed]
    kept_old = [n for n in old_names if n in new_names]
    kept_new = [n for n in new_names if n in old_names]
    if kept_old != kept_new:
        parts.append(f"tools reordered: {kept_old} → {kept_new}")
    for name in kept_new:
        before = old_list[old_names.index(name)]
        after = new_list[new_names.index(name)]
        if json.dumps(before, sort_keys=True) != json.dumps(after, sort_keys=True):
            parts.append(f"tool {name!r} schema edited")
    if not parts:
        parts.append("the tool list differs")
    evidence = (f"before: {old_names}", f"after:  {new_names}")
    return Finding(
        code="tools-changed",
        detail="; ".join(parts),
        evidence=evidence,
        where=f"tools[{first_changed}]",
    )


def _thinking(body: Mapping[str, Any], endpoint: Endpoint = "chat") -> bool:
    """Whether the request runs in thinking mode (the providers' one rule)."""
    from dsh_core.providers import resolve_model, thinking_enabled

    model = body.get("model")
    thinking = body.get("thinking")
    kind = thinking.get("type") if isinstance(thinking, Mapping) else None
    effort: Any = body.get("reasoning_effort")
    reasoning = body.get("reasoning")
    if effort is None and isinstance(reasoning, Mapping):
        effort = reasoning.get("effort")
    return thinking_enabled(
        resolve_model(model, endpoint=endpoint) if isinstance(model, str) else None,
        thinking_type=kind if isinstance(kind, str) else None,
        effort=effort if isinstance(effort, str) else None,
    )


def _echo_findings(
    produced: Mapping[str, Any], sent: Any, where: str, body: Mapping[str, Any]
) -> list[Finding]:
    """Compare the assistant turn the model produced with the one the client sent back."""
    if not isinstance(sent, Mapping) or sent.get("role") != "assistant":
        return []
    out: list[Finding] = []
    reasoning = produced.get("reasoning_content")
    sent_reasoning = sent.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning and not isinstance(sent_reasoning, str):
        rejected = _thinking(body) and bool(sent.get("tool_calls"))
        out.append(
            Finding(
                code="reasoning-dropped",
                detail=(
                    f"{where} was sent without the model's reasoning_content ({len(reasoning)} "
                    "characters); "
                    + (
                        "the API rejects this request (400: reasoning_content must be passed "
                        "back in thinking mode on a tool-call turn)"
                        if rejected
                        else "the API accepts it, but the prompt no longer matches the cached one"
                    )
                ),
                evidence=(f"produced: reasoning_content {reasoning[:60]!r}", "sent: (absent)"),
                where=f"{where}.reasoning_content",
                rejected=rejected,
            )
        )
    elif (
        isinstance(reasoning, str)
        and isinstance(sent_reasoning, str)
        and reasoning != sent_reasoning
    ):
        location, _, (x, y) = text_divergence(reasoning, sent_reasoning)
        out.append(
            Finding(
                code="reasoning-altered",
                detail=f"{where}.reasoning_content differs from the model's at {location}",
                evidence=(f"produced: {x}", f"sent:     {y}"),
                where=f"{where}.reasoning_content",
                rejected=False,
            )
        )
    calls = produced.get("tool_calls") or []
    sent_calls = sent.get("tool_calls") or []
    for i, (call, back) in enumerate(zip(calls, sent_calls, strict=False)):
        try:
            made = call["function"]["arguments"]
            echoed = back["function"]["arguments"]
        except (KeyError, TypeError):
            continue
        if made == echoed or not isinstance(made, str) or not isinstance(echoed, str):
            continue
        try:
            same = json.loads(made) == json.loads(echoed)
        except ValueError:
            same = False
        if same:
            name = call["function"].get("name")
            out.append(
                Finding(
                    code="tool-args-reserialized",
                    detail=(
                        f"{where}.tool_calls[{i}] ({name!r}): the arguments mean the same JSON "
                        "but are written differently"
                    ),
                    evidence=(f"produced: {made}", f"sent:     {echoed}"),
                    where=f"{where}.tool_calls[{i}].function.arguments",
                )
            )
    return out


def _passback_missing(
    messages: Sequence[Any], body: Mapping[str, Any], start: int, offset: int
) -> list[Finding]:
    """Assistant tool-call turns sent without reasoning in thinking mode (no answer needed)."""
    if not _thinking(body):
        return []
    out = []
    for i in range(start, len(messages)):
        message = messages[i]
        if (
            isinstance(message, Mapping)
            and message.get("role") == "assistant"
            and message.get("tool_calls")
            and not isinstance(message.get("reasoning_content"), str)
        ):
            out.append(
                Finding(
                    code="reasoning-dropped",
                    detail=(
                        f"messages[{i + offset}] is a tool-call turn sent without "
                        "reasoning_content in thinking mode; the API rejects this request (400)"
                    ),
                    evidence=(f"sent: {json.dumps(message, ensure_ascii=False)[:100]}",),
                    where=f"messages[{i + offset}].reasoning_content",
                    rejected=True,
                )
            )
    return out


def _message_diff(old: Any, new: Any) -> tuple[str, tuple[str, ...]]:
    """The first differing field of two messages, with the differing text visible."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        for key in dict.fromkeys([*old, *new]):
            a, b = old.get(key), new.get(key)
            if a == b:
                continue
            if isinstance(a, str) and isinstance(b, str):
                location, _, (x, y) = text_divergence(a, b)
                return f".{key} {location}", (f"before: {x}", f"after:  {y}")
            return f".{key}", (
                f"before: {json.dumps(a, ensure_ascii=False)[:100]}",
                f"after:  {json.dumps(b, ensure_ascii=False)[:100]}",
            )
    return "", (
        f"before: {json.dumps(old, ensure_ascii=False)[:100]}",
        f"after:  {json.dumps(new, ensure_ascii=False)[:100]}",
    )


def _same_turn(produced: Mapping[str, Any], sent: Any) -> bool:
    """Whether ``sent`` is the model's answer resent (content and tool-call names agree)."""
    if not isinstance(sent, Mapping) or sent.get("role") != "assistant":
        return False
    names = [c.get("function", {}).get("name") for c in produced.get("tool_calls") or ()]
    sent_names = [c.get("function", {}).get("name") for c in sent.get("tool_calls") or ()]
    return (produced.get("content") or "") == (sent.get("content") or "") and names == sent_names


def _history_findings(
    old: list[Any], new: list[Any], offset: int, previous: Exchange, current: Exchange
) -> tuple[str | None, list[Finding]]:
    """Compare the previous request's messages (and answer) with this request's."""
    same = 0
    for x, y in zip(old, new, strict=False):
        if x != y:
            break
        same += 1
    if same < len(old):
        where = f"messages[{same + offset}]"
        if same < len(new):
            a, b = old[same], new[same]
            if (
                isinstance(a, Mapping)
                and isinstance(b, Mapping)
                and a.get("role") == b.get("role") == "assistant"
            ):
                echo = _echo_findings(a, b, where, current.body)
                stripped_a = {
                    k: v for k, v in a.items() if k not in ("reasoning_content", "tool_calls")
                }
                stripped_b = {
                    k: v for k, v in b.items() if k not in ("reasoning_content", "tool_calls")
                }
                if echo and stripped_a == stripped_b:
                    return where + echo[0].where.removeprefix(where) if echo[
                        0
                    ].where else where, echo
            # removed messages: does b appear later in old (a truncation), or is it new text?
            later = next((j for j in range(same + 1, len(old)) if old[j] == b), None)
            if later is not None:
                removed = later - same
                return where, [
                    Finding(
                        code="history-rewritten",
                        detail=(
                            f"{removed} message(s) from {where} on were removed (truncation): "
                            f"the previous request had {len(old) + offset} messages"
                        ),
                        evidence=(f"removed: {json.dumps(old[same], ensure_ascii=False)[:80]}",),
                        where=where,
                    )
                ]
            answer = previous.response
            if answer is not None and _same_turn(answer, b):
                return where, [
                    Finding(
                        code="history-rewritten",
                        detail=(
                            f"{len(old) - same} message(s) from {where} on were removed "
                            "(truncation): the request continues with the model's answer right "
                            "after them"
                        ),
                        evidence=(f"removed: {json.dumps(old[same], ensure_ascii=False)[:80]}",),
                        where=where,
                    )
                ]
            field, evidence = _message_diff(a, b)
            shorter = len(new) < len(old)
            kind = (
                "replaced by a message the previous request did not have and the history "
                "shortened (truncation, summarization or compaction)"
                if shorter
                else "edited"
            )
            return where + field, [
                Finding(
                    code="history-rewritten",
                    detail=f"{where} was {kind}",
                    evidence=evidence,
                    where=where + field,
                )
            ]
        return where, [
            Finding(
                code="history-rewritten",
                detail=(
                    f"the history was cut: the previous request had {len(old) + offset} messages, "
                    f"this one {len(new) + offset} (truncation)"
                ),
                where=where,
            )
        ]
    findings: list[Finding] = []
    if previous.response is not None and len(new) > len(old):
        findings += _echo_findings(
            previous.response, new[len(old)], f"messages[{len(old) + offset}]", current.body
        )
    if not any(f.code == "reasoning-dropped" for f in findings):
        findings += _passback_missing(new, current.body, len(old), offset)
    return None, findings


def compare_exchanges(previous: Exchange, current: Exchange) -> tuple[str | None, list[Finding]]:
    """Where ``current`` first diverges from ``previous`` (``None``: it extends it) and why.

    The findings include causes that do not break the prefix of the previous request itself but
    cost the next hit (the echo of the model's answer) or get the request rejected.
    """
    out: list[Finding] = []
    divergence: str | None = None
    for key in _PARAMS:
        a, b = previous.body.get(key), current.body.get(key)
        if a != b:
            out.append(
                Finding(
                    code="params-changed",
                    detail=f"{key}: {json.dumps(a)} → {json.dumps(b)}",
                    where=key,
                )
            )
            divergence = divergence or key
    if _thinking(previous.body) != _thinking(current.body) and not any(
        f.where in ("thinking", "reasoning_effort", "model") for f in out
    ):
        out.append(
            Finding(
                code="params-changed",
                detail=f"thinking mode {_thinking(previous.body)} → {_thinking(current.body)}",
                where="thinking",
            )
        )
        divergence = divergence or "thinking"
    old_system, old_messages = _split_system(previous.body)
    new_system, new_messages = _split_system(current.body)
    offset = len(current.messages) - len(new_messages)
    if old_system != new_system:
        location, (span_a, span_b), (x, y) = text_divergence(old_system, new_system)
        start = _first_diff_start(old_system, new_system)
        volatile = _volatile_span(old_system, new_system, span_a, span_b, start)
        where = f"system {location}"
        evidence = (f"request #{previous.index + 1}: {x}", f"request #{current.index + 1}: {y}")
        if volatile is not None:
            out.append(
                Finding(
                    code="volatile-system-text",
                    detail=(
                        f"the system prompt changes at {location} in a volatile-looking span: "
                        f"{volatile}; move it out of the system prompt (e.g. into the latest "
                        "user message)"
                    ),
                    evidence=evidence,
                    where=where,
                )
            )
        else:
            out.append(
                Finding(
                    code="system-changed",
                    detail=f"the system prompt was edited at {location}",
                    evidence=evidence,
                    where=where,
                )
            )
        divergence = divergence or where
    old_tools, new_tools = previous.body.get("tools"), current.body.get("tools")
    if (old_tools or None) != (new_tools or None):
        finding = _tools_finding(old_tools, new_tools)
        out.append(finding)
        divergence = divergence or finding.where
    at, history = _history_findings(old_messages, new_messages, offset, previous, current)
    out += history
    divergence = divergence or at
    return divergence, out
