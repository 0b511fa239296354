"""The cache doctor's verdict accuracy: precision and recall per cause code, on two sources.

- **Real recordings**: the 469 labelled later requests of the shared real-DeepSeek fixture
  (``tests/fixtures/real-wire-labels.json``), each run through the doctor as a HAR file.
- **Generated cache killers**: the openai SDK, pydantic-ai, the OpenAI Agents SDK and
  langchain-deepseek each play the verdict suite's three-turn conversation against the loopback
  mock with one planted killer per scenario, labelled by construction.

The cases, their labels and the scorer are the test suite's (``tests/testkit/doctor/verdicts``):
this section only runs them and reports the figures. ``python -m benchmarks.bench_verdicts
--markdown`` prints the full per-code and confusion tables (BENCHMARKS.md, "Cache doctor:
verdict accuracy").
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from tests.testkit.doctor._real_wire import MISSING, WIRE
from tests.testkit.doctor.verdicts._real import ISSUE_LOST, load_labels, real_cases
from tests.testkit.doctor.verdicts._scenarios import (
    FRAMEWORKS,
    KILLER_NAMES,
    NOT_PRODUCIBLE,
    framework,
    run_scenario,
)
from tests.testkit.doctor.verdicts._scoring import (
    Case,
    Scorecard,
    markdown_confusion,
    markdown_table,
    score,
    summary_lines,
)

from ._common import Figure, Section

__all__ = ["Source", "run", "sources"]

QUICK_FRAMEWORKS = ("openai-sdk",)


@dataclass(frozen=True, slots=True, kw_only=True)
class Source:
    """One source's cases and figures (``card`` is ``None`` where the source is absent)."""

    name: str
    cases: tuple[Case, ...]
    card: Scorecard | None
    notes: tuple[str, ...] = ()


def _real(quick: bool) -> Source:
    if not WIRE.is_dir() or not any(WIRE.glob("*.jsonl.gz")):
        return Source(name="real recordings", cases=(), card=None, notes=(MISSING,))
    labels = load_labels()
    if quick:  # the first 20 runs' requests: seconds, not a figure
        runs = list(dict.fromkeys(c["run"] for c in labels["cases"]))[:20]
        labels = {**labels, "cases": [c for c in labels["cases"] if c["run"] in runs]}
    cases = tuple(real_cases(labels=labels))
    return Source(name="real recordings", cases=cases, card=score(cases))


def _generated(quick: bool) -> Source:
    cases: list[Case] = []
    skipped: list[str] = []
    for name in FRAMEWORKS:
        if quick and name not in QUICK_FRAMEWORKS:
            continue
        for killer in KILLER_NAMES:
            reason = NOT_PRODUCIBLE.get((name, killer))
            if reason is not None:
                skipped.append(f"{name} × {killer}: {reason}")
                continue
            cases.extend(run_scenario(framework(name), killer).cases)
    return Source(
        name="generated cache killers",
        cases=tuple(cases),
        card=score(cases),
        notes=tuple(skipped),
    )


def sources(quick: bool) -> tuple[Source, Source]:
    """Both sources, scored."""
    return _real(quick), _generated(quick)


def _per_code(card: Scorecard) -> str:
    parts = []
    for code, s in card.codes.items():
        if code == "none":
            continue
        p = "—" if s.precision is None else f"{s.precision:.2f}"
        r = "—" if s.recall is None else f"{s.recall:.2f}"
        parts.append(f"`{code}` {p}/{r} ({s.labelled} labelled, {s.named} named)")
    return "; ".join(parts)


