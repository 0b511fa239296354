"""Cassettes: record an agent's HTTP traffic once, replay it in every test run after.

Built on vcrpy with this project's configuration (see ``cassettes/README.md`` for the file
format and how the repository's cassettes were recorded)::

    from dsh_testkit.cassettes import use_cassette

    with use_cassette("cassettes/plain-chat.yaml") as cassette:   # replay only, network blocked
        run_my_agent()
    # leaving the block fails if a recording was never played

- **Format**: versioned YAML, one literal block per body (JSON laid out a message a line, SSE
  as sent) that replays as a real stream, one event per chunk, to sync and async
  ``httpx``/``httpx2`` clients.
- **Secrets** are scrubbed before anything is written (credential headers, query parameters and
  JSON keys; key-shaped strings anywhere, request and response alike).
- **Matching**: method + URL + canonical JSON body (key order ignored) by default; a
  :class:`~dsh_testkit.cassettes.CassetteConfig` (``config=``) changes what is matched, ignores
  volatile JSON paths, adds before-record hooks and origin rewrites. Every loopback origin is
  stored and matched as ``http://127.0.0.1``, so a recording through a mock server on a random
  port replays wherever it listens next. A request with no
  recording raises :class:`CassetteMismatch` naming the request's index, the closest recording
  and what differs in this project's vocabulary (``system line 3``, tool ``'grep'`` added,
  ``temperature``, ``messages[4].content``). The error is raised inside the transport
  and, because HTTP clients may swallow transport errors into retries, raised again when the
  cassette closes.
- **Modes**: pytest-recording's (:data:`RecordMode`): ``"none"`` (the default: replay only, live
  network blocked), ``"once"``, ``"new_episodes"``, ``"all"``, ``"rewrite"``.

The repository's own cassettes are recorded by its tooling (``tools/record_cassettes.py``, run
by ``make record-live``), not by this library module.

Why the httpx transports are patched here rather than by vcrpy (which patches ``httpx`` and
``httpx2`` alike in 9.x): vcrpy hands every replayed or recorded body to the client as ONE
chunk, so a stream would lose its event boundaries; see ``_transport``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, Final, Literal, TypeAlias
from unittest import mock as _patch

from .._errors import (
    CassetteError,
    CassetteMismatch,
    CassetteNotFound,
    CassetteNotFullyPlayed,
    UnscrubbableBody,
)
from ..scrub._rules import ScrubRules
from ..scrub._scrubber import Scrubber
from ._config import CassetteConfig
from ._format import (
    CassettePersister,
    CassetteSerializer,
)
from ._hooks import RecordHooks
from ._matching import (
    as_sent,
    build_mismatch,
    describe,
    matchers_for,
    request_key,
    vcr_suggestions,
)
from ._transport import CassetteLayer, intercepting

RecordMode: TypeAlias = Literal["none", "once", "new_episodes", "all", "rewrite", "missing"]
"""The record modes of vcrpy and pytest-recording, with their meanings:

- ``none``: replay only; a request with no recording fails, a missing file fails at once;
- ``once``: record a cassette that does not exist yet; replay-only once it does;
- ``new_episodes``: replay what is recorded and record what is not (``missing`` is its old
  name, still accepted);
- ``all``: never replay; record every request, appended to the recordings already in the file;
- ``rewrite``: never replay; the cassette is rewritten from scratch with this run's requests
  (the old file is replaced only when the use ends cleanly).
