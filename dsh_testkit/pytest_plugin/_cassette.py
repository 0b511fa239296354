"""One test's cassette, behind the ``dsh_cassette`` fixture: its file, its options, what records.

Imported by the plugin's fixtures only when a test asks for a cassette (it brings vcrpy and the
core). :class:`CassetteFixture` opens the cassette with the options the ``dsh_cassette_config``
fixture and the marker gave (:func:`cassette_options`), routes what would reach the network to
the in-process mock while it may record (:func:`route_network_to_mock`), fails the test for
what the cassette saw, and notes in the file what the recordings came from.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final, Protocol

from dsh_core.providers import DeepSeekProvider
from dsh_core.providers.deepseek import BASE_URL_ENV

from .._errors import CassetteConfigError
from .._loopback.hosts import is_loopback
from ..cassettes import Cassette, CassetteConfig, CassetteMismatch, use_cassette
from ..cassettes._api import RecordMode
from ..cassettes._transport import AsyncSend, Send, intercepting
from ..scrub._scrubber import scrub_url
from ._settings import LIVE_ORIGIN, MOCK_API_KEY

if TYPE_CHECKING:
    from ..mock import MockDeepSeek, MockHandler


class _TestMock(Protocol):
    """What a cassette needs of the test's in-process mock (``dsh_mock``: ``MockFixture``)."""

    mock: MockDeepSeek
    handler: MockHandler
    replaying: bool
    bypassed: bool


__all__ = [
    "CassetteFixture",
    "CassetteOptions",
    "CassetteSettings",
    "cassette_options",
    "cassette_path",
    "route_network_to_mock",
]


_MARKER_ONLY: Final = ("name", "record_mode")
"""Keys the marker and ``dsh_cassette_config`` take besides :class:`CassetteConfig`'s."""

# ------------------------------------------------------------------------- the live guard


class _MockRoute:
    """A layer of the one transport interception
    (:func:`~dsh_testkit.cassettes._transport.intercepting`): a request a network transport
    would send to a non-loopback host is answered by ``handler`` (the mock); loopback requests
    (a local mock server) and the in-memory transports go on."""

    def __init__(self, handler: Callable[[Any], Any]) -> None:
        self._handler = handler

    def handle(self, mod: ModuleType, transport: Any, request: Any, send: Send) -> Any:
        if not isinstance(transport, mod.HTTPTransport) or is_loopback(request.url.host):
            return send(request)
        request.read()
        return self._handler(request)

    async def handle_async(
        self, mod: ModuleType, transport: Any, request: Any, send: AsyncSend
    ) -> Any:
        if not isinstance(transport, mod.AsyncHTTPTransport) or is_loopback(request.url.host):
            return await send(request)
        await request.aread()
        return self._handler(request)


@contextmanager
def route_network_to_mock(handler: Callable[[Any], Any]) -> Iterator[None]:
    """While active, the network transports of httpx and httpx2 answer every request to a
    non-loopback host with ``handler`` (the mock) instead of connecting anywhere.

    This is how a cassette records without live calls: the request that would have gone to
    the API is answered by the mock. Loopback requests (a local mock server) go through. It is a
    layer of the one transport interception the cassette uses too, so a cassette test patches
    each transport method once.
    """
    with intercepting(_MockRoute(handler)):
        yield


# ------------------------------------------------------------------------- files and options

_UNSAFE_NAME: Final = re.compile(r"[^A-Za-z0-9_.\-\[\]=+,]")


def _safe_name(text: str) -> str:
    return _UNSAFE_NAME.sub("_", text)


def cassette_path(
    *,
    directory: Path,
    module_path: Path,
    test_name: str,
    marker_name: str | None,
) -> Path:
    """The cassette file of one test.

    With ``@pytest.mark.dsh_cassette(name)``: ``directory/name.yaml`` (``name`` may contain
    ``/`` for a sub-folder; ``.yaml``/``.yml`` is kept when given). Without it:
    ``directory/<module stem>/<test name>.yaml``, where the test name joins class and function
    with ``.`` and keeps the parametrize id (``TestChat.test_greets[flash].yaml``); characters
    that are unsafe in file names become ``_``.
    """
    if marker_name is None:
        return directory / _safe_name(module_path.stem) / f"{_safe_name(test_name)}.yaml"
    parts = marker_name.replace("\\", "/").split("/")
    if marker_name.startswith("/") or any(part in ("", ".", "..") for part in parts):
        raise ValueError(
            f"dsh_cassette name {marker_name!r} must be a relative path inside the cassette "
            "directory (no leading '/', no '.' or '..' parts)"
        )
    name = "/".join(_safe_name(p) for p in parts)
    if not name.endswith((".yaml", ".yml")):
        name += ".yaml"
    return directory / name


