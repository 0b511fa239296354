"""The doctor's assertions: the same engine as ``dsh-testkit cache-report``, as a test failure.

Both take anything the doctor reads: a :class:`~dsh_testkit.capture.RequestCapture` (which
keeps the answers, so re-serialized arguments and dropped reasoning are found from it), a
``MockDeepSeek``, a ``ProxyServer``, a trace file of any kind, a cassette path, a list of wire
bodies or of logged ``GenerateOptions``.

- :func:`assert_cache_friendly`: no finding that cost tokens (or got the request refused),
  except the codes in ``allow`` — exactly the findings ``cache-report`` marks ``loss`` or
  ``refusal`` on the same input.
- :func:`assert_prefix_stable`: every request extends the request it is compared with, byte
  for byte as the template renders it, whatever the figures say — the stricter check for a
  harness whose every request must be cache-stable (it needs no usage at all).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

from dsh_core import GenerateOptions

from .._errors import PrefixInstability
from ..prompt._diff import diff_chat
from ..prompt._wire_view import wire_view
from ..traces import Trace, trace_of
from ._codes import CAUSE_CODES, CODES
from ._diagnose import diagnose
from ._errors import CacheUnfriendly
from ._report import DoctorReport
from ._text import one_line

__all__ = ["DEFAULT_ALLOWED", "assert_cache_friendly", "assert_prefix_stable", "failing_findings"]

DEFAULT_ALLOWED: Final = ("below-cache-unit", "not-yet-persisted", "provider-miss")
"""Codes :func:`assert_cache_friendly` accepts unless told otherwise: none is the client's doing
(a prompt shorter than one cache unit, the provider's timing, its best-effort cache)."""


def _checked(allow: Iterable[str]) -> set[str]:
    allowed = set(allow)
    unknown = sorted(allowed - set(CAUSE_CODES))
    if unknown:
        raise ValueError(
            f"unknown cause code(s) in allow: {', '.join(unknown)}; known: {', '.join(CAUSE_CODES)}"
        )
    return allowed


def _as_trace(value: Any) -> Any:
    """Logged ``GenerateOptions`` become the wire bodies the provider sends."""
    if isinstance(value, Sequence) and value and all(isinstance(v, GenerateOptions) for v in value):
        from dsh_core.providers import anthropic, deepseek

        return [
            anthropic.serialize_request(o)
            if o.provider == "anthropic"
            else deepseek.serialize_request(o)
            for o in value
        ]
    return value


def failing_findings(report: DoctorReport, allow: Iterable[str]) -> list[tuple[str, Any, Any]]:
    """``(conversation, request, finding)`` for every finding that fails: severity ``loss`` or
    ``refusal``, code not in ``allow``."""
    allowed = _checked(allow)
    return [
        (c.key, r, f)
        for c in report.conversations
        for r, f in c.findings()
        if f.severity != "note" and f.code not in allowed
    ]


def assert_cache_friendly(
    value: Any,
    allow: Iterable[str] = DEFAULT_ALLOWED,
    *,
    simulate: bool | None = None,
) -> DoctorReport:
    """Fail unless no request lost cache hits (or was refused) for a cause outside ``allow``.

    The failure, :class:`CacheUnfriendly`, lists each failing finding once with the requests
    it covers — code, wire location, what it cost, the evidence with the differing characters
    visible, and the advice. ``simulate`` as in :func:`diagnose` (default: simulate when the
    traffic carries no usage). Returns the report when it passes. An unknown code in ``allow``
    is a ``ValueError``.
    """
    __tracebackhide__ = True
    allowed = _checked(allow)
    report = diagnose(_as_trace(value), simulate=simulate)
    failing = failing_findings(report, allowed)
    if not failing:
        return report
    lines: list[str] = []
    first_key = failing[0][0]
    for conversation in report.conversations:
        groups = [g for g in conversation.groups if g.severity != "note" and g.code not in allowed]
        if not groups:
            continue
        lines.append(
            f"conversation {conversation.key}: {len(groups)} cause(s) cost cache hits "
            f"({', '.join(dict.fromkeys(g.code for g in groups))}):"
        )
        for group in groups:
            finding = group.first
            cost = f", {group.lost_tokens:,} tokens lost" if group.lost_tokens else ""
            lines.append(
                f"  {group.code} ({group.severity}) on {group.noun} "
                f"{group.label}{cost}"
                + (f" at {finding.where}" if finding.where else "")
                + f": {finding.detail}"
            )
            lines += [f"    {one_line(evidence)}" for evidence in finding.evidence]
            lines.append(f"    {CODES[group.code].sentence}")
            lines.append(f"    advice: {CODES[group.code].advice}")
    lines.append(
        "  (pass allow=[...] with the codes this agent accepts, e.g. "
        f"allow=[{failing[0][2].code!r}])"
    )
    raise CacheUnfriendly(
        "\n".join(lines), conversation=first_key, findings=[f for _, _, f in failing]
    )


def assert_prefix_stable(value: Any) -> Trace:
    """Fail unless every request extends the one it is compared with, as the template renders
    it: same model, user and thinking mode, same system prompt and tools, every earlier message
    and the model's answers resent unchanged; only new messages appended.

    Requests of separate conversations (a sub-agent with its own system prompt, side calls that
    branch off) are never compared with each other. The failure (:class:`PrefixInstability`)
    names the request and the first divergence in the project's wording. Returns the trace.
    """
    __tracebackhide__ = True
    trace = trace_of(_as_trace(value))
    report = diagnose(trace, simulate=True)
    for request in report.requests:
        breaking = [f for f in request.findings if f.rendered and CODES[f.code].kind == "change"]
        if request.parent is None or not (breaking or request.divergence is not None):
            continue
        parent = trace.exchanges[request.parent]
        current = trace.exchanges[request.index]
        before = wire_view(parent.body, endpoint=parent.endpoint)
        after = wire_view(current.body, endpoint=current.endpoint)
        names = (f"request #{request.parent + 1}", f"request #{request.index + 1}")
        diff: tuple[str, ...] = ()
        if before is not None and after is not None:
            diff = diff_chat(before, after, names=names, prefix=True)
        if breaking:
            finding = breaking[0]
            where = f" at {finding.where}" if finding.where else ""
            detail = f"{finding.code}{where}: {finding.detail}"
        else:
            detail = f"the prompt departs at {request.divergence}"
        raise PrefixInstability(
            f"request #{request.index + 1} does not extend request #{request.parent + 1}, so the "
            f"provider's prefix cache cannot reuse it ({detail}); the first divergence:",
            index=request.index,
            diff=diff or (detail,),
        )
    return trace
