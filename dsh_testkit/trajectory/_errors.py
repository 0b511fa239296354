"""The errors of trajectories (part of ``dsh_testkit``'s one tree).

::

    TestkitError
    ├── TrajectoryError      a value cannot be read as a trajectory (``.reason``)
    └── TrajectoryMismatch   a trajectory is not the expected one (``.result``)  [AssertionError]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._errors import TestkitError

if TYPE_CHECKING:
    from ._match import TrajectoryMatch

__all__ = ["TrajectoryError", "TrajectoryMismatch"]


class TrajectoryError(TestkitError, ValueError):
    """A value could not be read as a trajectory, or a matching option is invalid: what it
    is, where, and what was expected."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


class TrajectoryMismatch(TestkitError, AssertionError):
    """:func:`~dsh_testkit.trajectory.assert_trajectory` found the trajectory is not the
    expected one. ``.result`` is the :class:`~dsh_testkit.trajectory.TrajectoryMatch` (both
    trajectories, the pairs matched, what was left on each side); the message shows both side
    by side."""

    def __init__(self, message: str, *, result: TrajectoryMatch) -> None:
        self.result = result
        super().__init__(message)


# A traceback names them where users import them from, not this private module.
TrajectoryError.__module__ = "dsh_testkit.trajectory"
TrajectoryMismatch.__module__ = "dsh_testkit.trajectory"