@dataclass(frozen=True, slots=True, kw_only=True)
class CassetteOptions:
    """What the ``dsh_cassette_config`` fixture and the marker asked of one test's cassette."""

    name: str | None = None
    """The marker's cassette name (``None``: the test's own file)."""
    record_mode: str | None = None
    """A record mode for this test (``None``: the run's); the command line's flag wins."""
    record_mode_source: str = ""
    """Who asked for it (``the dsh_cassette marker``, ``the dsh_cassette_config fixture``)."""
    config: CassetteConfig = field(default_factory=CassetteConfig)


def cassette_options(
    fixture: Mapping[str, Any], marker_args: tuple[Any, ...], marker_kwargs: Mapping[str, Any]
) -> CassetteOptions:
    """The options of one test: the marker's over the fixture's (as ``@pytest.mark.vcr``'s
    over ``vcr_config``). Raises :class:`CassetteConfigError` naming the bad key and where."""
    where_fixture = "the dsh_cassette_config fixture"
    where_marker = "@pytest.mark.dsh_cassette"
    if not isinstance(fixture, Mapping):
        raise CassetteConfigError(
            f"{where_fixture} must return a dict of options, got {type(fixture).__name__}", key=""
        )
    if len(marker_args) > 1 or (marker_args and not isinstance(marker_args[0], str)):
        raise CassetteConfigError(
            f"{where_marker} takes at most one positional argument, the cassette name (a "
            f"string), got {marker_args!r}",
            key="name",
        )
    if "name" in fixture:
        raise CassetteConfigError(
            f"{where_fixture}: 'name' is the marker's (one cassette per test)", key="name"
        )
    name = marker_args[0] if marker_args else marker_kwargs.get("name")
    if name is not None and not isinstance(name, str):
        raise CassetteConfigError(
            f"{where_marker}: name must be a string, got {name!r}", key="name"
        )
    mode, source = None, ""
    for options, where in ((fixture, where_fixture), (marker_kwargs, where_marker)):
        if "record_mode" in options:
            mode, source = options["record_mode"], where
            if mode not in ("none", "once", "new_episodes", "all", "rewrite", "missing"):
                raise CassetteConfigError(
                    f"{where}: record_mode {mode!r} is not a record mode; use one of none, "
                    "once, new_episodes, all, rewrite",
                    key="record_mode",
                )
    config = CassetteConfig.from_mapping(
        {k: v for k, v in fixture.items() if k not in _MARKER_ONLY}, where=where_fixture
    )
    marked = {k: v for k, v in marker_kwargs.items() if k not in _MARKER_ONLY}
    if marked:
        config = config.merged(CassetteConfig.from_mapping(marked, where=where_marker))
    return CassetteOptions(
        name=name,
        record_mode="new_episodes" if mode == "missing" else mode,
        record_mode_source=source,
        config=config,
    )


# ------------------------------------------------------------------------------ the cassette


@dataclass(frozen=True, slots=True, kw_only=True)
class CassetteSettings:
    """What the command line, the ini file and the test's options decided for its cassette."""

    mode: RecordMode
    """One of ``dsh_testkit.cassettes._api.RECORD_MODES`` (``none``: replay only)."""
    live: bool
    """``--dsh-live`` was given and a key is in the environment: recordings reach the API."""
    config: CassetteConfig = field(default_factory=CassetteConfig)
    """The cassette's options (match rules, hooks, origins, scrub rules)."""


