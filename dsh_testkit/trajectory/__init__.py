"""Trajectories: what an agent did, as data, and assertions about it.

:func:`trajectory_of` reads the tool calls (in order, with arguments and results), the answers
and the model turns out of any recording the kit reads — a ``RequestCapture``, the mock (or the
``dsh_mock`` fixture), a cassette, a HAR file, OpenTelemetry spans, the proxy's trace, a
session log — or an OpenAI-format message list. :func:`assert_trajectory` matches it against
the one you expect, exactly, in order, as a subset or superset, or unordered (LangSmith's
trajectory evaluators' modes), and fails showing both side by side::

    from dsh_testkit.trajectory import answer, assert_trajectory, tool, trajectory_of

    run = trajectory_of(dsh_mock)
    assert run.tool_names == ("get_weather", "get_time")
    assert_trajectory(run, [tool("get_weather", city="Oslo"), tool("get_time")], mode="in_order")
"""

from ._errors import TrajectoryError
from ._extract import trajectory_of
from ._match import (
    ArgsMode,
    MatchMode,
    TrajectoryMatch,
    TrajectoryMismatch,
    assert_trajectory,
    match_trajectory,
)
from ._model import AnswerStep, Step, ToolStep, Trajectory, Turn, answer, tool

__all__ = [
    "AnswerStep",
    "ArgsMode",
    "MatchMode",
    "Step",
    "ToolStep",
    "Trajectory",
    "TrajectoryError",
    "TrajectoryMatch",
    "TrajectoryMismatch",
    "Turn",
    "answer",
    "assert_trajectory",
    "match_trajectory",
    "tool",
    "trajectory_of",
]
