"""What the pytest plugin's fixtures hand out, kept out of the plugin module.

:mod:`dsh_testkit.pytest_plugin` is imported by every pytest run in an environment where this
package is installed, so it imports nothing heavy; the fixtures import this module (and through
it the mock, vcrpy and the core) only when a test asks for one of them.

- :class:`MockFixture` is ``dsh_mock``: the mock DeepSeek served in process, with a ready
  :class:`~dsh_core.providers.DeepSeekProvider` and transports for any httpx/httpx2 client.
- :class:`CassetteFixture` runs one test's cassette: the path rule, the recording target (the
  in-process mock unless live calls are allowed) and the checks after the test body.
- :class:`ReplayFactory` and :class:`AgentFactory` are ``dsh_replay`` and ``dsh_agent``.
"""

from __future__ import annotations

import asyncio
import importlib
import itertools
import os
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, suppress
from dataclasses import dataclass, fields, replace
from pathlib import Path
from types import ModuleType
from typing import Any, Final
from unittest import mock as _patch

from dsh_core import Agent, AgentOptions, Provider, Session, Tool
from dsh_core.providers import DeepSeekProvider
from dsh_core.providers.deepseek import API_KEY_ENV, BASE_URL_ENV

from ._errors import MockNotSatisfied
from ._mock_strict import unmet_expectations
from ._network import is_loopback
from ._scrub_rules import ScrubRules
from ._secrets import scrub_url
from .cassettes import Cassette, CassetteMismatch, RecordMode, use_cassette
from .mock import MockDeepSeek, MockHandler, ReceivedRequest, ScriptEntry
from .replay import LogSource, ReplayProvider

__all__ = [
    "API_KEY_ENV",
    "BASE_URL_ENV",
    "LIVE_ORIGIN",
    "MOCK_API_KEY",
    "AgentFactory",
    "CassetteFixture",
    "CassetteSettings",
    "MockFixture",
    "ReplayFactory",
    "cassette_path",
    "route_network_to_mock",
    "unmet_expectations",
]

LIVE_ORIGIN: Final = "https://api.deepseek.com"
"""Where cassettes file their requests, whatever they were recorded against."""
MOCK_API_KEY: Final = "dsh-testkit-mock-key"
"""The key sent to the mock and in replay: any non-empty key will do, and this one is not
shaped like a real key, so nothing mistakes it for a secret."""

_UNSAFE_NAME: Final = re.compile(r"[^A-Za-z0-9_.\-\[\]=+,]")

# ------------------------------------------------------------------------------ dsh_mock


