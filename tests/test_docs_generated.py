"""The sections of ``docs/`` generated from the code are committed up to date: each page reads
complete in the repository, and a stale one fails here naming the file and the command."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools import gen_docs


def test_every_generated_section_is_up_to_date() -> None:
    found = gen_docs.stale()
    stale = [str(path.relative_to(gen_docs.ROOT)) for path, _ in found]
    assert not stale, (
        f"generated sections are stale in {', '.join(stale)}; regenerate them with "
        f"{gen_docs.COMMAND} and commit the result"
    )


def test_the_pages_with_generated_sections_are_the_expected_ones() -> None:
    names = {path.relative_to(gen_docs.DOCS).as_posix() for path in gen_docs.pages()}
    assert names >= {
        "guides/cache-doctor.md",
        "reference/api.md",
        "reference/cli.md",
        "reference/script.md",
    }
    for path in gen_docs.pages():
        text = path.read_text(encoding="utf-8")
        for match in gen_docs.SECTION.finditer(text):
            assert match.group("body").strip(), f"{path}: an empty {match.group('name')} section"


def test_a_stale_section_is_found_and_regenerated(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# Codes\n\n<!-- dsh:cause-codes -->\nsomething old\n<!-- /dsh:cause-codes -->\nafter\n",
        encoding="utf-8",
    )
    [(path, fresh)] = gen_docs.stale([page])
    assert path == page
    assert "something old" not in fresh and fresh.endswith("<!-- /dsh:cause-codes -->\nafter\n")
    from dsh_testkit.doctor._codes import CODES

    for code in CODES:
        assert f"### `{code}`" in fresh
    page.write_text(fresh, encoding="utf-8")
    assert gen_docs.stale([page]) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("<!-- dsh:nothing -->\nx\n<!-- /dsh:nothing -->\n", "unknown generated section 'nothing'"),
        ("a\n<!-- dsh:cause-codes -->\nno end\n", "page.md:2: a <!-- dsh:… --> marker without"),
    ],
)
def test_a_broken_marker_is_an_error_naming_the_page(text: str, message: str) -> None:
    with pytest.raises(gen_docs.GenerationError, match=message):
        gen_docs.render(text, where="page.md")


def test_the_command_checks_and_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    page = docs / "codes.md"
    page.write_text("<!-- dsh:report-legend -->\n<!-- /dsh:report-legend -->\n", encoding="utf-8")
    monkeypatch.setattr(gen_docs, "DOCS", docs)
    monkeypatch.setattr(gen_docs, "ROOT", tmp_path)
    assert gen_docs.main(["--check"]) == 1
    out, err = capsys.readouterr()
    assert out == "stale: docs/codes.md\n"
    assert err == f"regenerate with: {gen_docs.COMMAND}\n"
    assert gen_docs.main([]) == 0
    assert capsys.readouterr().out == "regenerated docs/codes.md\n"
    assert gen_docs.main(["--check"]) == 0
    assert "| term | meaning |" in page.read_text(encoding="utf-8")
