"""The goldens are byte-stable, and stale ones fail the run.

The scenario suite is copied to fresh checkouts and run in other working directories (separate
pytest processes, as a developer or CI would): regenerated there, every golden equals the
committed one byte for byte; an update run over unchanged goldens rewrites nothing; and a golden
that no test uses fails the run (syrupy's unused-snapshot check, which is on by default and must
stay on: ``--snapshot-warn-unused`` or ``--snapshot-disable-unused`` would turn it off).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_testkit.golden._transcript import TRANSCRIPT_FORMAT, TRANSCRIPT_FORMAT_VERSION
from dsh_testkit.golden._wire import WIRE_FORMAT_VERSION

SUITE = Path(__file__).resolve().parent
WIRE_CASSETTES = SUITE.parents[1] / "cassettes" / "scenarios"
GOLDENS = SUITE / "__snapshots__"

# The project's pytest settings that matter here (pyproject.toml is not part of the copy).
PYTEST_INI = """\
[pytest]
addopts = -p no:cacheprovider --strict-markers --strict-config
filterwarnings = error
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
"""


def _checkout(base: Path, *, with_goldens: bool) -> Path:
    """A copy of the scenario suite as ``<base>/checkout/tests/scenarios``."""
    root = base / "checkout"
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "__init__.py").write_text("", encoding="utf-8")
    skipped = ["__pycache__", Path(__file__).name]
    if not with_goldens:
        skipped.append("__snapshots__")
    shutil.copytree(SUITE, root / "tests" / "scenarios", ignore=shutil.ignore_patterns(*skipped))
    shutil.copytree(WIRE_CASSETTES, root / "cassettes" / "scenarios")
    (root / "pytest.ini").write_text(PYTEST_INI, encoding="utf-8")
    return root


def _pytest(root: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cwd.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-c",
            str(root / "pytest.ini"),
            "--rootdir",
            str(root),
            *args,
        ],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _tree(directory: Path) -> dict[str, bytes]:
    return {
        p.relative_to(directory).as_posix(): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def test_committed_goldens_exist_and_carry_their_format_version() -> None:
    goldens = _tree(GOLDENS)
    transcripts = [name for name in goldens if name.endswith(".transcript.txt")]
    requests = [name for name in goldens if name.endswith(".requests.jsonc")]
    assert len(transcripts) == len(requests) >= 16
    for name in transcripts:
        header = f"# {TRANSCRIPT_FORMAT} · format {TRANSCRIPT_FORMAT_VERSION}\n"
        assert goldens[name].startswith(header.encode()), name
    for name in requests:
        assert goldens[name].startswith(
            f'{{\n  "format": "dsh-testkit wire requests",\n  "version": {WIRE_FORMAT_VERSION},\n'.encode()
        ), name


@pytest.mark.slow
def test_goldens_regenerate_byte_identical_in_other_directories(tmp_path: Path) -> None:
    # Run A: a checkout without goldens, run from an unrelated directory, writes them afresh.
    fresh = _checkout(tmp_path / "a", with_goldens=False)
    run = _pytest(
        fresh, tmp_path / "elsewhere-a", str(fresh / "tests" / "scenarios"), "--snapshot-update"
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert _tree(fresh / "tests" / "scenarios" / "__snapshots__") == _tree(GOLDENS)

    # Run B: a checkout with the committed goldens, from another directory: nothing is rewritten.
    kept = _checkout(tmp_path / "b", with_goldens=True)
    goldens = kept / "tests" / "scenarios" / "__snapshots__"
    before = {p: p.stat().st_mtime_ns for p in goldens.rglob("*") if p.is_file()}
    run = _pytest(
        kept, tmp_path / "elsewhere-b", str(kept / "tests" / "scenarios"), "--snapshot-update"
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "updated" not in run.stdout and "generated" not in run.stdout, run.stdout
    assert {p: p.stat().st_mtime_ns for p in goldens.rglob("*") if p.is_file()} == before
    assert _tree(goldens) == _tree(GOLDENS)


@pytest.mark.slow
def test_a_golden_no_test_uses_fails_the_run(tmp_path: Path) -> None:
    root = _checkout(tmp_path, with_goldens=True)
    scenario = root / "tests" / "scenarios" / "test_plain_chat.py"
    orphan = (
        root
        / "tests"
        / "scenarios"
        / "__snapshots__"
        / "test_plain_chat"
        / "test_gone.transcript.txt"
    )
    orphan.write_bytes(b"# dsh-testkit transcript \xc2\xb7 format 1\n")

    run = _pytest(root, tmp_path / "elsewhere", str(scenario))
    assert run.returncode != 0, run.stdout
    assert "1 snapshot unused" in run.stdout, run.stdout

    # --snapshot-update deletes it, and then the run passes
    run = _pytest(root, tmp_path / "elsewhere", str(scenario), "--snapshot-update")
    assert run.returncode == 0, run.stdout + run.stderr
    assert not orphan.exists()
