"""What the golden renderers accept (sessions, loaded logs, paths) and how ids are primed."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from dsh_core import (
    Event,
    Session,
    SessionInfo,
)

from .._errors import TestkitError
from ._normalize import Normalizer

__all__ = [
    "LogInput",
    "SnapshotInputError",
    "logs_of",
]


class SnapshotInputError(TestkitError, TypeError):
    """A value the golden extensions cannot render (``.value_type`` names what was given)."""

    def __init__(self, message: str, *, value_type: str) -> None:
        super().__init__(message)
        self.value_type = value_type


# A traceback names it where users import it from, not this private module.
SnapshotInputError.__module__ = "dsh_testkit.golden"


# ---------------------------------------------------------------------------------------------
# Inputs


@dataclass(frozen=True, slots=True)
class _Log:
    info: SessionInfo | None
    events: tuple[Event, ...]

    @property
    def seed_length(self) -> int:
        """Events a fork child inherited from its parent (rendered by the parent, not here)."""
        info = self.info
        if info is None or info.parent_session is None or info.seed_length is None:
            return 0
        return max(0, min(int(info.seed_length), len(self.events)))


LogInput = Any
"""What the renderers take: a :class:`~dsh_core.Session`, a loaded log (``.info`` and
``.events``, as :func:`dsh_core.persistence.load_session` returns), a sequence of
:class:`~dsh_core.Event`, or a list of those (the primary session first, then its children)."""


def _one(value: object) -> _Log | None:
    if isinstance(value, Session):
        return _Log(value.info, tuple(value.events))
    info = getattr(value, "info", None)
    events = getattr(value, "events", None)
    if (
        isinstance(info, SessionInfo)
        and isinstance(events, Sequence)
        and all(isinstance(e, Event) for e in events)
    ):
        return _Log(info, tuple(events))
    if (
        isinstance(value, Sequence)
        and not isinstance(value, (str, bytes))
        and len(value) > 0
        and all(isinstance(e, Event) for e in value)
    ):
        return _Log(None, tuple(value))
    return None


def logs_of(value: LogInput) -> list[_Log]:
    """The logs in ``value`` (see :data:`LogInput`), or :class:`SnapshotInputError`."""
    single = _one(value)
    if single is not None:
        return [single]
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)) and len(value) > 0:
        many = [_one(item) for item in value]
        if all(log is not None for log in many):
            return [log for log in many if log is not None]
    raise SnapshotInputError(
        f"cannot render a {type(value).__name__} as a golden: pass a Session, a loaded log "
        "(dsh_core.persistence.load_session), a non-empty sequence of Events, or a list of "
        "those (primary session first); for an agent's traffic (WireRequestsExtension): a "
        "RequestCapture (dsh_capture), the mock (dsh_mock, dsh_mock_server), a proxy, a Trace "
        "or a recording's path",
        value_type=type(value).__name__,
    )


def _primed(logs: Sequence[_Log], cwd: Any, cwd_aliases: Iterable[Any]) -> Normalizer:
    """A normalizer that knows every cwd spelling and has registered every id in log order."""
    normalizer = Normalizer(cwd=cwd, cwd_aliases=cwd_aliases)
    for log in logs:
        if log.info is not None:
            normalizer.add_cwd(log.info.cwd)
    for log in logs:
        if log.info is not None:
            normalizer.token("session", log.info.id)
            if log.info.parent_session is not None:
                normalizer.token("session", log.info.parent_session)
        for event in log.events:
            _register_ids(normalizer, event.data)
    return normalizer


def _register_ids(normalizer: Normalizer, value: Any) -> None:
    if isinstance(value, Mapping):
        if "role" in value and "content" in value and isinstance(value.get("id"), str):
            normalizer.token("msg", value["id"])
        if value.get("type") in ("tool-call", "tool-call-delta") and isinstance(
            value.get("id"), str
        ):
            normalizer.token("call", value["id"])
        for key, kind in _ID_KEYS.items():
            item = value.get(key)
            if isinstance(item, str) and item:
                normalizer.token(kind, item)
        for item in value.values():
            _register_ids(normalizer, item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _register_ids(normalizer, item)


_ID_KEYS: Final = {
    "callId": "call",
    "toolCallId": "call",
    "tool_call_id": "call",
    "requestId": "req",
    "sessionId": "session",
    "parentSession": "session",
}
