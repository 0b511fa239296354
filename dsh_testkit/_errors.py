"""The error tree of ``dsh_testkit``, rooted in ``dsh_core``'s one tree.

Every failure the test kit raises on purpose is a :class:`TestkitError`. Errors that mean "the
code under test did something other than what was recorded" are also ``AssertionError``s, so
pytest reports them as failures, not as crashes. Each carries its facts as attributes.

**Where each is imported from**: every error is exported by exactly one public package, the
lowest (in the kit's layer order) whose public functions raise it, and its ``__module__`` names
that package, so a failing test's traceback shows a path the reader can import
(``dsh_testkit.cassettes.CassetteMismatch``, not this private module). The root ``dsh_testkit``
exports :class:`TestkitError`, the base of them all. The package is in brackets::

    DshError                                                                       [dsh_core]
    └── TestkitError                                                               [dsh_testkit]
        ├── CassetteError              a cassette could not be used (``.path``)    [cassettes]
        │   ├── CassetteFormatError    unreadable, another format version, a bad body encoding
        │   ├── CassetteNotFound       replay-only mode and no cassette file at ``.path``
        │   ├── CassetteMismatch       no recording for a live request (``.index``, ``.request``,
        │   │                          ``.closest``, ``.closest_index``, ``.diff``)   [AssertionError]
        │   └── CassetteNotFullyPlayed recordings left unplayed (``.unplayed``)   [AssertionError]
        ├── RecordingRefused           a record mode under ``CI=true`` without
        │                              ``--dsh-record-in-ci``, a body it cannot store  [cassettes]
        │   └── UnscrubbableBody       a body that cannot be checked for secrets (``.part``,
        │                              ``.reason``): refused, never stored         [scrub]
        ├── ScrubRuleError             a user scrub rule is invalid (``.rule``, ``.value``)  [scrub]
        ├── CassetteConfigError        a cassette option (``dsh_cassette_config``, the marker,
        │                              ``CassetteConfig``) is invalid (``.key``)   [cassettes]
        ├── NetworkBlocked             a test reached for a refused host (``.host``, ``.port``)
        │                                                                          [pytest_plugin]
        ├── MockNotSatisfied           the mock fixtures' script was not followed: entries left
        │                              (``.unused``), requests nobody scripted (``.unscripted``)
        │                              [AssertionError, pytest_plugin]
        ├── ReplayError                the replay provider could not serve a call  [replay]
        │   ├── ReplayScriptError      a log cannot be turned into a script (``.turn``, ``.step``, ``.seq``)
        │   ├── UnrecordedSession      more live sessions than recorded ones (``.session_id``)
        │   ├── ReplayExhausted        a session asked for more calls than recorded (``.session_id``,
        │   │                          ``.index``, ``.recorded``)   [AssertionError]
        │   ├── ReplayNotConsumed      recorded calls left unserved (``.remaining``)   [AssertionError]
        │   └── ReplayMismatch         strict mode: the live request differs from the recorded one
        │                              (``.index``, ``.expected``, ``.actual``, ``.diff``)   [AssertionError]
        ├── PrefixInstability          a request does not extend the one it is compared with
        │                              (``.index``, ``.diff``)   [AssertionError, doctor]
        ├── SnapshotInputError         a golden was asked of something that is not a log  [golden]
        ├── TraceError                 a file or object is not a readable trace (``.path``)  [traces]
        ├── TrajectoryError            a value is not a trajectory, a match option is invalid
        │                              (``.reason``)   [trajectory]
        ├── TrajectoryMismatch         a trajectory is not the expected one (``.result``)
        │                              [AssertionError, trajectory]
        ├── NotASessionLogError        a report was asked of a file that is not a log (``.path``,
        │                              ``.reason``)                                [reports]
        ├── CalibrationError           a calibration input cannot be used (``.path``)  [calibration]
        ├── CompressedDataError        a compressed recording's frame is damaged (``.path``,
        │                              ``.offset``, ``.compression``)   [traces]
        ├── CacheUnfriendly            assert_cache_friendly found requests that lost cache hits
        │                              (``.conversation``, ``.findings``)   [AssertionError, doctor]
        ├── ReportFormatError          a cache report JSON document of another formatVersion,
        │                              or malformed (``expand_report``)   [ValueError, doctor]
        ├── CacheRegression            a run's caching or cost got worse than its baseline's
        │                              (``.comparison``, ``.scenarios``)   [AssertionError, compare]
        ├── ProxyError                 the recording proxy could not start (``.host``, ``.port``) [proxy]
        └── MockError                  the mock DeepSeek was misused                       [mock]
            ├── ScriptError            a script entry or file is invalid (``.path``)
            └── MockServerError        the loopback server could not start or serve

The errors defined here are the ones several rooms raise or catch; the others are defined beside
the code that raises them. ``tests/test_public_surface.py`` checks every error of the tree
against this rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dsh_core import DshError

__all__ = [
    "CassetteConfigError",
    "CassetteError",
    "CassetteFormatError",
    "CassetteMismatch",
    "CassetteNotFound",
    "CassetteNotFullyPlayed",
    "MockNotSatisfied",
    "NetworkBlocked",
    "PrefixInstability",
    "RecordingRefused",
    "ReplayError",
    "ReplayExhausted",
    "ReplayMismatch",
    "ReplayNotConsumed",
    "ReplayScriptError",
    "ScrubRuleError",
    "TestkitError",
    "UnrecordedSession",
    "UnscrubbableBody",
]


def _indented(lines: Sequence[str]) -> str:
    return "".join(f"\n  {line}" for line in lines)


class TestkitError(DshError):
    """Base of every error ``dsh_testkit`` raises on purpose."""

    __test__ = False  # not a pytest test class, despite the name


class CassetteConfigError(TestkitError, ValueError):
    """A cassette option is invalid. ``key`` names it (``match_on``, ``rewrite_origin``, …)."""

    def __init__(self, message: str, *, key: str) -> None:
        super().__init__(message)
        self.key = key


class CassetteError(TestkitError):
    """A cassette could not be used. ``path`` is the cassette file."""

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


class CassetteFormatError(CassetteError, ValueError):
    """A cassette file cannot be read: not ours, another format version, or a bad body."""


class CassetteNotFound(CassetteError, FileNotFoundError):
    """Replay-only mode was asked for a cassette that does not exist."""


class CassetteMismatch(CassetteError, AssertionError):
    """A live request has no recording to play.

    ``index`` is the live request's position in this cassette use (0-based, as Python indexes;
    the message numbers requests and interactions from 1, as the cache doctor does:
    ``request #1``); ``request`` a one-line description of it (method and URL);
    ``closest_index`` the interaction closest to it (0-based; ``None`` when the cassette has
    none); ``closest`` that interaction's method and URL; ``diff`` the differences from the
    closest recording to the live request, first first.
    """

    def __init__(
        self,
        message: str,
        *,
        path: str,
        index: int,
        request: str,
        closest: str | None,
        closest_index: int | None,
        diff: tuple[str, ...],
    ) -> None:
        super().__init__(message, path=path)
        self.index = index
        self.request = request
        self.closest = closest
        self.closest_index = closest_index
        self.diff = diff


class CassetteNotFullyPlayed(CassetteError, AssertionError):
    """A cassette was left with recordings that were never played (``unplayed``: their 0-based
    indexes; the message numbers them from 1)."""

    def __init__(self, message: str, *, path: str, unplayed: tuple[int, ...]) -> None:
        super().__init__(message, path=path)
        self.unplayed = unplayed


class RecordingRefused(TestkitError):
    """A recording was refused (no key in the environment, an unknown scenario, a record mode
    under ``CI=true`` without ``--dsh-record-in-ci``, …)."""


class UnscrubbableBody(RecordingRefused):
    """A body could not be checked for secrets (an unknown compression, a gzip stream holding
    one), so it is not stored. ``part`` is ``"request body"`` or ``"response body"``;
    ``reason`` says why in a few words."""

    def __init__(self, message: str, *, part: str, reason: str) -> None:
        super().__init__(message)
        self.part = part
        self.reason = reason


class ScrubRuleError(TestkitError, ValueError):
    """A scrub rule of the user's is invalid. ``rule`` names the kind (``patterns``,
    ``json_paths``, …) and ``value`` is what was given."""

    def __init__(self, message: str, *, rule: str, value: Any) -> None:
        super().__init__(message)
        self.rule = rule
        self.value = value


class NetworkBlocked(TestkitError):
    """A test tried to reach a host the run refuses: the live DeepSeek API without
    ``--dsh-live``, or any host but loopback under ``--dsh-block-network``. ``host`` is the
    name (or IP) it tried; ``port`` the port, when known. Not an ``OSError``, so clients do not
    mistake it for a network fault to retry."""

    def __init__(self, message: str, *, host: str, port: int | None) -> None:
        super().__init__(message)
        self.host = host
        self.port = port


class MockNotSatisfied(TestkitError, AssertionError):
    """A test using the mock fixtures left scripted entries unused or sent requests nobody
    scripted (strict by default, as respx is). ``unused`` holds the unused entries' JSON;
    ``unscripted`` the 1-based ``seq`` of each request answered with the default reply."""

    def __init__(
        self, message: str, *, unused: tuple[Any, ...], unscripted: tuple[int, ...]
    ) -> None:
        super().__init__(message)
        self.unused = unused
        self.unscripted = unscripted


class ReplayError(TestkitError):
    """The replay provider could not serve a call."""


class ReplayScriptError(ReplayError, ValueError):
    """A recorded log cannot be turned into a replay script; ``turn``/``step``/``seq`` say where."""

    def __init__(
        self,
        message: str,
        *,
        turn: int | None = None,
        step: int | None = None,
        seq: int | None = None,
    ) -> None:
        super().__init__(message)
        self.turn = turn
        self.step = step
        self.seq = seq


class UnrecordedSession(ReplayError, AssertionError):
    """A live session made a call but every recorded session is already bound to another."""

    def __init__(self, message: str, *, session_id: str | None) -> None:
        super().__init__(message)
        self.session_id = session_id


class ReplayExhausted(ReplayError, AssertionError):
    """A session asked for call ``index`` (0-based) but only ``recorded`` calls were recorded."""

    def __init__(self, message: str, *, session_id: str | None, index: int, recorded: int) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.index = index
        self.recorded = recorded


class ReplayNotConsumed(ReplayError, AssertionError):
    """Recorded calls were never served. ``remaining`` maps each recorded session to its count."""

    def __init__(self, message: str, *, remaining: dict[str, int]) -> None:
        super().__init__(message)
        self.remaining = remaining


class ReplayMismatch(ReplayError, AssertionError):
    """Strict replay: live request ``index`` differs from the one the recorded log rebuilds.

    ``expected`` is the reconstructed request, ``actual`` the live one (both
    :class:`~dsh_core.GenerateOptions`), ``diff`` the differences, first first.
    """

    def __init__(
        self, message: str, *, index: int, expected: Any, actual: Any, diff: tuple[str, ...]
    ) -> None:
        super().__init__(message + _indented(diff))
        self.index = index
        self.expected = expected
        self.actual = actual
        self.diff = diff


class PrefixInstability(TestkitError, AssertionError):
    """Request ``index`` does not extend the request it is compared with (the cache prefix
    broke); ``diff`` says where, in the project's wording."""

    def __init__(self, message: str, *, index: int, diff: tuple[str, ...]) -> None:
        super().__init__(message + _indented(diff))
        self.index = index
        self.diff = diff


_HOMES: dict[str, tuple[type[TestkitError], ...]] = {
    "dsh_testkit": (TestkitError,),
    "dsh_testkit.cassettes": (
        CassetteConfigError,
        CassetteError,
        CassetteFormatError,
        CassetteMismatch,
        CassetteNotFound,
        CassetteNotFullyPlayed,
        RecordingRefused,
    ),
    "dsh_testkit.scrub": (ScrubRuleError, UnscrubbableBody),
    "dsh_testkit.pytest_plugin": (MockNotSatisfied, NetworkBlocked),
    "dsh_testkit.replay": (
        ReplayError,
        ReplayExhausted,
        ReplayMismatch,
        ReplayNotConsumed,
        ReplayScriptError,
        UnrecordedSession,
    ),
    "dsh_testkit.doctor": (PrefixInstability,),
}
"""The public package that exports each error (the rule is in the module docstring)."""

for _home, _errors in _HOMES.items():
    for _error in _errors:
        _error.__module__ = _home
