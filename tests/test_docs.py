"""The documentation builds, and every Python example in it runs as printed.

Each fenced ``python`` block of ``docs/**/*.md`` and ``README.md`` runs in a fresh temporary
directory: a block that defines ``test_`` functions runs under pytest as a user's test file
(with our plugin, as installed), any other block with ``python -W error``. A block opts out only
with a ``<!-- no-run: reason -->`` line right before it; ``<!-- continued -->`` right before a
block appends it to the previous block of the same page (one program shown in pieces).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [*sorted((ROOT / "docs").rglob("*.md")), ROOT / "README.md"]
FENCE = re.compile(r"^```python\n(.*?)^```", re.M | re.S)
USER_PYTEST_INI = """\
[pytest]
filterwarnings = error
asyncio_default_fixture_loop_scope = function
"""
"""A user's pytest settings: warnings are errors; pytest-asyncio (installed here) wants its loop
scope set, as its own warning asks every user to."""
MARKER = re.compile(r"<!--\s*(no-run|continued)(?::\s*(.*?))?\s*-->\s*$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Example:
    page: Path
    line: int
    code: str

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT).as_posix()}:{self.line}"


def _examples(page: Path) -> tuple[list[Example], list[str]]:
    """The runnable examples of a page, and its opt-outs (``line: reason``)."""
    text = page.read_text(encoding="utf-8")
    examples: list[Example] = []
    skipped: list[str] = []
    for match in FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        marker = MARKER.search(before)
        if marker and marker.group(1) == "no-run":
            skipped.append(f"{line}: {marker.group(2) or ''}")
            continue
        if marker and marker.group(1) == "continued":
            assert examples, f"{page}:{line}: '<!-- continued -->' needs an example before it"
            last = examples.pop()
            examples.append(Example(page=page, line=last.line, code=last.code + match.group(1)))
            continue
        examples.append(Example(page=page, line=line, code=match.group(1)))
    return examples, skipped


ALL = [example for page in PAGES for example in _examples(page)[0]]


def test_every_page_has_its_examples_found() -> None:
    assert len(ALL) >= 10, [e.id for e in ALL]
    for page in PAGES:
        for entry in _examples(page)[1]:
            reason = entry.split(":", 1)[1].strip()
            assert reason, f"{page.name}:{entry}: a no-run example must say why"


@pytest.mark.slow
@pytest.mark.parametrize("example", ALL, ids=lambda e: e.id)
def test_the_example_runs_as_printed(example: Example, tmp_path: Path) -> None:
    if re.search(r"^(async )?def test_", example.code, re.M):
        (tmp_path / "test_example.py").write_text(example.code, encoding="utf-8")
        (tmp_path / "pytest.ini").write_text(USER_PYTEST_INI, encoding="utf-8")
        pytest_command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        pytest_command.append("test_example.py")
        # A golden example writes its golden first, as a user does once, then must pass as is.
        runs = [pytest_command]
        if re.search(r"\bsnapshot\b", example.code):
            runs.insert(0, [*pytest_command, "--snapshot-update"])
    else:
        runs = [[sys.executable, "-W", "error", "-c", example.code]]
    for command in runs:
        result = subprocess.run(
            command, cwd=tmp_path, capture_output=True, text=True, timeout=180, check=False
        )
        assert result.returncode == 0, f"{example.id}\n{result.stdout}\n{result.stderr}"


@pytest.mark.slow
def test_the_site_builds_with_warnings_as_errors(tmp_path: Path) -> None:
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    assert mkdocs, "mkdocs is a dev dependency (pyproject.toml)"
    result = subprocess.run(
        [mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "reference" / "cli" / "index.html").is_file()