class MockFixture:
    """The mock DeepSeek served in process (the ``dsh_mock`` fixture).

    Script it with :meth:`push` (``Reply``, ``ErrorReply`` entries of :mod:`dsh_testkit.mock`);
    unscripted requests get the mock's deterministic default reply. Point a client at it with
    :attr:`provider` (this project's provider), or :meth:`transport` for any httpx/httpx2
    client (the openai and anthropic SDKs use httpx2). Nothing touches the network.
    """

    base_url: str = LIVE_ORIGIN
    """The base URL to give clients (any host reaches the mock through its transport)."""
    api_key: str = MOCK_API_KEY
    """A key the mock accepts (it accepts any non-empty key)."""

    def __init__(self, mock: MockDeepSeek | None = None, *, strict: bool = True) -> None:
        self.mock = mock if mock is not None else MockDeepSeek(seed=0)
        """The model of the API: script, requests received, the prefix-cache simulator."""
        self.handler = MockHandler(self.mock)
        """The ``request → response`` callable behind every transport."""
        self.replaying = False
        """``True`` while the test's cassette replays only: the cassette answers, so nothing
        pushed now is used (script the mock only ``if not dsh_mock.replaying``)."""
        self.pushed = 0
        """Entries pushed so far (the plugin reports the ones pushed while replaying)."""
        self.strict = strict
        """Fail the test for entries left unused or requests nobody scripted (the default;
        :meth:`lenient` or ``@pytest.mark.dsh_lenient`` turns it off)."""
        self.bypassed = False
        """``True`` while a live recording goes to the real API instead of this mock."""
        self._provider: DeepSeekProvider | None = None

    def __repr__(self) -> str:
        return f"MockFixture(requests={len(self.mock.requests)}, pending={len(self.mock.pending)})"

    @property
    def provider(self) -> DeepSeekProvider:
        """A :class:`~dsh_core.providers.DeepSeekProvider` answered by this mock (one per test)."""
        if self._provider is None:
            self._provider = self.new_provider()
        return self._provider

    def new_provider(self, **kwargs: Any) -> DeepSeekProvider:
        """Another provider answered by this mock; ``kwargs`` go to ``DeepSeekProvider``."""
        kwargs.setdefault("api_key", self.api_key)
        kwargs.setdefault("base_url", self.base_url)
        return DeepSeekProvider(transport=self.transport("httpx"), **kwargs)

    def transport(self, module: str | ModuleType = "httpx") -> Any:
        """A ``MockTransport`` of ``module`` (``"httpx"`` or ``"httpx2"``, or the module) for a
        client of your own; works for sync and async clients."""
        mod = importlib.import_module(module) if isinstance(module, str) else module
        return mod.MockTransport(self.handler)

    @property
    def recording(self) -> bool:
        """Whether the mock's answers are used: not while the test's cassette replays only."""
        return not self.replaying

    def lenient(self) -> MockFixture:
        """Do not fail this test for scripted entries left unused or requests nobody scripted
        (unscripted requests get the deterministic default reply). Returns the fixture."""
        self.strict = False
        return self

    def respond_with(self, responder: Any) -> None:
        """Answer requests the queue does not with ``responder(request)`` (a ``Reply``, an
        ``ErrorReply`` or ``None``); its answers count as scripted."""
        self.mock.respond_with(responder)

    def unmet(self) -> MockNotSatisfied | None:
        """What the strict check finds (``None`` when the script was followed or the mock was
        not asked: a replaying cassette, a live recording)."""
        if not self.strict or self.replaying or self.bypassed:
            return None
        return unmet_expectations(self.mock)

    def push(self, *entries: ScriptEntry) -> None:
        """Queue scripted answers; each answers one valid model request, in order.

        While the test's cassette replays (:attr:`replaying`), the entries are kept but never
        asked for; the run's summary lists the test so the script's intent stays visible.
        """
        self.pushed += len(entries)
        self.mock.push(*entries)

    @property
    def requests(self) -> tuple[ReceivedRequest, ...]:
        """Every request the mock received so far (keys redacted)."""
        return self.mock.requests

    def assert_consumed(self) -> None:
        """Fail if a scripted entry was never used."""
        self.mock.assert_consumed()


# ------------------------------------------------------------------------- the live guard


@contextmanager
def route_network_to_mock(handler: Callable[[Any], Any]) -> Iterator[None]:
    """While active, the network transports of httpx and httpx2 answer every request to a
    non-loopback host with ``handler`` (the mock) instead of connecting anywhere.

    This is how a cassette records without live calls: the request that would have gone to
    the API is answered by the mock. Loopback requests (a local mock server) go through.
    """
    patches: list[AbstractContextManager[Any]] = []
    for name in ("httpx", "httpx2"):
        try:
            mod = importlib.import_module(name)
        except ImportError:  # pragma: no cover - both are dependencies here
            continue
        patches.append(
            _patch.patch.object(mod.HTTPTransport, "handle_request", _sync_route(mod, handler))
        )
        patches.append(
            _patch.patch.object(
                mod.AsyncHTTPTransport, "handle_async_request", _async_route(mod, handler)
            )
        )
    with ExitStack() as stack:
        for patch in patches:
            stack.enter_context(patch)
        yield


