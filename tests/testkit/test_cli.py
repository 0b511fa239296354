"""The ``dsh-testkit`` command's shape: subcommands, help, and light imports."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from dsh_testkit.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]


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
    assert "dsh_testkit._demo" not in loaded


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
