"""The doctor on real recordings: every later request of a recorded test run, against its label.

Each of the 469 labelled requests (``tests/fixtures/real-wire-labels.json``; ``_real.py``) must
get its true verdict (the labels' cause or an accepted alternative; a loss where it lost one
unit or more), and together they must meet issue 23's bars: at least 7 of the 8 lost hits the
issue counts explained with the right cause (its 8 are losses against the previous prompt
alone: the labels find 9, so at most one may go wrong), no loss given a wrong cause,
``below-cache-unit`` named wrongly on at most 5 % of the requests that lost nothing, and no
timing verdict where the trace knows the gap no finer than a second.

Where the doctor is wrong today the expectation stays what is true, marked ``xfail(strict)``
with the defect (:data:`DEFECTS`, also in ``/work/notes/verdict-disagreements.md`` beside the
checkout's worktrees): the test then passes the day the engine is fixed, and strictness makes
that visible. Reading the recordings takes a few seconds per worker: the module is slow.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import pytest

from dsh_testkit.doctor import diagnose
from dsh_testkit.traces import loads_trace

from .._real_wire import conversation_runs, har_document, load_runs, require_wire
from ._real import ISSUE_LOST, LABELS, real_cases, short_id
from ._scoring import Case, Scorecard, score

pytestmark = pytest.mark.slow

ERA_TEMPLATE_SYSTEM: Final = (
    "era-blind template: V3's template gathered a late system message into the head "
    "(true: system-changed; the doctor, with V4's: provider-miss)"
)
"""DeepSeek-V3's chat template (in service until V3.2, 2025-12) gathered every system message
into the leading system prompt, so a system message added after the history edits the rendered
head and the next request misses from there; rendered with the V4 template the request is a
pure extension."""
THINKING_ANSWER: Final = (
    "a thinking answer without tool calls counted as reusable (true: its reasoning, generated "
    "first, is never resent, so nothing past the previous prompt is)"
)
"""The model generated its reasoning before its content, and the reasoning is not sent back on
a turn without tool calls: the cached answer diverges right after the previous prompt (under
one unit here: below-cache-unit, or nothing lost)."""
ANSWER_END: Final = (
    "the answer's end placed from the doctor's own rendering, not at the previous prompt + the "
    "reported completion tokens: a few tokens off across a unit boundary"
)
"""A few tokens off across a unit boundary, it invents a lost unit (or misses one)."""
HIDDEN_CHANGE: Final = (
    "a change the template hides (re-spaced arguments) named as the cause where it cannot be "
    "(true: provider-miss)"
)
"""On V4-era traffic (arguments rendered by value: the provider's template hid it too), or
where the hit stopped well before the change."""
DEFECTS: Final[Mapping[str, str]] = {
    **{
        f"crmne/ruby_llm:spec/fixtures/vcr_cassettes/chat_basic_chat_functionality_deepseek_"
        f"deepseek-chat_successfully_uses_the_system_prompt.yml@{blob}#{position}": (
            ERA_TEMPLATE_SYSTEM
        )
        for blob in (
            "6bf929014848059c2dc79364e024d582f0c1ca8f",
            "115d42559b2310fb4141d31f4869dfda121cbd68",
            "261cca76be7eed9f73fd32bc3b6959006d5f933c",
        )
        for position in (1, 2)
    },
    **{
        "crmne/ruby_llm:spec/fixtures/vcr_cassettes/activerecord_actsas_extended_thinking_"
        "persistence_deepseek_deepseek-reasoner_persists_thinking_data_and_replays_it_across_"
        f"turns.yml@{blob}#1": THINKING_ANSWER
        for blob in (
            "332276957abcabcc041350e58c30eed5577177d1",
            "8d0cb4d6192b6772c70eed0b632a99a284cfb376",
            "84b6bf082d36579ef563dd3889d5866b2f44c18d",
            "bbb5f840a3c4ad4a274d65e1bf36bec5352c6ede",
            "af97f0b5459ed3daab4a872985daa506152b7192",
            "53683346f3324051d5af74cfb868d7e5732959e1",
            "d27d63caed3a75a382f8d137c11a18fac4726dd4",
            "e8b31cf1ae890b584bdf673b5c7ad78541d59c11",
        )
    },
    "crmne/ruby_llm:spec/fixtures/vcr_cassettes/chat_function_calling_deepseek_deepseek-chat_"
    "can_use_tools_in_multi-turn_conversations.yml@fcdc4fd9b0577a35f43c3dff12944b2d78c108dd#3": (
        ANSWER_END
    ),
    "crmne/ruby_llm:spec/fixtures/vcr_cassettes/chat_function_calling_deepseek_deepseek-chat_"
    "can_use_tools_with_multi-turn_streaming_conversations.yml@"
    "f697e1ecd89b8e779ae8dec2d8e2ef59879bb7ea#3": ANSWER_END,
    "crmne/ruby_llm:spec/fixtures/vcr_cassettes/chat_function_calling_deepseek_deepseek-chat_"
    "can_use_tools_with_multi-turn_streaming_conversations.yml@"
    "c85e03884ec00d3eb68ce7bd25a8d9bd6e7eeca6#3": ANSWER_END + ", then " + HIDDEN_CHANGE,
    "crmne/ruby_llm:spec/fixtures/vcr_cassettes/chat_function_calling_deepseek_deepseek-chat_"
    "can_use_tools_without_parameters_in_multi-turn_streaming_conversations.yml@"
    "bbe8fd22e08538f9fe89ed87814c6f8ad8284f52#1": ANSWER_END + " (a borderline loss)",
    "crmne/ruby_llm:spec/fixtures/vcr_cassettes/chat_function_calling_deepseek_deepseek-chat_"
    "can_use_tools_without_parameters_in_multi-turn_streaming_conversations.yml@"
    "1d9ec91f9f333cef9a502decbe71b8ffbccb87a5#1": ANSWER_END + " (a borderline loss)",
    "crmne/ruby_llm:spec/fixtures/vcr_cassettes/chat_function_calling_deepseek_deepseek-chat_"
    "can_use_tools_with_multi-turn_streaming_conversations.yml@"
    "ace4c145d94ced69e34847b056c017eb55265f12#1": HIDDEN_CHANGE + " (V4 era, 2026-05-06)",
    "crmne/ruby_llm:spec/fixtures/vcr_cassettes/chat_function_calling_deepseek_deepseek-chat_"
    "can_remove_tools_in_multi-turn_conversations.yml@"
    "480dfbd5333166848bbb9080f733b3e378310395#1": HIDDEN_CHANGE
    + " (hit 0, the change past the reusable 192 tokens)",
}
"""The requests the doctor gets wrong today, and the defect behind each (its case id → why)."""


def _label_ids() -> list[str]:
    document: dict[str, Any] = json.loads(LABELS.read_text(encoding="utf-8"))
    return [case["id"] for case in document["cases"]]


def _params() -> list[Any]:
    return [
        pytest.param(
            case_id,
            id=short_id(case_id),
            marks=[pytest.mark.xfail(strict=True, reason=DEFECTS[case_id])]
            if case_id in DEFECTS
            else [],
        )
        for case_id in _label_ids()
    ]


@pytest.fixture(scope="module")
def cases() -> dict[str, Case]:
    return {case.id: case for case in real_cases(require_wire())}


@pytest.fixture(scope="module")
def card(cases: dict[str, Case]) -> Scorecard:
    return score(cases.values())


@pytest.mark.parametrize("case_id", _params())
def test_each_request_gets_its_true_verdict(cases: dict[str, Case], case_id: str) -> None:
    case = cases[case_id]
    assert case.right, case.describe()
    if case.lost_something:
        assert case.verdict.severity == "loss", case.describe()


def test_the_defects_name_labelled_requests() -> None:
    assert set(DEFECTS) <= set(_label_ids())


@pytest.mark.xfail(
    strict=True,
    reason="4 of the 9 losses against the previous prompt get a wrong cause: 3 × "
    + ERA_TEMPLATE_SYSTEM
    + "; 1 × "
    + HIDDEN_CHANGE,
)
def test_the_issues_lost_hits_are_explained_with_the_right_cause(card: Scorecard) -> None:
    # The issue counts 8 lost hits against the previous prompt; the labels find 9 (most likely
    # the issue's 8 and one more): "at least 7 of the 8" holds for any 8 of them when at most
    # one of the 9 goes wrong.
    assert card.lost_vs_prompt == ISSUE_LOST + 1
    assert card.lost_vs_prompt - card.lost_vs_prompt_explained <= 1


@pytest.mark.xfail(
    strict=True,
    reason="19 losses with a wrong cause (6 × era-blind template, 8 × thinking answer counted, "
    "3 × answer end, 2 × hidden change named)",
)
def test_no_loss_is_given_a_wrong_cause(card: Scorecard) -> None:
    assert [c.describe() for c in card.wrong_losses] == []


def test_below_cache_unit_is_named_wrongly_on_at_most_5_percent_of_requests_that_lost_nothing(
    card: Scorecard,
) -> None:
    assert card.nothing_lost == 403  # 469 labelled requests, 66 of which lost hit tokens
    assert card.below_unit_wrong <= 0.05 * card.nothing_lost


def test_no_timing_verdict_where_the_gap_is_known_only_to_a_second(card: Scorecard) -> None:
    # The recordings time each request by its response's Date header: whole seconds.
    assert card.coarse == card.cases == 469
    assert card.coarse_timing == []


def test_no_timing_verdict_even_when_a_har_claims_to_know_every_duration(tmp_path: Path) -> None:
    """The same runs with every duration given as 0 ms (as some exporters write it): the
    answers' ends are then "known", yet the clock is still whole seconds, so a 1-second gap
    on a day the service delayed output units (before 2026-07-11) proves nothing."""
    runs = conversation_runs(load_runs(require_wire()))
    timing = []
    for run in runs:
        document = har_document(run)
        for entry in document["log"]["entries"]:
            entry["time"] = 0
            entry["timings"] = {"send": 0, "wait": 0, "receive": 0}
        report = diagnose(loads_trace(json.dumps(document)))
        assert report.time_resolution is not None and report.time_resolution >= 1.0
        timing += [
            (run.id, r.index)
            for r in report.requests
            if any(f.code == "not-yet-persisted" for f in r.findings)
        ]
    assert timing == []
