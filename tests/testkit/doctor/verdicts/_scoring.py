"""Scoring the doctor's verdicts against labelled cases: per cause code, and the issue's bars.

A :class:`Case` is one request with its true cause (a cause code, or ``none``), the codes a
diagnosis may name instead (``accepted``), and what the doctor said (:class:`Verdict`). A
request's **verdict** is the code of its ``loss`` finding (the change that limited its hit);
without one, that of its refusal (the change the API refused it for, else
``request-refused``); without either, ``below-cache-unit`` when the doctor said so (a note: the
request could not hit); else ``none``. A verdict is **right** when it is the true cause or an
accepted alternative.

:func:`score` counts, per code: how many cases carry it (*labelled*), how often the doctor
named it (*named*), how often that was right (*precision* = right / named), and how many of
its cases got exactly it (*recall* = found / labelled; *via alternative* counts the cases that
got an accepted other code instead). Beside them: a confusion table (truth × verdict), the
losses explained with the right cause, the losses given a wrong cause, the rate of
``below-cache-unit`` named wrongly on requests that lost nothing, and the timing verdicts given
where the trace does not know the gap finer than a second.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from dsh_testkit.doctor import CAUSE_CODES, RequestDiagnosis, Severity

__all__ = [
    "CODES",
    "Case",
    "CodeScore",
    "Scorecard",
    "Verdict",
    "markdown_confusion",
    "markdown_table",
    "score",
    "verdict_of",
]

CODES: Final = (*CAUSE_CODES, "none")
"""Every verdict a case can have: the doctor's cause codes and ``none``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Verdict:
    """What the doctor said about one request, reduced to what is scored."""

    cause: str
    """The verdict (see the module docstring)."""
    severity: Severity | None
    """The severity of the finding the verdict comes from (``None`` for ``none``)."""
    findings: tuple[tuple[str, Severity], ...] = ()
    """Every finding, as (code, severity)."""
    losses: tuple[tuple[str, int], ...] = ()
    """Every ``loss`` finding, as (code, the tokens counted on it): a loss may be split between
    a change and the provider."""
    lost: int = 0
    """The tokens the doctor counts as lost."""
    reusable: int = 0
    timing: bool = False
    """Whether it gave a timing verdict (``not-yet-persisted``)."""

    def has(self, code: str, severity: Severity | None = None) -> bool:
        return any(c == code and (severity is None or s == severity) for c, s in self.findings)


