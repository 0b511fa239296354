"""What the pytest plugin's fixtures hand out, kept out of the plugin module.

:mod:`dsh_testkit.pytest_plugin` is imported by every pytest run in an environment where this
package is installed, so it imports nothing heavy; the fixtures import this module (and through
it the mock, vcrpy and the core) only when a test asks for one of them.

- :class:`MockFixture` is ``dsh_mock``: the mock DeepSeek served in process, with a ready
  :class:`~dsh_core.providers.DeepSeekProvider` and transports for any httpx/httpx2 client.
- :class:`CassetteFixture` (in :mod:`._cassette`) runs one test's
  cassette: the path rule, its options, the recording target (the in-process mock unless live
  calls are allowed) and the checks after the test body.
- :class:`ReplayFactory` and :class:`AgentFactory` are ``dsh_replay`` and ``dsh_agent``.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import itertools
import os
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import fields, replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Final, Literal

from dsh_core import Agent, AgentOptions, Provider, Session, Tool
from dsh_core.providers import DeepSeekProvider

from .._errors import MockNotSatisfied
from ..mock import (
    MockDeepSeek,
    MockHandler,
    MockRequest,
    ReceivedRequest,
    Route,
    ScriptEntry,
)
from ..mock._routes import RouteAnswer, TextMatcher
from ..replay import ReplayProvider
from ..replay._provider import LogSource
from ._settings import LIVE_ORIGIN, MOCK_API_KEY
from ._strict import unmet_expectations

if TYPE_CHECKING:
    from ..traces import Trace

__all__ = ["AgentFactory", "MockFixture", "ReplayFactory", "make_lenient", "make_strict"]

# ------------------------------------------------------------------------------ dsh_mock


class MockFixture:
    """The mock DeepSeek served in process (the ``dsh_mock`` fixture).

    Script it with :meth:`route` (answers picked by what a request holds) and :meth:`push`
    (answers in order; ``Reply``, ``ErrorReply`` entries of :mod:`dsh_testkit.mock`). Strict
    (the default), a request nothing scripted is refused at the call with a 410 naming it, and
    the test fails naming it; lenient, it gets the mock's deterministic default reply. Point a
    client at it with :attr:`provider` (this project's provider), or :meth:`transport` for any
    httpx/httpx2 client (the openai and anthropic SDKs use httpx2). Nothing touches the network.
    """

    base_url: str = LIVE_ORIGIN
    """The base URL to give clients (any host reaches the mock through its transport)."""
    anthropic_base_url: str = LIVE_ORIGIN + "/anthropic"
    """The base URL to give the Anthropic SDK (it appends ``/v1/messages``), with
    :meth:`transport` ``("httpx2")`` as its client's transport."""
    api_key: str = MOCK_API_KEY
    """A key the mock accepts (it accepts any non-empty key)."""

    def __init__(
        self,
        mock: MockDeepSeek | None = None,
        *,
        strict: bool = True,
        assert_all_called: bool | None = None,
        assert_all_mocked: bool | None = None,
    ) -> None:
        self.mock = mock if mock is not None else MockDeepSeek(seed=0)
        """The model of the API: script, requests received, the prefix-cache simulator."""
        self.handler = MockHandler(self.mock)
        """The ``request → response`` callable behind every transport."""
        self.replaying = False
        """``True`` while the test's cassette replays only: the cassette answers, so nothing
        pushed now is used (script the mock only ``if not dsh_mock.replaying``)."""
        self.pushed = 0
        """Entries pushed so far (the plugin reports the ones pushed while replaying)."""
        self.assert_all_called = strict if assert_all_called is None else assert_all_called
        """Fail the test for routes never matched and entries or route answers left unused,
        ``optional`` ones aside (respx's ``assert_all_called``; the default)."""
        self._all_mocked = False
        self.assert_all_mocked = strict if assert_all_mocked is None else assert_all_mocked
        self.bypassed = False
        """``True`` while a live recording goes to the real API instead of this mock."""
        self._provider: DeepSeekProvider | None = None

    @property
    def assert_all_mocked(self) -> bool:
        """Refuse a request nothing scripted at the call (a 410 naming it) and fail the test
        for it (respx's ``assert_all_mocked``; the default). Off, such a request gets the
        mock's deterministic default reply."""
        return self._all_mocked

    @assert_all_mocked.setter
    def assert_all_mocked(self, value: bool) -> None:
        self._all_mocked = bool(value)
        if self._all_mocked:
            make_strict(self.mock)
        else:
            make_lenient(self.mock)

    @property
    def strict(self) -> bool:
        """Both checks on: :attr:`assert_all_called` and :attr:`assert_all_mocked`."""
        return self.assert_all_called and self.assert_all_mocked

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
        self.assert_all_called = False
        self.assert_all_mocked = False
        return self

    def route(
        self,
        *,
        last_user: TextMatcher | None = None,
        tools: bool | str | Collection[str] | None = None,
        model: TextMatcher | None = None,
        header: tuple[str, TextMatcher | None] | Mapping[str, TextMatcher | None] | None = None,
        endpoint: Literal["chat", "anthropic"] | None = None,
        thinking: bool | None = None,
        after_tool_result: bool | None = None,
        when: Callable[[MockRequest], bool] | None = None,
        respond: RouteAnswer | None = None,
        optional: bool = False,
    ) -> Route:
        """Add a route (respx's routes, for the mock DeepSeek): requests matching every given
        matcher get its answer, before the ordered script. See
        :meth:`MockDeepSeek.route <dsh_testkit.mock.MockDeepSeek.route>`; answer with
        ``.respond(...)`` or ``.reply(text=..., tool_calls=...)``; ``optional=True``: the
        strict check does not ask for it."""
        self.pushed += 1
        return self.mock.route(
            last_user=last_user,
            tools=tools,
            model=model,
            header=header,
            endpoint=endpoint,
            thinking=thinking,
            after_tool_result=after_tool_result,
            when=when,
            respond=respond,
            optional=optional,
        )

    def respond_with(self, responder: Any) -> None:
        """Answer requests no route or queued entry does with ``responder(request)`` (a
        ``Reply``, an ``ErrorReply`` or ``None``, which leaves the request unanswered); its
        answers count as scripted."""
        self.mock.respond_with(responder)

    def unmet(self) -> MockNotSatisfied | None:
        """What the strict check finds (``None`` when the script was followed or the mock was
        not asked: a replaying cassette, a live recording)."""
        if self.replaying or self.bypassed:
            return None
        return unmet_expectations(
            self.mock, all_called=self.assert_all_called, all_mocked=self.assert_all_mocked
        )

    def push(self, *entries: ScriptEntry) -> None:
        """Queue scripted answers; each answers one valid model request no route answers, in
        order.

        While the test's cassette replays (:attr:`replaying`), the entries are kept but never
        asked for; the run's summary lists the test so the script's intent stays visible.
        """
        self.pushed += len(entries)
        self.mock.push(*entries)

    def to_trace(self) -> Trace:
        """The requests this mock received, as a :class:`~dsh_testkit.traces.Trace`: so the
        fixture itself goes to the cache doctor, the prefix assertions and the wire goldens
        (``assert_cache_friendly(dsh_mock)``, ``dsh_mock == snapshot.use_extension(...)``)."""
        return self.mock.to_trace()

    @property
    def requests(self) -> tuple[ReceivedRequest, ...]:
        """Every request the mock received so far (keys redacted)."""
        return self.mock.requests

    def assert_consumed(self) -> None:
        """Fail if a scripted entry was never used."""
        self.mock.assert_consumed()


_STRICT_MARK: Final = "_dsh_strict_fixture"
"""Attribute set on a mock whose ``on_exhausted`` a strict fixture turned to ``error``."""


def make_strict(mock: MockDeepSeek) -> None:
    """What the strict fixtures do to their mock: a request nothing scripted (no route, queued
    entry or responder) is refused at the call (``on_exhausted = "error"``: a 410 naming it),
    unless the test chose another ``on_exhausted``."""
    if mock.on_exhausted == "default":
        mock.on_exhausted = "error"
        setattr(mock, _STRICT_MARK, True)


def make_lenient(mock: MockDeepSeek) -> None:
    """Undo :func:`make_strict`: unscripted requests get the default reply again."""
    if getattr(mock, _STRICT_MARK, False) and mock.on_exhausted == "error":
        mock.on_exhausted = "default"
    with contextlib.suppress(AttributeError):
        delattr(mock, _STRICT_MARK)


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
