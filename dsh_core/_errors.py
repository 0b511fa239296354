"""The one error tree of ``dsh_core``.

Every failure the core raises on purpose is a :class:`DshError`; each subclass carries the facts
as attributes (``.seq``, ``.path``, ``.line``), not only in its message::

    DshError
    ├── JsonValueError        a value is not lossless JSON (``.path``)
    ├── InvalidEventError     an append, seed or event shape was refused (``.seq``, ``.event_type``)
    │   └── SurfaceError      a surface transition was refused (``surfaceOp``, provenance, rewrite rules)
    ├── HeaderError           an invalid request header or header delta (duplicate tool names, …)
    ├── CorruptLogError       a stored or folded log cannot be read as written (``.seq``, ``.line``, ``.path``)
    │   └── UnsupportedVersionError   a log of another format version (never migrated)
    ├── SidecarError          a placeholder sidecar does not read or does not fit its log (``.path``)
    ├── UnfilledPlaceholderError  a request to send still holds a placeholder (``.placeholder``, ``.field``)
    ├── LogLockedError        a second writer opened a session file (``.path``)   [persistence]
    ├── ForkError             a fork at an invalid boundary (``.seq``)
    ├── InvariantViolation    a dev-mode invariant failed (``.diff``)
    ├── ProviderError         a model call failed (``.failure``: the :class:`LlmFailure`)   [_stream]
    ├── WireFormatError       a wire body is not the API's shape (``.param``)          [providers]
    ├── SseTruncatedError     an event stream ended mid-event                          [providers]
    ├── ScriptExhaustedError  the scripted provider has no answer left                 [scripted]
    └── AgentError            the loop was misused (a turn while one runs, no provider/model, …)
        ├── TurnCancelledError    a turn ended by ``cancel()`` (``.partial``)              [_loop]
        └── CompactionError       a compaction attempt failed (logged; the turn goes on)  [_compaction]

Errors marked ``[module]`` are defined beside the code that raises them. Each is exported by
one public module, and its ``__module__`` names it, so a traceback shows a path the reader can
import: ``dsh_core`` for all but ``LogLockedError`` (``dsh_core.persistence``),
``WireFormatError`` and ``SseTruncatedError`` (``dsh_core.providers``) and
``ScriptExhaustedError`` (``dsh_core.scripted``).
"""

from __future__ import annotations

__all__ = [
    "AgentError",
    "CorruptLogError",
    "DshError",
    "ForkError",
    "HeaderError",
    "InvalidEventError",
    "InvariantViolation",
    "JsonValueError",
    "SidecarError",
    "SurfaceError",
    "UnfilledPlaceholderError",
    "UnsupportedVersionError",
]


class DshError(Exception):
    """Base of every error ``dsh_core`` raises on purpose."""


class JsonValueError(DshError, ValueError):
    """A value is not lossless JSON. ``path`` names where, e.g. ``data.content[2].text``."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


class InvalidEventError(DshError, ValueError):
    """An event was refused: by ``Session.append``, a seed, or a loader's shape check."""

    def __init__(
        self, message: str, *, seq: int | None = None, event_type: str | None = None
    ) -> None:
        super().__init__(message)
        self.seq = seq
        self.event_type = event_type


class SurfaceError(InvalidEventError):
    """A surface transition (``surfaceOp`` / ``sourceEventSeqs``) was refused; nothing changed."""


class HeaderError(DshError, ValueError):
    """An invalid request header or header delta."""


class CorruptLogError(DshError):
    """A log cannot be read or folded as written.

    ``seq`` is the event's sequence number when known, ``line`` the 1-based line of a JSONL
    file, ``path`` the file.
    """

    def __init__(
        self,
        message: str,
        *,
        seq: int | None = None,
        line: int | None = None,
        path: str | None = None,
    ) -> None:
        where = []
        if path is not None:
            where.append(str(path))
        if line is not None:
            where.append(f"line {line}")
        prefix = f"{':'.join(where)}: " if where else ""
        super().__init__(prefix + message)
        self.seq = seq
        self.line = line
        self.path = path


class UnsupportedVersionError(CorruptLogError):
    """The log was written in another session format version; logs are rejected, never migrated."""


class SidecarError(DshError, ValueError):
    """A sidecar file (the real values of a normalized log's placeholders) does not read, or
    does not fit the log (fewer header epochs, other tool names). ``path`` names the file or
    folder when known."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class UnfilledPlaceholderError(DshError, ValueError):
    """A request about to become a wire body still holds a normalized log's placeholder.

    ``placeholder`` is the token (``"{{system}}"``, ``"{{tools}}"``, the tool-name list …) and
    ``field`` where it sits (``system``, ``tools``, ``messagePrefix[0]``)."""

    def __init__(self, message: str, *, placeholder: str, field: str) -> None:
        super().__init__(message)
        self.placeholder = placeholder
        self.field = field


class ForkError(DshError, ValueError):
    """A fork was asked for at an invalid boundary (missing seq, or inside an open turn)."""

    def __init__(self, message: str, *, seq: int | None = None) -> None:
        super().__init__(message)
        self.seq = seq


class InvariantViolation(DshError, AssertionError):
    """A dev-mode invariant failed. ``diff`` lists the differences found, most important first."""

    def __init__(self, message: str, *, diff: tuple[str, ...] = ()) -> None:
        super().__init__(message if not diff else message + "\n  " + "\n  ".join(diff))
        self.diff = diff


class AgentError(DshError, RuntimeError):
    """The agent loop was misused or could not build a request."""


# A traceback names each error where users import it from (``dsh_core``), not this private module.
for _error in (
    AgentError,
    CorruptLogError,
    DshError,
    ForkError,
    HeaderError,
    InvalidEventError,
    InvariantViolation,
    JsonValueError,
    SidecarError,
    SurfaceError,
    UnfilledPlaceholderError,
    UnsupportedVersionError,
):
    _error.__module__ = "dsh_core"
