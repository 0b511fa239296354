"""Offline installs for the install tests: a wheelhouse repacked from this environment, fresh
virtual environments, and an environment in which ``pip`` sees only that wheelhouse.

Installing needs the network, the suite runs without it: every distribution a fresh install
needs is already installed in the development environment, so :func:`wheelhouse` writes each
one back into a wheel (its files as its ``RECORD`` lists them, with a new ``RECORD``), the way a
package index would serve it. ``pip`` then installs from that folder alone (``PIP_NO_INDEX``),
as a user on a machine without network does with ``pip install --no-index --find-links DIR``.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterable, Mapping
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

_ROOT = Path(__file__).resolve().parents[1]

_SKIPPED_FILES = frozenset({"INSTALLER", "REQUESTED", "RECORD", "direct_url.json"})
"""Files an installer writes into ``.dist-info``; a wheel carries none of them (``RECORD`` is
written anew)."""


def closure(requirements: Iterable[str]) -> list[metadata.Distribution]:
    """The installed distributions ``requirements`` need, with everything they need in turn
    (markers evaluated for this interpreter, extras followed), sorted by name."""
    found: dict[str, metadata.Distribution] = {}
    pending = [(Requirement(text), "") for text in requirements]
    while pending:
        requirement, extra = pending.pop()
        # evaluate() fills in this interpreter's environment; only the extra is ours
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(requirement.name)
        dist = metadata.distribution(name)
        wanted = ["", *sorted(requirement.extras)]
        if name not in found:
            found[name] = dist
        else:
            wanted = sorted(requirement.extras)  # the base requirements are queued already
        for each in wanted:
            pending += [(Requirement(text), each) for text in dist.requires or ()]
    return [found[name] for name in sorted(found)]


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def _wheel_tag(wheel_file: str) -> str:
    """The compressed tag set of a ``WHEEL`` file's ``Tag:`` lines (``py2.py3-none-any``)."""
    tags = [
        line.split(":", 1)[1].strip() for line in wheel_file.splitlines() if line.startswith("Tag:")
    ]
    parts = [sorted({tag.split("-")[i] for tag in tags}) for i in range(3)]
    return "-".join(".".join(part) for part in parts)


def repack(dist: metadata.Distribution, into: Path) -> Path:
    """``dist`` (installed) written back as a wheel in ``into``."""
    files = [f for f in dist.files or () if f.parts[0] != ".."]  # scripts are remade on install
    info_dir = next(f.parts[0] for f in files if f.parts[0].endswith(".dist-info"))
    wheel_file = Path(str(dist.locate_file(f"{info_dir}/WHEEL"))).read_text(encoding="utf-8")
    name = re.sub(r"[-_.]+", "_", dist.metadata["Name"]).lower()
    target = into / f"{name}-{dist.version}-{_wheel_tag(wheel_file)}.whl"
    record: list[str] = []
    # Stored, not deflated: a wheel is a zip either way (pip reads both), and compressing ~100 MB
    # that pip unpacks a moment later on the same disk was two thirds of a wheelhouse's time.
    with zipfile.ZipFile(target, "w", zipfile.ZIP_STORED) as wheel:
        for file in sorted(files, key=str):
            if "__pycache__" in file.parts or file.suffix == ".pyc":
                continue
            if file.parts[0] == info_dir and file.name in _SKIPPED_FILES:
                continue
            data = Path(str(dist.locate_file(file))).read_bytes()
            wheel.writestr(file.as_posix(), data)
            record.append(f"{file.as_posix()},{_record_hash(data)},{len(data)}")
        record.append(f"{info_dir}/RECORD,,")
        wheel.writestr(f"{info_dir}/RECORD", "\n".join(record) + "\n")
    return target


def wheelhouse(requirements: Iterable[str], into: Path) -> Path:
    """A folder of wheels for ``requirements`` and all they need, from this environment, and
    pip's (:func:`fresh_venv` installs it)."""
    into.mkdir(parents=True, exist_ok=True)
    for dist in closure([*requirements, "pip"]):
        if dist.read_text("direct_url.json") and "editable" in (
            dist.read_text("direct_url.json") or ""
        ):
            continue  # this checkout, installed editable: the tests build its wheel themselves
        repack(dist, into)
    return into


def fresh_venv(path: Path, wheels: Path) -> Path:
    """A new virtual environment at ``path`` with nothing installed but pip, taken from
    ``wheels`` (which must hold it; faster than ``ensurepip``); its ``bin``."""
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(path)], check=True, timeout=120
    )
    bin_dir = path / "bin"
    subprocess.run(
        [
            *(sys.executable, "-m", "pip", "--python", str(bin_dir / "python")),
            *("install", "--quiet", "--no-index", "--find-links", str(wheels), "pip"),
        ],
        env=offline_env(bin_dir, wheels),
        check=True,
        timeout=300,
    )
    return bin_dir


def offline_env(bin_dir: Path, wheels: Path, **extra: str) -> Mapping[str, str]:
    """The environment of a shell in the fresh venv ``bin_dir`` whose ``pip`` sees only
    ``wheels``: no index, no configuration file of this machine, no network, and none of the
    variables a user's own machine would not have set (this run's ``CI``, which makes the plugin
    refuse recording, and any DeepSeek key or URL)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PIP_", "PYTEST_", "VIRTUAL_ENV", "PYTHON", "DEEPSEEK_")) and k != "CI"
    }
    env.update(
        PATH=os.pathsep.join([str(bin_dir), env.get("PATH", "")]),
        VIRTUAL_ENV=str(bin_dir.parent),
        PIP_CONFIG_FILE=os.devnull,
        PIP_NO_INDEX="1",
        PIP_FIND_LINKS=str(wheels),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        # Byte-compiling every installed module is most of an install's time (~40 s of the
        # LangGraph guide's ~45 s install), and changes nothing a test looks at: Python compiles
        # what it imports. The variable is PIP_COMPILE=0: pip reads an environment variable as
        # the value of the option it names, so PIP_NO_COMPILE=1 sets --no-compile's destination
        # (`compile`) to 1, which turns compiling on.
        PIP_COMPILE="0",
        **extra,
    )
    return env


def checkout(into: Path) -> Path:
    """This repository's files as a user's copy of it holds them (tracked and new files, without
    the virtual environment and caches)."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=_ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = _ROOT / name
        if source.is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / name)
    return into


def commands(block: str) -> list[str]:
    """A shell block's command lines as a guide prints them (comments and blank lines out)."""
    lines = [line.split("  #", 1)[0].strip() for line in block.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def sh(command: str, cwd: Path, env: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    """``command`` run by bash (stopping at the first failing line) in ``cwd`` with ``env``."""
    return subprocess.run(
        ["bash", "-e", "-c", command],
        cwd=cwd,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