"""

RECORD_MODES: Final = ("none", "once", "new_episodes", "all", "rewrite")
"""The record modes, safest first (``missing``, the old name of ``new_episodes``, aside)."""

_VCR_MODES: Final = {
    "none": "none",
    "once": "once",
    "new_episodes": "new_episodes",
    "missing": "new_episodes",
    "all": "all",
    "rewrite": "all",
}


def normalize_mode(mode: str) -> RecordMode:
    """``mode`` under its current name (``missing`` → ``new_episodes``); a ``ValueError``
    naming the modes for anything else."""
    if mode not in _VCR_MODES:
        raise ValueError(
            f"record mode must be one of {', '.join(RECORD_MODES)} (or 'missing', the old name "
            f"of 'new_episodes'), got {mode!r}"
        )
    normalized: RecordMode = "new_episodes" if mode == "missing" else mode  # type: ignore[assignment]
    return normalized


def mode_records(mode: RecordMode, path: Path) -> bool:
    """Whether a use of the cassette at ``path`` in ``mode`` may record (else it replays only)."""
    if mode == "none":
        return False
    if mode == "once":
        return not path.is_file()
    return True


class Cassette:
    """One use of a cassette file: what was played, recorded and left over.

    Returned by :func:`use_cassette`; wraps the vcrpy cassette in ``vcr_cassette``.
    """

    def __init__(
        self,
        path: Path,
        mode: RecordMode,
        persister: CassettePersister,
        *,
        config: CassetteConfig,
    ) -> None:
        self.path = path
        """The cassette file."""
        self.mode: RecordMode = mode
        self.vcr_cassette: Any = None
        """The underlying ``vcr.cassette.Cassette`` (for vcrpy-level inspection)."""
        self.requests_seen = 0
        """Live requests that reached the cassette so far."""
        self.mismatches: list[CassetteMismatch] = []
        """Every mismatch raised during this use (re-raised when the cassette closes)."""
        self.refusals: list[UnscrubbableBody] = []
        """Every body refused because it could not be scrubbed (re-raised when it closes)."""
        self.config = config
        """The options of this use (what is matched, hooks, origin rewrites, …)."""
        self.match_on = matchers_for(config.match_on, config.parsed_ignore_paths)
        """The vcrpy matchers in use (by default method, URL, canonical JSON body)."""
        self.passed_through = 0
        """Requests a ``before_record_request`` hook left out of the cassette (sent unrecorded)."""
        self._persister = persister
        self._loaded = 0
        self._index: dict[tuple[Any, ...], list[int]] = {}
        self._indexed = 0
        self._raw_index: dict[tuple[str, str, bytes], list[int]] = {}
        self._raw_indexed = 0
        self.uri_filter: Any = None
        """What the record hooks do to a URL (scrub, rewrite the origin), for the fast path;
        ``None`` turns the fast path off (hooks of the user's, matchers beyond method, URL and
        body)."""

    @property
    def metadata(self) -> dict[str, Any]:
        """The metadata stored in the file (what it was recorded against, the scenario, …)."""
        return {**self._persister.loaded_metadata, **self._persister.metadata}

    def set_metadata(self, key: str, value: Any) -> None:
        """Store ``key: value`` in the file's metadata when it is next written."""
        self._persister.metadata[key] = value

    @property
    def recording(self) -> bool:
        """Whether requests with no recording are recorded in this use (``False``: replay
        only, so a mock scripted for recording is never asked)."""
        return not self.vcr_cassette.write_protected

    @property
    def recorded(self) -> int:
        """Interactions in the cassette (loaded and newly recorded)."""
        return len(self.vcr_cassette)

    @property
    def play_count(self) -> int:
        return int(self.vcr_cassette.play_count)

    @property
    def unplayed(self) -> tuple[int, ...]:
        """Indexes of loaded recordings never played in this use."""
        counts = self.vcr_cassette.play_counts
        return tuple(i for i in range(self._loaded) if counts[i] == 0)

    def assert_all_played(self) -> None:
        """Fail with :class:`CassetteNotFullyPlayed` when a loaded recording was not played.

        A recording left over means the code under test made fewer (or other) requests than
        were recorded. In modes ``"all"`` and ``"rewrite"`` nothing is played by design, so
        nothing is checked.
        """
        if self.mode in ("all", "rewrite"):
            return
        unplayed = self.unplayed
        if not unplayed:
            return
        data = self.vcr_cassette.data
        listed = "".join(f"\n  interaction #{i + 1}: {describe(data[i][0])}" for i in unplayed[:5])
        more = f"\n  … and {len(unplayed) - 5} more" if len(unplayed) > 5 else ""
        raise CassetteNotFullyPlayed(
            f"cassette {self.path} was only partly played: {len(unplayed)} of {self._loaded} "
            f"recordings never requested (the code made {self.requests_seen} request(s)):"
            f"{listed}{more}\nThe code under test now makes fewer or other requests than were "
            "recorded: fix it, or re-record the cassette from scratch if the change is intended "
            "(pytest --dsh-record-mode=rewrite; use_cassette(mode='rewrite')).",
            path=str(self.path),
            unplayed=unplayed,
        )

    # ---------------------------------------------------------------- transport callbacks

    def decide(self, request: Any, body: bytes) -> tuple[str, Any]:
        """Play, record, pass or raise for a live request (called by the transport patches):
        ``("play", response)``, ``("record", vcr_request)`` or ``("pass", None)`` for a request
        a ``before_record_request`` hook left out."""
        __tracebackhide__ = True  # a mismatch's traceback would print the raw body (a key)
        from vcr.request import Request as VcrRequest

        cassette = self.vcr_cassette
        index = self.requests_seen
        self.requests_seen += 1
        vcr_request = VcrRequest(request.method, str(request.url), body, dict(request.headers))
        replaying = self.mode not in ("all", "rewrite") and cassette.rewound
        if replaying:
            position = self._playableas_sent(vcr_request.method, vcr_request.uri, body)
            if position is not None:
                return "play", self._play(position, vcr_request)
        try:
            filtered = cassette.filter_request(vcr_request)
        except UnscrubbableBody as refusal:
            self.refusals.append(refusal)
            raise
        if filtered is None:
            self.requests_seen -= 1
            self.passed_through += 1
            return "pass", None
        if replaying:
            position = self._playable(filtered)
            if position is not None:
                return "play", self._play(position, vcr_request)
        if cassette.write_protected:
            error = self._mismatch(vcr_request, index)
            self.mismatches.append(error)
            raise error
        return "record", vcr_request

    def _playableas_sent(self, method: str, uri: str, body: bytes) -> int | None:
        """The fast path of :meth:`_playable`: a recording whose body has exactly the bytes the
        client sent (stored bodies are indexed as compact JSON, as httpx and the SDKs send it).

        A recording is scrubbed, so one with the same bytes proves the live body had nothing
        to scrub: neither the scrub pass nor the canonical form is needed. Anything else (other
        JSON spacing or key order, a key to scrub) takes the full path.
        """
        if self.uri_filter is None:
            return None
        data = self.vcr_cassette.data
        for position in range(self._raw_indexed, len(data)):
            stored = data[position][0]
            key = (stored.method, stored.uri, as_sent(stored.body))
            self._raw_index.setdefault(key, []).append(position)
        self._raw_indexed = len(data)
        candidates = self._raw_index.get((method, self.uri_filter(uri), body))
        if not candidates:
            return None
        return self._first_playable(candidates)

    def _first_playable(self, candidates: list[int]) -> int | None:
        """The first candidate not played yet (or, with ``allow_playback_repeats``, the first)."""
        counts = self.vcr_cassette.play_counts
        unplayed = next((i for i in candidates if counts[i] == 0), None)
        if unplayed is None and self.config.allow_playback_repeats and candidates:
            return candidates[0]
        return unplayed

    def _playable(self, request: Any) -> int | None:
        """The first unplayed recording matching ``request`` (scrubbed), or ``None``.

        vcrpy finds it by running every matcher against every recording, twice per request
        (quadratic in the cassette); with named matchers an index by what they compare (method,
        URL, canonical body by default) finds it in one lookup, and each body is made canonical
        once. Matcher callables of the user's are run against each recording, as vcrpy does.
        """
        from vcr.matchers import requests_match

        data = self.vcr_cassette.data
        config = self.config
        if not config.keyable:
            matching = [
                i
                for i, (stored, _) in enumerate(data)
                if requests_match(request, stored, self.match_on)
            ]
            return self._first_playable(matching)
        ignore = config.parsed_ignore_paths
        for position in range(self._indexed, len(data)):
            key = request_key(data[position][0], config.match_on, ignore)
            self._index.setdefault(key, []).append(position)
        self._indexed = len(data)
        key = request_key(request, config.match_on, ignore)
        return self._first_playable(self._index.get(key, []))

    def _play(self, position: int, request: Any) -> Any:
        """Mark recording ``position`` played, as ``vcr.cassette.Cassette.play_response`` does
        (its bookkeeping decides what ``drop_unused_requests`` keeps), and return its response."""
        cassette = self.vcr_cassette
        if not hasattr(cassette, "_played_interactions") or not hasattr(
            cassette, "_loaded_count"
        ):  # another vcrpy: let it find the same recording its own way
            return cassette.play_response(request)
        stored, response = cassette.data[position]
        if cassette.play_counts[position] == 0 and position < cassette._loaded_count:
            cassette._played_interactions.append((stored, response))
        cassette.play_counts[position] += 1
        return response

    def record(
        self,
        vcr_request: Any,
        status: int,
        reason: str,
        headers: dict[str, list[str]],
        content: bytes,
    ) -> None:
        try:
            self.vcr_cassette.append(
                vcr_request,
                {
                    "status": {"code": status, "message": reason},
                    "headers": headers,
                    "body": {"string": content},
                },
            )
        except UnscrubbableBody as refusal:
            self.refusals.append(refusal)
            raise

    def _mismatch(self, vcr_request: Any, index: int) -> CassetteMismatch:
        return build_mismatch(
            self.path,
            self.vcr_cassette,
            vcr_request,
            index,
            self.match_on,
            self.config.parsed_ignore_paths,
        )


