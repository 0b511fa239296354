"""The guide for agents outside Python, run as printed against a real ``dsh-testkit serve``: the
zero-install Node example always (when ``node`` is on the machine), the TypeScript example when
npm can install its packages, the Go example when ``go`` is installed. Each skips with the
reason when its toolchain is missing; none reaches the network but the npm install."""

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

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guides" / "other-languages.md"
TITLED = re.compile(r'^```(\w+) title="([^"]+)"\n(.*?)^```', re.S | re.M)
PACKAGES = {"openai": "6.49.0", "typescript": "7.0.2", "@types/node": "20.19.9"}
"""The guide's ``npm install openai@6 && npm install -D typescript@7 @types/node@20``, pinned."""
TSCONFIG = {
    "compilerOptions": {
        "target": "es2022",
        "module": "nodenext",
        "strict": True,
        "outDir": "dist",
        "types": ["node"],
    },
    "files": ["agent.ts", "agent.test.ts"],
}


def files() -> dict[str, str]:
    return {name: code for _, name, code in TITLED.findall(GUIDE.read_text(encoding="utf-8"))}


def test_the_guide_holds_every_example_file() -> None:
    assert set(files()) == {"agent.ts", "agent.test.ts", "smoke.mjs", "agent.go", "agent_test.go"}


@pytest.fixture(scope="module")
def serve() -> Iterator[str]:
    """``dsh-testkit serve --port 0 --on-exhausted error``, as the guide starts it."""
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


def run(
    command: list[str], cwd: Path, base_url: str, **env: str
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "DEEPSEEK_API_KEY"}
    environment.update(env, DEEPSEEK_BASE_URL=base_url)
    return subprocess.run(
        command, cwd=cwd, env=environment, capture_output=True, text=True, timeout=300, check=False
    )


def test_the_zero_install_node_example(serve: str, tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed on this machine")
    (tmp_path / "smoke.mjs").write_text(files()["smoke.mjs"], encoding="utf-8")
    result = run([node, "smoke.mjs"], tmp_path, serve)
    assert result.returncode == 0, result.stderr
    first, second = result.stdout.splitlines()
    assert first == "Hello from the mock. | reasoning: I can answer this directly."
    assert re.fullmatch(r"prompt tokens: \d+ cache hit: 0", second), second


def _node_modules() -> Path:
    """The pinned packages, installed once per machine into a cache folder (npm's registry is
    reached only here); skips with npm's reason when the install fails."""
    npm = shutil.which("npm")
    if npm is None or shutil.which("node") is None:
        pytest.skip("node and npm are not installed on this machine")
    digest = hashlib.sha256(json.dumps(PACKAGES, sort_keys=True).encode()).hexdigest()[:12]
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    root = cache / "dsh-testkit-tests" / f"node-{digest}"
    if not (root / "node_modules" / ".bin" / "tsc").exists():
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


@pytest.mark.slow
def test_the_typescript_example_with_the_openai_package(serve: str, tmp_path: Path) -> None:
    modules = _node_modules()
    for name in ("agent.ts", "agent.test.ts"):
        (tmp_path / name).write_text(files()[name], encoding="utf-8")
    (tmp_path / "tsconfig.json").write_text(json.dumps(TSCONFIG), encoding="utf-8")
    (tmp_path / "package.json").write_text('{"type": "module"}\n', encoding="utf-8")
    (tmp_path / "node_modules").symlink_to(modules, target_is_directory=True)
    compiled = run([str(modules / ".bin" / "tsc"), "-p", "."], tmp_path, serve)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
    tested = run(["node", "--test", "dist/"], tmp_path, serve)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert re.search(r"^# pass 2$", tested.stdout, re.M), tested.stdout
    assert re.search(r"^# fail 0$", tested.stdout, re.M), tested.stdout


@pytest.mark.slow
def test_the_go_example_with_the_standard_library(serve: str, tmp_path: Path) -> None:
    go = shutil.which("go")
    if go is None:
        pytest.skip("go is not installed on this machine (the Go example is checked where it is)")
    for name in ("agent.go", "agent_test.go"):
        (tmp_path / name).write_text(files()[name], encoding="utf-8")
    (tmp_path / "go.mod").write_text("module example.com/agent\n\ngo 1.19\n", encoding="utf-8")
    result = run(
        [go, "test", "./..."],
        tmp_path,
        serve,
        GOCACHE=str(tmp_path / ".gocache"),
        GOPATH=str(tmp_path / ".gopath"),
        GOPROXY="off",  # the standard library only: nothing to download
        GOTOOLCHAIN="local",
        GOFLAGS="-count=1",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("ok  \texample.com/agent"), result.stdout
