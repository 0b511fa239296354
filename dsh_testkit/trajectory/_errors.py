"""The errors of trajectories (part of ``dsh_testkit``'s one tree).

::

    TestkitError
    ├── TrajectoryError      a value cannot be read as a trajectory, an option is invalid
    │                        (``.reason``)
    └── TrajectoryMismatch   a trajectory is not the expected one (``.result``)  [AssertionError]

:class:`TrajectoryMismatch` lives beside the match it carries (``_match.py``).
"""

from __future__ import annotations

from .._errors import TestkitError

__all__ = ["TrajectoryError"]


class TrajectoryError(TestkitError, ValueError):
    """A value could not be read as a trajectory, or a matching option is invalid: what it
    is, where, and what was expected."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(reason)


# A traceback names it where users import it from, not this private module.
TrajectoryError.__module__ = "dsh_testkit.trajectory"
