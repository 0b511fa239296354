"""The engine: each request's figures and findings, one request at a time.

For a request and the request it is compared with (its parent, ``_branches.py``):

1. **Render** both the request and its *ideal* — what it would have been had the client only
   appended to the parent: the parent's system prompt, tools, parameters and messages, the
   model's answer resent exactly (when the request resends that turn), then the request's own
   new messages — with DeepSeek's chat template (``mock/_template.py``), so only what reaches
   the prompt counts.
2. **Figures**: *reusable* is where the ideal's reusable part ends (the parent's input end, or
   its answer's end when the answer is resent); *shared* is the common token prefix of the
   request and its ideal. Rendered positions become provider tokens anchored at the figures the
   trace reports (the parent's prompt, this prompt), then are rounded down to the cache unit.
   The hit is the reported one, or the prefix-cache simulator's when the trace has no usage.
3. **Findings**: every change (``_changes.py``) is a finding. When the request lost one unit or
   more (reusable − hit), the cause is the first change the prompt renders inside the reusable
   part — it limited the hit, and the whole loss is counted on it; with no such change, a
   change the template would hide but where the hit stopped (an older template rendered it),
   else ``not-yet-persisted`` when the timing is known finely enough to say so, else
   ``provider-miss``. Every other change is a note: true, but it cost nothing here.

:class:`Doctor` keeps only what later requests need (a bounded window when asked), so the
proxy can diagnose a long live session as it goes.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from dsh_core.providers import Prices, prices_for, resolve_model

from .._wire_view import WireView, wire_view
from ..mock import PrefixCacheSimulator, PromptRenderer
from ..mock._template_tokens import RenderedPrompt
from ..traces import Exchange, LogEvent
from ._branches import Brancher, Link
from ._changes import PARAMS_COMPONENT, Change, compare, describe_components, refusal_reason
from ._codes import CauseCode
from ._report import Finding, RequestDiagnosis, Segment
from ._unit import CacheUnit

__all__ = ["Doctor"]

_GENERATION_PREFIX: Final = 2
"""``<｜Assistant｜><think>`` (or ``</think>``): the tokens a prompt ends with after its input."""

_MEMO: Final = 64
"""Rendered prompts kept for later requests (a parent is almost always recent)."""

_LOG_KINDS: Final[Mapping[str, tuple[str, ...]]] = {
    "header": ("system-changed", "volatile-system-text", "system-moved", "tools-changed"),
    "resume": ("system-changed", "volatile-system-text", "tools-changed", "history-rewritten"),
    "compaction": ("history-rewritten",),
    "prune": ("history-rewritten",),
    "rewrite": ("history-rewritten",),
}
"""Which findings a session log's event explains."""


def _floor(tokens: float, unit: int) -> int:
    return max(0, int(tokens)) // unit * unit


