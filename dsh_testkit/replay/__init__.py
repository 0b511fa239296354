"""Replay a recorded session log as a provider: keyless, networkless, and strict by default.

:class:`ReplayProvider` serves the model calls a ``dsh_core`` session log recorded to an agent
under test, and (strict, the default) checks each live request against the one the log
rebuilds, failing at once with :class:`ReplayMismatch` and a structured diff. What does not fit
fails loudly: :class:`UnrecordedSession`, :class:`ReplayExhausted`, :class:`ReplayNotConsumed`
(``assert_consumed``); a log that cannot be replayed, :class:`ReplayScriptError`. Each is a
:class:`ReplayError`. ``_provider`` holds the provider and the script it derives.
"""

from .._errors import (
    ReplayError,
    ReplayExhausted,
    ReplayMismatch,
    ReplayNotConsumed,
    ReplayScriptError,
    UnrecordedSession,
)
from ._provider import ReplayProvider

__all__ = [
    "ReplayError",
    "ReplayExhausted",
    "ReplayMismatch",
    "ReplayNotConsumed",
    "ReplayProvider",
    "ReplayScriptError",
    "UnrecordedSession",
]
