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
   The hit is the reported one, or the prefix-cache simulator's when the trace has no usage
   (``simulate``), or only for the requests whose usage has no cache figure
   (``simulate_missing``). A reported prompt count is never replaced: a simulated hit is
   scaled from the simulator's rendering to the reported prompt and rounded down to the unit.
   Each request says which of its figures are reported and which simulated.
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

import itertools
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from dsh_core.providers import Prices, prices_for
from dsh_core.providers._models import ChatTemplate

from ..prompt import PrefixCacheSimulator, PromptRenderer
from ..prompt._granularity import CacheGranularity
from ..prompt._template_tokens import RenderedPrompt, default_thinking
from ..prompt._wire_view import WireView, wire_view
from ..traces import Exchange, LogEvent
from ._attribution import attribute, component_at, floor_unit, refusal, refused_changes
from ._branches import Brancher, Link
from ._change import Change
from ._changes import clock_risk, compare, component_label, message_labels
from ._codes import CauseCode
from ._model_facts import rules_of, template_of
from ._report import FigureSource, Finding, RequestDiagnosis, Segment

__all__ = ["Doctor", "Planned", "view_of"]

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


def _common(a: Sequence[int], b: Sequence[int]) -> int:
    """Length of the common prefix of two token sequences (slices compared in C first)."""
    n, limit, step = 0, min(len(a), len(b)), 256
    while n + step <= limit and a[n : n + step] == b[n : n + step]:
        n += step
    while n < limit and a[n] == b[n]:
        n += 1
    return n


@dataclass(frozen=True, slots=True)
class _Figures:
    """A request's prompt and hit, and where each came from (``None``: unknown)."""

    prompt: int | None
    hit: int | None
    prompt_source: FigureSource | None
    hit_source: FigureSource | None


@dataclass(frozen=True, slots=True)
class Planned:
    """A request's wire view and link (:meth:`Doctor.plan`)."""

    view: WireView
    link: Link


@dataclass(frozen=True, slots=True)
class _Known:
    """What a later request needs of an earlier one."""

    exchange: Exchange
    prompt: int | None
    """Its prompt tokens (reported or simulated)."""
    rendered_length: int
    reported: bool = False
    """Whether its prompt count is the provider's (its answer then anchors the next one)."""
    view: WireView | None = None
    """Its wire view, when kept (a parent is compared with each of its children)."""


