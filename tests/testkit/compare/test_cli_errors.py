"""``dsh-testkit compare`` refuses what it cannot compare with exit status 2 and one line that
says what and where; a build can tell a broken input from a regression (exit 1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests._support import run_cli
from tests.testkit.compare._agent import cli
from tests.testkit.compare._traces import conversation, write


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    base = write(tmp_path / "base" / "a.jsonl", conversation("hi", "more"))
    new = write(tmp_path / "new" / "a.jsonl", conversation("hi", "more"))
    return base.parent, new.parent


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            ["--max-efficiency-drop", "-1"],
            "--max-efficiency-drop must be a number ≥ 0, got -1.0",
        ),
        (["--max-cost-increase", "inf"], "--max-cost-increase must be a number ≥ 0, got inf"),
        (["--granularity", "0"], "--granularity must be at least 1, got 0"),
        (
            ["--unit-tokens", "0"],  # the old spelling: the same refusal, after a note
            "--unit-tokens is now spelled --granularity\n"
            "dsh-testkit compare: --granularity must be at least 1, got 0",
        ),
        (["--price", "hit=1"], "--price 'hit=1': miss missing"),
    ],
)
def test_bad_options(
    runs: tuple[Path, Path],
    options: list[str],
    message: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, err = cli(capsys, "compare", str(runs[0]), str(runs[1]), *options)
    assert (status, out) == (2, "")
    assert err == f"dsh-testkit compare: {message}\n"


def test_a_missing_path(runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    missing = runs[1].parent / "nowhere"
    status, out, err = cli(capsys, "compare", str(runs[0]), str(missing))
    assert (status, out) == (2, "")
    assert err == f"dsh-testkit compare: {missing}: no such file or folder\n"


def test_a_corrupt_recording_in_a_folder_names_the_file(
    runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    broken = runs[1] / "broken.jsonl"
    broken.write_text(
        '{"format": "dsh-trace", "version": 1, "source": "proxy"}\nnot json\n{}\n',
        encoding="utf-8",
    )
    status, out, err = cli(capsys, "compare", str(runs[0]), str(runs[1]))
    assert (status, out) == (2, "")
    assert err == f"dsh-testkit compare: {broken}: line 2 is not JSON\n"


def test_a_folder_with_no_recording_in_it(
    runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    empty = runs[1].parent / "empty"
    empty.mkdir()
    (empty / "README.md").write_text("nothing here\n", encoding="utf-8")
    status, out, err = cli(capsys, "compare", str(runs[0]), str(empty))
    assert (status, out) == (2, "")
    assert err == (
        f"dsh-testkit compare: NEW {empty}: no recording found (a folder of recordings, or one "
        "recording, is expected); an empty run is never compared\n"
    )


def test_a_file_of_no_known_kind(
    runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    other = runs[1] / "notes.txt"
    other.write_text("hello\n", encoding="utf-8")
    status, _, err = cli(capsys, "compare", str(runs[0] / "a.jsonl"), str(other))
    assert status == 2
    assert err == f"dsh-testkit compare: {other}: not a session log or any recognized trace\n"


def test_an_unwritable_markdown_file_writes_nothing_else(
    runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    target = runs[1].parent / "no-such-folder" / "summary.md"
    status, out, err = cli(
        capsys, "compare", str(runs[0]), str(runs[1]), "--markdown-file", str(target)
    )
    assert (status, out) == (2, "")
    assert err.startswith(f"dsh-testkit compare: cannot write {target}: ")


@pytest.mark.slow
def test_help_lists_the_options_and_the_matching_rules() -> None:
    result = run_cli("compare", "--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    for option in (
        "--max-efficiency-drop PP",
        "--max-cost-increase PCT",
        "--json",
        "--markdown",
        "--markdown-file FILE",
        "--simulate",
        "--price",
    ):
        assert option in text
    assert "Scenarios match by declared id" in text
    assert "Exit status: 0 no regression, 1 a regression, 2 an input that cannot be read" in text


def test_the_markdown_file_never_replaces_a_recording(
    runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    recording = runs[1] / "a.jsonl"
    before = recording.read_bytes()
    status, _, err = cli(
        capsys, "compare", str(runs[0]), str(runs[1]), "--markdown-file", str(recording)
    )
    assert status == 2
    assert err.startswith(
        f"dsh-testkit compare: refusing to write the report to {recording}: it is the input "
    )
    assert recording.read_bytes() == before
    # an earlier summary is replaced whole, never left half-written
    summary = runs[1].parent / "summary.md"
    summary.write_text("earlier\n", encoding="utf-8")
    status, _, _ = cli(
        capsys, "compare", str(runs[0]), str(runs[1]), "--markdown-file", str(summary)
    )
    assert status == 0 and summary.read_text(encoding="utf-8").startswith("### Cache compare")
    assert sorted(p.name for p in summary.parent.iterdir()) == ["base", "new", "summary.md"]


def test_runs_that_share_no_scenario_are_no_pass(
    runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    renamed = runs[1].parent / "renamed"
    renamed.mkdir()
    (runs[1] / "a.jsonl").rename(renamed / "b.jsonl")
    status, out, err = cli(capsys, "compare", str(runs[0]), str(renamed))
    # Exit 2 says why and nothing else: no verdict, no report (it said "verdict: benign").
    assert (status, out) == (2, "")
    assert err.startswith(
        "dsh-testkit compare: no scenario of BASE matches one of NEW (1 only in BASE, 1 only in "
        "NEW): nothing was compared"
    )


def test_a_price_that_is_no_finite_number(
    runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    for value in ("nan", "inf", "1e400"):
        status, out, err = cli(
            capsys, "compare", str(runs[0]), str(runs[1]), "--price", f"hit={value},miss=1"
        )
        assert (status, out) == (2, "")
        assert "is not a finite number" in err, err
