"""Matching a trajectory against the expected one, as LangSmith's trajectory evaluators do —
and as an assertion that shows both side by side.

Modes (agentevals' names, plus ``in_order``), always of the *actual* trajectory against the
*expected* one:

* ``exact`` — the same steps in the same order (and, when the expected trajectory is written in
  groups, the same turn boundaries: which calls came in one model answer);
* ``in_order`` — the expected steps appear in this order, other steps may come between;
* ``unordered`` — the same steps, in any order;
* ``superset`` — every expected step appears, in any order, and others may too (the agent did
  at least this);
* ``subset`` — every actual step is an expected one (the agent did no more than this).

Two steps match when they are the same kind and — for tools — have the same name, arguments
under the arguments mode (``exact``, ``ignore``, ``subset``: the actual arguments are within
the expected ones, ``superset``: they hold the expected ones; per tool with ``args_by_tool``, a
mode or a callable ``(actual, expected) -> bool``) and, when the expected step gives one, the
same result; answers match on their text when the expected step gives one. Answers take part
when the expected trajectory has any (``answers=`` says otherwise). Unlike agentevals, results,
answers and turn boundaries can all be compared, and the outcome is an assertion naming the
first difference, not a bare score.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias, get_args

from .._errors import TestkitError
from ._errors import TrajectoryError
from ._extract import trajectory_of
from ._model import AnswerStep, Step, ToolStep, Trajectory, shown

__all__ = [
    "ArgsMode",
    "MatchMode",
    "TrajectoryMatch",
    "TrajectoryMismatch",
    "assert_trajectory",
    "match_trajectory",
]

MatchMode: TypeAlias = Literal["exact", "in_order", "unordered", "subset", "superset"]
"""How the steps of two trajectories must correspond (see the module's text)."""
ArgsMode: TypeAlias = Literal["exact", "ignore", "subset", "superset"]
"""How a tool call's arguments must correspond."""
ArgsMatcher: TypeAlias = ArgsMode | Callable[[Any, Any], bool]

_MODES: Final = frozenset(get_args(MatchMode))
_ARGS_MODES: Final = frozenset(get_args(ArgsMode))
_MISSING: Final = object()


Row: TypeAlias = tuple[int | None, int | None, bool]
"""One row of the side-by-side view: the expected step's index, the actual step's (``None``:
nothing on that side) and whether the two match."""


@dataclass(frozen=True, slots=True, kw_only=True)
class TrajectoryMatch:
    """The outcome of :func:`match_trajectory`: truthy when the trajectories match."""

    ok: bool
    mode: MatchMode
    expected: Trajectory
    actual: Trajectory
    rows: tuple[Row, ...]
    """The side-by-side view's rows: ``(expected index, actual index, same)`` into
    :attr:`expected_steps` and :attr:`actual_steps`."""
    difference: str | None
    """The first difference, in words (``None`` when they match)."""
    expected_steps: tuple[Step, ...]
    """The expected steps compared (answers dropped when answers are not compared)."""
    actual_steps: tuple[Step, ...]
    """The actual steps compared."""

    def __bool__(self) -> bool:
        return self.ok

    @property
    def key(self) -> str:
        """``trajectory_<mode>_match``, as an evaluator's result names itself."""
        return f"trajectory_{self.mode}_match"

    def to_evaluator_result(self) -> dict[str, Any]:
        """The result as a LangSmith/agentevals evaluator returns it: ``{"key", "score",
        "comment"}`` (the comment is the first difference)."""
        return {"key": self.key, "score": self.ok, "comment": self.difference}

    def explain(self) -> str:
        """Both trajectories side by side: a row per pair, ``==`` where the steps match,
        ``!=`` where they differ, blank beside a step with nothing on the other side."""
        left = [self.expected_steps[e].describe() if e is not None else "" for e, _, _ in self.rows]
        right = [self.actual_steps[a].describe() if a is not None else "" for _, a, _ in self.rows]
        width = max([len("expected"), *(len(x) for x in left)])
        lines = [f"     {'expected'.ljust(width)}    actual"]
        for n, ((e, a, same), lt, rt) in enumerate(zip(self.rows, left, right, strict=True), 1):
            mark = ("==" if same else "!=") if e is not None and a is not None else "  "
            lines.append(f"{n:>3}  {lt.ljust(width)} {mark} {rt}".rstrip())
        return "\n".join(lines)

    def message(self) -> str:
        """What an assertion says: the verdict, the first difference, both side by side."""
        head = (
            f"trajectory does not match ({self.mode})"
            if not self.ok
            else f"trajectory matches ({self.mode})"
        )
        parts = [head + (f": {self.difference}" if self.difference else ""), self.explain()]
        return "\n".join(parts)


class TrajectoryMismatch(TestkitError, AssertionError):
    """:func:`assert_trajectory` found the trajectory is not the expected one. ``.result`` is
    the :class:`TrajectoryMatch` (both trajectories, the rows of the side-by-side view, the
    first difference); the message shows both side by side."""

    def __init__(self, message: str, *, result: TrajectoryMatch) -> None:
        self.result = result
        super().__init__(message)


TrajectoryMismatch.__module__ = "dsh_testkit.trajectory"


def match_trajectory(
    actual: Any,
    expected: Any,
    *,
    mode: MatchMode = "exact",
    args: ArgsMode = "exact",
    args_by_tool: Mapping[str, ArgsMatcher] | None = None,
    answers: bool | None = None,
) -> TrajectoryMatch:
    """Match ``actual`` against ``expected`` (each a :class:`Trajectory` or anything
    :func:`trajectory_of` reads: a capture, the mock, a cassette, a trace, a message list);
    see the module's text for ``mode``, ``args``, ``args_by_tool`` and ``answers``."""
    if mode not in _MODES:
        raise TrajectoryError(f"mode: expected one of {sorted(_MODES)}, got {mode!r}")
    matchers = _matchers(args, args_by_tool)
    if answers is not None and not isinstance(answers, bool):
        raise TrajectoryError(f"answers: expected True, False or None, got {answers!r}")
    want = trajectory_of(expected)
    got = trajectory_of(actual)
    compare_answers = (
        any(isinstance(s, AnswerStep) for s in want.steps) if answers is None else answers
    )
    e_steps, e_groups = _compared(want, compare_answers)
    a_steps, a_groups = _compared(got, compare_answers)

    def why(e: int, a: int) -> str | None:
        return _mismatch(e_steps[e], a_steps[a], matchers)

    if mode == "exact":
        ok, pairs, difference = _exact(e_steps, a_steps, why)
        if ok and want.grouped and got.grouped and e_groups != a_groups:
            ok, difference = False, _grouping_difference(e_steps, e_groups, a_groups)
    elif mode == "in_order":
        ok, pairs, difference = _in_order(e_steps, a_steps, why)
    else:
        ok, pairs, difference = _unordered(e_steps, a_steps, why, mode)
    rows = tuple((e, a, e is not None and a is not None and why(e, a) is None) for e, a in pairs)
    return TrajectoryMatch(
        ok=ok,
        mode=mode,
        expected=want,
        actual=got,
        rows=rows,
        difference=difference,
        expected_steps=e_steps,
        actual_steps=a_steps,
    )


def assert_trajectory(
    actual: Any,
    expected: Any,
    *,
    mode: MatchMode = "exact",
    args: ArgsMode = "exact",
    args_by_tool: Mapping[str, ArgsMatcher] | None = None,
    answers: bool | None = None,
) -> TrajectoryMatch:
    """Raise :class:`TrajectoryMismatch` (an ``AssertionError``) unless ``actual`` matches
    ``expected`` under ``mode`` (see :func:`match_trajectory`); its message names the first
    difference and shows both trajectories side by side. Returns the match."""
    __tracebackhide__ = True
    result = match_trajectory(
        actual, expected, mode=mode, args=args, args_by_tool=args_by_tool, answers=answers
    )
    if not result.ok:
        raise TrajectoryMismatch(result.message(), result=result)
    return result


# -- comparing two steps ----------------------------------------------------------------------


def _matchers(
    args: ArgsMode, by_tool: Mapping[str, ArgsMatcher] | None
) -> tuple[ArgsMatcher, Mapping[str, ArgsMatcher]]:
    if args not in _ARGS_MODES:
        raise TrajectoryError(f"args: expected one of {sorted(_ARGS_MODES)}, got {args!r}")
    by_tool = dict(by_tool or {})
    for name, matcher in by_tool.items():
        if not callable(matcher) and matcher not in _ARGS_MODES:
            raise TrajectoryError(
                f"args_by_tool[{name!r}]: expected one of {sorted(_ARGS_MODES)} or a callable "
                f"(actual, expected) -> bool, got {matcher!r}"
            )
    return args, by_tool


def _same(expected: Any, actual: Any) -> bool:
    """One expected value against the actual one: a regex searches a string, anything else
    is ``expected == actual`` (so matchers such as ``unittest.mock.ANY`` work)."""
    if isinstance(expected, re.Pattern):
        return isinstance(actual, str) and expected.search(actual) is not None
    try:
        return bool(expected == actual)
    except Exception:  # a matcher that cannot compare this value does not match it
        return False


def _contained(inner: Any, outer: Any) -> str | None:
    """Why ``inner``'s keys are not all in ``outer`` with the same values (``None``: they are)."""
    if not isinstance(inner, Mapping) or not isinstance(outer, Mapping):
        return None if _same(inner, outer) else "not the same value"
    for key, value in inner.items():
        if key not in outer:
            return f"no {key!r}"
        if not _same(value, outer[key]) and not _same(outer[key], value):
            return f"{key!r} is {shown(outer[key], limit=40)}, not {shown(value, limit=40)}"
    return None


def _args_mismatch(matcher: ArgsMatcher, expected: Any, actual: Any) -> str | None:
    if expected is None or matcher == "ignore":
        return None
    if callable(matcher) and not isinstance(matcher, str):
        try:
            said = matcher(actual, expected)
        except Exception as exc:
            raise TrajectoryError(
                f"the arguments matcher {getattr(matcher, '__name__', 'callable')} raised "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        return None if said else f"the matcher {getattr(matcher, '__name__', 'callable')} said no"
    if matcher == "exact":
        if isinstance(expected, Mapping) and isinstance(actual, Mapping):
            for key in sorted(set(expected) | set(actual), key=str):
                if key not in actual:
                    return f"argument {key!r} missing"
                if key not in expected:
                    return f"unexpected argument {key!r}={shown(actual[key], limit=40)}"
                if not _same(expected[key], actual[key]):
                    return (
                        f"argument {key!r} is {shown(actual[key], limit=40)}, expected "
                        f"{shown(expected[key], limit=40)}"
                    )
            return None
        return None if _same(expected, actual) else "the arguments differ"
    if matcher == "subset":  # the actual arguments are within the expected ones
        why = _contained(actual, expected)
        return None if why is None else f"arguments not within the expected ones ({why})"
    why = _contained(expected, actual)  # superset: they hold the expected ones
    return None if why is None else f"arguments lack the expected ones ({why})"


def _mismatch(
    expected: Step, actual: Step, matchers: tuple[ArgsMatcher, Mapping[str, ArgsMatcher]]
) -> str | None:
    """Why two steps differ, or ``None``."""
    if isinstance(expected, ToolStep):
        if not isinstance(actual, ToolStep):
            return f"expected a call to {expected.name}, got an answer"
        if expected.name != actual.name:
            return f"expected a call to {expected.name}, got {actual.name}"
        default, by_tool = matchers
        why = _args_mismatch(by_tool.get(expected.name, default), expected.args, actual.args)
        if why is not None:
            return f"{expected.name}: {why}"
        if expected.result is not None and not _same(expected.result, actual.result):
            return (
                f"{expected.name}: result {shown(actual.result, limit=40)}, expected "
                f"{shown(expected.result, limit=40)}"
            )
        return None
    if not isinstance(actual, AnswerStep):
        return f"expected an answer, got a call to {actual.name}"
    if expected.text is not None and not _same(expected.text, actual.text):
        return f"answer {shown(actual.text, limit=50)}, expected {shown(expected.text, limit=50)}"
    return None


# -- the modes --------------------------------------------------------------------------------

Why: TypeAlias = Callable[[int, int], str | None]
Pairs: TypeAlias = list[tuple[int | None, int | None]]


def _compared(trajectory: Trajectory, answers: bool) -> tuple[tuple[Step, ...], tuple[int, ...]]:
    """The steps compared, and the turn each is in (numbered from 0 among turns that kept a
    step)."""
    steps: list[Step] = []
    groups: list[int] = []
    turn = -1
    for t in trajectory.turns:
        kept = [s for s in t.steps if answers or not isinstance(s, AnswerStep)]
        if kept:
            turn += 1
        steps += kept
        groups += [turn] * len(kept)
    return tuple(steps), tuple(groups)


def _exact(e: tuple[Step, ...], a: tuple[Step, ...], why: Why) -> tuple[bool, Pairs, str | None]:
    pairs: Pairs = [
        (i if i < len(e) else None, i if i < len(a) else None) for i in range(max(len(e), len(a)))
    ]
    for i in range(min(len(e), len(a))):
        reason = why(i, i)
        if reason is not None:
            return False, pairs, f"step {i + 1}: {reason}"
    if len(e) > len(a):
        return False, pairs, f"step {len(a) + 1}: expected {e[len(a)].describe()}, the run ended"
    if len(a) > len(e):
        return False, pairs, f"step {len(e) + 1}: unexpected {a[len(e)].describe()}"
    return True, pairs, None


def _grouping_difference(e: tuple[Step, ...], want: tuple[int, ...], got: tuple[int, ...]) -> str:
    for i in range(1, len(want)):
        together_want = want[i] == want[i - 1]
        together_got = got[i] == got[i - 1]
        if together_want != together_got:
            how = "in the same model turn as" if together_want else "in a turn after"
            return (
                f"turns: expected step {i + 1} ({e[i].describe()}) {how} step {i}, "
                f"the run {'split them' if together_want else 'put them in one turn'}"
            )
    return "turns: the turn boundaries differ"


def _in_order(e: tuple[Step, ...], a: tuple[Step, ...], why: Why) -> tuple[bool, Pairs, str | None]:
    """Greedy earliest matching: an expected step taken at its first match never costs a
    later one a match, so it finds a subsequence whenever one exists."""
    pairs: Pairs = []
    j = 0
    for i in range(len(e)):
        start = j
        while j < len(a) and why(i, j) is not None:
            j += 1
        if j == len(a):
            pairs += [(None, k) for k in range(start, len(a))]
            pairs += [(k, None) for k in range(i, len(e))]
            seen = ", ".join(a[k].describe() for k in range(start, len(a))) or "nothing"
            return (
                False,
                pairs,
                f"step {i + 1} ({e[i].describe()}) not found in order; after the steps matched "
                f"before it the run did: {seen}",
            )
        pairs += [(None, k) for k in range(start, j)]
        pairs.append((i, j))
        j += 1
    pairs += [(None, k) for k in range(j, len(a))]
    return True, pairs, None


def _unordered(
    e: tuple[Step, ...], a: tuple[Step, ...], why: Why, mode: MatchMode
) -> tuple[bool, Pairs, str | None]:
    """A maximum matching of expected to actual steps (augmenting paths: a greedy pick can
    take the step a later, pickier expected step needed)."""
    owner: dict[int, int] = {}  # actual index -> expected index

    def place(i: int, seen: set[int]) -> bool:
        for j in range(len(a)):
            if j in seen or why(i, j) is not None:
                continue
            seen.add(j)
            if j not in owner or place(owner[j], seen):
                owner[j] = i
                return True
        return False

    for i in range(len(e)):
        place(i, set())
    matched = {i: j for j, i in owner.items()}
    pairs: Pairs = [(i, matched.get(i)) for i in range(len(e))]
    pairs += [(None, j) for j in range(len(a)) if j not in owner]
    missing = [i for i in range(len(e)) if i not in matched]
    extra = [j for j in range(len(a)) if j not in owner]
    problems = []
    if missing and mode in ("unordered", "superset"):
        problems.append("missing " + ", ".join(e[i].describe() for i in missing))
    if extra and mode in ("unordered", "subset"):
        problems.append("not expected: " + ", ".join(a[j].describe() for j in extra))
    return (not problems), pairs, ("; ".join(problems) or None)