def _sync_route(mod: ModuleType, handler: Callable[[Any], Any]) -> Callable[..., Any]:
    original = mod.HTTPTransport.handle_request

    def handle_request(transport: Any, request: Any) -> Any:
        if is_loopback(request.url.host):
            return original(transport, request)
        request.read()
        return handler(request)

    return handle_request


def _async_route(mod: ModuleType, handler: Callable[[Any], Any]) -> Callable[..., Any]:
    original = mod.AsyncHTTPTransport.handle_async_request

    async def handle_async_request(transport: Any, request: Any) -> Any:
        if is_loopback(request.url.host):
            return await original(transport, request)
        await request.aread()
        return handler(request)

    return handle_async_request


# ------------------------------------------------------------------------------ cassettes


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
class CassetteSettings:
    """What the command line and ini file decided for this run's cassettes."""

    mode: RecordMode
    """One of ``dsh_testkit.cassettes.RECORD_MODES`` (``none``: replay only)."""
    live: bool
    """``--dsh-live`` was given and a key is in the environment: recordings reach the API."""
    scrub: ScrubRules | None = None
    """The user's scrub rules, on top of the built-in ones."""


class CassetteFixture:
    """One test's cassette use (behind the ``dsh_cassette`` fixture).

    :meth:`start` opens the cassette; :meth:`after_call` runs when the test body ended and may
    raise (a mismatch a client swallowed, a recording never played) so the test fails in its
    call phase with the cassette's own message; :meth:`close` ends the use, saving recordings
    only when the test passed.
    """

    def __init__(
        self,
        path: Path,
        settings: CassetteSettings,
        *,
        mock: MockFixture,
        test_id: str,
    ) -> None:
        self.path = path
        self.settings = settings
        self.mock = mock
        self.test_id = test_id
        self.cassette: Cassette | None = None
        self._stack = ExitStack()
        self._use: AbstractContextManager[Cassette] | None = None
        self._reported: BaseException | None = None

    @property
    def recorded_against(self) -> str:
        """What the recordings come from, in words that are true for the base URL in use."""
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
        return (
            "the in-process mock DeepSeek (dsh_testkit.mock, seed 0) through the dsh_mock "
            "fixture, not the live API; record live with --dsh-live and DEEPSEEK_API_KEY"
        )

    @property
    def live_base_url(self) -> str:
        return (os.environ.get(BASE_URL_ENV) or LIVE_ORIGIN).rstrip("/")

    def start(self) -> Cassette:
        if not self.settings.live:
            self._stack.enter_context(route_network_to_mock(self.mock.handler))
        origin = self.live_base_url if self.settings.live else LIVE_ORIGIN
        self._use = use_cassette(
            self.path,
            mode=self.settings.mode,
            metadata={"recordedAgainst": self.recorded_against, "test": self.test_id},
            rewrite_origin=(origin, LIVE_ORIGIN) if origin != LIVE_ORIGIN else None,
            assert_all_played=False,
            scrub=self.settings.scrub,
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


# ------------------------------------------------------------------------------ dsh_replay


class ReplayFactory:
    """``dsh_replay(log, *children, strict=True, check_consumed=True)`` → a
    :class:`~dsh_testkit.replay.ReplayProvider` (the ``dsh_replay`` fixture).

    A relative path is read from the test module's directory. Every provider made with
    ``check_consumed=True`` must have served all its recorded calls by the end of a passing
    test (:meth:`~dsh_testkit.replay.ReplayProvider.assert_consumed`).
    """

    def __init__(self, base_dir: Path) -> None:
        self.base_dir = base_dir
        self.providers: list[tuple[ReplayProvider, bool]] = []
        """Every provider made in this test, with whether it is checked for consumption."""

    def _resolve(self, source: LogSource) -> LogSource:
        if isinstance(source, (str, os.PathLike)):
            path = Path(source)
            return path if path.is_absolute() else self.base_dir / path
        return source

    def __call__(
        self,
        log: LogSource,
        *children: LogSource,
        strict: bool = True,
        check_consumed: bool = True,
    ) -> ReplayProvider:
        provider = ReplayProvider(
            self._resolve(log), *(self._resolve(c) for c in children), strict=strict
        )
        self.providers.append((provider, check_consumed))
        return provider

    def after_call(self, error: BaseException | None) -> None:
        """After a passing test: every provider with ``check_consumed`` served all its calls."""
        __tracebackhide__ = True
        if error is None:
            for provider, checked in self.providers:
                if checked:
                    provider.assert_consumed()


# ------------------------------------------------------------------------------- dsh_agent

_OPTION_NAMES: Final = frozenset(f.name for f in fields(AgentOptions))
_CLOCK_START: Final = 1_767_225_600_000
"""2026-01-01T00:00:00Z in ms: the deterministic clock's first tick."""


async def _no_wait(seconds: float) -> None:
    await asyncio.sleep(0)


class AgentFactory:
    """``dsh_agent(provider=None, *, session=None, tools=(), **options)`` → an
    :class:`~dsh_core.Agent` with dev-mode invariants on (the ``dsh_agent`` fixture).

    ``provider`` defaults to ``default_provider()`` (the ``dsh_mock`` provider). ``session`` is
    a :class:`~dsh_core.Session` or a session id (default ``"dsh-session"``; new sessions get a
    deterministic millisecond clock). ``options`` are :class:`~dsh_core.AgentOptions` fields
    overriding the test defaults: provider ``deepseek``, model ``deepseek-v4-flash``,
    ``invariants=True``, retries that do not wait, jitter fixed at 0.5, and message ids
    ``msg-1``, ``msg-2``, … counted per session (continuing after the messages a session
    already holds), so an agent replaying a recorded session mints the ids the recording did.
    Agents are closed after the test.
    """

    def __init__(self, default_provider: Callable[[], Provider]) -> None:
        self._default_provider = default_provider
        self._ticks = itertools.count(_CLOCK_START)
        self._ids: dict[int, Callable[[], str]] = {}
        self.agents: list[Agent] = []
        """Every agent made in this test."""

    def ids(self, session: Session) -> Callable[[], str]:
        """The message-id factory of ``session`` (one counter per session in this test)."""
        factory = self._ids.get(id(session))
        if factory is None:
            counter = itertools.count(len(session.derive_messages()) + 1)

            def factory() -> str:
                return f"msg-{next(counter)}"

            # The factory list keeps the session alive, so its id() is not reused meanwhile.
            self._ids[id(session)] = factory
        return factory

    def defaults(self, session: Session) -> AgentOptions:
        """The test defaults for an agent on ``session`` (before a call's overrides)."""
        return AgentOptions(
            provider="deepseek",
            model="deepseek-v4-flash",
            invariants=True,
            id_factory=self.ids(session),
            sleep=_no_wait,
            random=lambda: 0.5,
        )

    def clock(self) -> int:
        """The deterministic clock new sessions use (one ms per reading)."""
        return next(self._ticks)

    def __call__(
        self,
        provider: Provider | None = None,
        *,
        session: Session | str | None = None,
        tools: Iterable[Tool] = (),
        **options: Any,
    ) -> Agent:
        unknown = sorted(set(options) - _OPTION_NAMES)
        if unknown:
            raise TypeError(
                f"dsh_agent got unknown AgentOptions field(s) {', '.join(unknown)}; "
                f"known: {', '.join(sorted(_OPTION_NAMES))}"
            )
        if session is None or isinstance(session, str):
            session = Session.create(session or "dsh-session", clock=self.clock)
        agent = Agent(
            session,
            provider if provider is not None else self._default_provider(),
            replace(self.defaults(session), **options),
            tools=tools,
        )
        self.agents.append(agent)
        return agent

    def close(self) -> None:
        for agent in self.agents:
            agent.close()
