"""The pytest plugin (entry point ``pytest11``): options, markers and fixtures.

Loaded by every pytest run where ``dsh-testkit`` is installed, so importing it stays light:
only pytest and the standard library at import; the mock, vcrpy and the core are imported by
the fixtures that need them (respx, syrupy and hypothesis not at all).

Options (group ``dsh``; ``pytest --help`` lists them):

- ``--dsh-record-mode=none|once|new_episodes|all|rewrite``: the cassette record modes of
  pytest-recording, with their meanings (``missing``, the old name of ``new_episodes``, still
  works). The default is ``none`` (replay only), or the ini option ``dsh_record_mode``. With
  ``CI=true`` every mode but ``none`` is refused, whoever asks for it (the flag, ``addopts``,
  the ini, a marker, ``dsh_cassette_config``), unless ``--dsh-record-in-ci`` is given.
- ``--dsh-block-network``: every test, every client library: a connection to any host but
  loopback fails with ``NetworkBlocked`` naming the host; ``--dsh-allowed-hosts=a,b`` lets
  hosts through (ini: ``dsh_block_network``, ``dsh_allowed_hosts``).
- ``--dsh-live``: allow live DeepSeek calls (the key comes only from ``DEEPSEEK_API_KEY`` and is
  never printed). Without it, any connection to a DeepSeek API host fails the test, whatever the
  client (the ``ALLOW_MODEL_REQUESTS=False`` of pydantic-ai, always on).
- ``--dsh-cassette-dir`` (the ini option ``dsh_cassette_dir`` sets a default); the ini option
  ``dsh_rewrite_origin`` files origins under others (``LIVE -> RECORDED`` lines).
- ``--dsh-cache-baseline DIR`` (``--dsh-cache-baseline-update``, thresholds): each test's
  traffic kept as a trace and compared with the next run's; ``_baseline.py``.

Markers: ``dsh_cassette`` / ``dsh_cassette(name, **options)`` (alone, it puts the test under its
cassette, like ``@pytest.mark.vcr``; options as ``dsh_cassette_config``'s), ``dsh_live``,
``dsh_lenient`` (the mock fixtures are strict like respx: a request nothing scripted is refused
at the call, and a passing test fails for it and for scripted entries or routes left unused;
this marker, or ``dsh_mock.lenient()``, opts a test out). Async tests run under pytest-asyncio or
anyio (``@pytest.mark.anyio``), whichever the project uses: the fixtures are synchronous, and
cassette names and the golden extensions' file names leave out anyio's ``[asyncio]`` backend
parameter. Fixtures: ``dsh_mock``, ``dsh_mock_server``, ``dsh_cassette``,
``dsh_cassette_config``, ``dsh_cassette_provider``, ``dsh_scrub``, ``dsh_replay``,
``dsh_capture``, ``dsh_agent`` (``pytest --fixtures`` shows one line each; ``-v`` the whole docstring).
Scrub rules of your own go in ``pyproject.toml`` under ``[tool.dsh_testkit.scrub]``.
The fixtures' types, for annotations (``MockFixture``, ``ReplayFactory``, ``AgentFactory``), and
the errors only the plugin raises (``MockNotSatisfied``, ``NetworkBlocked``) import from here.

Live calls are hard to make by accident: without ``--dsh-live`` nothing the plugin does
reaches the network: while a cassette is in use, a request to a non-loopback host that it
records is answered by the in-process mock, so recording needs no key and never goes live.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol

import pytest

from .._test_ids import name_of_test as _test_name
from . import _baseline, _network
from ._settings import API_KEY_ENV as _API_KEY_ENV
from ._settings import DEFAULT_DIR_NAME as _DEFAULT_DIR_NAME
from ._settings import MARKERS as _MARKERS
from ._settings import Settings as _Settings
from ._settings import add_options as _add_options
from ._settings import ci_refusal as _ci_refusal
from ._settings import read_settings as _read_settings
from ._settings import report_header as _report_header
from ._stash import CASSETTE_USE as _CASSETTE_USE
from ._stash import MOCK as _MOCK
from ._stash import SERVER as _SERVER

if TYPE_CHECKING:
    from dsh_core.providers import DeepSeekProvider

    from .._errors import MockNotSatisfied, NetworkBlocked
    from ..capture import RequestCapture
    from ..cassettes import Cassette
    from ..mock import MockDeepSeek, MockServer
    from ..scrub._rules import ScrubRules
    from ._cassette import CassetteFixture
    from ._support import AgentFactory, MockFixture, ReplayFactory

__all__ = [
    "AgentFactory",
    "CassetteFixture",
    "MockFixture",
    "MockNotSatisfied",
    "NetworkBlocked",
    "ReplayFactory",
]

_LAZY: Final = frozenset({"AgentFactory", "CassetteFixture", "MockFixture", "ReplayFactory"})
"""The fixtures' value types (for annotations), imported from ``_support`` (``_cassette``: the
cassette's) on first use."""
_LAZY_ERRORS: Final = frozenset({"MockNotSatisfied", "NetworkBlocked"})
"""The errors only the plugin raises (a strict mock fixture left unsatisfied, a refused host),
imported from the kit's error tree on first use."""


