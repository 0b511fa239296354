"""The ``dsh-testkit`` command's shape: subcommands, help, and light imports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from dsh_testkit.cli import build_parser

ROOT = Path(__file__).resolve().parents[3]


def _modules_loaded_by(*argv: str) -> set[str]:
    code = (
        "import json, sys\n"
        "from dsh_testkit.cli import main\n"
        "try:\n"
        f"    main({list(argv)!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    return set(json.loads(result.stderr.strip().splitlines()[-1]))


def test_serve_help_imports_neither_rich_nor_the_reports() -> None:
    loaded = _modules_loaded_by("serve", "--help")
    assert not {m for m in loaded if m == "rich" or m.startswith("rich.")}
    assert "dsh_testkit.reports" not in loaded
    assert "dsh_testkit.mock" not in loaded


def test_audit_help_builds_only_the_audit_arguments() -> None:
    loaded = _modules_loaded_by("audit", "--help")
    assert "dsh_testkit.reports" in loaded
    assert "dsh_testkit.cli._demo" not in loaded


def test_the_full_parser_knows_every_subcommand_with_its_arguments() -> None:
    parser = build_parser()
    assert parser.parse_args(["audit", "x.jsonl"]).log == "x.jsonl"
    assert parser.parse_args(["serve", "--port", "7"]).port == 7
    assert parser.parse_args(["demo", "--out", "d"]).out == "d"
    assert parser.parse_args(["cache-report", "y.jsonl"]).log == "y.jsonl"


def test_the_top_level_help_lists_every_subcommand() -> None:
    help_text = build_parser(only="").format_help()
    for name in ("demo", "serve", "audit", "cache-report"):
        assert name in help_text


def test_cache_report_says_where_it_wrote_the_html(tmp_path: Path) -> None:
    log = sorted((ROOT / "tests" / "scenarios" / "recordings").glob("*.jsonl"))[0]
    page = tmp_path / "report.html"
    result = subprocess.run(
        [sys.executable, "-m", "dsh_testkit.cli", "cache-report", str(log), "--html", str(page)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    assert f"wrote the HTML report to {page}" in result.stderr


def test_no_command_prints_a_key_a_recording_holds(tmp_path: Path, capsys) -> None:
    """Whatever a log holds, the commands' output (text and JSON, stdout and stderr) shows no
    key: here a key pasted into a user message of a real session log."""
    from dsh_testkit.cli import main

    key = "sk-" + "FAKE-SESSLEAK-000011112222"  # fake, built so no key-shaped literal is stored
    demo = tmp_path / "demo"
    assert main(["demo", "--out", str(demo)]) == 0
    text = (demo / "session.jsonl").read_text(encoding="utf-8")
    assert "Where is the retry policy defined?" in text
    leaked = tmp_path / "leaked.jsonl"
    leaked.write_text(text.replace("Where is the retry policy", f"{key} Where is the retry policy"))
    capsys.readouterr()
    for command in (
        ["audit", str(leaked)],
        ["audit", "--json", str(leaked)],
        ["rebuild", "--wire", str(leaked)],
        ["cache-report", str(leaked)],
        ["cache-report", "--json", str(leaked)],
        ["compare", str(demo / "session.jsonl"), str(leaked)],
    ):
        main(command)
        out, err = capsys.readouterr()
        assert "<REDACTED>" in out + err or command[0] == "compare", command
        assert key not in out + err, command
