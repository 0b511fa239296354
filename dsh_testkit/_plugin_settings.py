"""The pytest plugin's settings: what the command line, the ini file, ``pyproject.toml`` and
the environment decide for a run, and the report-header line that says so.

Imported by the plugin at start-up, so it imports only pytest and the standard library.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pytest

from ._network import parse_hosts

__all__ = [
    "API_KEY_ENV",
    "DEFAULT_DIR_NAME",
    "OLD_MODE_NAMES",
    "RECORD_MODES",
    "Settings",
    "cassette_test_name",
    "read_settings",
    "report_header",
]

API_KEY_ENV: Final = "DEEPSEEK_API_KEY"
"""The one place a live key is read from: ``dsh_core.providers.deepseek.API_KEY_ENV``, spelled
here because the plugin imports no ``dsh_core`` at start-up (a test keeps the two equal)."""
RECORD_MODES: Final = ("none", "once", "new_episodes", "all", "rewrite")
"""The cassette record modes (``dsh_testkit.cassettes.RECORD_MODES``), safest first."""
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


def _is_ci() -> bool:
    return os.environ.get(_CI_ENV, "").strip().lower() in ("1", "true", "yes", "on")


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """What this run's command line and ini file decided (``config.stash``; never the key)."""

    record_mode: str
    """The record mode in use (one of :data:`RECORD_MODES`)."""
    mode_source: str
    """Where it came from: ``--dsh-record-mode``, ``ini``, ``CI`` or ``default``."""
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
    elif _is_ci():
        mode, source = "none", "CI"
    elif ini_mode:
        mode, source = ini_mode, "ini"
    else:
        mode, source = "none", "default"
    mode = OLD_MODE_NAMES.get(mode, mode)
    if mode not in RECORD_MODES:
        raise pytest.UsageError(
            f"dsh_record_mode = {ini_mode!r} in the ini file is not a record mode; use one of "
            f"{', '.join(RECORD_MODES)}"
        )
    block = config.getoption("dsh_block_network")
    scrub_table, scrub_source = _scrub_table(config)
    settings = Settings(
        record_mode=mode,
        mode_source=source,
        block_network=bool(config.getini("dsh_block_network") if block is None else block),
        allowed_hosts=parse_hosts(
            [*config.getini("dsh_allowed_hosts"), *config.getoption("dsh_allowed_hosts")]
        ),
        scrub_table=scrub_table,
        scrub_source=scrub_source,
        live_requested=bool(config.getoption("dsh_live")),
        key_present=bool(os.environ.get(API_KEY_ENV, "").strip()),
        cassette_dir=cassette_dir,
    )
    return settings


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
    if settings.mode_source == "CI":
        mode += " [CI=true]"
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
        source = ", recording from " + ("the live API" if settings.live else "the in-process mock")
    network = ""
    if settings.block_network:
        allowed = ", ".join(sorted(settings.allowed_hosts))
        network = "; network: blocked but loopback" + (f" and {allowed}" if allowed else "")
    return (
        f"dsh-testkit: record mode {mode}{source}; cassettes: {where}; live calls: {live}{network}"
    )


def cassette_test_name(node: Any) -> str:
    """``Class.test_name[param]`` from a node id (the part after the module).

    The async runner's parameter is left out (anyio parametrizes every test with
    ``anyio_backend``): the same test under pytest-asyncio or anyio uses the same cassette.
    """
    name = ".".join(str(node.nodeid).split("::")[1:]) or str(node.name)
    params = getattr(getattr(node, "callspec", None), "params", {})
    backend = params.get("anyio_backend")
    if backend is not None and name.endswith("]") and "[" in name:
        head, _, ids = name[:-1].partition("[")
        backend_id = backend if isinstance(backend, str) else str(backend[0])
        parts = ids.split("-")
        if backend_id in parts:
            parts.remove(backend_id)
        name = f"{head}[{'-'.join(parts)}]" if parts else head
    return name