def __getattr__(name: str) -> Any:
    # Lazy, so that loading the plugin in every pytest run imports neither dsh_core nor the mock.
    if name == "CassetteFixture":
        from ._cassette import CassetteFixture

        return CassetteFixture
    if name in _LAZY:
        from . import _support

        return getattr(_support, name)
    if name in _LAZY_ERRORS:
        from .._errors import MockNotSatisfied, NetworkBlocked

        return {"MockNotSatisfied": MockNotSatisfied, "NetworkBlocked": NetworkBlocked}[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _AfterCall(Protocol):
    def after_call(self, error: BaseException | None) -> None: ...


_AFTER_CALL: Final[pytest.StashKey[list[_AfterCall]]] = pytest.StashKey()
_CALL_ERROR: Final[pytest.StashKey[BaseException | None]] = pytest.StashKey()
_SETTINGS: Final[pytest.StashKey[_Settings]] = pytest.StashKey()
_GUARD: Final[pytest.StashKey[_network.NetworkGuard]] = pytest.StashKey()
_REPLAY_NOTES: Final[pytest.StashKey[list[str]]] = pytest.StashKey()
_WARNINGS: Final[pytest.StashKey[list[str]]] = pytest.StashKey()


def _settings(config: pytest.Config) -> _Settings:
    settings = config.stash.get(_SETTINGS, None)
    if settings is None:
        settings = config.stash[_SETTINGS] = _read_settings(config)
    return settings


def pytest_addoption(parser: pytest.Parser) -> None:
    _add_options(parser)
    _baseline.add_options(
        parser.getgroup("dsh", "dsh-testkit: mock DeepSeek, cassettes and replay"), parser
    )


def pytest_configure(config: pytest.Config) -> None:
    for line in _MARKERS:
        config.addinivalue_line("markers", line)
    settings = _settings(config)
    if settings.record_mode != "none" and settings.live_requested and not settings.key_present:
        raise pytest.UsageError(
            f"--dsh-record-mode={settings.record_mode} with --dsh-live records from the live "
            f"DeepSeek API and needs a key in the environment variable {_API_KEY_ENV}, which is "
            "not set; set it, or drop --dsh-live to record from the in-process mock"
        )
    policy = _network.NetworkPolicy(
        block_all=settings.block_network,
        allowed_hosts=settings.allowed_hosts,
        live=settings.live,
    )
    config.stash[_GUARD] = _network.NetworkGuard(policy).install()
    _baseline.configure(config)


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
        reason = f"dsh_live: --dsh-live is given but ${_API_KEY_ENV} is not set"
    else:
        reason = f"dsh_live: needs the live DeepSeek API; run with --dsh-live and ${_API_KEY_ENV}"
    for item in items:
        if item.get_closest_marker("dsh_live") is not None:
            item.add_marker(pytest.mark.skip(reason=reason))


def _uses_server(item: pytest.Item) -> bool:
    return "dsh_mock_server" in getattr(item, "fixturenames", ())


def _lenient(item: pytest.Item) -> bool:
    return item.get_closest_marker("dsh_lenient") is not None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    # The session's server is shared; each test that uses it starts from a clean mock, strict
    # unless the test is lenient.
    server = item.config.stash.get(_SERVER, None)
    if server is not None and _uses_server(item):
        _reset_server(server, lenient=_lenient(item))


def _reset_server(server: MockServer, *, lenient: bool) -> None:
    from ._support import make_strict

    server.mock.reset()
    if not lenient:
        make_strict(server.mock)


def _mocks_of(item: pytest.Item) -> list[tuple[str, Any]]:
    """The mocks a test used: ``(fixture name, MockDeepSeek)``."""
    mocks: list[tuple[str, Any]] = []
    fixture = item.stash.get(_MOCK, None)
    if fixture is not None:
        mocks.append(("dsh_mock", fixture.mock))
    server = item.config.stash.get(_SERVER, None)
    if server is not None and _uses_server(item):
        mocks.append(("dsh_mock_server", server.mock))
    return mocks


def _after_mocks(item: pytest.Item, error: BaseException | None) -> None:
    """What the plugin tells about the test's mocks: warnings from their logs (in the run's
    summary) and, when the test failed, the requests they refused and why (in its report)."""
    from ._strict import notes_of

    warnings, refused = notes_of(_mocks_of(item))
    item.config.stash.setdefault(_WARNINGS, []).extend(f"{item.nodeid} {w}" for w in warnings)
    if error is not None and refused:
        item.add_report_section("call", "dsh-testkit: requests the mock DeepSeek refused", refused)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    __tracebackhide__ = True
    server = item.config.stash.get(_SERVER, None)
    if server is not None and _uses_server(item) and not _lenient(item):
        # (the first test to use the server created it after pytest_runtest_setup ran)
        from ._support import make_strict

        make_strict(server.mock)
    guard = item.config.stash.get(_GUARD, None)
    refused_before = len(guard.refused) if guard is not None else 0
    try:
        result = yield
    except BaseException as error:
        item.stash[_CALL_ERROR] = error
        _after_mocks(item, error)
        for hook in item.stash.get(_AFTER_CALL, []):
            hook.after_call(error)
        refused = guard.refused_since(refused_before) if guard is not None else []
        if refused and isinstance(error, Exception) and error is not refused[0]:
            # The test failed on a symptom (an SDK's APIConnectionError); show the cause.
            raise refused[0] from error
        raise
    item.stash[_CALL_ERROR] = None
    _after_mocks(item, None)
    try:
        _check_mocks(item)
        if guard is not None:
            refused = guard.refused_since(refused_before)
            if refused:
                # A live DeepSeek call was refused and the test passed anyway: a client
                # swallowed the refusal (a retry loop, an error result), or the test caught it.
                # Either way the test reached for the live API without --dsh-live.
                raise refused[0]
    except BaseException as error:
        # The test fails here, after its body: it is a failing test all the same, so its
        # cassette records nothing (a good recording is never replaced by this one).
        item.stash[_CALL_ERROR] = error
        for hook in item.stash.get(_AFTER_CALL, []):
            hook.after_call(error)
        raise
    for hook in item.stash.get(_AFTER_CALL, []):
        hook.after_call(None)
    return result


def _check_mocks(item: pytest.Item) -> None:
    """After a passing test body: the strict check of the mock fixtures it used (not while its
    cassette replays: then no mock is asked, and what was scripted is noted instead)."""
    __tracebackhide__ = True
    if _lenient(item):
        return
    fixture = item.stash.get(_MOCK, None)
    if fixture is not None:
        unmet = fixture.unmet()
        if unmet is not None:
            raise unmet
    server = item.config.stash.get(_SERVER, None)
    if server is not None and _uses_server(item):
        use = item.stash.get(_CASSETTE_USE, None)
        if use is not None and use.cassette is not None and not use.cassette.recording:
            scripted = len(server.mock.pending) + len(server.mock.routes)
            if scripted:
                item.config.stash.setdefault(_REPLAY_NOTES, []).append(
                    f"{item.nodeid}: {scripted} scripted answer{'' if scripted == 1 else 's'} "
                    f"of dsh_mock_server not used (cassette {use.path.name} replayed)"
                )
            return
        from ._strict import unmet_expectations

        unmet = unmet_expectations(server.mock)
        if unmet is not None:
            raise unmet


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    warnings = config.stash.get(_WARNINGS, [])
    if warnings:
        terminalreporter.section("dsh-testkit: mock warnings")
        terminalreporter.line(
            "The mock answered as scripted, but the live API would not have (see each line):"
        )
        for line in warnings:
            terminalreporter.line(f"  {line}")
    notes = config.stash.get(_REPLAY_NOTES, [])
    if notes:
        terminalreporter.section("dsh-testkit: mock scripts not used in replay")
        terminalreporter.line(
            "These tests scripted a mock while their cassette replayed (the cassette answers; "
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


def _dated_mock(config: pytest.Config) -> MockDeepSeek:
    """A fixture's mock (seed 0), dated as the ini's ``dsh_as_of`` and ``dsh_retired_models``
    say (a test may change either on its mock; a reset restores them)."""
    from ..mock import MockDeepSeek

    settings = _settings(config)
    return MockDeepSeek(seed=0, as_of=settings.as_of, retired_models=settings.retired_models)


@pytest.fixture
def dsh_mock(request: pytest.FixtureRequest) -> MockFixture:
    """A fresh in-process mock DeepSeek per test: script it with route() and push(), give clients .provider.

    No sockets, no key, no network.

    ``dsh_mock.route(last_user="weather", tools=["get_weather"]).reply(text="Sunny")`` answers
    requests by what they hold (respx's routes: matchers ``last_user``, ``tools``, ``model``,
    ``header``, ``thinking``, ``after_tool_result``, ``when``; ``.respond(entry | [entries] |
    callable)``; ``route.calls``, ``route.call_count``); ``dsh_mock.push(Reply(text="hi"),
    ErrorReply(status=429))`` scripts answers in order (from ``dsh_testkit.mock``). Routes
    answer first, then the ordered script. Strict like respx: a request nothing scripted is
    refused at the call (a 410 ``MOCK_SCRIPT_EXHAUSTED`` naming it, which the client sees), and
    a passing test fails with ``MockNotSatisfied`` naming it and any scripted entry or route
    left unused; opt out with ``dsh_mock.lenient()`` or ``@pytest.mark.dsh_lenient`` (then the
    deterministic default reply answers). In thinking mode a reply scripted without reasoning
    gets a short generated one, as the live API always reasons. ``dsh_mock.replaying`` tells
    whether the test's cassette replays (then the mock is never asked).
    ``dsh_mock.provider`` is a ``DeepSeekProvider`` answered by it;
    ``dsh_mock.transport("httpx2")`` is a ``MockTransport`` for any other client (the openai
    and anthropic SDKs use httpx2); ``dsh_mock.requests`` is what it received; ``dsh_mock.mock``
    the ``MockDeepSeek`` itself. A fresh one per test (seed 0), dated as the ini's ``dsh_as_of``
    and ``dsh_retired_models`` say (default: the machine's clock, retired model ids warned about).
    """
    from ._support import MockFixture

    fixture = MockFixture(
        _dated_mock(request.config),
        strict=request.node.get_closest_marker("dsh_lenient") is None,
    )
    _stash(request)[_MOCK] = fixture
    return fixture


@pytest.fixture(scope="session")
def dsh_mock_server(request: pytest.FixtureRequest) -> Iterator[MockServer]:
    """The mock DeepSeek on a loopback port for the session: .base_url for any client, .mock.

    A ``dsh_testkit.mock.MockServer``.

    ``dsh_mock_server.base_url`` (``http://127.0.0.1:<port>``) is a DeepSeek base URL for any
    client in any language; ``.anthropic_base_url`` the Anthropic-format one; ``.mock`` the
    ``MockDeepSeek`` to script (``.mock.route(...)``, ``.mock.push(...)``) and inspect
    (``.mock.requests``). The port is free and chosen by the OS, so each pytest-xdist worker
    gets its own server. The mock is reset before each test that uses it (routes and script
    dropped) and is strict as ``dsh_mock`` is (a request nothing scripted is refused at the
    call; scripted entries or routes left unused fail the test; ``@pytest.mark.dsh_lenient``
    opts out). Record through it with ``dsh_cassette``: loopback origins are filed as one, so
    the cassette replays whatever port the server gets next time. The cache doctor's live
    report of the requests it received is at ``/_dsh/report``, the Cache Explorer at
    ``/_dsh/explorer``. It answers requests addressed to a loopback name only (a web page cannot
    reach it through a name of its own); the ini option ``dsh_server_allow_hosts`` adds names.
    """
    from ..explorer import live_pages
    from ..mock import MockServer, MockServerError

    try:
        server = MockServer(
            _dated_mock(request.config),
            pages=live_pages,
            allow_hosts=request.config.getini("dsh_server_allow_hosts"),
        ).start()
    except MockServerError as exc:
        raise pytest.UsageError(f"dsh_server_allow_hosts: {exc}") from None
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

    A ``dsh_testkit.scrub.ScrubRules`` (header names, query names, JSON keys, JSON paths,
    regexes) that every cassette of the test applies on top of the built-in rules. Override it
    in a ``conftest.py`` to add rules in code::

        @pytest.fixture
        def dsh_scrub(dsh_scrub):
            return dsh_scrub.merged(ScrubRules(headers=frozenset({"x-team-token"})))
    """
    from .._errors import ScrubRuleError
    from ..scrub._rules import ScrubRules

    settings = _settings(request.config)
    if settings.scrub_table is None:
        return ScrubRules()
    try:
        return ScrubRules.from_mapping(settings.scrub_table, where=settings.scrub_source)
    except ScrubRuleError as exc:
        pytest.fail(f"ScrubRuleError: {exc}", pytrace=False)


@pytest.fixture
def dsh_cassette_config() -> dict[str, Any]:
    """Options for the test's cassette, as pytest-recording's vcr_config: override it.

    A dict (``{}`` by default); override it in a ``conftest.py`` or a module (any scope), and
    give one test other keys with ``@pytest.mark.dsh_cassette(**options)`` (the marker's win):

    - ``record_mode``: this test's record mode (``--dsh-record-mode`` on the command line wins;
      refused under ``CI=true`` unless ``--dsh-record-in-ci``);
    - ``match_on``: what must equal a recording's, from ``method``, ``uri``, ``scheme``,
      ``host``, ``port``, ``path``, ``query``, ``body`` (canonical JSON), ``headers``, or vcrpy
      matcher callables (default ``("method", "uri", "body")``);
    - ``ignore_json_paths``: volatile JSON fields left out of the body comparison
      (``["metadata.request_id", "messages[*].ts"]``), still recorded;
    - ``before_record_request`` / ``before_record_response``: vcrpy's hooks (``None`` leaves a
      request out of the cassette, or a response unrecorded); secrets are scrubbed after them;
    - ``rewrite_origin``: ``{live: recorded}`` origins (a gateway stored as the API's URL; the
      ini's ``dsh_rewrite_origin`` too); ``loopback_as_one`` (default ``True``): every loopback
      origin is stored and matched as ``http://127.0.0.1``, so recordings through
      ``dsh_mock_server`` replay whatever its port;
    - ``allow_playback_repeats``; ``scrub`` (``ScrubRules`` or a ``[tool.dsh_testkit.scrub]``
      -like table), ``filter_headers``, ``filter_query_parameters`` (added to ``dsh_scrub``).
    """
    return {}


@pytest.fixture
def dsh_cassette(
    request: pytest.FixtureRequest,
    dsh_mock: MockFixture,
    dsh_scrub: ScrubRules,
    dsh_cassette_config: dict[str, Any],
) -> Iterator[Cassette]:
    """Replays (or records) the test's HTTP traffic from cassettes/<module>/<test>.yaml.

    Also activated by ``@pytest.mark.dsh_cassette`` alone.

    Every httpx/httpx2 request made during the test meets it (and, through vcrpy, requests,
    urllib3 and aiohttp ones). The file is ``<cassette dir>/<module>/<test name>.yaml``, or
    ``<cassette dir>/<name>.yaml`` with ``@pytest.mark.dsh_cassette(name)``; the cassette dir is
    ``--dsh-cassette-dir``, the ini ``dsh_cassette_dir``, or ``cassettes/`` beside the test
    module. ``--dsh-record-mode`` (pytest-recording's modes): ``none`` (default) replays only
    and never writes; ``once`` records a cassette that does not exist yet; ``new_episodes``
    records requests without a recording; ``all`` records every request; ``rewrite``
    re-records from scratch. Under ``CI=true`` every mode but ``none`` is refused, whoever asks
    (flag, ini, marker, ``dsh_cassette_config``), unless ``--dsh-record-in-ci``.
    ``dsh_cassette.recording`` tells whether this test may record: script the mocks only then
    (a script pushed while replaying is listed in the run's summary). Recordings come from
    ``dsh_mock`` (a client on ``https://api.deepseek.com``) or ``dsh_mock_server`` (a client on
    its ``base_url``: loopback origins are filed as ``http://127.0.0.1``, so the recording
    replays whatever port the server gets), or from the live API with ``--dsh-live`` and
    ``DEEPSEEK_API_KEY``. The test fails with ``CassetteMismatch`` (naming the closest
    recording and what differs) on an unrecorded request, even one a client swallowed, and with
    ``CassetteNotFullyPlayed`` when a recording was never requested. A failing test records
    nothing. Secrets are scrubbed with the built-in rules and ``dsh_scrub``'s. Options:
    ``dsh_cassette_config``. Yields the ``dsh_testkit.cassettes.Cassette``.
    """
    from .._errors import TestkitError
    from ..cassettes import CassetteConfig
    from ..cassettes._api import normalize_mode
    from ._cassette import CassetteFixture, CassetteSettings, cassette_options, cassette_path

    settings = _settings(request.config)
    marker = request.node.get_closest_marker("dsh_cassette")
    failure: str | None = None
    try:
        options = cassette_options(
            dsh_cassette_config,
            tuple(marker.args) if marker is not None else (),
            dict(marker.kwargs) if marker is not None else {},
        )
    except TestkitError as exc:
        failure = f"{type(exc).__name__}: {exc}"
    if failure is not None:
        pytest.fail(failure, pytrace=False)
    mode, asked_by = settings.record_mode, ""
    if settings.mode_source != "--dsh-record-mode" and options.record_mode is not None:
        mode, asked_by = options.record_mode, options.record_mode_source
    if settings.ci and not settings.record_in_ci and mode != "none":
        pytest.fail(f"RecordingRefused: {_ci_refusal(mode, asked_by)}", pytrace=False)
    directory = settings.cassette_dir or _module_dir(request) / _DEFAULT_DIR_NAME
    try:
        path = cassette_path(
            directory=directory,
            module_path=Path(request.node.path),
            test_name=_test_name(request.node),
            marker_name=options.name,
        )
        config = options.config
        if settings.rewrite_origin:
            config = CassetteConfig(rewrite_origin=settings.rewrite_origin).merged(config)
        if dsh_scrub != type(dsh_scrub)():
            config = config.merged(CassetteConfig(scrub=dsh_scrub))
    except TestkitError as exc:
        failure = f"{type(exc).__name__}: {exc}"
    except ValueError as exc:  # the cassette name is not a relative path
        failure = str(exc)
    if failure is not None:
        pytest.fail(failure, pytrace=False)

    def server_mock() -> Any:
        server = request.config.stash.get(_SERVER, None)
        return server.mock if server is not None and _uses_server(request.node) else None

    use = CassetteFixture(
        path,
        CassetteSettings(mode=normalize_mode(mode), live=settings.live, config=config),
        mock=dsh_mock,
        test_id=request.node.nodeid,
        server_mock=server_mock,
    )
    try:
        cassette = use.start()
    except TestkitError as exc:
        # failed outside the handler: the report shows the error once, not chained twice
        failure = f"{type(exc).__name__}: {exc}"
    if failure is not None:
        pytest.fail(failure, pytrace=False)
    _after_call(request, use)
    _stash(request)[_CASSETTE_USE] = use
    try:
        yield cassette
    finally:
        use.close(_call_error(request))
        if dsh_mock.replaying and dsh_mock.pushed:
            request.config.stash.setdefault(_REPLAY_NOTES, []).append(
                f"{request.node.nodeid}: {dsh_mock.pushed} scripted answer"
                f"{'' if dsh_mock.pushed == 1 else 's'} not used (cassette {path.name} replayed)"
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
    from ._support import ReplayFactory

    factory = ReplayFactory(_module_dir(request))
    _after_call(request, factory)
    return factory


@pytest.fixture
def dsh_capture() -> Iterator[RequestCapture]:
    """Captures every request any httpx/httpx2 client sends in the test (.requests, in order).

    Works for agents you did not write (the openai SDK, pydantic-ai, your own loop) without
    touching their clients. ``dsh_capture.requests`` holds ``CapturedRequest``s (method, URL,
    redacted headers, exact body bytes, ``.json``). The capture goes to the cache doctor as
    is: ``dsh_testkit.doctor.assert_prefix_stable(dsh_capture)`` fails with
    ``PrefixInstability`` unless each chat request extends the one it continues (same model,
    tools and system prompt, earlier messages untouched), as a prefix cache needs;
    ``assert_cache_friendly(dsh_capture)`` names the cause of each lost cache hit.
    """
    from ..capture import capture_requests

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
    from ._support import AgentFactory

    def default_provider() -> Any:
        return request.getfixturevalue("dsh_mock").provider

    factory = AgentFactory(default_provider)
    try:
        yield factory
    finally:
        factory.close()
