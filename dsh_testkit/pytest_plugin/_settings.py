"""The pytest plugin's settings: what the command line, the ini file, ``pyproject.toml`` and
the environment decide for a run, and the report-header line that says so.

Imported by the plugin at start-up, so it imports only pytest and the standard library.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal

import pytest

from ._network import parse_hosts

__all__ = [
    "API_KEY_ENV",
    "DEFAULT_DIR_NAME",
    "LIVE_ORIGIN",
    "MARKERS",
    "MOCK_API_KEY",
    "OLD_MODE_NAMES",
    "RECORD_MODES",
    "Settings",
    "add_options",
    "ci_refusal",
    "is_ci",
    "read_settings",
    "report_header",
]

LIVE_ORIGIN: Final = "https://api.deepseek.com"
"""Where cassettes file their requests, whatever they were recorded against."""
MOCK_API_KEY: Final = "dsh-testkit-mock-key"
"""The key sent to the mock and in replay: any non-empty key will do, and this one is not
shaped like a real key, so nothing mistakes it for a secret."""

API_KEY_ENV: Final = "DEEPSEEK_API_KEY"
"""The one place a live key is read from: ``dsh_core.providers.deepseek.API_KEY_ENV``, spelled
here because the plugin imports no ``dsh_core`` at start-up (a test keeps the two equal)."""
RECORD_MODES: Final = ("none", "once", "new_episodes", "all", "rewrite")
"""The cassette record modes (``dsh_testkit.cassettes._api.RECORD_MODES``), safest first."""
OLD_MODE_NAMES: Final = {"missing": "new_episodes"}
DEFAULT_DIR_NAME: Final = "cassettes"
_CI_ENV: Final = "CI"
_MODE_HELP: Final = {
    "none": "none (replay only)",
    "once": "once (record a cassette that does not exist, then replay only)",
    "new_episodes": "new_episodes (record what has no recording)",
    "all": "all (record every request anew)",
    "rewrite": "rewrite (re-record each cassette from scratch)",
}


def is_ci() -> bool:
    """Whether this run is CI's (``CI`` set to ``true``, ``1``, ``yes`` or ``on``)."""
    return os.environ.get(_CI_ENV, "").strip().lower() in ("1", "true", "yes", "on")


_TRUE: Final = frozenset({"1", "true", "yes", "on", "y", "t"})
_FALSE: Final = frozenset({"0", "false", "no", "off", "n", "f", ""})


def _ini_bool(config: pytest.Config, name: str) -> bool:
    """An ini switch, read as pytest reads a ``bool`` ini value (declared a string: pytest's
    own error for another value says only "invalid truth value", naming neither the setting
    nor its file)."""
    value = str(config.getini(name)).strip()
    if value.lower() in _TRUE:
        return True
    if value.lower() in _FALSE:
        return False
    raise pytest.UsageError(
        f"{_ini_setting(config, name, repr(value))} is not true or false (write "
        f"{name} = true or {name} = false)"
    )


def _ini_setting(config: pytest.Config, name: str, value: str) -> str:
    """Where the ini setting ``name`` came from, for a message: ``-o name=…`` on the command
    line (or addopts) overrides the ini file."""
    overrides = getattr(config.option, "override_ini", None) or ()
    if any(str(o).split("=", 1)[0].strip() == name for o in overrides):
        return f"-o {name}={value} (the command line or addopts)"
    return f"{name} = {value} in {config.inipath or 'the ini file'}"