def _common(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the common prefix of two token sequences (slices compared in C first)."""
    n, limit, step = 0, min(len(a), len(b)), 256
    while n + step <= limit and a[n : n + step] == b[n : n + step]:
        n += step
    while n < limit and a[n] == b[n]:
        n += 1
    return n


@dataclass(frozen=True, slots=True)
class _Known:
    """What a later request needs of an earlier one."""

    exchange: Exchange
    prompt: int | None
    """Its prompt tokens (reported or simulated)."""
    rendered_length: int


class Doctor:
    """Diagnoses the requests of a trace one at a time, in trace order.

    ``lookup`` returns an earlier exchange by index when the doctor no longer holds it (the
    proxy reads it back from its trace file); without one every exchange is kept. ``window``
    bounds how many earlier requests can be a parent (``None``: all).
    """

    def __init__(
        self,
        *,
        unit: CacheUnit,
        simulate: bool = False,
        time_resolution: float | None = None,
        prices: Prices | None = None,
        window: int | None = None,
        lookup: Callable[[int], Exchange] | None = None,
        renderer: PromptRenderer | None = None,
    ) -> None:
        self.unit = unit
        self.simulate = simulate
        self.time_resolution = time_resolution
        self.prices = prices
        self._brancher = Brancher(window=window)
        self._renderer = renderer if renderer is not None else PromptRenderer()
        self._lookup = lookup
        self._window = window
        self._known: OrderedDict[int, _Known] = OrderedDict()
        self._rendered: OrderedDict[int, RenderedPrompt] = OrderedDict()
        self._positions: dict[str, int] = {}
        self._below_noted: set[str] = set()
        self._clock = 0.0
        self._simulator: PrefixCacheSimulator | None = None
        if simulate:
            # No expiry: a trace's clock may jump from unknown times to known ones, and an
            # eviction the simulation made up is not a finding.
            self._simulator = PrefixCacheSimulator(
                granularity=unit.tokens, clock=lambda: self._clock, ttl=None
            )

    # -- rendering ----------------------------------------------------------------------

    def _render_body(self, body: Mapping[str, Any], endpoint: str) -> RenderedPrompt:
        if endpoint == "anthropic":
            return self._renderer.render_anthropic(body)
        return self._renderer.render_chat(body)

    def _render(self, exchange: Exchange) -> RenderedPrompt:
        found = self._rendered.get(exchange.index)
        if found is None:
            found = self._render_body(exchange.body, exchange.endpoint)
            self._rendered[exchange.index] = found
            while len(self._rendered) > _MEMO:
                self._rendered.popitem(last=False)
        return found

    # -- one request ------------------------------------------------------------------------

    def add(self, exchange: Exchange) -> RequestDiagnosis:
        """Diagnose the next request of the trace."""
        view = wire_view(exchange.body, endpoint=exchange.endpoint)
        if view is None:  # readers keep only chat requests; an empty body is still one
            view = WireView(endpoint=exchange.endpoint)
        link = self._brancher.link(exchange, view)
        rendered = self._render(exchange)
        prompt, hit = self._figures(exchange, view, rendered)
        position = self._positions.get(link.conversation, 0) + 1
        self._positions[link.conversation] = position
        parent = self._parent(link)
        reusable = shared = 0
        divergence: str | None = None
        findings: list[Finding] = []
        notes: tuple[str, ...] = ()
        if parent is not None and not exchange.refused:
            reusable, shared, divergence, findings, notes = self._against(
                exchange, view, rendered, prompt, hit, parent, link
            )
        if exchange.refused:
            if parent is not None:
                findings = self._refused_changes(parent.exchange, exchange, view)
            findings.append(self._refused(exchange, view))
        findings, unmatched = _with_log_evidence(findings, exchange.log_events)
        diagnosis = RequestDiagnosis(
            index=exchange.index,
            position=position,
            conversation=link.conversation,
            parent=link.parent,
            relation=link.relation,
            model=exchange.model,
            status=exchange.status,
            error=exchange.error,
            outcome=exchange.outcome,
            prompt_tokens=prompt,
            hit_tokens=None if exchange.refused else hit,
            completion_tokens=exchange.usage.completion_tokens if exchange.usage else None,
            reusable_tokens=reusable,
            shared_tokens=shared,
            divergence=divergence,
            findings=tuple(findings),
            log_events=unmatched,
            notes=notes,
            segments=self._segments(view, rendered, prompt),
            started=exchange.started,
        )
        diagnosis = self._priced(exchange, diagnosis)
        if not exchange.refused:
            self._remember(exchange, prompt, rendered)
        return diagnosis

    def _figures(
        self, exchange: Exchange, view: WireView, rendered: RenderedPrompt
    ) -> tuple[int | None, int | None]:
        if self._simulator is None:
            usage = exchange.usage
            if usage is None:
                return None, None
            return usage.prompt_tokens, usage.hit_tokens
        if exchange.started is not None:
            self._clock = max(self._clock, exchange.started)
        else:
            self._clock += 1.0
        found = self._simulator.lookup(view.cache_key(), rendered)
        if exchange.refused:
            return found.usage.prompt_tokens, None
        completion = None
        answer = exchange.response
        if answer is not None:
            if exchange.endpoint == "anthropic":
                completion = self._renderer.render_anthropic_completion(
                    answer.get("content"), thinking=rendered.thinking
                )
            else:
                completion = self._renderer.render_chat_completion(
                    answer, thinking=rendered.thinking
                )
        self._simulator.commit(found, completion)
        return found.usage.prompt_tokens, found.usage.hit_tokens

    def _parent(self, link: Link) -> _Known | None:
        if link.parent is None:
            return None
        known = self._known.get(link.parent)
        if known is None and self._lookup is not None:
            exchange = self._lookup(link.parent)
            known = _Known(
                exchange=exchange,
                prompt=exchange.usage.prompt_tokens if exchange.usage else None,
                rendered_length=len(self._render(exchange).tokens),
            )
        return known

    def _remember(self, exchange: Exchange, prompt: int | None, rendered: RenderedPrompt) -> None:
        keep = exchange if self._lookup is None else replace(exchange, content=None)
        self._known[exchange.index] = _Known(
            exchange=keep, prompt=prompt, rendered_length=len(rendered.tokens)
        )
        limit = self._window if self._lookup is None else min(self._window or _MEMO, _MEMO)
        if limit is not None:
            while len(self._known) > limit:
                self._known.popitem(last=False)

    # -- the comparison -----------------------------------------------------------------

    def _ideal(
        self, parent: Exchange, parent_view: WireView, view: WireView
    ) -> tuple[dict[str, Any], bool]:
        """The request as it would have been had it only appended to ``parent``, and whether
        it resends the parent's answer."""
        count = len(parent_view.messages)
        rest = list(view.messages[count:])
        answer = parent.response
        resends = (
            answer is not None
            and bool(rest)
            and isinstance(rest[0], Mapping)
            and rest[0].get("role") == "assistant"
        )
        messages = list(parent.body.get("messages") or ())
        if resends:
            assert answer is not None
            messages.append(dict(answer))
            rest = rest[1:]
        body = dict(parent.body)
        body["messages"] = [*messages, *rest]
        return body, resends

    def _against(
        self,
        exchange: Exchange,
        view: WireView,
        rendered: RenderedPrompt,
        prompt: int | None,
        hit: int | None,
        parent: _Known,
        link: Link,
    ) -> tuple[int, int, str | None, list[Finding], tuple[str, ...]]:
        unit = self.unit.tokens
        p_exchange = parent.exchange
        p_view = wire_view(p_exchange.body, endpoint=p_exchange.endpoint) or WireView()
        count = len(p_view.messages)
        ideal_body, resends = self._ideal(p_exchange, p_view, view)
        fast = link.relation in ("extends", "repeats") and (
            not resends or view.messages[count] == p_exchange.response
        )
        ideal = rendered if fast else self._render_body(ideal_body, p_exchange.endpoint)
        marks = ideal.marks
        p_input = ideal.input_end if count + 2 >= len(marks) - 1 else marks[count + 2]
        slot = count + 2 + (1 if resends else 0)
        reusable_r = marks[slot] if resends and slot < len(marks) - 1 else p_input
        common_r = len(ideal.tokens) if fast else _common(rendered.tokens, ideal.tokens)
        shared_r = min(common_r, reusable_r)
        # rendered positions → provider tokens, anchored at the reported figures
        own = len(rendered.tokens)
        p_prompt = parent.prompt if parent.prompt is not None else parent.rendered_length
        p_length = max(1, parent.rendered_length)
        p_input_provider = p_prompt * p_input / p_length
        total = prompt if prompt is not None else own

        def provider(x: int) -> float:
            if x <= p_input or own <= p_input:
                return x * p_input_provider / max(1, p_input)
            return p_input_provider + (x - p_input) * (total - p_input_provider) / (own - p_input)

        reusable_raw = min(provider(reusable_r), total)
        if (
            link.relation in ("extends", "repeats")
            and total + _GENERATION_PREFIX < p_input_provider
        ):
            # It starts with the parent's whole request, yet its reported prompt is shorter
            # than the parent's: what was sent is not what the recording shows (a normalized
            # log's placeholders). Nothing can be said of what it could reuse.
            note = (
                f"its reported prompt ({total:,} tokens) is shorter than that of request "
                f"#{p_exchange.index + 1} ({int(p_input_provider):,}), which it extends as "
                "recorded: the recording does not show everything that was sent, so its "
                "reusable part is not counted"
            )
            return 0, 0, None, [], (note,)
        reusable = _floor(reusable_raw, unit)
        shared = _floor(min(provider(shared_r), reusable), unit)
        changes = compare(p_exchange, p_view, exchange, view)
        if any(c.code == "params-changed" and c.where in ("model", "user_id") for c in changes):
            shared_r = common_r = shared = 0  # another cache key: nothing is shared
        components = describe_components(view)
        divergence = None
        if shared_r < reusable_r:
            at = _component_at(rendered.marks, common_r)
            divergence = components[at] if 0 <= at < len(components) else "the generation prefix"
        findings = self._attribute(
            exchange=exchange,
            view=view,
            parent=p_exchange,
            changes=changes,
            hit=hit,
            reusable=reusable,
            shared_r=shared_r,
            reusable_r=reusable_r,
            common_r=common_r,
            marks=rendered.marks,
            provider=provider,
            p_input_provider=p_input_provider,
            resends=resends,
        )
        if (
            hit is not None
            and not hit
            and reusable == 0
            and 0 < reusable_raw < unit
            and link.conversation not in self._below_noted
        ):
            self._below_noted.add(link.conversation)
            findings.append(
                Finding(
                    code="below-cache-unit",
                    severity="note",
                    detail=(
                        f"the prompt it could reuse (about {int(reusable_raw)} tokens) is below "
                        f"one {unit}-token unit (noted once per conversation)"
                    ),
                    signature="below-cache-unit",
                )
            )
        return reusable, shared, divergence, findings, ()

    def _attribute(
        self,
        *,
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
    ) -> list[Finding]:
        unit = self.unit.tokens
        lost = reusable - min(hit, reusable) if hit is not None else 0
        limiting: Change | None = None
        reason = ""
        cause: Finding | None = None
        if lost >= unit:
            keyed = next(
                (
                    c
                    for c in changes
                    if c.code == "params-changed" and c.where in ("model", "user_id")
                ),
                None,
            )
            if keyed is not None:
                limiting = keyed
            elif shared_r < reusable_r:
                at = _component_at(marks, common_r)
                rendered = [c for c in changes if c.rendered]
                limiting = next((c for c in rendered if c.component == at), None)
                if limiting is None:
                    limiting = next(
                        (c for c in rendered if c.component >= at or c.component < 0), None
                    )
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
                hidden = [
                    c
                    for c in changes
                    if not c.rendered
                    and c.component >= 0
                    and c.component < len(marks)
                    and hit is not None
                    and hit <= provider(marks[c.component]) + unit
                ]
                if hidden:
                    limiting = hidden[0]
                    reason = (
                        "; the hit stopped there: the provider's template rendered this difference"
                    )
                else:
                    cause = self._timing_or_provider(
                        exchange, parent, hit, reusable, lost, p_input_provider, resends
                    )
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
            findings.append(self._note(change, exchange, limiting, lost, hit))
        if cause is not None:
            findings.append(cause)
        return findings

    def _note(
        self,
        change: Change,
        exchange: Exchange,
        limiting: Change | None,
        lost: int,
        hit: int | None,
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
        self,
        exchange: Exchange,
        parent: Exchange,
        hit: int | None,
        reusable: int,
        lost: int,
        p_input_provider: float,
        resends: bool,
    ) -> Finding:
        unit = self.unit.tokens
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
        resolution = self.time_resolution
        output_missed = resends and hit is not None and hit >= _floor(p_input_provider, unit) - unit
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

    def _refused_changes(
        self, parent: Exchange, exchange: Exchange, view: WireView
    ) -> list[Finding]:
        """What changed in a refused request: the change the API refuses it for is part of the
        refusal; the rest cost nothing (a refused request caches and reads nothing)."""
        p_view = wire_view(parent.body, endpoint=parent.endpoint) or WireView()
        error = (exchange.error or "").lower()
        explained = not error or "reasoning" in error or "thinking" in error
        out = []
        for change in compare(parent, p_view, exchange, view):
            refusing = change.rejected and explained
            out.append(
                Finding(
                    code=change.code,
                    severity="refusal" if refusing else "note",
                    detail=change.detail
                    if refusing
                    else f"{change.detail} (the request was refused, so it cost no hit)",
                    evidence=change.evidence,
                    where=change.where,
                    rejected=refusing,
                    rendered=change.rendered,
                    diff=change.diff,
                    signature=change.signature,
                )
            )
        return out

    def _refused(self, exchange: Exchange, view: WireView) -> Finding:
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

    # -- presentation ----------------------------------------------------------------------

    def _segments(
        self, view: WireView, rendered: RenderedPrompt, prompt: int | None
    ) -> tuple[Segment, ...]:
        marks = rendered.marks
        own = len(rendered.tokens)
        ratio = (prompt / own) if prompt and own else 1.0
        labels = describe_components(view)
        out = []
        for i, label in enumerate(labels):
            if i + 1 >= len(marks):
                break
            size = round((marks[i + 1] - marks[i]) * ratio)
            if size > 0:
                out.append(Segment(label=label, tokens=size))
        return tuple(out)

    def _priced(self, exchange: Exchange, diagnosis: RequestDiagnosis) -> RequestDiagnosis:
        if diagnosis.prompt_tokens is None or exchange.refused:
            return diagnosis
        prices = self.prices or prices_for(exchange.model, exchange.started)
        hit = diagnosis.hit_tokens or 0
        cost = prices.cost(
            hit_tokens=hit,
            miss_tokens=max(0, diagnosis.prompt_tokens - hit),
            output_tokens=diagnosis.completion_tokens or 0,
        )
        lost_cost = diagnosis.lost_tokens * (prices.miss - prices.hit) / 1e6
        return replace(diagnosis, cost=cost, lost_cost=lost_cost)


def _component_at(marks: Sequence[int], position: int) -> int:
    """The component (index into the view's parts) that token ``position`` falls in (an empty
    component never: a position at a shared boundary belongs to the next non-empty one)."""
    if len(marks) < 2:
        return PARAMS_COMPONENT
    return min(max(0, bisect_right(marks, position) - 1), len(marks) - 2)


def _label_at(at: int, view: WireView) -> str:
    labels = describe_components(view)
    return labels[at] if 0 <= at < len(labels) else "the end of the prompt"


def _with_log_evidence(
    findings: list[Finding], events: Sequence[LogEvent]
) -> tuple[list[Finding], tuple[str, ...]]:
    """Put each session-log event on the findings it explains; the rest stay on the request."""
    if not events:
        return findings, ()
    unmatched: list[str] = []
    out = list(findings)
    for event in events:
        codes: tuple[CauseCode, ...] = _LOG_KINDS.get(event.kind, ())  # type: ignore[assignment]
        matched = False
        for i, finding in enumerate(out):
            if finding.code in codes:
                out[i] = replace(finding, evidence=(*finding.evidence, f"log: {event.detail}"))
                matched = True
                break
        if not matched:
            unmatched.append(event.detail)
    return out, tuple(unmatched)