class CassetteFixture:
    """One test's cassette use (behind the ``dsh_cassette`` fixture).

    :meth:`start` opens the cassette; :meth:`after_call` runs when the test body ended and may
    raise (a mismatch a client swallowed, a recording never played) so the test fails in its
    call phase with the cassette's own message; :meth:`close` ends the use, saving recordings
    only when the test passed, with a note of what they came from. ``server_mock()`` is the
    loopback mock server's model when the test uses ``dsh_mock_server``.
    """

    def __init__(
        self,
        path: Path,
        settings: CassetteSettings,
        *,
        mock: _TestMock,
        test_id: str,
        server_mock: Callable[[], MockDeepSeek | None] = lambda: None,
    ) -> None:
        self.path = path
        self.settings = settings
        self.mock = mock
        self.test_id = test_id
        self.server_mock = server_mock
        self.cassette: Cassette | None = None
        self._stack = ExitStack()
        self._use: AbstractContextManager[Cassette] | None = None
        self._reported: BaseException | None = None
        self._server_seen = 0

    @property
    def recorded_against(self) -> str:
        """What the recordings came from, in words that are true for this test's traffic."""
        if self.settings.live:
            base = scrub_url(self.live_base_url)
            if base == LIVE_ORIGIN:
                return f"the live DeepSeek API at {base}"
            host = httpx_host(base)
            where = "a local server" if is_loopback(host) else "a server"
            return (
                f"{where} at {base} (${BASE_URL_ENV}), not the default DeepSeek API "
                f"{LIVE_ORIGIN}; recorded with --dsh-live"
            )
        server = self.server_mock()
        on_server = server is not None and len(server.requests) > self._server_seen
        in_process = len(self.mock.mock.requests) > 0
        live_hint = "not the live API; record live with --dsh-live and DEEPSEEK_API_KEY"
        if on_server and in_process:
            return (
                "the mock DeepSeek (dsh_testkit.mock, seed 0), in process through the dsh_mock "
                "fixture and on loopback through the dsh_mock_server fixture (filed under "
                f"http://127.0.0.1), {live_hint}"
            )
        if on_server:
            return (
                "the mock DeepSeek on loopback (dsh_testkit.mock, seed 0) through the "
                f"dsh_mock_server fixture (filed under http://127.0.0.1), {live_hint}"
            )
        if in_process:
            return (
                "the in-process mock DeepSeek (dsh_testkit.mock, seed 0) through the dsh_mock "
                f"fixture, {live_hint}"
            )
        return f"a server on loopback, not a dsh-testkit mock (filed under http://127.0.0.1), {live_hint}"

    @property
    def live_base_url(self) -> str:
        return (os.environ.get(BASE_URL_ENV) or LIVE_ORIGIN).rstrip("/")

    def start(self) -> Cassette:
        if not self.settings.live:
            self._stack.enter_context(route_network_to_mock(self.mock.handler))
        server = self.server_mock()
        self._server_seen = len(server.requests) if server is not None else 0
        origin = self.live_base_url if self.settings.live else LIVE_ORIGIN
        self._use = use_cassette(
            self.path,
            mode=self.settings.mode,
            metadata={"test": self.test_id},
            rewrite_origin=(origin, LIVE_ORIGIN) if origin != LIVE_ORIGIN else None,
            assert_all_played=False,
            config=self.settings.config,
        )
        try:
            self.cassette = self._use.__enter__()
        except BaseException:
            self._stack.close()
            raise
        self.mock.replaying = not self.cassette.recording
        self.mock.bypassed = self.settings.live and self.cassette.recording
        return self.cassette

    def after_call(self, error: BaseException | None) -> None:
        """Fail the test for what the cassette saw; ``error`` is what the test body raised."""
        __tracebackhide__ = True
        cassette = self.cassette
        if cassette is None:
            return
        mismatch = cassette.mismatches[0] if cassette.mismatches else None
        if error is None:
            if mismatch is not None:
                # A client swallowed the mismatch (a retry, an error finish) and the test passed.
                self._reported = mismatch
                raise mismatch
            cassette.assert_all_played()
            return
        if (
            mismatch is not None
            and isinstance(error, Exception)
            and not _caused_by(error, mismatch)
        ):
            # The test failed on a symptom (an error finish, a wrong answer); the cause is the
            # request the cassette could not play, so that is what the failure shows first.
            self._reported = mismatch
            raise mismatch from error

    def close(self, error: BaseException | None) -> None:
        """End the use; a failed test (``error``) records nothing and raises nothing more."""
        use, self._use = self._use, None
        try:
            if use is None:
                return
            if error is not None:
                # Whatever leaving raises now (the test's error again, a mismatch) was
                # already reported by the call phase.
                with suppress(BaseException):
                    use.__exit__(type(error), error, error.__traceback__)
                return
            if self.cassette is not None and self.cassette.recording:
                self.cassette.set_metadata("recordedAgainst", self.recorded_against)
            try:
                use.__exit__(None, None, None)
            except CassetteMismatch as exc:
                if exc is not self._reported:
                    raise
        finally:
            self._stack.close()

    def provider(self) -> DeepSeekProvider:
        """The :class:`~dsh_core.providers.DeepSeekProvider` whose requests meet this cassette."""
        if self.settings.live and self.settings.mode != "none":
            import httpx

            # No kept-alive connections: nothing is left open for the garbage collector when
            # the test's event loop is gone.
            transport = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_keepalive_connections=0))
            return DeepSeekProvider(base_url=self.live_base_url, transport=transport)
        return DeepSeekProvider(api_key=MOCK_API_KEY, base_url=LIVE_ORIGIN)


def httpx_host(url: str) -> str:
    """The host of ``url`` (``""`` when it has none)."""
    from urllib.parse import urlsplit

    return urlsplit(url).hostname or ""


def _caused_by(error: BaseException, cause: BaseException) -> bool:
    """Whether pytest's report of ``error`` already shows ``cause`` (its displayed chain)."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if current is cause:
            return True
        seen.add(id(current))
        if current.__cause__ is not None:
            current = current.__cause__
        elif current.__suppress_context__:
            current = None
        else:
            current = current.__context__
    return False
