"""The laws of trajectories: a JSON round trip, and the relations between the match modes
(exact implies in order and unordered; in order implies superset; unordered is subset and
superset together; any subsequence is matched in order, as a superset, and its run as a
subset)."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from dsh_testkit.trajectory import (
    AnswerStep,
    Step,
    ToolStep,
    Trajectory,
    Turn,
    match_trajectory,
)

values = st.one_of(st.integers(-2, 2), st.sampled_from(["x", "y", ""]), st.booleans())
# Every field given: then "matches" is equality of the steps, an equivalence.
tool_steps = st.builds(
    ToolStep,
    name=st.sampled_from(["a", "b", "c"]),
    args=st.dictionaries(st.sampled_from(["k", "q"]), values, max_size=2),
    result=st.sampled_from(["r1", "r2"]),
)
answer_steps = st.builds(AnswerStep, text=st.sampled_from(["done", "ok"]))
steps = st.one_of(tool_steps, answer_steps)
step_lists = st.lists(steps, max_size=6)


@st.composite
def trajectories(draw: st.DrawFn) -> Trajectory:
    turns = draw(st.lists(st.lists(steps, min_size=1, max_size=3), max_size=4))
    return Trajectory(
        turns=tuple(
            Turn(
                steps=tuple(t),
                user=draw(st.one_of(st.none(), st.text(max_size=8))),
                reasoning=draw(st.one_of(st.none(), st.text(max_size=8))),
                exchange=draw(st.one_of(st.none(), st.integers(0, 9))),
            )
            for t in turns
        ),
        grouped=draw(st.booleans()),
    )


def flat(items: list[Step]) -> Trajectory:
    return Trajectory.of(*items)


@given(trajectories())
def test_json_round_trip(trajectory: Trajectory) -> None:
    document = json.loads(json.dumps(trajectory.to_json()))
    assert Trajectory.from_json(document) == trajectory


@given(trajectories())
def test_a_run_matches_itself_in_every_mode(trajectory: Trajectory) -> None:
    for mode in ("exact", "in_order", "unordered", "subset", "superset"):
        assert match_trajectory(trajectory, trajectory, mode=mode, answers=True)


@given(step_lists, st.data())
def test_any_subsequence_is_in_order_and_a_superset_and_its_run_a_subset(
    items: list[Step], data: st.DataObject
) -> None:
    keep = data.draw(st.lists(st.booleans(), min_size=len(items), max_size=len(items)))
    sub = [s for s, k in zip(items, keep, strict=True) if k]
    run = flat(items)
    assert match_trajectory(run, sub or flat([]), mode="in_order", answers=True)
    assert match_trajectory(run, sub or flat([]), mode="superset", answers=True)
    assert match_trajectory(flat(sub), run, mode="subset", answers=True)
    shuffled = data.draw(st.permutations(items))
    assert match_trajectory(run, flat(shuffled), mode="unordered", answers=True)


@given(step_lists, step_lists)
def test_the_modes_imply_each_other(a: list[Step], b: list[Step]) -> None:
    def ok(mode: str) -> bool:
        return bool(match_trajectory(flat(a), flat(b), mode=mode, answers=True))  # type: ignore[arg-type]

    if ok("exact"):
        assert ok("in_order") and ok("unordered")
    if ok("in_order"):
        assert ok("superset")
    assert ok("unordered") == (ok("subset") and ok("superset"))
    assert ok("exact") == (a == b)
