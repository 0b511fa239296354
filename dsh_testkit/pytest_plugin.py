"""The pytest plugin (entry point ``pytest11``): options, markers and fixtures.

Loaded by every pytest run where ``dsh-testkit`` is installed, so importing it stays light:
only pytest and the standard library at import; the mock, vcrpy and the core are imported by
the fixtures that need them (respx, syrupy and hypothesis not at all).

Options (group ``dsh``): ``--dsh-record-mode=none|missing|all`` (cassettes: replay only — the
default —, record what has no recording, or re-record everything), ``--dsh-live`` (allow live
DeepSeek calls; the key comes only from ``DEEPSEEK_API_KEY`` and is never printed),
``--dsh-cassette-dir`` (where cassettes live; the ini option ``dsh_cassette_dir`` sets a
default). Markers: ``dsh_cassette(name)`` and ``dsh_live``. Fixtures: ``dsh_mock``,
``dsh_mock_server``, ``dsh_cassette``, ``dsh_cassette_provider``, ``dsh_replay``,
``dsh_capture``, ``dsh_agent`` (``pytest --fixtures`` shows what each does).

Live calls are hard to make by accident: without ``--dsh-live`` nothing the plugin does
reaches the network: while a cassette is in use, a request to a non-loopback host that it
records is answered by the in-process mock, so recording needs no key and never goes live.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

import pytest

if TYPE_CHECKING:
    from dsh_core.providers import DeepSeekProvider

    from ._pytest_support import AgentFactory, CassetteFixture, MockFixture, ReplayFactory
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


API_KEY_ENV: Final = "DEEPSEEK_API_KEY"
"""The one place a live key is read from."""
RECORD_MODES: Final = ("none", "missing", "all")
_DEFAULT_DIR_NAME: Final = "cassettes"


class _AfterCall(Protocol):
    def after_call(self, error: BaseException | None) -> None: ...


_AFTER_CALL: Final[pytest.StashKey[list[_AfterCall]]] = pytest.StashKey()
_CALL_ERROR: Final[pytest.StashKey[BaseException | None]] = pytest.StashKey()
_SETTINGS: Final[pytest.StashKey[_Settings]] = pytest.StashKey()
_SERVER: Final[pytest.StashKey[MockServer]] = pytest.StashKey()
_CASSETTE_USE: Final[pytest.StashKey[CassetteFixture]] = pytest.StashKey()


@dataclass(frozen=True, slots=True, kw_only=True)
class _Settings:
    """What this run's command line and ini file decided (``config.stash``; never the key)."""

    record_mode: Literal["none", "missing", "all"]
    """``--dsh-record-mode``."""
    live_requested: bool
    """``--dsh-live`` was given."""
    key_present: bool
    """``DEEPSEEK_API_KEY`` is set (its value is never kept)."""
    cassette_dir: Path | None
    """``--dsh-cassette-dir`` (relative to where pytest was run) or the ini ``dsh_cassette_dir``
    (relative to the ini file); ``None``: a ``cassettes/`` folder beside each test module."""

    @property
    def live(self) -> bool:
        """Live calls are allowed: ``--dsh-live`` and a key."""
        return self.live_requested and self.key_present


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("dsh", "dsh-testkit: mock DeepSeek, cassettes and replay")
    group.addoption(
        "--dsh-record-mode",
        choices=RECORD_MODES,
        default="none",
        help="cassette record mode: none (default: replay only, an unrecorded request fails), "
        "missing (record requests that have no recording), all (re-record every cassette used)",
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
    parser.addini(
        "dsh_cassette_dir",
        "directory of cassettes, relative to the ini file (--dsh-cassette-dir overrides it)",
        default="",
    )


def _settings(config: pytest.Config) -> _Settings:
    settings = config.stash.get(_SETTINGS, None)
    if settings is not None:
        return settings
    option_dir = config.getoption("dsh_cassette_dir")
    ini_dir = str(config.getini("dsh_cassette_dir") or "")
    cassette_dir: Path | None = None
    if option_dir:
        cassette_dir = Path(config.invocation_params.dir, option_dir)
    elif ini_dir:
        base = config.inipath.parent if config.inipath is not None else config.rootpath
        cassette_dir = base / ini_dir
    settings = _Settings(
        record_mode=config.getoption("dsh_record_mode"),
        live_requested=bool(config.getoption("dsh_live")),
        key_present=bool(os.environ.get(API_KEY_ENV, "").strip()),
        cassette_dir=cassette_dir,
    )
    config.stash[_SETTINGS] = settings
    return settings


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "dsh_cassette(name): the cassette this test's dsh_cassette fixtures use: "
        "<cassette dir>/<name>.yaml instead of one named after the test",
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


def pytest_report_header(config: pytest.Config) -> str:
    settings = _settings(config)
    mode = {
        "none": "none (replay only)",
        "missing": "missing (record what has no recording)",
        "all": "all (re-record)",
    }[settings.record_mode]
    where = (
        str(settings.cassette_dir)
        if settings.cassette_dir is not None
        else f"'{_DEFAULT_DIR_NAME}/' beside each test module"
    )
    if settings.live:
        live = f"on (key from ${API_KEY_ENV})"
    elif settings.live_requested:
        live = f"off: --dsh-live given but ${API_KEY_ENV} is not set"
    else:
        live = "off"
    source = ""
    if settings.record_mode != "none":
        source = ", recording from " + ("the live API" if settings.live else "the in-process mock")
    return f"dsh-testkit: record mode {mode}{source}; cassettes: {where}; live calls: {live}"


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
    try:
        result = yield
    except BaseException as error:
        item.stash[_CALL_ERROR] = error
        for hook in item.stash.get(_AFTER_CALL, []):
            hook.after_call(error)
        raise
    item.stash[_CALL_ERROR] = None
    for hook in item.stash.get(_AFTER_CALL, []):
        hook.after_call(None)
    return result


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
def dsh_mock() -> MockFixture:
    """The mock DeepSeek, in process: no sockets, no key, no network.

    ``dsh_mock.push(Reply(text="hi"), ErrorReply(status=429))`` scripts answers (from
    ``dsh_testkit.mock``); unscripted requests get a deterministic default reply.
    ``dsh_mock.provider`` is a ``DeepSeekProvider`` answered by it;
    ``dsh_mock.transport("httpx2")`` is a ``MockTransport`` for any other client (the openai
    and anthropic SDKs use httpx2); ``dsh_mock.requests`` is what it received; ``dsh_mock.mock``
    the ``MockDeepSeek`` itself. A fresh one per test (seed 0).
    """
    from ._pytest_support import MockFixture

    return MockFixture()


@pytest.fixture(scope="session")
def dsh_mock_server(request: pytest.FixtureRequest) -> Iterator[MockServer]:
    """The mock DeepSeek on a loopback port (``dsh_testkit.mock.MockServer``), for the session.

    ``dsh_mock_server.base_url`` (``http://127.0.0.1:<port>``) is a DeepSeek base URL for any
    client in any language; ``.anthropic_base_url`` the Anthropic-format one; ``.mock`` the
    ``MockDeepSeek`` to script (``.mock.push(...)``) and inspect (``.mock.requests``). The
    port is free and chosen by the OS, so each pytest-xdist worker gets its own server. The mock
    is reset before each test that uses it.
    """
    from .mock import MockDeepSeek, MockServer

    server = MockServer(MockDeepSeek(seed=0)).start()
    request.config.stash[_SERVER] = server
    try:
        yield server
    finally:
        del request.config.stash[_SERVER]
        server.stop()


@pytest.fixture
def dsh_cassette(request: pytest.FixtureRequest, dsh_mock: MockFixture) -> Iterator[Cassette]:
    """The test's cassette: every httpx/httpx2 request made during the test meets it.

    The file is ``<cassette dir>/<module>/<test name>.yaml``, or ``<cassette dir>/<name>.yaml``
    with ``@pytest.mark.dsh_cassette(name)``; the cassette dir is ``--dsh-cassette-dir``, the
    ini ``dsh_cassette_dir``, or ``cassettes/`` beside the test module. ``--dsh-record-mode``:
    ``none`` (default) replays only and never writes; ``missing`` records requests without a
    recording; ``all`` re-records. Recordings come from the in-process mock (``dsh_mock``;
    script it first) unless ``--dsh-live`` and ``DEEPSEEK_API_KEY`` allow the live API. The
    test fails with ``CassetteMismatch`` (naming the closest recording and what differs) on an
    unrecorded request, even one a client swallowed, and with ``CassetteNotFullyPlayed`` when
    a recording was never requested. A failing test records nothing. Yields the
    ``dsh_testkit.cassettes.Cassette``.
    """
    from ._pytest_support import CassetteFixture, CassetteSettings, cassette_path
    from .cassettes import CassetteError

    settings = _settings(request.config)
    marker = request.node.get_closest_marker("dsh_cassette")
    name: str | None = None
    if marker is not None:
        if len(marker.args) != 1 or marker.kwargs or not isinstance(marker.args[0], str):
            pytest.fail(
                f"@pytest.mark.dsh_cassette takes one cassette name (a string), got "
                f"args={marker.args!r} kwargs={marker.kwargs!r}",
                pytrace=False,
            )
        name = marker.args[0]
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
        CassetteSettings(mode=settings.record_mode, live=settings.live),
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


def _test_name(node: Any) -> str:
    """``Class.test_name[param]`` from a node id (the part after the module)."""
    return ".".join(str(node.nodeid).split("::")[1:]) or str(node.name)


@pytest.fixture
def dsh_cassette_provider(
    request: pytest.FixtureRequest, dsh_cassette: Cassette
) -> DeepSeekProvider:
    """A ``DeepSeekProvider`` that replays (or records) the test's cassette (see ``dsh_cassette``).

    It sends to ``https://api.deepseek.com`` with a placeholder key; in replay nothing leaves
    the process. When recording it is answered by ``dsh_mock`` (script it before the first
    call), or by the live API (``DEEPSEEK_BASE_URL`` or the default origin, the key from
    ``DEEPSEEK_API_KEY``) with ``--dsh-live``; requests are filed under the default origin
    either way and scrubbed of secrets before anything is written.
    """
    return _stash(request)[_CASSETTE_USE].provider()


@pytest.fixture
def dsh_replay(request: pytest.FixtureRequest) -> ReplayFactory:
    """A factory of replay providers: ``dsh_replay(log, *child_logs, strict=True)``.

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
    """Every request any httpx/httpx2 client sends during the test, in order.

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
    """A factory of ``dsh_core.Agent``s with dev-mode invariants on.

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