_NAME_MAX: Final = 255
"""Bytes in one file name on the common file systems (ext4, APFS, NTFS's UTF-16 aside)."""


def _check_path(path: Path, mode: str) -> None:
    """Refuse, before the test runs, a cassette path that cannot be read or written: a
    directory or a broken link where the file should be, a name too long, a folder that is a
    file or cannot be written (what would otherwise fail after a passing test, at saving)."""
    where = str(path)
    if os.path.lexists(path) and not path.is_file():
        what = "a directory" if path.is_dir() else "not a regular file (a broken or looping link?)"
        raise CassetteError(
            f"cassette {path} is {what}; a cassette is a file: move it away or name another "
            "cassette",
            path=where,
        )
    if mode == "none":
        return
    if len(path.name.encode("utf-8")) > _NAME_MAX:
        raise CassetteError(
            f"cassette name {path.name[:40]}… is {len(path.name.encode('utf-8'))} bytes, longer "
            f"than a file name may be ({_NAME_MAX}); name the cassette shorter",
            path=where,
        )
    folder = path.parent
    while not os.path.lexists(folder) and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise CassetteError(
            f"cannot write cassette {path}: {folder} is a file, not a directory", path=where
        )
    writes = mode in ("all", "rewrite", "new_episodes") or not path.is_file()
    if writes and not os.access(folder, os.W_OK | os.X_OK):
        raise CassetteError(
            f"cannot write cassette {path}: {folder} is not writable (permission denied)",
            path=where,
        )


