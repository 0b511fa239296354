"""The real recordings as labelled cases: every later request of a recorded test run.

The runs come from ``../_real_wire.py`` (the shared real-DeepSeek fixture grouped per recorded
test run, each written as a HAR file); the truth from ``tests/fixtures/real-wire-labels.json``
(lost hit tokens counting the previous prompt and its answer, the true cause, accepted
alternatives, and ``lostVsPrompt``: the loss counting only the previous prompt, the issue's
measure). Each run goes through the doctor as a HAR file does (``cache-report RUN.har``).

Where this suite's judgement differs from the labels it is said here, with the reason
(:data:`JUDGEMENTS`); the labels file is left as its author wrote it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from dsh_testkit.doctor import diagnose
from dsh_testkit.traces import loads_trace

from .._real_wire import WIRE, Run, conversation_runs, har_text, load_runs
from ._scoring import Case, verdict_of

__all__ = ["ISSUE_LOST", "JUDGEMENTS", "LABELS", "Judgement", "load_labels", "real_cases"]

LABELS: Final = Path(__file__).resolve().parents[3] / "fixtures" / "real-wire-labels.json"
ISSUE_LOST: Final = 8
"""The lost hits issue 23 counts on these recordings (measured against the previous prompt
alone; the labels find 9 such requests: the issue's 8 are most likely these less one)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Judgement:
    """Where this suite accepts a verdict the labels do not list, and why."""

    applies: Callable[[Mapping[str, Any]], bool]
    accept: tuple[str, ...]
    why: str


JUDGEMENTS: Final = (
    Judgement(
        applies=lambda label: label["cause"] == "below-cache-unit",
        accept=("none",),
        why=(
            "the request lost nothing; 'below-cache-unit' is a note explaining a zero, which the "
            "doctor gives once per conversation and only where the prompt reaches a unit: "
            "saying nothing of it claims nothing false"
        ),
    ),
    Judgement(
        applies=lambda label: (
            label["cause"] == "none" and label["reach"] == 0 and label["hit"] == 0
        ),
        accept=("below-cache-unit",),
        why=(
            "nothing of the earlier request was reusable (less than one unit) and nothing hit: "
            "'below-cache-unit' is true of it; the labels say 'none' because the request "
            "starts a new one-shot conversation (a one-message prompt sent again)"
        ),
    ),
)
"""This suite's judgement beside the labels: 28 requests that could not hit may go without a
finding, and 18 (the repeated one-message prompts of
``reports_consistent_token_counts_compared_to_non-streaming``) may get ``below-cache-unit``."""


def load_labels(path: Path = LABELS) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return document


def _case(label: Mapping[str, Any], verdict: Any, resolution: float | None) -> Case:
    accepted = list(label.get("alternatives", ()))
    why = []
    for judgement in JUDGEMENTS:
        if judgement.applies(label):
            accepted += [c for c in judgement.accept if c not in accepted]
            why.append(judgement.why)
    return Case(
        id=label["id"],
        source="real",
        truth=label["cause"],
        accepted=tuple(accepted),
        verdict=verdict,
        lost=label["lost"],
        lost_vs_prompt=label["lostVsPrompt"],
        provider_share=label["lostByProvider"] > 0,
        resolution=resolution,
        borderline=bool(label.get("borderline")),
        why="; ".join(why),
    )


def real_cases(folder: Path = WIRE, labels: Mapping[str, Any] | None = None) -> list[Case]:
    """Every labelled request with the doctor's verdict, in the labels' order."""
    document = labels if labels is not None else load_labels()
    by_id = {c["id"]: c for c in document["cases"]}
    runs: dict[str, Run] = {r.id: r for r in conversation_runs(load_runs(folder))}
    verdicts: dict[str, tuple[Any, float | None]] = {}
    for run_id in dict.fromkeys(c["run"] for c in document["cases"]):
        run = runs[run_id]
        report = diagnose(loads_trace(har_text(run), path=run.har_name))
        for request in report.requests:
            case_id = f"{run.id}#{run.requests[request.index].position}"
            verdicts[case_id] = (verdict_of(request), report.time_resolution)
    return [_case(label, *verdicts[case_id]) for case_id, label in by_id.items()]


def short_id(case_id: str) -> str:
    """``<file stem>@<blob prefix>#<position>``: a readable test id."""
    path, _, rest = case_id.rpartition("@")
    stem = path.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    stem = stem.replace("chat_basic_chat_functionality_deepseek_deepseek-chat_", "basic/")
    stem = stem.replace("chat_function_calling_deepseek_deepseek-chat_", "fc/")
    blob, _, position = rest.partition("#")
    return f"{stem}@{blob[:8]}#{position}"
