"""The thinking guide's TypeScript example (docs/guides/thinking.md), run as printed with ``node
--test`` against a real ``dsh-testkit serve``, when npm can install the guide's pinned packages
(once per machine, into a cache folder: the only network use); it skips with npm's reason
otherwise. The guide's Python examples run in tests/test_docs.py."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

GUIDE = Path(__file__).resolve().parents[3] / "docs" / "guides" / "thinking.md"
TITLED = re.compile(r'^```(\w+) title="([^"]+)"\n(.*?)^```', re.S | re.M)
PACKAGES = {"ai": "6.0.333", "@ai-sdk/deepseek": "2.0.69", "zod": "4.6.7"}
"""The versions the guide names (ai 6 pairs with @ai-sdk/deepseek 2; both run on Node 20)."""


def files() -> dict[str, str]:
    return {name: code for _, name, code in TITLED.findall(GUIDE.read_text(encoding="utf-8"))}


def test_the_guide_names_the_versions_the_test_installs() -> None:
    text = GUIDE.read_text(encoding="utf-8")
    for name, version in PACKAGES.items():
        assert f"{name} {version}" in text, name
    assert set(files()) == {"thinking.test.mjs"}


def _node_modules() -> Path:
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.skip("node and npm are not installed on this machine")
    digest = hashlib.sha256(json.dumps(PACKAGES, sort_keys=True).encode()).hexdigest()[:12]
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    root = cache / "dsh-testkit-tests" / f"node-{digest}"
    if not (root / "node_modules" / "ai" / "package.json").exists():
        root.mkdir(parents=True, exist_ok=True)
        (root / "package.json").write_text('{"private": true}\n', encoding="utf-8")
        result = subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", *(f"{n}@{v}" for n, v in PACKAGES.items())],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if result.returncode != 0:
            pytest.skip(f"npm could not install {', '.join(PACKAGES)}: {result.stderr[-400:]}")
    return root / "node_modules"


@pytest.fixture(scope="module")
def serve() -> Iterator[str]:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dsh_testkit.cli",
            "serve",
            "--port",
            "0",
            "--on-exhausted",
            "error",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        assert base_url.startswith("http://127.0.0.1:"), base_url
        yield base_url
    finally:
        process.terminate()
        process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


@pytest.mark.slow
def test_the_vercel_ai_sdk_example_turns_thinking_off_and_passes_reasoning_back(
    serve: str, tmp_path: Path
) -> None:
    modules = _node_modules()
    (tmp_path / "thinking.test.mjs").write_text(files()["thinking.test.mjs"], encoding="utf-8")
    (tmp_path / "node_modules").symlink_to(modules, target_is_directory=True)
    environment = {k: v for k, v in os.environ.items() if k != "DEEPSEEK_API_KEY"}
    environment["DEEPSEEK_BASE_URL"] = serve
    result = subprocess.run(
        ["node", "--test", "thinking.test.mjs"],
        cwd=tmp_path,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"^# pass 2$", result.stdout, re.M), result.stdout
    assert re.search(r"^# fail 0$", result.stdout, re.M), result.stdout
