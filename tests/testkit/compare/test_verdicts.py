"""Verdicts, thresholds and prices: when a change is identical, benign, a regression or an
improvement, and what it costs at which prices."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from dsh_testkit.compare import CacheRegression, Thresholds, compare_runs
from dsh_testkit.compare._values import judge
from dsh_testkit.doctor import Totals
from tests.testkit.compare._agent import cli
from tests.testkit.compare._traces import body, conversation, write

LIMITS = Thresholds(max_efficiency_drop=2, max_cost_increase=5)


def totals(*, reusable: int = 1000, counted: int = 1000, cost: float | None = 1.0) -> Totals:
    return Totals(
        requests=2,
        measured=2,
        prompt_tokens=2000,
        hit_tokens=counted,
        reusable_tokens=reusable,
        counted_hit_tokens=counted,
        cost=cost,
    )


@pytest.mark.parametrize(
    ("new", "verdict"),
    [
        (totals(counted=980), "benign"),  # exactly 2 pp: not beyond the threshold
        (totals(counted=979), "regression"),
        (totals(cost=1.05), "benign"),  # exactly 5 %
        (totals(cost=1.0501), "regression"),
        (totals(counted=979, cost=0.5), "regression"),  # cheaper, but the cache got worse
        (totals(cost=0.94), "improvement"),
        (totals(counted=1000, reusable=1000, cost=1.0), "benign"),  # same figures, new requests
    ],
)
def test_thresholds_are_limits_not_exceeded(new: Totals, verdict: str) -> None:
    base = totals(counted=1000)
    assert judge(LIMITS, base, new, same=False)[0] == verdict


def test_an_improvement_in_efficiency_beyond_the_margin() -> None:
    verdict, reasons = judge(LIMITS, totals(counted=500), totals(counted=900), same=False)
    assert verdict == "improvement"
    assert reasons == ("efficiency rose 40.0 pp (50.0 % → 90.0 %)",)


def test_the_reasons_name_figures_and_thresholds() -> None:
    verdict, reasons = judge(
        LIMITS, totals(counted=1000, cost=0.0002), totals(counted=600, cost=0.0003), same=False
    )
    assert verdict == "regression"
    assert reasons == (
        "efficiency fell 40.0 pp (100.0 % → 60.0 %; more than 2 pp)",
        "estimated cost rose 50.0 % ($0.000200 → $0.000300; more than 5 %)",
    )


def test_a_cost_from_nothing_and_unmeasured_figures() -> None:
    verdict, reasons = judge(LIMITS, totals(cost=0.0), totals(cost=0.01), same=False)
    assert verdict == "regression"
    assert reasons == ("estimated cost rose from nothing ($0.00 → $0.0100; more than 5 %)",)
    # Nothing reusable and no price on either side: nothing to judge but the requests.
    empty = Totals(requests=1)
    assert judge(LIMITS, empty, empty, same=True) == (
        "identical",
        ("every request byte-identical, the same figures",),
    )
    assert judge(LIMITS, empty, empty, same=False)[0] == "benign"


def test_thresholds_refuse_what_is_not_a_limit() -> None:
    for bad in (-1, math.inf, math.nan, True, "2"):
        with pytest.raises(ValueError, match="max_efficiency_drop must be a number ≥ 0"):
            Thresholds(max_efficiency_drop=bad)  # type: ignore[arg-type]


def test_the_same_requests_with_other_hits_are_not_identical(tmp_path: Path) -> None:
    requests = conversation("hi", "more", "again")
    base = write(tmp_path / "a.jsonl", requests, usage=[(900, 0), (1000, 896), (1100, 1024)])
    new = write(tmp_path / "b.jsonl", requests, usage=[(900, 0), (1000, 896), (1100, 1000)])
    (scenario,) = compare_runs(base, new).scenarios
    assert scenario.first_change is None
    assert scenario.verdict == "benign"
    assert scenario.reasons == (
        "the same requests; cost +2.0 % ($0.000161 → $0.000164), within the thresholds "
        "(rounding can move it by ±$0.0000176, ±10.9 % (1 request(s) × one 128-token unit × "
        "$0.137/M))",  # only #3 moved: #2 is the same request with the same figures
    )


def _tool_turns(ids: tuple[str, str], *, resent: tuple[str, str] | None = None) -> list[Any]:
    """Two requests: a question, then the model's call (made under ``ids[0]`` in the chat
    format, ``ids[1]`` in Anthropic's) resent under ``resent`` with its result."""
    first = body("What is in README.md?")
    made, echoed = ids, resent or ids
    chat = body("What is in README.md?")
    chat["messages"] += [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": echoed[0],
                    "type": "function",
                    "function": {"name": "read", "arguments": '{"path": "README.md"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": made[0], "content": "# Project"},
        {
            "role": "user",
            "content": [
                {"type": "tool_use", "id": echoed[1], "name": "read", "input": {}},
                {"type": "tool_result", "tool_use_id": made[1], "content": "# Project"},
            ],
        },
    ]
    return [first, chat]


def test_tool_call_ids_made_up_anew_on_each_run_do_not_make_runs_differ(tmp_path: Path) -> None:
    # The live API (and a long-running mock) gives every call a fresh id on every run.
    base = write(tmp_path / "a.jsonl", _tool_turns(("call_00_2yW4Acq9", "toolu_01AbC")))
    new = write(tmp_path / "b.jsonl", _tool_turns(("call_00_r2bccnRq", "toolu_01XyZ")))
    (scenario,) = compare_runs(base, new).scenarios
    assert scenario.first_change is None
    assert scenario.verdict == "identical"
    # A call resent under another id than it was made under is still a change.
    changed = write(
        tmp_path / "c.jsonl",
        _tool_turns(("call_00_r2bccnRq", "toolu_01XyZ"), resent=("call_00_other", "toolu_01XyZ")),
    )
    (scenario,) = compare_runs(base, changed).scenarios
    assert scenario.first_change is not None and scenario.first_change.request == 2


def test_a_small_change_within_the_thresholds_is_benign(tmp_path: Path) -> None:
    base = write(tmp_path / "a.jsonl", conversation("hi", "more", "again"))
    new = write(tmp_path / "b.jsonl", conversation("hi", "more", "AGAIN"))
    result = compare_runs(base, new)
    (scenario,) = result.scenarios
    assert scenario.verdict == "benign"
    assert scenario.first_change is not None
    assert scenario.first_change.request == 3
    assert scenario.first_change.changed_requests == 1
    assert [p.same for p in scenario.pairs] == [True, True, False]
    assert result.exit_status == 0


def test_a_request_refused_in_the_new_run_is_a_regression(tmp_path: Path) -> None:
    requests = conversation("hi", "more")
    base = write(tmp_path / "a.jsonl", requests)
    new = write(tmp_path / "b.jsonl", requests, status=[200, 400])
    result = compare_runs(base, new)
    (scenario,) = result.scenarios
    assert scenario.verdict == "regression"
    assert "1 more request(s) refused by the API (0 → 1)" in scenario.reasons
    assert [c.code for c in scenario.causes if c.change == "appeared"] == ["request-refused"]
    with pytest.raises(CacheRegression) as caught:
        result.check()
    assert caught.value.scenarios == (scenario,)
    assert "1 more request(s) refused by the API" in str(caught.value)


def test_more_requests_cost_more(tmp_path: Path) -> None:
    base = write(tmp_path / "a.jsonl", conversation("hi", "more"))
    new = write(tmp_path / "b.jsonl", conversation("hi", "more", "and", "more"))
    (scenario,) = compare_runs(base, new).scenarios
    assert scenario.verdict == "regression"
    assert scenario.first_change is not None
    assert scenario.first_change.kind == "added"
    assert scenario.first_change.differences == (
        "the new run sends 2 more request(s): #3–#4 only in the new run",
    )


def test_a_price_override_prices_both_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    requests = conversation("hi", "more")
    base = write(tmp_path / "a.jsonl", requests, usage=[(1000, 0), (1200, 896)])
    new = write(tmp_path / "b.jsonl", requests, usage=[(1000, 0), (1200, 0)])
    status, out, _ = cli(
        capsys, "compare", str(base), str(new), "--price", "hit=1,miss=10,output=100", "--json"
    )
    document = json.loads(out)
    assert document["prices"] == {"used": ["--price"], "date": None}
    (scenario,) = document["scenarios"]
    # (hit × 1 + miss × 10 + 5 output × 100) per million tokens, per request.
    expected_base = (1000 * 10 + 500 + 896 * 1 + 304 * 10 + 500) / 1e6
    expected_new = (1000 * 10 + 500 + 1200 * 10 + 500) / 1e6
    assert scenario["base"]["totals"]["cost"] == pytest.approx(expected_base)
    assert scenario["new"]["totals"]["cost"] == pytest.approx(expected_new)
    # The new run's second request missed what it extends unchanged: the provider's doing,
    # not the harness's, so it is not a regression (and says so).
    assert status == 0
    assert scenario["verdict"] == "benign"
    assert scenario["reasons"][0].startswith(
        "within the provider's misses (not the harness's doing): cost +54.0 %"
    )
    assert scenario["rounding"]["providerCost"] == pytest.approx(896 * 9 / 1e6)
    assert scenario["netCostChange"] == pytest.approx(0.0, abs=1e-9)


def test_both_runs_are_priced_at_the_new_runs_date(tmp_path: Path) -> None:
    may_2026 = datetime(2026, 5, 10, tzinfo=UTC).timestamp()
    june_2025 = datetime(2025, 6, 1, tzinfo=UTC).timestamp()
    requests = conversation("hi", "more")
    base = write(tmp_path / "a.jsonl", requests, started=may_2026, usage=[(1000, 0), (1200, 896)])
    new = write(tmp_path / "b.jsonl", requests, started=june_2025, usage=[(1000, 0), (1200, 896)])
    result = compare_runs(base, new, granularity=128)  # the model table's is dated too
    assert result.prices == ("deepseek-chat (V3) since 2025-01-01",)
    assert result.price_date == "2025-06-01"
    (scenario,) = result.scenarios
    # Same requests, same usage, prices that differ by date: the same cost, no regression.
    assert scenario.verdict == "identical"
    assert scenario.base.cost == scenario.new.cost


def test_a_large_run_lists_only_what_changed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for i in range(31):
        write(tmp_path / "base" / f"t{i:02d}.jsonl", conversation(f"q{i}", "more"))
        last = "MORE" if i == 7 else "more"
        write(tmp_path / "new" / f"t{i:02d}.jsonl", conversation(f"q{i}", last))
    status, out, _ = cli(capsys, "compare", str(tmp_path / "base"), str(tmp_path / "new"))
    assert status == 0
    table = out.split("\n\n")[1].splitlines()
    assert [row.split()[0] for row in table[:-1]] == ["scenario", "t07.jsonl", "total"]
    assert table[-1] == "(30 identical scenario(s) not listed)"
    assert "benign: t07.jsonl" in out


def test_markdown_keeps_odd_names_intact(tmp_path: Path) -> None:
    name = "tests/t.py::test_x[a|b`c]"
    base = write(tmp_path / "base" / "x.jsonl", conversation("hi"), scenario=name)
    write(tmp_path / "new" / "x.jsonl", [body("hi", system="changed")], scenario=name)
    from dsh_testkit.compare import comparison_markdown

    markdown = comparison_markdown(compare_runs(base.parent, tmp_path / "new"))
    row = next(line for line in markdown.splitlines() if "test_x" in line and line.startswith("|"))
    assert row.startswith("| ``tests/t.py::test_x[a\\|b`c]`` | ")
    assert "<code>tests/t.py::test_x[a|b`c]</code>" in markdown


def test_the_same_body_sent_to_another_endpoint_is_named(tmp_path: Path) -> None:
    request = {
        "model": "deepseek-v4-flash",
        "max_tokens": 100,
        "messages": [{"role": "user", "content": "hi"}],
    }
    base = write(tmp_path / "a.jsonl", [request])
    new = write(
        tmp_path / "b.jsonl", [request], url="https://api.deepseek.com/anthropic/v1/messages"
    )
    (scenario,) = compare_runs(base, new).scenarios
    assert scenario.first_change is not None
    assert scenario.first_change.differences == (
        "request #1 differs in its endpoint or body shape (base chat, new anthropic); see the two "
        "recordings",
    )


def test_a_run_that_starts_on_a_warm_cache_is_said_to(tmp_path: Path) -> None:
    requests = conversation("hi", "more")
    base = write(tmp_path / "a.jsonl", requests, usage=[(900, 0), (1000, 896)])
    new = write(tmp_path / "b.jsonl", requests, usage=[(900, 768), (1000, 896)])
    (scenario,) = compare_runs(base, new).scenarios
    [note] = [n for n in scenario.notes if "warm" in n]
    assert note.startswith("the new run's first request hit 768 cached tokens")
    assert "--simulate" in note
    (scenario,) = compare_runs(base, new, simulate=True).scenarios
    assert not [n for n in scenario.notes if "warm" in n]