def _real_figures(card: Scorecard, quick: bool) -> list[Figure]:
    wrong_issue = card.lost_vs_prompt - card.lost_vs_prompt_explained
    rate = card.below_unit_wrong_rate or 0.0
    return [
        Figure(
            label="real: losses against the previous prompt explained with the right cause "
            f"(the issue counts {ISSUE_LOST}; the labels find {card.lost_vs_prompt})",
            value=card.lost_vs_prompt_explained,
            unit=f"of {card.lost_vs_prompt}",
            goal=f"≥ 7 of {ISSUE_LOST} (≤ 1 wrong)",
            ok=None if quick else wrong_issue <= 1,
        ),
        Figure(
            label="real: losses counting the previous answer too, explained with the right cause",
            value=card.lost_explained,
            unit=f"of {card.lost}",
        ),
        Figure(
            label="real: losses given a wrong cause",
            value=len(card.wrong_losses),
            unit="requests",
            goal="0",
            ok=not card.wrong_losses,
        ),
        Figure(
            label="real: below-cache-unit named wrongly on requests that lost nothing",
            value=100 * rate,
            unit="%",
            goal="≤ 5 %",
            ok=rate <= 0.05,
            note=f"{card.below_unit_wrong} of {card.nothing_lost}",
        ),
        Figure(
            label="real: timing verdicts where the gap is known no finer than 1 s",
            value=len(card.coarse_timing),
            unit="requests",
            goal="0",
            ok=not card.coarse_timing,
            note=f"of {card.coarse} such requests",
        ),
        Figure(
            label="real: verdicts right",
            value=100 * (card.accuracy or 0.0),
            unit="%",
            note=f"{card.right} of {card.cases}",
        ),
    ]


def _generated_figures(card: Scorecard) -> list[Figure]:
    clean = card.codes["none"]
    planted = card.cases - clean.labelled
    named = sum(s.found + s.via_alternative for code, s in card.codes.items() if code != "none")
    return [
        Figure(
            label="generated: planted killers named with the right code and severity",
            value=named,
            unit=f"of {planted}",
            goal="all",
            ok=named == planted,
        ),
        Figure(
            label="generated: requests without a killer given a loss or a refusal, or missing "
            "a planted no-cost note",
            value=clean.labelled - clean.found,
            unit="requests",
            goal="0",
            ok=clean.labelled == clean.found,
            note=f"of {clean.labelled}",
        ),
    ]


def run(quick: bool) -> Section:
    section = Section(
        key="verdicts",
        title="Cache doctor: verdict accuracy",
        method=(
            "The verdict suite's labelled cases (`tests/testkit/doctor/verdicts`): the real "
            "recordings' 469 later requests (labels in `tests/fixtures/real-wire-labels.json`; "
            "each recorded run read as a HAR file) and the generated cache killers (four "
            "frameworks × the planted killers, against the loopback mock, labelled by "
            "construction). A request's verdict is its `loss` finding's code, else its "
            "refusal's, else `below-cache-unit` when said, else none; right when it is the "
            "true cause or an accepted alternative (with the planted severity for generated "
            "cases). Precision = right / named, recall = found exactly / labelled, per code; "
            "the full tables: `python -m benchmarks.bench_verdicts --markdown`."
        ),
    )
    real, generated = sources(quick)
    if real.card is not None:
        section.figures += _real_figures(real.card, quick)
        section.notes.append(f"Real, precision/recall per code: {_per_code(real.card)}.")
    else:
        section.notes += [f"Real recordings not measured: {note}." for note in real.notes]
    assert generated.card is not None
    section.figures += _generated_figures(generated.card)
    section.notes.append(f"Generated, precision/recall per code: {_per_code(generated.card)}.")
    section.notes += [f"Not produced: {note}." for note in generated.notes]
    if quick:
        section.notes.append("Quick run: 20 recorded runs and the openai SDK only.")
    return section


def markdown(quick: bool) -> str:
    """Both sources' per-code and confusion tables, headline figures and misses."""
    out = []
    for source in sources(quick):
        out.append(f"#### {source.name}\n")
        if source.card is None:
            out += [f"not measured: {note}" for note in source.notes]
            continue
        out.append(markdown_table(source.card))
        out.append(markdown_confusion(source.card))
        out += [f"- {line}" for line in summary_lines(source.card)]
        out += [f"- wrong: {case.describe()}" for case in source.card.misses]
        out += [f"- not produced: {note}" for note in source.notes]
        out.append("")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_verdicts")
    parser.add_argument("--quick", action="store_true", help="20 recorded runs, one framework")
    parser.add_argument(
        "--markdown", action="store_true", help="print the per-code and confusion tables"
    )
    args = parser.parse_args(argv)
    if args.markdown:
        print(markdown(args.quick))
    else:
        print(json.dumps(run(args.quick).to_json(), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