@contextmanager
def use_cassette(
    path: str | Path,
    *,
    mode: RecordMode = "none",
    metadata: Mapping[str, Any] | None = None,
    rewrite_origin: tuple[str, str] | Mapping[str, str] | None = None,
    assert_all_played: bool = True,
    scrub: ScrubRules | None = None,
    config: CassetteConfig | None = None,
) -> Iterator[Cassette]:
    """Replay (or record) every ``httpx``/``httpx2`` request made inside the block.

    ``mode`` is one of :data:`RecordMode` (vcrpy's and pytest-recording's meanings): ``"none"``
    (replay only; a missing file raises :class:`CassetteNotFound` at once, and an unrecorded
    request raises :class:`CassetteMismatch`), ``"once"``, ``"new_episodes"``, ``"all"`` or
    ``"rewrite"``. ``metadata`` is stored in the file when it is written (say what it was recorded
    against). ``rewrite_origin=(live, recorded)`` (or ``{live: recorded}``) stores requests sent
    to the ``live`` origin as sent to ``recorded`` (a gateway filed under the real API's URL);
    every loopback origin is stored as ``http://127.0.0.1`` unless ``config`` says otherwise. On
    a clean exit the block fails when a recording was never played (``assert_all_played``), and
    any mismatch that a client swallowed (into a retry or a wrapped error) is raised again.
    ``scrub`` adds your own :class:`~dsh_testkit.scrub.ScrubRules` to the built-in secret
    scrubbing; a body that cannot be scrubbed raises
    :class:`~dsh_testkit.scrub.UnscrubbableBody` (again on exit, should a client swallow
    it) and is never written. ``config`` (:class:`~dsh_testkit.cassettes.CassetteConfig`): what
    is matched, JSON paths to ignore, before-record hooks, origin rewrites, loopback as one,
    playback repeats, scrub rules.
    """
    import vcr.cassette

    mode = normalize_mode(mode)
    path = Path(path)
    _check_path(path, mode)
    if mode == "none" and not path.is_file():
        raise CassetteNotFound(
            f"cassette {path} does not exist and mode 'none' replays only (live network "
            "blocked); record it with mode='once' (pytest --dsh-record-mode=once)",
            path=str(path),
        )
    config = config or CassetteConfig()
    if rewrite_origin or scrub is not None:
        extra = CassetteConfig(rewrite_origin=rewrite_origin or (), scrub=scrub)  # type: ignore[arg-type]
        config = config.merged(extra)
    scrubber = Scrubber.for_rules(config.scrub)
    persister = CassettePersister(metadata, fingerprint=scrubber.fingerprint)
    handle = Cassette(path, mode, persister, config=config)
    hooks = RecordHooks(config, scrubber, persister, is_loading=lambda: handle.vcr_cassette is None)
    # The exact-bytes fast path proves a match on method, URL and body, so on any of their parts.
    if config.keyable and "headers" not in config.match_on and not hooks.has_user_hooks:
        handle.uri_filter = hooks.uri_filter

    context = vcr.cassette.Cassette.use(
        path=str(path),
        serializer=CassetteSerializer,
        persister=persister,
        record_mode=_VCR_MODES[mode],
        match_on=handle.match_on,
        before_record_request=hooks.before_record_request,
        before_record_response=hooks.before_record_response,
        allow_playback_repeats=config.allow_playback_repeats,
        drop_unused_requests=mode == "rewrite",
        record_on_exception=False,
        skip_patchers=("httpx", "httpx2"),
    )
    with ExitStack() as stack:
        import vcr.errors

        stack.enter_context(_patch.patch.object(vcr.errors, "_suggestions", vcr_suggestions))
        handle.vcr_cassette = stack.enter_context(context)
        handle._loaded = len(handle.vcr_cassette)
        stack.enter_context(intercepting(CassetteLayer(handle)))
        try:
            yield handle
        except BaseException as exc:
            if handle.refusals and not isinstance(exc, UnscrubbableBody):
                raise handle.refusals[0] from exc
            if handle.mismatches and not isinstance(exc, CassetteMismatch):
                raise handle.mismatches[0] from exc
            raise
    if handle.refusals:
        raise handle.refusals[0]
    if handle.mismatches:
        raise handle.mismatches[0]
    if assert_all_played:
        handle.assert_all_played()
