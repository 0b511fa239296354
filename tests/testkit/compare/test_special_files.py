"""``compare`` reads regular files only, and at most ``--max-file-bytes`` of each.

A folder handed to ``compare`` in CI may hold anything: a link to ``/dev/zero`` (read for ever,
memory without end), a named pipe (``open`` waits for a writer that never comes), a link to a
file elsewhere, a file larger than memory. In a folder, links and special files are skipped
with a note naming each; a file over the cap is an error naming it and the option; a file named
on the command line must lead to a regular file. The hostile cases run the command in a
subprocess with its memory capped and a time limit, so a reader that follows them fails the test
instead of taking the machine.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from dsh_testkit.compare import compare_runs
from dsh_testkit.traces import TraceError
from tests.testkit.compare._agent import cli
from tests.testkit.compare._traces import conversation, write

posix_only = pytest.mark.skipif(
    not hasattr(os, "mkfifo"), reason="named pipes and /dev/zero are POSIX"
)


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    base = write(tmp_path / "base" / "a.jsonl", conversation("hi", "more"))
    new = write(tmp_path / "new" / "a.jsonl", conversation("hi", "more"))
    return base.parent, new.parent


def test_a_link_to_a_recording_outside_the_folder_is_not_read(
    runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = write(tmp_path / "elsewhere" / "other.jsonl", conversation("secret prompt"))
    (runs[1] / "leak.jsonl").symlink_to(outside)
    (runs[1] / "linked").symlink_to(outside.parent, target_is_directory=True)
    result = compare_runs(runs[0], runs[1])
    assert [s.name for s in result.added] == []  # neither the file nor the folder was read
    assert result.new.traces == 1
    assert (
        "new: 2 folder entries not read (leak.jsonl: a symbolic link, not followed; "
        "linked: a symbolic link, not followed)"
    ) in result.notes
    status, out, _ = cli(capsys, "compare", str(runs[0]), str(runs[1]))
    assert status == 0
    assert "leak.jsonl: a symbolic link, not followed" in out
    # named on the command line, a link is the user's choice: followed
    status, _, err = cli(capsys, "compare", str(runs[0] / "a.jsonl"), str(runs[1] / "leak.jsonl"))
    assert status in (0, 1) and err == ""  # read and compared


def test_a_file_over_the_cap_is_an_error_naming_it_and_the_option(
    runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    big = write(runs[1] / "a.jsonl", conversation("hi", "more", "and a longer third turn"))
    size = big.stat().st_size
    assert (runs[0] / "a.jsonl").stat().st_size < size - 1  # BASE is read, and is under it
    status, out, err = cli(
        capsys, "compare", str(runs[0]), str(runs[1]), "--max-file-bytes", str(size - 1)
    )
    assert (status, out) == (2, "")
    assert err == (
        f"dsh-testkit compare: {big}: the file is {size:,} bytes, over the {size - 1:,}-byte cap "
        "on what compare reads (--max-file-bytes)\n"
    )
    status, _, err = cli(
        capsys, "compare", str(runs[0]), str(runs[1]), "--max-file-bytes", str(size)
    )
    assert (status, err) == (1, "")  # read and compared (the new run's third turn costs more)


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ("0", "must be at least 1, got 0"),
        ("-5", "must be at least 1, got -5"),
        ("1e9", "'1e9' is not a whole number of bytes"),
        ("lots", "'lots' is not a whole number of bytes"),
    ],
)
def test_the_cap_is_a_positive_whole_number(
    runs: tuple[Path, Path], value: str, why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli(capsys, "compare", str(runs[0]), str(runs[1]), "--max-file-bytes", value)
    assert exit_info.value.code == 2
    assert f"argument --max-file-bytes: {why}" in capsys.readouterr().err


@pytest.mark.skipif(not Path("/proc/self/status").is_file(), reason="Linux /proc")
def test_a_file_that_grows_past_the_cap_while_read_is_refused() -> None:
    from dsh_testkit.compare._inputs import read_regular_file

    # /proc files say they are empty (st_size 0) and then hold more: as a file growing would.
    with pytest.raises(TraceError, match="grew past the 10-byte cap"):
        read_regular_file("/proc/self/status", 10)


@posix_only
def test_a_named_pipe_is_never_waited_on(tmp_path: Path) -> None:
    from dsh_testkit.compare._inputs import read_regular_file

    pipe = tmp_path / "pipe.jsonl"
    os.mkfifo(pipe)
    with pytest.raises(TraceError, match="a named pipe, not a regular file: not read"):
        read_regular_file(str(pipe))


# -- the hostile folders, in a subprocess with its memory and time capped ----------------------

_MEMORY = 1 << 30
_SECONDS = 60


def _capped() -> None:  # pragma: no cover - runs in the child
    resource.setrlimit(resource.RLIMIT_AS, (_MEMORY, _MEMORY))


def _compare(*args: str) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [sys.executable, "-m", "dsh_testkit.cli", "compare", *args],
            capture_output=True,
            text=True,
            timeout=_SECONDS,
            preexec_fn=_capped,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"compare still reading after {_SECONDS} s: {exc}")


@pytest.mark.slow
@posix_only
@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
def test_a_folder_with_devices_pipes_and_links_compares_what_it_holds(
    runs: tuple[Path, Path],
) -> None:
    new = runs[1]
    (new / "zero.jsonl").symlink_to("/dev/zero")
    os.mkfifo(new / "pipe.jsonl")
    with open(new / "huge.jsonl", "wb") as sparse:  # 4 GiB that take no disk
        sparse.truncate(4 << 30)
    result = _compare(str(runs[0]), str(new), "--max-file-bytes", str(1 << 20), "--json")
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr == (
        f"dsh-testkit compare: {new / 'huge.jsonl'}: the file is {4 << 30:,} bytes, over the "
        f"{1 << 20:,}-byte cap on what compare reads (--max-file-bytes)\n"
    )
    (new / "huge.jsonl").unlink()
    result = _compare(str(runs[0]), str(new))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "pipe.jsonl: a named pipe, not a regular file: not read" in result.stdout
    assert "zero.jsonl: a symbolic link, not followed" in result.stdout


@pytest.mark.slow
@posix_only
@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero")
@pytest.mark.parametrize("kind", ["device", "pipe"])
def test_a_special_file_named_on_the_command_line_is_refused(
    runs: tuple[Path, Path], tmp_path: Path, kind: str
) -> None:
    if kind == "device":
        named = tmp_path / "zero.jsonl"
        named.symlink_to("/dev/zero")
        what = "a character device"
    else:
        named = tmp_path / "pipe.jsonl"
        os.mkfifo(named)
        what = "a named pipe"
    result = _compare(str(runs[0] / "a.jsonl"), str(named))
    assert result.returncode == 2
    assert result.stderr == (
        f"dsh-testkit compare: {named}: {what}, not a regular file: not read\n"
    )