def verdict_of(request: RequestDiagnosis) -> Verdict:
    """The doctor's verdict on one request of its report."""
    findings = tuple((f.code, f.severity) for f in request.findings)
    loss = next((f for f in request.findings if f.severity == "loss"), None)
    refusals = [f for f in request.findings if f.severity == "refusal"]
    refusal = next((f for f in refusals if f.code != "request-refused"), None)
    if refusal is None and refusals:
        refusal = refusals[0]
    cause: str
    severity: Severity | None
    if loss is not None:
        cause, severity = loss.code, loss.severity
    elif refusal is not None:
        cause, severity = refusal.code, refusal.severity
    elif any(code == "below-cache-unit" for code, _ in findings):
        cause, severity = "below-cache-unit", "note"
    else:
        cause, severity = "none", None
    return Verdict(
        cause=cause,
        severity=severity,
        findings=findings,
        losses=tuple((f.code, f.lost_tokens) for f in request.findings if f.severity == "loss"),
        lost=request.lost_tokens,
        reusable=request.reusable_tokens,
        timing=any(code == "not-yet-persisted" for code, _ in findings),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """One labelled request and the doctor's verdict on it."""

    id: str
    source: Literal["real", "generated"]
    truth: str
    """The true cause: a cause code, or ``none``."""
    verdict: Verdict
    accepted: tuple[str, ...] = ()
    """Other verdicts that are right too (the labels' alternatives, this suite's judgement)."""
    severity: Severity | None = None
    """The severity the true cause must be named with (generated cases; ``None``: any)."""
    also: tuple[tuple[str, Severity], ...] = ()
    """Findings (code, severity) the request must carry besides its cause."""
    provider_share: bool = False
    """Part of its loss is the provider's (a ``provider-miss`` loss may stand beside its cause)."""
    lost: int | None = None
    """The tokens it truly lost (real cases: the labels' measure, previous prompt and answer)."""
    lost_vs_prompt: int | None = None
    """The tokens it lost counting only the previous prompt (real cases)."""
    resolution: float | None = None
    """How finely the trace knows its times (seconds; ``None``: not at all)."""
    borderline: bool = False
    """A loss that a one-token estimate error would cancel (the labels say so)."""
    why: str = ""
    """Where the truth comes from, when this suite's judgement differs from the labels."""

    @property
    def lost_something(self) -> bool:
        if self.lost is not None:
            return self.lost > 0
        return self.severity == "loss"

    @property
    def right(self) -> bool:
        """The verdict is the true cause (or an accepted one), with the planted severity; every
        code the case also needs is there; and no loss is counted on a code that did not cost
        it anything (only ``provider-miss`` may share a loss, where the provider lost a part)."""
        if self.verdict.cause != self.truth and self.verdict.cause not in self.accepted:
            return False
        allowed = {self.truth, *self.accepted, *(("provider-miss",) if self.provider_share else ())}
        if any(code not in allowed for code, _ in self.verdict.losses):
            return False
        if self.severity is not None and self.verdict.severity != self.severity:
            return False
        return all(self.verdict.has(code, severity) for code, severity in self.also)

    def describe(self) -> str:
        lost = dict(self.verdict.losses)
        found = (
            ", ".join(
                f"{c} ({s}{f', {lost[c]} tokens' if s == 'loss' and c in lost else ''})"
                for c, s in self.verdict.findings
            )
            or "no finding"
        )
        return (
            f"{self.id}: true {self.truth}"
            + (f" (or {', '.join(self.accepted)})" if self.accepted else "")
            + (f" [{self.severity}]" if self.severity else "")
            + "".join(f" + {code} ({severity})" for code, severity in self.also)
            + f"; the doctor: {found}; lost {self.verdict.lost} of {self.verdict.reusable}"
        )


@dataclass(slots=True, kw_only=True)
class CodeScore:
    """One code's counts."""

    code: str
    labelled: int = 0
    named: int = 0
    right_named: int = 0
    found: int = 0
    via_alternative: int = 0

    @property
    def precision(self) -> float | None:
        return self.right_named / self.named if self.named else None

    @property
    def recall(self) -> float | None:
        return self.found / self.labelled if self.labelled else None


@dataclass(slots=True, kw_only=True)
class Scorecard:
    """Every figure of one set of cases."""

    cases: int = 0
    codes: dict[str, CodeScore] = field(default_factory=dict)
    confusion: Counter[tuple[str, str]] = field(default_factory=Counter)
    right: int = 0
    lost: int = 0
    """Cases that lost one unit or more."""
    lost_explained: int = 0
    """… explained with the right cause."""
    lost_vs_prompt: int = 0
    """Cases that lost tokens counting only the previous prompt (real cases)."""
    lost_vs_prompt_explained: int = 0
    wrong_losses: list[Case] = field(default_factory=list)
    """Cases given a loss with a wrong cause (a false loss on a request that lost nothing is
    one)."""
    nothing_lost: int = 0
    """Cases that lost nothing."""
    below_unit_named: int = 0
    """… where the doctor said ``below-cache-unit``."""
    below_unit_wrong: int = 0
    """… and that was not the truth (nor accepted)."""
    coarse: int = 0
    """Cases whose trace knows its times no finer than a second (or not at all)."""
    coarse_timing: list[Case] = field(default_factory=list)
    """… given a timing verdict all the same."""
    misses: list[Case] = field(default_factory=list)
    """Every case whose verdict is not right."""

    @property
    def below_unit_wrong_rate(self) -> float | None:
        return self.below_unit_wrong / self.nothing_lost if self.nothing_lost else None

    @property
    def accuracy(self) -> float | None:
        return self.right / self.cases if self.cases else None


def score(cases: Iterable[Case]) -> Scorecard:
    card = Scorecard()
    codes = {code: CodeScore(code=code) for code in CODES}
    for case in cases:
        card.cases += 1
        said = case.verdict.cause
        right = case.right
        card.confusion[(case.truth, said)] += 1
        codes.setdefault(case.truth, CodeScore(code=case.truth)).labelled += 1
        named = codes.setdefault(said, CodeScore(code=said))
        named.named += 1
        if right:
            card.right += 1
            named.right_named += 1
            if said == case.truth:
                codes[case.truth].found += 1
            else:
                codes[case.truth].via_alternative += 1
        else:
            card.misses.append(case)
        if case.lost_something:
            card.lost += 1
            card.lost_explained += right
        if case.lost_vs_prompt:
            card.lost_vs_prompt += 1
            card.lost_vs_prompt_explained += right
        if case.verdict.severity == "loss" and not right:
            card.wrong_losses.append(case)
        if not case.lost_something and case.severity != "refusal":
            card.nothing_lost += 1
            if said == "below-cache-unit":
                card.below_unit_named += 1
                card.below_unit_wrong += not right
        if case.resolution is None or case.resolution >= 1.0:
            card.coarse += 1
            if case.verdict.timing:
                card.coarse_timing.append(case)
    card.codes = {code: s for code, s in codes.items() if s.labelled or s.named}
    return card


def _ratio(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def markdown_table(card: Scorecard) -> str:
    """The per-code table: labelled, named, right, precision, recall (and via alternatives)."""
    rows = [
        "| code | labelled | named | right | precision | found | via alternative | recall |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for code in CODES:
        s = card.codes.get(code)
        if s is None:
            continue
        rows.append(
            f"| `{code}` | {s.labelled} | {s.named} | {s.right_named} | {_ratio(s.precision)} "
            f"| {s.found} | {s.via_alternative} | {_ratio(s.recall)} |"
        )
    return "\n".join(rows) + "\n"


def markdown_confusion(card: Scorecard) -> str:
    """The confusion table: one row per true cause, one column per verdict the doctor gave."""
    truths = [c for c in CODES if any(t == c for t, _ in card.confusion)]
    said = [c for c in CODES if any(v == c for _, v in card.confusion)]
    rows = [
        "| true \\ doctor | " + " | ".join(f"`{c}`" for c in said) + " |",
        "|---|" + "---:|" * len(said),
    ]
    for truth in truths:
        cells = [str(card.confusion.get((truth, c), "")) for c in said]
        rows.append(f"| `{truth}` | " + " | ".join(cells) + " |")
    return "\n".join(rows) + "\n"


def summary_lines(card: Scorecard, *, issue_lost: int | None = None) -> Sequence[str]:
    """The headline figures, one line each."""
    lines = [f"cases: {card.cases}; verdict right: {card.right}"]
    lines.append(
        f"lost ≥ 1 unit: {card.lost}; explained with the right cause: {card.lost_explained}"
    )
    if card.lost_vs_prompt:
        lines.append(
            f"lost counting the previous prompt only: {card.lost_vs_prompt}; explained: "
            f"{card.lost_vs_prompt_explained}"
            + (f" (the issue counts {issue_lost})" if issue_lost else "")
        )
    lines.append(f"losses given a wrong cause: {len(card.wrong_losses)}")
    rate = card.below_unit_wrong_rate
    lines.append(
        f"below-cache-unit named wrongly on requests that lost nothing: {card.below_unit_wrong} "
        f"of {card.nothing_lost}"
        + ("" if rate is None else f" ({rate:.1%})")
        + f"; named there at all: {card.below_unit_named}"
    )
    lines.append(
        f"timing verdicts where the gap is known no finer than 1 s: {len(card.coarse_timing)} "
        f"(of {card.coarse} such requests)"
    )
    return lines