def ci_refusal(mode: str, asked_by: str) -> str:
    """Why a record mode is refused under ``CI=true``, and the two ways on."""
    return (
        f"record mode {mode!r} (asked by {asked_by}) is refused because CI=true: a CI run "
        "replays its cassettes and never records them (recording there would hide a missing "
        "or stale cassette behind a fresh recording). Record on your machine and commit the "
        "cassettes; in CI run replay only (leave the record mode out, or "
        "--dsh-record-mode=none), or pass --dsh-record-in-ci to record in CI on purpose"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """What this run's command line and ini file decided (``config.stash``; never the key)."""

    record_mode: str
    """The record mode in use (one of :data:`RECORD_MODES`)."""
    mode_source: str
    """Where it came from: ``--dsh-record-mode``, ``ini`` or ``default``."""
    block_network: bool
    """``--dsh-block-network`` (or the ini ``dsh_block_network``)."""
    allowed_hosts: frozenset[str]
    """``--dsh-allowed-hosts`` and the ini ``dsh_allowed_hosts``, lowercased."""
    scrub_table: Mapping[str, Any] | None
    """``[tool.dsh_testkit.scrub]`` of the project's ``pyproject.toml``, unvalidated."""
    scrub_source: str
    """Where ``scrub_table`` was read (for error messages)."""
    live_requested: bool
    """``--dsh-live`` was given."""
    key_present: bool
    """``DEEPSEEK_API_KEY`` is set (its value is never kept)."""
    cassette_dir: Path | None
    """``--dsh-cassette-dir`` (relative to where pytest was run) or the ini ``dsh_cassette_dir``
    (relative to the ini file); ``None``: a ``cassettes/`` folder beside each test module."""
    ci: bool = False
    """``CI=true``: every record mode but ``none`` is refused, unless :attr:`record_in_ci`."""
    record_in_ci: bool = False
    """``--dsh-record-in-ci``: recording in CI on purpose."""
    rewrite_origin: tuple[tuple[str, str], ...] = ()
    """The ini's ``dsh_rewrite_origin`` lines, as ``(live, recorded)`` origins."""
    as_of: str | None = None
    """The ini's ``dsh_as_of``: the date the mocks of ``dsh_mock`` and ``dsh_mock_server`` take
    every request to be made on; ``None``: the machine's clock."""
    retired_models: Literal["warn", "refuse"] = "warn"
    """The ini's ``dsh_retired_models``: what those mocks do with a retired model id."""

    @property
    def live(self) -> bool:
        """Live calls are allowed: ``--dsh-live`` and a key."""
        return self.live_requested and self.key_present


def read_settings(config: pytest.Config) -> Settings:
    """This run's settings from its command line, ini file, pyproject.toml and environment."""
    option_dir = config.getoption("dsh_cassette_dir")
    ini_dir = str(config.getini("dsh_cassette_dir") or "")
    cassette_dir: Path | None = None
    if option_dir:
        cassette_dir = Path(config.invocation_params.dir, option_dir)
    elif ini_dir:
        base = config.inipath.parent if config.inipath is not None else config.rootpath
        cassette_dir = base / ini_dir
    option_mode = config.getoption("dsh_record_mode")
    ini_mode = str(config.getini("dsh_record_mode") or "").strip()
    if option_mode:
        mode, source = option_mode, "--dsh-record-mode"
    elif ini_mode:
        mode, source = ini_mode, "ini"
    else:
        mode, source = "none", "default"
    mode = OLD_MODE_NAMES.get(mode, mode)
    if mode not in RECORD_MODES:
        raise pytest.UsageError(
            f"{_ini_setting(config, 'dsh_record_mode', repr(ini_mode))} is not a record mode; "
            f"use one of {', '.join(RECORD_MODES)}"
        )
    ci = is_ci()
    record_in_ci = bool(config.getoption("dsh_record_in_ci"))
    if ci and mode != "none" and not record_in_ci:
        asked_by = (
            f"--dsh-record-mode={mode} (the command line or addopts)"
            if source == "--dsh-record-mode"
            else _ini_setting(config, "dsh_record_mode", mode)
        )
        raise pytest.UsageError(ci_refusal(mode, asked_by))
    block = config.getoption("dsh_block_network")
    scrub_table, scrub_source = _scrub_table(config)
    as_of, retired = _model_dates(config)
    settings = Settings(
        record_mode=mode,
        mode_source=source,
        block_network=_ini_bool(config, "dsh_block_network") if block is None else bool(block),
        allowed_hosts=parse_hosts(
            [*config.getini("dsh_allowed_hosts"), *config.getoption("dsh_allowed_hosts")]
        ),
        scrub_table=scrub_table,
        scrub_source=scrub_source,
        live_requested=bool(config.getoption("dsh_live")),
        key_present=bool(os.environ.get(API_KEY_ENV, "").strip()),
        cassette_dir=cassette_dir,
        ci=ci,
        record_in_ci=record_in_ci,
        rewrite_origin=_origin_lines(config.getini("dsh_rewrite_origin")),
        as_of=as_of,
        retired_models=retired,
    )
    return settings


def _model_dates(config: pytest.Config) -> tuple[str | None, Literal["warn", "refuse"]]:
    """The ini's ``dsh_as_of`` and ``dsh_retired_models``, checked as the mock checks them."""
    as_of = str(config.getini("dsh_as_of") or "").strip() or None
    retired = str(config.getini("dsh_retired_models") or "").strip() or "warn"
    if retired not in ("warn", "refuse"):
        raise pytest.UsageError(
            f"{_ini_setting(config, 'dsh_retired_models', repr(retired))} is not warn or refuse"
        )
    if as_of is not None:
        from ..mock import MockDeepSeek, ScriptError

        try:
            MockDeepSeek(as_of=as_of)
        except ScriptError as error:
            raise pytest.UsageError(
                f"{_ini_setting(config, 'dsh_as_of', repr(as_of))} is not a date: {error}"
            ) from None
    return as_of, "refuse" if retired == "refuse" else "warn"


def _origin_lines(lines: list[str]) -> tuple[tuple[str, str], ...]:
    """The ini's ``LIVE -> RECORDED`` lines (origins are checked fully when a cassette opens)."""
    pairs = []
    for line in lines:
        live, arrow, recorded = line.partition("->")
        live, recorded = live.strip(), recorded.strip()
        origins = (live, recorded)
        if not arrow or not all(o.startswith(("http://", "https://")) for o in origins):
            raise pytest.UsageError(
                f"dsh_rewrite_origin: {line!r} is not 'LIVE -> RECORDED' (two origins, e.g. "
                "'http://gateway.local:8080/deepseek -> https://api.deepseek.com')"
            )
        pairs.append((live, recorded))
    return tuple(pairs)


def _scrub_table(config: pytest.Config) -> tuple[Mapping[str, Any] | None, str]:
    """``[tool.dsh_testkit.scrub]`` of the project's ``pyproject.toml`` (the ini file when it is
    one, else the one in the root directory)."""
    path = config.inipath if config.inipath and config.inipath.name == "pyproject.toml" else None
    path = path or config.rootpath / "pyproject.toml"
    where = f"{path} [tool.dsh_testkit.scrub]"
    if not path.is_file():
        return None, where
    import tomllib

    try:
        document = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise pytest.UsageError(f"cannot read {path}: {exc}") from None
    table = document.get("tool", {}).get("dsh_testkit", {}).get("scrub")
    if table is not None and not isinstance(table, dict):
        raise pytest.UsageError(f"{where} must be a table, got {table!r}")
    return table, where


def report_header(settings: Settings) -> str:
    """The line pytest prints under its own header: what this run will do."""
    mode = _MODE_HELP[settings.record_mode]
    if settings.ci:
        mode += (
            " [CI=true, recording allowed by --dsh-record-in-ci]"
            if settings.record_in_ci
            else " [CI=true: recording refused]"
        )
    where = (
        str(settings.cassette_dir)
        if settings.cassette_dir is not None
        else f"'{DEFAULT_DIR_NAME}/' beside each test module"
    )
    if settings.live:
        live = f"on (key from ${API_KEY_ENV})"
    elif settings.live_requested:
        live = f"off: --dsh-live given but ${API_KEY_ENV} is not set"
    else:
        live = "off"
    source = ""
    if settings.record_mode != "none":
        source = ", recording from " + ("the live API" if settings.live else "the mock DeepSeek")
    network = ""
    if settings.block_network:
        allowed = ", ".join(sorted(settings.allowed_hosts))
        network = "; network: blocked but loopback" + (f" and {allowed}" if allowed else "")
    return (
        f"dsh-testkit: record mode {mode}{source}; cassettes: {where}; live calls: {live}{network}"
    )


MARKERS: Final = (
    "dsh_cassette(name=None, **options): put the test under its cassette (no fixture needed): "
    "<cassette dir>/<module>/<test>.yaml, or <cassette dir>/<name>.yaml when named; options as "
    "the dsh_cassette_config fixture's (record_mode, match_on, ignore_json_paths, "
    "before_record_request, before_record_response, rewrite_origin, loopback_as_one, "
    "allow_playback_repeats, scrub, filter_headers, filter_query_parameters)",
    "dsh_lenient: the dsh_mock fixtures answer requests nothing scripted with the default reply "
    "and do not fail the test for them or for scripted replies and routes left unused",
    f"dsh_live: the test calls the live DeepSeek API; skipped unless --dsh-live is given "
    f"and ${API_KEY_ENV} is set",
)
"""The plugin's markers, as ``pytest --markers`` lists them."""


def add_options(parser: pytest.Parser) -> None:
    """The plugin's command-line options (group ``dsh``) and ini options."""
    group = parser.getgroup("dsh", "dsh-testkit: mock DeepSeek, cassettes and replay")
    group.addoption(
        "--dsh-record-mode",
        choices=(*RECORD_MODES, "missing"),
        default=None,
        help="cassette record mode, as in pytest-recording: none (replay only, an unrecorded "
        "request fails), once (record cassettes that do not exist yet), new_episodes (record "
        "requests that have no recording; 'missing' is its old name), all (record every "
        "request, never replay), rewrite (re-record each cassette from scratch). Default: the "
        "dsh_record_mode ini option, else none. With CI=true every mode but none is refused "
        "(see --dsh-record-in-ci)",
    )
    group.addoption(
        "--dsh-record-in-ci",
        action="store_true",
        default=False,
        help="allow recording although CI=true (by default a CI run refuses every record mode "
        "but none, whether the flag, the ini, a marker or dsh_cassette_config asks for it)",
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
    parser.addini(
        "dsh_record_mode",
        "default cassette record mode (--dsh-record-mode overrides it; refused under CI=true "
        "unless --dsh-record-in-ci)",
        default="",
    )
    parser.addini(
        "dsh_block_network",
        "block the network as --dsh-block-network does: true or false",
        type="string",
        default="false",
    )
    parser.addini(
        "dsh_allowed_hosts",
        "hosts reachable under --dsh-block-network (loopback always is)",
        type="args",
        default=[],
    )
    parser.addini(
        "dsh_server_allow_hosts",
        "host names dsh_mock_server answers besides loopback ones (its Host check against DNS "
        "rebinding, as serve --allow-host; .example.test: the domain and its subdomains)",
        type="args",
        default=[],
    )
    parser.addini(
        "dsh_cassette_dir",
        "directory of cassettes, relative to the ini file (--dsh-cassette-dir overrides it)",
        default="",
    )
    parser.addini(
        "dsh_as_of",
        "the date dsh_mock and dsh_mock_server take every request to be made on (ISO 8601: "
        "2026-05-01 or 2026-05-01T09:30:00Z; default: the machine's clock): model ids the model "
        "table says were not served yet are refused as unknown",
        default="",
    )
    parser.addini(
        "dsh_retired_models",
        "what dsh_mock and dsh_mock_server do with a model id requested after its retirement: "
        "warn (served, the warning shown in the run's summary; the default) or refuse (400 "
        "Model Not Exist, as the API answers an unknown model)",
        default="",
    )
    parser.addini(
        "dsh_rewrite_origin",
        "origins cassettes file under another, one 'LIVE -> RECORDED' a line (a gateway URL "
        "stored as https://api.deepseek.com); loopback origins are always stored as one",
        type="linelist",
        default=[],
    )
