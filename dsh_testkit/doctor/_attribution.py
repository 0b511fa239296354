"""Which change cost what: attributing a request's lost hit to its cause.

When a request lost one unit or more, the cause is the first change the prompt renders inside
its reusable part (it limited the hit; the whole loss is counted on it); with none, a change the
template would hide but where the hit stopped (an older template rendered it), else
``not-yet-persisted`` when the timing is known finely enough to say so, else
``provider-miss``. Every other change is a note. A refused request's changes are part of its
refusal or cost nothing.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Sequence

from dsh_core.providers import resolve_model

from ..prompt._wire_view import WireView, wire_view
from ..traces import Exchange
from ._change import PARAMS_COMPONENT, Change
from ._changes import compare, component_label, refusal_reason
from ._model_facts import template_of
from ._report import Finding

__all__ = ["attribute", "component_at", "floor_unit", "refusal", "refused_changes"]


def floor_unit(tokens: float, unit: int) -> int:
    """``tokens`` rounded down to whole units (never below 0)."""
    return max(0, int(tokens)) // unit * unit


def component_at(marks: Sequence[int], position: int) -> int:
    """The component (index into the view's parts) that token ``position`` falls in (an empty
    component never: a position at a shared boundary belongs to the next non-empty one)."""
    if len(marks) < 2:
        return PARAMS_COMPONENT
    return min(max(0, bisect_right(marks, position) - 1), len(marks) - 2)


def _logged_header_change(exchange: Exchange) -> Change | None:
    """A header change the session log records before ``exchange`` (a ``request/header``
    snapshot or delta that changed it), as the change that limited its hit."""
    for event in exchange.log_events:
        if event.kind in ("header", "resume") and "holds placeholders" in event.detail:
            return Change(
                code="system-changed",
                detail=(
                    "the request header changed (system prompt or tools) where the rebuilt "
                    "request cannot show it: the log's header holds placeholders"
                ),
                evidence=(f"log: {event.detail}",),
                where="system",
                component=0,
                signature=f"system-changed logged {event.seq}",
            )
    return None


def _label_at(at: int, view: WireView) -> str:
    return component_label(view, at)


def attribute(
    *,
    unit: int,
    resolution: float | None,
    exchange: Exchange,
    view: WireView,
    parent: Exchange,
    changes: list[Change],
    hit: int | None,
    reusable: int,
    shared_r: int,
    reusable_r: int,
    common_r: int,
    marks: Sequence[int],
    provider: Callable[[int], float],
    p_input_provider: float,
    resends: bool,
    expected: int,
) -> list[Finding]:
    """The findings of one request: its changes, and the cause of its loss (see the module
    docstring). ``expected`` is the hit a perfect cache gives this request as it is (the
    longest earlier unit before the divergence): below it, the provider lost the rest."""
    lost = reusable - min(hit, reusable) if hit is not None else 0
    limiting: Change | None = None
    reason = ""
    cause: Finding | None = None
    if lost >= unit:
        keyed = next(
            (c for c in changes if c.code == "params-changed" and c.where in ("model", "user_id")),
            None,
        )
        if keyed is not None:
            limiting = keyed
        elif shared_r < reusable_r:
            if hit is not None and hit + unit <= expected:
                # the provider missed whole units that the change left intact
                cause = _timing_or_provider(
                    exchange,
                    parent,
                    hit,
                    expected,
                    expected - hit,
                    p_input_provider,
                    resends,
                    unit=unit,
                    resolution=resolution,
                )
                lost = reusable - expected
            at = component_at(marks, common_r)
            rendered = [c for c in changes if c.rendered]
            limiting = next((c for c in rendered if c.component == at), None)
            if limiting is None:
                limiting = next((c for c in rendered if c.component >= at or c.component < 0), None)
            if limiting is None and rendered:
                limiting = rendered[0]
            if limiting is None:
                label = _label_at(at, view)
                limiting = Change(
                    code="history-rewritten",
                    detail=(
                        f"the prompt departs from the request it extends at {label} in "
                        "what the template renders"
                    ),
                    where=label,
                    component=at,
                    signature=f"history-rewritten at {at}",
                )
                changes = [*changes, limiting]
        else:
            # A change the template hides, where the hit stopped: an older template rendered
            # it. Only when the trace's time does not tell which template served the request.
            hidden = [
                c
                for c in changes
                if exchange.started is None
                and not c.rendered
                and c.component >= 0
                and c.component < len(marks)
                and hit is not None
                and hit <= provider(marks[c.component]) + unit
            ]
            if hidden:
                limiting = hidden[0]
                reason = (
                    "; the hit stopped there: the template that served it (unknown without "
                    "the request's date) rendered this difference"
                )
            elif (header := _logged_header_change(exchange)) is not None:
                # nothing visible changed, but the log says the header did (its placeholders
                # hide the text): that change, not the provider, limited the hit
                limiting = header
                changes = [*changes, header]
            else:
                cause = _timing_or_provider(
                    exchange,
                    parent,
                    hit,
                    reusable,
                    lost,
                    p_input_provider,
                    resends,
                    unit=unit,
                    resolution=resolution,
                )
    if limiting is not None and lost < unit:
        limiting = None  # the provider's part was the whole loss
    findings: list[Finding] = []
    for change in changes:
        if change is limiting:
            findings.append(
                Finding(
                    code=change.code,
                    severity="loss",
                    detail=change.detail + reason,
                    evidence=change.evidence,
                    where=change.where,
                    lost_tokens=lost,
                    rejected=change.rejected,
                    rendered=change.rendered,
                    diff=change.diff,
                    signature=change.signature,
                )
            )
            continue
        findings.append(_note(change, exchange, limiting, hit, reusable, cause))
    if cause is not None:
        findings.append(cause)
    return findings


def _note(
    change: Change,
    exchange: Exchange,
    limiting: Change | None,
    hit: int | None,
    reusable: int,
    cause: Finding | None,
) -> Finding:
    if change.rejected and not exchange.refused:
        if exchange.status is None:
            return Finding(
                code=change.code,
                severity="refusal",
                detail=change.detail,
                evidence=change.evidence,
                where=change.where,
                rejected=True,
                rendered=change.rendered,
                diff=change.diff,
                signature=change.signature,
            )
        why = "the API accepted it here (this service did not enforce the pass-back rule)"
    elif not change.rendered:
        why = "the template does not render this difference, so it cost nothing"
    elif limiting is not None:
        why = f"no further cost: the hit was already limited by {limiting.code} at {limiting.where}"
    elif hit is None:
        why = "its cost is unknown: the trace reports no cache figures for this request"
    elif cause is not None:
        why = f"not what limited the hit here: that was {cause.code}"
    elif reusable == 0:
        why = "nothing was reusable here, so it cost nothing"
    else:
        why = "it cost nothing here: the hit still covered it"
    return Finding(
        code=change.code,
        severity="note",
        detail=f"{change.detail} ({why})",
        evidence=change.evidence,
        where=change.where,
        rejected=change.rejected,
        rendered=change.rendered,
        diff=change.diff,
        signature=change.signature,
    )


def _timing_or_provider(
    exchange: Exchange,
    parent: Exchange,
    hit: int | None,
    reusable: int,
    lost: int,
    p_input_provider: float,
    resends: bool,
    *,
    unit: int,
    resolution: float | None,
) -> Finding:
    # The gap from the parent's end; when its end is unknown, the time since it started
    # bounds the gap from above (it ended after it started).
    end = parent.finished if parent.finished is not None else parent.started
    gap = exchange.started - end if exchange.started is not None and end is not None else None
    if gap is not None and gap < 0:
        gap = None
    info = resolve_model(parent.model) if parent.model else None
    delay = (
        info.cache.visibility_at(parent.finished or parent.started).output
        if info is not None
        else 0.0
    )
    output_missed = resends and hit is not None and hit >= floor_unit(p_input_provider, unit) - unit
    if (
        output_missed
        and gap is not None
        and resolution is not None
        and resolution < 1.0
        and delay > 0
        and gap + resolution < delay
    ):
        since = "finished" if parent.finished is not None else "started"
        return Finding(
            code="not-yet-persisted",
            severity="loss",
            detail=(
                f"sent {gap:.3f} s after request #{parent.index + 1} {since}; that "
                f"request's output-end unit needed about {delay:g} s to become usable; "
                f"{lost} tokens missed"
            ),
            evidence=(f"gap {gap:.3f} s (times known to {resolution:g} s)",),
            lost_tokens=lost,
            signature="not-yet-persisted",
        )
    timing = ""
    if gap is not None and resolution is not None and resolution >= 0.5:
        timing = f" (the gap, {gap:.0f} s, is only known to {resolution:g} s)"
    return Finding(
        code="provider-miss",
        severity="loss",
        detail=(
            f"it extends request #{parent.index + 1} unchanged as the template renders it, "
            f"yet {lost} of {reusable} reusable tokens missed{timing}"
        ),
        lost_tokens=lost,
        signature="provider-miss",
    )


def refused_changes(parent: Exchange, exchange: Exchange, view: WireView) -> list[Finding]:
    """The change the API refused a request for (part of the refusal). Nothing else is named:
    a refused request cached nothing and lost nothing, so its other changes cost nothing."""
    p_view = wire_view(parent.body, endpoint=parent.endpoint) or WireView()
    error = (exchange.error or "").lower()
    explained = not error or "reasoning" in error or "thinking" in error
    out = []
    for change in compare(parent, p_view, exchange, view, template=template_of(exchange)):
        if not (change.rejected and explained):
            continue
        out.append(
            Finding(
                code=change.code,
                severity="refusal",
                detail=change.detail,
                evidence=change.evidence,
                where=change.where,
                rejected=True,
                rendered=change.rendered,
                diff=change.diff,
                signature=change.signature,
            )
        )
    return out


def refusal(exchange: Exchange, view: WireView) -> Finding:
    reason = refusal_reason(view)
    error = exchange.error or "(no error body)"
    if exchange.error and not any(w in error.lower() for w in ("reasoning", "thinking")):
        reason = None  # refused for something else
    detail = f"status {exchange.status}: {error}"
    if reason is not None:
        detail += f"; {reason}"
    return Finding(
        code="request-refused",
        severity="refusal",
        detail=detail,
        evidence=(f"error: {error}",),
        where=None,
        rejected=True,
        signature=f"request-refused {exchange.status} {error[:80]}",
    )
