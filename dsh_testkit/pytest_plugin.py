"""The pytest plugin (entry point ``pytest11``): options, markers and fixtures.

Loaded by every pytest run where ``dsh-testkit`` is installed, so importing it stays light:
only pytest and the standard library at import; the mock, vcrpy and the core are imported by
the fixtures that need them (respx, syrupy and hypothesis not at all).

Options (group ``dsh``; ``pytest --help`` lists them):

- ``--dsh-record-mode=none|once|new_episodes|all|rewrite``: the cassette record modes of
  pytest-recording, with their meanings (``missing``, the old name of ``new_episodes``, still
  works). The default is ``none`` (replay only), or the ini option ``dsh_record_mode``; with
  ``CI=true`` in the environment the default is always ``none``.
- ``--dsh-block-network``: every test, every client library: a connection to any host but
  loopback fails with ``NetworkBlocked`` naming the host; ``--dsh-allowed-hosts=a,b`` lets
  hosts through (ini: ``dsh_block_network``, ``dsh_allowed_hosts``).
- ``--dsh-live``: allow live DeepSeek calls (the key comes only from ``DEEPSEEK_API_KEY`` and is
  never printed). Without it, any connection to a DeepSeek API host fails the test, whatever the
  client (the ``ALLOW_MODEL_REQUESTS=False`` of pydantic-ai, always on).
- ``--dsh-cassette-dir`` (the ini option ``dsh_cassette_dir`` sets a default).
- ``--dsh-cache-baseline DIR`` (``--dsh-cache-baseline-update``, thresholds): each test's
  traffic kept as a trace and compared with the next run's; ``_cache_baseline.py``.

Markers: ``dsh_cassette`` / ``dsh_cassette(name)`` (alone, it puts the test under its cassette,
like ``@pytest.mark.vcr``), ``dsh_live``, ``dsh_lenient`` (the mock fixtures are strict like
respx: a passing test fails for scripted entries left unused or requests nobody scripted; this
marker, or ``dsh_mock.lenient()``, opts a test out). Async tests run under pytest-asyncio or
anyio (``@pytest.mark.anyio``), whichever the project uses: the fixtures are synchronous, and
cassette names and the golden extensions' file names leave out anyio's ``[asyncio]`` backend
parameter. Fixtures: ``dsh_mock``, ``dsh_mock_server``,
``dsh_cassette``, ``dsh_cassette_provider``, ``dsh_scrub``, ``dsh_replay``, ``dsh_capture``,
``dsh_agent`` (``pytest --fixtures`` shows one line each; ``-v`` the whole docstring).
Scrub rules of your own go in ``pyproject.toml`` under ``[tool.dsh_testkit.scrub]``.

Live calls are hard to make by accident: without ``--dsh-live`` nothing the plugin does
reaches the network: while a cassette is in use, a request to a non-loopback host that it
records is answered by the in-process mock, so recording needs no key and never goes live.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol

import pytest

from . import _cache_baseline, _network
from ._plugin_settings import API_KEY_ENV, RECORD_MODES
from ._plugin_settings import DEFAULT_DIR_NAME as _DEFAULT_DIR_NAME
from ._plugin_settings import Settings as _Settings
from ._plugin_settings import cassette_test_name as _test_name
from ._plugin_settings import read_settings as _read_settings
from ._plugin_settings import report_header as _report_header

if TYPE_CHECKING:
    from dsh_core.providers import DeepSeekProvider

    from ._pytest_support import AgentFactory, CassetteFixture, MockFixture, ReplayFactory
    from ._scrub_rules import ScrubRules
    from .capture import RequestCapture
    from .cassettes import Cassette
    from .mock import MockServer

__all__ = [
    "API_KEY_ENV",
    "RECORD_MODES",
    "AgentFactory",
    "MockFixture",
    "ReplayFactory",
]

_LAZY: Final = frozenset({"AgentFactory", "MockFixture", "ReplayFactory"})
"""The fixtures' value types (for annotations), imported from ``_pytest_support`` on first use."""


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from . import _pytest_support

        return getattr(_pytest_support, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _AfterCall(Protocol):
    def after_call(self, error: BaseException | None) -> None: ...


_AFTER_CALL: Final[pytest.StashKey[list[_AfterCall]]] = pytest.StashKey()
_CALL_ERROR: Final[pytest.StashKey[BaseException | None]] = pytest.StashKey()
_SETTINGS: Final[pytest.StashKey[_Settings]] = pytest.StashKey()
_SERVER: Final[pytest.StashKey[MockServer]] = pytest.StashKey()
_CASSETTE_USE: Final[pytest.StashKey[CassetteFixture]] = pytest.StashKey()
_GUARD: Final[pytest.StashKey[_network.NetworkGuard]] = pytest.StashKey()
_REPLAY_NOTES: Final[pytest.StashKey[list[str]]] = pytest.StashKey()
_MOCK: Final[pytest.StashKey[MockFixture]] = pytest.StashKey()


def _settings(config: pytest.Config) -> _Settings:
    settings = config.stash.get(_SETTINGS, None)
    if settings is None:
        settings = config.stash[_SETTINGS] = _read_settings(config)
    return settings


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dsh", "dsh-testkit: mock DeepSeek, cassettes and replay")
    group.addoption(
        "--dsh-record-mode",
        choices=(*RECORD_MODES, "missing"),
        default=None,
        help="cassette record mode, as in pytest-recording: none (replay only, an unrecorded "
        "request fails), once (record cassettes that do not exist yet), new_episodes (record "
        "requests that have no recording; 'missing' is its old name), all (record every "
        "request, never replay), rewrite (re-record each cassette from scratch). Default: the "
        "dsh_record_mode ini option, else none; always none when CI=true",
    )
    group.addoption(
        "--dsh-block-network",
        action="store_true",
        default=None,
        help="refuse every connection but loopback, in every test and client library "
        "(socket level); the error names the host. Loopback stays open for the mock server",
    )
    group.addoption(
        "--dsh-allowed-hosts",
        metavar="HOSTS",
        action="append",
        default=[],
        help="comma-separated hosts (names, IPs, *.domain) still reachable under "
        "--dsh-block-network; loopback is always allowed",
    )
    group.addoption(
        "--dsh-live",
        action="store_true",
        default=False,
        help=f"allow live DeepSeek calls: run dsh_live tests and record cassettes from the live "
        f"API; the key is read from ${API_KEY_ENV} only and never printed",
    )
    group.addoption(
        "--dsh-cassette-dir",
        metavar="DIR",
        default=None,
        help="directory of cassettes (default: the dsh_cassette_dir ini option, else a "
        "'cassettes' folder beside each test module)",
    )
    _cache_baseline.add_options(group, parser)
    parser.addini(
        "dsh_record_mode",
        "default cassette record mode outside CI (--dsh-record-mode overrides it; CI=true forces "
        "none)",
        default="",
    )
    parser.addini(
        "dsh_block_network",
        "block the network as --dsh-block-network does",
        type="bool",
        default=False,
    )
    parser.addini(
        "dsh_allowed_hosts",
        "hosts reachable under --dsh-block-network (loopback always is)",
        type="args",
        default=[],
    )
    parser.addini(
        "dsh_cassette_dir",
        "directory of cassettes, relative to the ini file (--dsh-cassette-dir overrides it)",
        default="",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "dsh_cassette(name=None): put the test under its cassette (no fixture needed): "
        "<cassette dir>/<module>/<test>.yaml, or <cassette dir>/<name>.yaml when named",
    )
    config.addinivalue_line(
        "markers",
        "dsh_lenient: the dsh_mock fixtures do not fail the test for scripted replies left "
        "unused or requests nobody scripted",
    )
    config.addinivalue_line(
        "markers",
        f"dsh_live: the test calls the live DeepSeek API; skipped unless --dsh-live is given "
        f"and ${API_KEY_ENV} is set",
    )
    settings = _settings(config)
    if settings.record_mode != "none" and settings.live_requested and not settings.key_present:
        raise pytest.UsageError(
            f"--dsh-record-mode={settings.record_mode} with --dsh-live records from the live "
            f"DeepSeek API and needs a key in the environment variable {API_KEY_ENV}, which is "
            "not set; set it, or drop --dsh-live to record from the in-process mock"
        )
    policy = _network.NetworkPolicy(
        block_all=settings.block_network,
        allowed_hosts=settings.allowed_hosts,
        live=settings.live,
    )
    config.stash[_GUARD] = _network.NetworkGuard(policy).install()
    _cache_baseline.configure(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    guard = config.stash.get(_GUARD, None)
    if guard is not None:
        guard.uninstall()
        del config.stash[_GUARD]


def pytest_report_header(config: pytest.Config) -> str:
    return _report_header(_settings(config))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    settings = _settings(config)
    if settings.live:
        return
    if settings.live_requested:
        reason = f"dsh_live: --dsh-live is given but ${API_KEY_ENV} is not set"
    else:
        reason = f"dsh_live: needs the live DeepSeek API; run with --dsh-live and ${API_KEY_ENV}"
    for item in items:
        if item.get_closest_marker("dsh_live") is not None:
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # The session's server is shared; each test that uses it starts from a clean mock.
    server = item.config.stash.get(_SERVER, None)
    if server is not None and "dsh_mock_server" in getattr(item, "fixturenames", ()):
        server.mock.reset()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    __tracebackhide__ = True
    guard = item.config.stash.get(_GUARD, None)
    refused_before = len(guard.refused) if guard is not None else 0
    try:
        result = yield
    except BaseException as error:
        item.stash[_CALL_ERROR] = error
        for hook in item.stash.get(_AFTER_CALL, []):
            hook.after_call(error)
        refused = guard.refused_since(refused_before) if guard is not None else []
        if refused and isinstance(error, Exception) and error is not refused[0]:
            # The test failed on a symptom (an SDK's APIConnectionError); show the cause.
            raise refused[0] from error
        raise
    item.stash[_CALL_ERROR] = None
    _check_mocks(item)
    if guard is not None:
        refused = guard.refused_since(refused_before)
        if refused:
            # A live DeepSeek call was refused and the test passed anyway: a client swallowed
            # the refusal (a retry loop, an error result), or the test caught it. Either way
            # the test reached for the live API without --dsh-live.
            raise refused[0]
    for hook in item.stash.get(_AFTER_CALL, []):
        hook.after_call(None)
    return result


def _check_mocks(item: pytest.Item) -> None:
    """After a passing test body: the strict check of the mock fixtures it used."""
    __tracebackhide__ = True
    if item.get_closest_marker("dsh_lenient") is not None:
        return
    fixture = item.stash.get(_MOCK, None)
    if fixture is not None:
        unmet = fixture.unmet()
        if unmet is not None:
            raise unmet
    server = item.config.stash.get(_SERVER, None)
    if server is not None and "dsh_mock_server" in getattr(item, "fixturenames", ()):
        from ._pytest_support import unmet_expectations

        unmet = unmet_expectations(server.mock)
        if unmet is not None:
            raise unmet


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    notes = config.stash.get(_REPLAY_NOTES, [])
    if notes:
        terminalreporter.section("dsh-testkit: mock scripts not used in replay")
        terminalreporter.line(
            "These tests scripted dsh_mock while their cassette replayed (the cassette answers; "
            "the script only serves recording). Check dsh_cassette.recording or "
            "dsh_mock.replaying to script only when recording:"
        )
        for note in notes:
            terminalreporter.line(f"  {note}")


def _stash(request: pytest.FixtureRequest) -> pytest.Stash:
    node: pytest.Item = request.node
    return node.stash


def _after_call(request: pytest.FixtureRequest, hook: _AfterCall) -> None:
    _stash(request).setdefault(_AFTER_CALL, []).append(hook)


def _call_error(request: pytest.FixtureRequest) -> BaseException | None:
    return _stash(request).get(_CALL_ERROR, None)


def _module_dir(request: pytest.FixtureRequest) -> Path:
    return Path(request.node.path).parent


# ---------------------------------------------------------------------------------- fixtures


@pytest.fixture
def dsh_mock(request: pytest.FixtureRequest) -> MockFixture:
    """A fresh in-process mock DeepSeek per test: script it with push(), give clients .provider.

    No sockets, no key, no network.

    ``dsh_mock.push(Reply(text="hi"), ErrorReply(status=429))`` scripts answers (from
    ``dsh_testkit.mock``). Strict like respx: a passing test fails with ``MockNotSatisfied``
    when scripted entries were left unused or a request came that nobody scripted (it got the
    deterministic default reply); opt out with ``dsh_mock.lenient()`` or
    ``@pytest.mark.dsh_lenient``. ``dsh_mock.replaying`` tells whether the test's cassette
    replays (then the mock is never asked).
    ``dsh_mock.provider`` is a ``DeepSeekProvider`` answered by it;
    ``dsh_mock.transport("httpx2")`` is a ``MockTransport`` for any other client (the openai
    and anthropic SDKs use httpx2); ``dsh_mock.requests`` is what it received; ``dsh_mock.mock``
    the ``MockDeepSeek`` itself. A fresh one per test (seed 0).
    """
    from ._pytest_support import MockFixture

    fixture = MockFixture(strict=request.node.get_closest_marker("dsh_lenient") is None)
    _stash(request)[_MOCK] = fixture
    return fixture


@pytest.fixture(scope="session")
def dsh_mock_server(request: pytest.FixtureRequest) -> Iterator[MockServer]:
    """The mock DeepSeek on a loopback port for the session: .base_url for any client, .mock.

    A ``dsh_testkit.mock.MockServer``.

    ``dsh_mock_server.base_url`` (``http://127.0.0.1:<port>``) is a DeepSeek base URL for any
    client in any language; ``.anthropic_base_url`` the Anthropic-format one; ``.mock`` the
    ``MockDeepSeek`` to script (``.mock.push(...)``) and inspect (``.mock.requests``). The
    port is free and chosen by the OS, so each pytest-xdist worker gets its own server. The mock
    is reset before each test that uses it, and checked after it as ``dsh_mock`` is (scripted
    entries left, requests nobody scripted; ``@pytest.mark.dsh_lenient`` opts out).
    """
    from .mock import MockDeepSeek, MockServer

    server = MockServer(MockDeepSeek(seed=0)).start()
    request.config.stash[_SERVER] = server
    try:
        yield server
    finally:
        del request.config.stash[_SERVER]
        server.stop()


@pytest.fixture(autouse=True)
def _dsh_cassette_marker(request: pytest.FixtureRequest) -> None:
    """``@pytest.mark.dsh_cassette`` alone puts the test under its cassette (no fixture asked)."""
    if request.node.get_closest_marker("dsh_cassette") is not None:
        request.getfixturevalue("dsh_cassette")


@pytest.fixture
def dsh_scrub(request: pytest.FixtureRequest) -> ScrubRules:
    """Your secret-scrub rules for cassettes, from [tool.dsh_testkit.scrub] in pyproject.toml.

    A ``dsh_testkit.cassettes.ScrubRules`` (header names, query names, JSON keys, JSON paths,
    regexes) that every cassette of the test applies on top of the built-in rules. Override it
    in a ``conftest.py`` to add rules in code::

        @pytest.fixture
        def dsh_scrub(dsh_scrub):
            return dsh_scrub.merged(ScrubRules(headers=frozenset({"x-team-token"})))
    """
    from ._errors import ScrubRuleError
    from ._scrub_rules import ScrubRules

    settings = _settings(request.config)
    if settings.scrub_table is None:
        return ScrubRules()
    try:
        return ScrubRules.from_mapping(settings.scrub_table, where=settings.scrub_source)
    except ScrubRuleError as exc:
        pytest.fail(f"ScrubRuleError: {exc}", pytrace=False)


@pytest.fixture
def dsh_cassette(
    request: pytest.FixtureRequest, dsh_mock: MockFixture, dsh_scrub: ScrubRules
) -> Iterator[Cassette]:
    """Replays (or records) the test's HTTP traffic from cassettes/<module>/<test>.yaml.

    Also activated by ``@pytest.mark.dsh_cassette`` alone.

    Every httpx/httpx2 request made during the test meets it (and, through vcrpy, requests,
    urllib3 and aiohttp ones). The file is ``<cassette dir>/<module>/<test name>.yaml``, or
    ``<cassette dir>/<name>.yaml`` with ``@pytest.mark.dsh_cassette(name)``; the cassette dir is
    ``--dsh-cassette-dir``, the ini ``dsh_cassette_dir``, or ``cassettes/`` beside the test
    module. ``--dsh-record-mode`` (pytest-recording's modes): ``none`` (default, and always in
    CI) replays only and never writes; ``once`` records a cassette that does not exist yet;
    ``new_episodes`` records requests without a recording; ``all`` records every request;
    ``rewrite`` re-records from scratch. ``dsh_cassette.recording`` tells whether this test may
    record: script ``dsh_mock`` only then (a script pushed while replaying is listed in the
    run's summary). Recordings come from the in-process mock unless ``--dsh-live`` and
    ``DEEPSEEK_API_KEY`` allow the live API. The test fails with ``CassetteMismatch`` (naming
    the closest recording and what differs) on an unrecorded request, even one a client
    swallowed, and with ``CassetteNotFullyPlayed`` when a recording was never requested. A
    failing test records nothing. Secrets are scrubbed with the built-in rules and
    ``dsh_scrub``'s. Yields the ``dsh_testkit.cassettes.Cassette``.
    """
    from ._pytest_support import CassetteFixture, CassetteSettings, cassette_path
    from .cassettes import CassetteError

    settings = _settings(request.config)
    marker = request.node.get_closest_marker("dsh_cassette")
    name: str | None = None
    if marker is not None and (marker.args or marker.kwargs):
        args = [*marker.args, *marker.kwargs.values()]
        if len(args) != 1 or set(marker.kwargs) - {"name"} or not isinstance(args[0], str):
            pytest.fail(
                f"@pytest.mark.dsh_cassette takes at most one cassette name (a string), got "
                f"args={marker.args!r} kwargs={marker.kwargs!r}",
                pytrace=False,
            )
        name = args[0]
    directory = settings.cassette_dir or _module_dir(request) / _DEFAULT_DIR_NAME
    try:
        path = cassette_path(
            directory=directory,
            module_path=Path(request.node.path),
            test_name=_test_name(request.node),
            marker_name=name,
        )
    except ValueError as exc:
        pytest.fail(str(exc), pytrace=False)
    use = CassetteFixture(
        path,
        CassetteSettings(
            mode=settings.record_mode,  # type: ignore[arg-type]
            live=settings.live,
            scrub=dsh_scrub,
        ),
        mock=dsh_mock,
        test_id=request.node.nodeid,
    )
    try:
        cassette = use.start()
    except CassetteError as exc:
        pytest.fail(f"{type(exc).__name__}: {exc}", pytrace=False)
    _after_call(request, use)
    _stash(request)[_CASSETTE_USE] = use
    try:
        yield cassette
    finally:
        use.close(_call_error(request))
        if dsh_mock.replaying and dsh_mock.pushed:
            request.config.stash.setdefault(_REPLAY_NOTES, []).append(
                f"{request.node.nodeid}: {dsh_mock.pushed} scripted entr"
                f"{'y' if dsh_mock.pushed == 1 else 'ies'} not used (cassette {path.name} "
                "replayed)"
            )


@pytest.fixture
def dsh_cassette_provider(
    request: pytest.FixtureRequest, dsh_cassette: Cassette
) -> DeepSeekProvider:
    """A DeepSeekProvider whose requests replay (or record) through the test's cassette.

    It sends to ``https://api.deepseek.com`` with a placeholder key; in replay nothing leaves
    the process. When recording it is answered by ``dsh_mock`` (script it before the first
    call), or by the live API (``DEEPSEEK_BASE_URL`` or the default origin, the key from
    ``DEEPSEEK_API_KEY``) with ``--dsh-live``; requests are filed under the default origin
    either way and scrubbed of secrets before anything is written.
    """
    return _stash(request)[_CASSETTE_USE].provider()


@pytest.fixture
def dsh_replay(request: pytest.FixtureRequest) -> ReplayFactory:
    """dsh_replay(log) makes a provider serving the model calls a recorded session log made.

    ``dsh_replay(log, *child_logs, strict=True)``.

    Returns a ``dsh_testkit.replay.ReplayProvider`` serving the model calls a recorded session
    log made (a ``Session``, events, or a path to a ``session.jsonl``; relative paths are read
    from the test module's directory). With ``strict=True`` each live request must equal the
    one the log rebuilds for that call (``ReplayMismatch`` names the first difference). After a
    passing test every recorded call must have been served (``ReplayNotConsumed``); pass
    ``check_consumed=False`` to opt out.
    """
    from ._pytest_support import ReplayFactory

    factory = ReplayFactory(_module_dir(request))
    _after_call(request, factory)
    return factory


@pytest.fixture
def dsh_capture() -> Iterator[RequestCapture]:
    """Captures every request any httpx/httpx2 client sends in the test (.requests, in order).

    Works for agents you did not write (the openai SDK, pydantic-ai, your own loop) without
    touching their clients. ``dsh_capture.requests`` holds ``CapturedRequest``s (method, URL,
    redacted headers, exact body bytes, ``.json``); ``dsh_capture.assert_prefix_stable()``
    fails with ``PrefixInstability`` unless each chat request extends the one before it
    (same model, tools and system prompt, earlier messages untouched), as a prefix cache needs.
    """
    from .capture import capture_requests

    with capture_requests() as capture:
        yield capture


@pytest.fixture
def dsh_agent(request: pytest.FixtureRequest) -> Iterator[AgentFactory]:
    """dsh_agent(provider=None, **options) makes a dsh_core.Agent with invariants on, for tests.

    ``dsh_agent(provider=None, *, session=None, tools=(), **agent_options)``: every request is
    checked against the log's reconstruction before it is sent, and every append is validated.
    ``provider`` defaults to ``dsh_mock.provider``; ``session`` is a ``Session`` or an id
    (default ``"dsh-session"``, with a deterministic clock). Defaults: model
    ``deepseek-v4-flash``, provider ``deepseek``, message ids ``msg-1``, ``msg-2``, …, retries
    without waiting; any ``AgentOptions`` field overrides them. Agents are closed afterwards.
    """
    from ._pytest_support import AgentFactory

    def default_provider() -> Any:
        return request.getfixturevalue("dsh_mock").provider

    factory = AgentFactory(default_provider)
    try:
        yield factory
    finally:
        factory.close()