class Doctor:
    """Diagnoses the requests of a trace one at a time, in trace order.

    ``lookup`` returns an earlier exchange by index when the doctor no longer holds it (the
    proxy reads it back from its trace file); without one every exchange is kept. ``window``
    bounds how many earlier requests can be a parent (``None``: all).
    """

    def __init__(
        self,
        *,
        granularity: CacheGranularity,
        simulate: bool = False,
        simulate_missing: bool = False,
        time_resolution: float | None = None,
        prices: Prices | None = None,
        window: int | None = None,
        lookup: Callable[[int], Exchange] | None = None,
        renderer: PromptRenderer | None = None,
    ) -> None:
        self.granularity = granularity
        self.simulate = simulate
        self.simulate_missing = simulate_missing
        self.time_resolution = time_resolution
        self.prices = prices
        self._brancher = Brancher(window=window)
        self._renderer = renderer if renderer is not None else PromptRenderer()
        self._lookup = lookup
        self._window = window
        self._known: OrderedDict[int, _Known] = OrderedDict()
        self._rendered: OrderedDict[int, RenderedPrompt] = OrderedDict()
        self._positions: dict[str, int] = {}
        self._canonical: dict[int, tuple[Any, str]] = {}
        """Each message's comparable text, once for the message objects requests share."""
        self._below_noted: set[str] = set()
        self._clock = 0.0
        self._simulator: PrefixCacheSimulator | None = None
        if simulate or simulate_missing:
            # No expiry: a trace's clock may jump from unknown times to known ones, and an
            # eviction the simulation made up is not a finding.
            self._simulator = PrefixCacheSimulator(
                granularity=granularity.tokens, clock=lambda: self._clock, ttl=None
            )

    # -- rendering ----------------------------------------------------------------------

    def _render_body(
        self, body: Mapping[str, Any], endpoint: str, template: ChatTemplate
    ) -> RenderedPrompt:
        if endpoint == "anthropic":
            return self._renderer.render_anthropic(body, template=template)
        return self._renderer.render_chat(body, template=template)

    def _render(self, exchange: Exchange, link: Link | None = None) -> RenderedPrompt:
        """The request's prompt as the template renders it; a request that extends its parent
        is rendered from where the parent's left off (linear in a long conversation)."""
        found = self._rendered.get(exchange.index)
        if found is None:
            template = template_of(exchange)
            previous = (
                self._rendered.get(link.parent)
                if link is not None
                and link.parent is not None
                and link.relation in ("extends", "repeats")
                and exchange.endpoint == "chat"
                and template == "deepseek-v4"
                else None
            )
            if previous is not None and previous.thinking == default_thinking(exchange.body):
                assert link is not None
                found = self._renderer.render_chat(
                    exchange.body, template=template, resume=(previous, link.shared_parts - 2)
                )
            else:
                found = self._render_body(exchange.body, exchange.endpoint, template)
            self._rendered[exchange.index] = found
            while len(self._rendered) > _MEMO:
                self._rendered.popitem(last=False)
        return found

    def _render_ideal(
        self, body: Mapping[str, Any], parent: Exchange, count: int, template: ChatTemplate
    ) -> RenderedPrompt:
        """The ideal request (the parent's messages, then what this request appends) rendered
        from where the parent's held rendering left off: it extends the parent by construction
        (``count``: the parent's messages after its leading system ones)."""
        previous = self._rendered.get(parent.index)
        if (
            previous is not None
            and parent.endpoint == "chat"
            and template == "deepseek-v4"
            and previous.thinking == default_thinking(body)
        ):
            return self._renderer.render_chat(body, template=template, resume=(previous, count))
        return self._render_body(body, parent.endpoint, template)

    # -- one request ------------------------------------------------------------------------

    def plan(self, exchange: Exchange) -> Planned:
        """The next request of the trace linked to its conversation, not yet diagnosed: its
        wire view and its link (the one step that reads every earlier request)."""
        view = view_of(exchange)
        if len(self._canonical) > _CANONICAL_ENTRIES:
            self._canonical.clear()
        view.parts(self._canonical)
        return Planned(view=view, link=self._brancher.link(exchange, view))

    def hold(self, exchange: Exchange, planned: Planned) -> None:
        """Keep ``exchange`` as a possible parent without diagnosing it: what :meth:`add`
        would have kept of it (a process diagnosing some conversations of a trace holds the
        requests of other conversations that its own requests are compared with)."""
        if exchange.refused or exchange.index in self._known:
            return
        rendered = self._render(exchange, planned.link)
        figures = self._figures(exchange, planned.view, rendered)
        self._remember(
            exchange,
            figures.prompt,
            rendered,
            figures.prompt_source == "reported",
            view=planned.view,
        )

    def forget(self, index: int) -> None:
        """Drop what is kept of request ``index``: no later request is compared with it (a
        stream that planned the trace knows each request's last child)."""
        self._known.pop(index, None)
        self._rendered.pop(index, None)

    def add(self, exchange: Exchange, planned: Planned | None = None) -> RequestDiagnosis:
        """Diagnose the next request of the trace (``planned``: its :meth:`plan`, made by a
        doctor that planned every request before it; the requests it is compared with must
        then have been added or held here)."""
        if planned is None:
            planned = self.plan(exchange)
        view, link = planned.view, planned.link
        rendered = self._render(exchange, link)
        figures = self._figures(exchange, view, rendered)
        prompt, hit = figures.prompt, figures.hit
        position = self._positions.get(link.conversation, 0) + 1
        self._positions[link.conversation] = position
        parent = self._parent(link)
        reusable = shared = rounded_off = 0
        divergence: str | None = None
        findings: list[Finding] = []
        notes: tuple[str, ...] = ()
        if parent is not None and not exchange.refused:
            reusable, rounded_off, shared, divergence, findings, notes = self._against(
                exchange, view, rendered, prompt, hit, parent, link
            )
        if link.returns_to is not None and findings:
            # The change of the main line's latest request, undone: what it lost is counted
            # against that request, with that change's cause; its hit came from the older one.
            back = (
                f"it returns to the shape of request #{link.returns_to + 1} (the change of "
                f"request #{(link.parent or 0) + 1} undone): its hit came from #"
                f"{link.returns_to + 1}"
            )
            findings = [
                replace(f, evidence=(*f.evidence, back)) if f.severity == "loss" else f
                for f in findings
            ]
        if link.relation == "first" and not exchange.refused:
            risk = clock_risk(view, exchange.started)
            if risk is not None:
                findings.append(
                    Finding(
                        code=risk.code,
                        severity="note",
                        detail=risk.detail,
                        evidence=risk.evidence,
                        where=risk.where,
                        signature=risk.signature,
                    )
                )
        if exchange.refused:
            if parent is not None:
                findings = refused_changes(parent.exchange, exchange, view)
            findings.append(refusal(exchange, view))
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
            prompt_source=figures.prompt_source if prompt is not None else None,
            hit_source=None if exchange.refused or hit is None else figures.hit_source,
            usage_origin=exchange.usage.origin if exchange.usage is not None else None,
            completion_tokens=exchange.usage.completion_tokens if exchange.usage else None,
            reusable_tokens=reusable,
            shared_tokens=shared,
            rounded_off_tokens=rounded_off,
            divergence=divergence,
            findings=tuple(findings),
            log_events=unmatched,
            notes=notes,
            segments=self._segments(view, rendered, prompt),
            started=exchange.started,
        )
        self._price(exchange, diagnosis)
        if not exchange.refused:
            self._remember(
                exchange, prompt, rendered, figures.prompt_source == "reported", view=view
            )
        return diagnosis

    def _figures(self, exchange: Exchange, view: WireView, rendered: RenderedPrompt) -> _Figures:
        usage = exchange.usage
        reported_prompt = usage.prompt_tokens if usage is not None else None
        reported_hit = usage.hit_tokens if usage is not None else None
        if self._simulator is None:
            return _Figures(
                reported_prompt,
                reported_hit,
                "reported" if reported_prompt is not None else None,
                "reported" if reported_hit is not None else None,
            )
        simulated_prompt, simulated_hit, unit_end = self._simulated(exchange, view, rendered)
        if reported_hit is not None and not self.simulate:
            return _Figures(reported_prompt, reported_hit, "reported", "reported")
        if reported_prompt is None:
            return _Figures(simulated_prompt, simulated_hit, "simulated", "simulated")
        hit = None
        if simulated_hit is not None:
            # The simulator counts its own rendering of the rebuilt request; the provider
            # counted the real one. Where the cached prefix ends is mapped from the one to the
            # other, then rounded down to the unit.
            at = _provider_position(unit_end, rendered, reported_prompt, exchange)
            hit = max(0, min(reported_prompt, floor_unit(at, self.granularity.tokens)))
        return _Figures(reported_prompt, hit, "reported", "simulated")

    def _simulated(
        self, exchange: Exchange, view: WireView, rendered: RenderedPrompt
    ) -> tuple[int, int | None, int]:
        """The simulator's prompt and hit for the request (the hit ``None`` when refused), and
        where the unit that hit ends in the rendering (before rounding down)."""
        assert self._simulator is not None
        if exchange.started is not None:
            self._clock = max(self._clock, exchange.started)
        else:
            self._clock += 1.0
        found = self._simulator.lookup(view.cache_key(), rendered)
        if exchange.refused:
            return found.usage.prompt_tokens, None, 0
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
        unit_end = found.usage.unit_tokens if found.usage.hit_tokens else 0
        return found.usage.prompt_tokens, found.usage.hit_tokens, unit_end

    def _parent(self, link: Link) -> _Known | None:
        if link.parent is None:
            return None
        known = self._known.get(link.parent)
        if known is None and self._lookup is not None:
            try:
                exchange = self._lookup(link.parent)
            except LookupError:
                return None  # no longer kept: compared with nothing
            known = _Known(
                exchange=exchange,
                prompt=exchange.usage.prompt_tokens if exchange.usage else None,
                rendered_length=len(self._render(exchange).tokens),
                reported=exchange.usage is not None and not self.simulate,
            )
        return known

    def _remember(
        self,
        exchange: Exchange,
        prompt: int | None,
        rendered: RenderedPrompt,
        reported: bool,
        *,
        view: WireView | None = None,
    ) -> None:
        keep = exchange if self._lookup is None else replace(exchange, content=None)
        self._known[exchange.index] = _Known(
            exchange=keep,
            prompt=prompt,
            rendered_length=len(rendered.tokens),
            reported=reported and not self.simulate,
            view=view,
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
    ) -> tuple[int, int, int, str | None, list[Finding], tuple[str, ...]]:
        """``(reusable, rounded off, shared, divergence, findings, notes)``."""
        unit = self.granularity.tokens
        p_exchange = parent.exchange
        p_view = parent.view or wire_view(p_exchange.body, endpoint=p_exchange.endpoint)
        p_view = p_view or WireView()
        count = len(p_view.messages)
        ideal_body, resends = self._ideal(p_exchange, p_view, view)
        fast = link.relation in ("extends", "repeats") and (
            not resends or view.messages[count] == p_exchange.response
        )
        template = template_of(exchange)
        if template != "deepseek-v4" and any(
            isinstance(m, Mapping) and m.get("role") in ("system", "developer")
            for m in view.messages[count:]
        ):
            # DeepSeek-V3 gathers a system message sent later into the prompt's head: had the
            # request only appended, it would not carry one.
            fast = False
            ideal_body = dict(ideal_body)
            ideal_body["messages"] = [
                m
                for i, m in enumerate(ideal_body["messages"])
                if i < p_view.message_offset + count
                or not (isinstance(m, Mapping) and m.get("role") in ("system", "developer"))
            ]
        ideal = rendered if fast else self._render_ideal(ideal_body, p_exchange, count, template)
        marks = ideal.marks
        p_input = ideal.input_end if count + 2 >= len(marks) - 1 else marks[count + 2]
        slot = count + 2 + 1
        # The answer's own unit is reusable only when the next prompt renders the answer as it
        # was generated: not in thinking mode when the template drops its reasoning (a turn
        # without tool calls).
        cached = resends and _answer_cached(p_exchange.response, view) and slot < len(marks) - 1
        reusable_r = marks[slot] if cached else p_input
        common_r = len(ideal.tokens) if fast else _common(rendered.tokens, ideal.tokens)
        branch = link.relation == "branch"
        if branch and common_r < reusable_r:
            # A side call is compared on what it shares with the request it branches off: the
            # rest is its own, and no rewrite of anything.
            reusable_r = (
                common_r if rules_of(exchange) == "2024" else _expected_unit(ideal, common_r)
            )
        shared_r = min(common_r, reusable_r)
        # rendered positions → provider tokens, anchored at the reported figures: the parent's
        # prompt, its answer (prompt + completion tokens, when the answer is reused as
        # generated), this prompt
        own = len(rendered.tokens)
        p_prompt = parent.prompt if parent.prompt is not None else parent.rendered_length
        p_length = max(1, parent.rendered_length)
        # the parent's input ends where its prompt does, less the generation prefix it ends
        # with (exact, whatever the scale of the rendering to the reported tokens)
        p_input_provider = max(0.0, p_prompt - max(0, p_length - p_input))
        total = prompt if prompt is not None else own
        anchors = [(0, 0.0), (p_input, p_input_provider)]
        completion = p_exchange.usage.completion_tokens if p_exchange.usage is not None else None
        if cached and parent.reported and parent.prompt is not None and completion:
            anchors.append((reusable_r, float(parent.prompt + completion)))
        if own > anchors[-1][0]:
            anchors.append((own, float(total)))

        def provider(x: int) -> float:
            return _interpolate(anchors, x)

        block_prefixes = rules_of(exchange) == "2024"
        expected_r = (
            min(common_r, reusable_r)  # any prefix, in storage units
            if block_prefixes
            else _expected_unit(ideal, min(common_r, reusable_r))
        )
        reusable_raw = min(provider(reusable_r), total)
        header_changed = any(_header_change(e) for e in exchange.log_events)
        if (
            link.relation in ("extends", "repeats")
            and total + _GENERATION_PREFIX < p_input_provider
            and not header_changed
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
            return 0, 0, 0, None, [], (note,)
        reusable = floor_unit(reusable_raw, unit)
        shared = floor_unit(min(provider(shared_r), reusable), unit)
        changes = [] if branch else compare(p_exchange, p_view, exchange, view, template=template)
        if not (exchange.body_exact and p_exchange.body_exact):
            changes = [_unjudged(c) for c in changes]
        if any(c.code == "params-changed" and c.where in ("model", "user_id") for c in changes):
            shared_r = common_r = shared = 0  # another cache key: nothing is shared
        elif shared_r < reusable_r and provider(shared_r) >= (
            reusable if block_prefixes else reusable_raw
        ):
            # It departs only past what it could reuse: under the 2024 rules any prefix hits in
            # whole units, so past the last whole unit; under the 2026 rules a unit hits only
            # whole, so past the end of the unit it would have reused.
            shared_r = reusable_r
        divergence = None
        if shared_r < reusable_r:
            at = component_at(rendered.marks, common_r)
            divergence = component_label(view, at) if at >= 0 else "the generation prefix"
        findings = attribute(
            unit=self.granularity.tokens,
            resolution=self.time_resolution,
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
            resends=cached,
            expected=min(floor_unit(provider(expected_r), unit), reusable),
        )
        if (
            hit is not None
            and not hit
            and link.relation != "repeats"
            and reusable == 0
            and 0 < reusable_raw < unit
            and total >= unit  # a prompt shorter than a unit could never hit anyway
            and link.conversation not in self._below_noted
        ):
            self._below_noted.add(link.conversation)
            findings.append(
                Finding(
                    code="below-cache-unit",
                    severity="note",
                    detail=(
                        f"the {int(reusable_raw)} tokens it could reuse from request "
                        f"#{p_exchange.index + 1} are below one {unit}-token unit, so its "
                        f"{total:,}-token prompt could not hit (noted once per conversation)"
                    ),
                    signature="below-cache-unit",
                )
            )
        return reusable, max(0, int(reusable_raw) - reusable), shared, divergence, findings, ()

    # -- presentation ----------------------------------------------------------------------

    def _segments(
        self, view: WireView, rendered: RenderedPrompt, prompt: int | None
    ) -> tuple[Segment, ...]:
        """The prompt's components sized in provider tokens, for the prompt bar: the system
        prompt, the tools and each message; in a long conversation the older messages are
        grouped (at most :data:`_SEGMENTS` segments, so a report stays linear in its requests)."""
        marks = rendered.marks
        own = len(rendered.tokens)
        ratio = (prompt / own) if prompt and own else 1.0
        count = len(marks) - 1  # components
        spans: list[tuple[str, int, int]] = [
            (component_label(view, i), i, i + 1) for i in range(min(2, count))
        ]
        messages = count - 2
        if messages <= _SEGMENTS:
            spans += _message_spans(view, 0, messages)
        else:
            recent = _SEGMENTS // 3
            older = messages - recent
            groups = _SEGMENTS - recent
            for g in range(groups):
                lo, hi = older * g // groups, older * (g + 1) // groups
                if hi > lo:
                    label = f"messages[{view.wire_index(lo)}–{view.wire_index(hi - 1)}]"
                    spans.append((label, 2 + lo, 2 + hi))
            spans += _message_spans(view, older, messages)
        out = []
        for label, lo, hi in spans:
            size = round((marks[hi] - marks[lo]) * ratio)
            if size > 0:
                out.append(Segment(label=label, tokens=size))
        return tuple(out)

    def _price(self, exchange: Exchange, diagnosis: RequestDiagnosis) -> None:
        """Set the new ``diagnosis``'s cost and lost cost (its other fields price it). It is
        filled in place, being this call's own and not yet seen by anyone: a copy of its 25
        fields per request cost more than the pricing."""
        if diagnosis.prompt_tokens is None or exchange.refused:
            return
        prices = self.prices or prices_for(exchange.model, exchange.started)
        hit = diagnosis.hit_tokens or 0
        cost = prices.cost(
            hit_tokens=hit,
            miss_tokens=max(0, diagnosis.prompt_tokens - hit),
            output_tokens=diagnosis.completion_tokens or 0,
        )
        object.__setattr__(diagnosis, "cost", cost)
        object.__setattr__(
            diagnosis, "lost_cost", diagnosis.lost_tokens * (prices.miss - prices.hit) / 1e6
        )


def view_of(exchange: Exchange) -> WireView:
    """The request's wire view (an empty one for a body that is not a chat request's)."""
    view = wire_view(exchange.body, endpoint=exchange.endpoint)
    if view is None:  # readers keep only chat requests; an empty body is still one
        view = WireView(endpoint=exchange.endpoint)
    return view


def _message_spans(view: WireView, start: int, stop: int) -> list[tuple[str, int, int]]:
    """The prompt bar's span of each message from ``start`` to ``stop`` (components ``2 + i``;
    a component past the view's messages is the end of the prompt, as :func:`component_label`
    says)."""
    last = min(stop, len(view.messages))
    labels = message_labels(view, start, last) if last > start else []
    labels += [component_label(view, 2 + i) for i in range(max(start, last), stop)]
    return [(label, 2 + i, 3 + i) for i, label in zip(range(start, stop), labels, strict=True)]


def _header_change(event: LogEvent) -> bool:
    """Whether a session log's event says the header changed where its placeholders hide it."""
    return event.kind in ("header", "resume") and "holds placeholders" in event.detail


_BYTE_LEVEL: Final = frozenset({"tool-args-reserialized"})
"""Codes that need the request's bytes: a request rebuilt from telemetry cannot show them."""


def _unjudged(change: Change) -> Change:
    """A byte-level change seen on a request rebuilt from spans: it cannot be judged."""
    if change.code not in _BYTE_LEVEL:
        return change
    return replace(
        change,
        rendered=False,
        detail=f"{change.detail} (cannot be judged from spans: the request was rebuilt from "
        "telemetry, so its argument formatting is unknown)",
    )


_CANONICAL_ENTRIES: Final = 65_536
"""Messages whose comparable text is kept for the requests that resend them."""

_SEGMENTS: Final = 42
"""The most message segments a request's prompt bar shows (older messages grouped beyond it)."""

_INTERVAL: Final = 4096
"""Tokens between the fixed-interval units inside a long prompt (not published; the mock's)."""


def _answer_cached(answer: Mapping[str, Any] | None, view: WireView) -> bool:
    """Whether the next prompt renders the model's answer exactly as it was generated, so the
    unit ending after it can hit: always without thinking; in thinking mode only for a turn
    with tool calls (the template drops the reasoning of the others)."""
    if answer is None:
        return False
    if not view.thinking:
        return True
    if view.endpoint == "anthropic":
        content = answer.get("content")
        return isinstance(content, list) and any(
            isinstance(b, Mapping) and b.get("type") == "tool_use" for b in content
        )
    return bool(answer.get("tool_calls"))


def _provider_position(
    x: int, rendered: RenderedPrompt, reported_prompt: int, exchange: Exchange
) -> float:
    """A position in the rendering of a request as the provider counts it: proportionally to
    the reported prompt; for a request rebuilt from telemetry that records no tools, the
    difference is the tools the provider read after the system prompt, so a position inside the
    system prompt stays where it is and one after it moves by the missing tools."""
    marks = rendered.marks
    own = max(1, len(rendered.tokens))
    if not exchange.body_exact and "tools" not in exchange.body and len(marks) > 2:
        missing = reported_prompt - own
        anchors = [
            (0, 0.0),
            (marks[1], float(marks[1])),
            (marks[2] + 1, float(marks[2] + 1 + missing)),
            (own, float(reported_prompt)),
        ]
    else:
        anchors = [(0, 0.0), (own, float(reported_prompt))]
    return _interpolate(anchors, x)


def _interpolate(anchors: Sequence[tuple[int, float]], x: int) -> float:
    """Piecewise-linear through ``anchors`` (rendered position → provider tokens)."""
    for (x0, y0), (x1, y1) in itertools.pairwise(anchors):
        if x <= x1:
            return y0 if x1 == x0 else y0 + (x - x0) * (y1 - y0) / (x1 - x0)
    (xa, ya), (xb, yb) = anchors[-2] if len(anchors) > 1 else anchors[0], anchors[-1]
    return yb if xb == xa else yb + (x - xb) * (yb - ya) / (xb - xa)


def _expected_unit(ideal: RenderedPrompt, limit: int) -> int:
    """The longest unit a perfect cache holds within the first ``limit`` tokens of the ideal
    prompt: the end of an earlier input or answer of the conversation, or an interval unit."""
    found = limit // _INTERVAL * _INTERVAL
    for ends in (ideal.input_ends, ideal.output_ends):  # ascending
        at = bisect_right(ends, limit)
        if at:
            found = max(found, ends[at - 1])
    return found


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
