"""The repository explains itself: its code cites only documents inside the repository.

Docstrings and comments in the packages, the tooling, the tests, the benchmarks and the e2e test
cite ``docs/wire.md §x`` (the wire facts) and ``docs/design.md §x`` (the session-log design and the
reference harness's testing machinery, sections ``T1``–``T9``), never a specification or an
absolute path that only exists on the machine the code was written on. Tests and benchmarks that
read the optional fixtures beside the checkout may name ``../shared/fixtures`` (they skip with a
reason when it is absent). The documentation (the site's pages, the top-level Markdown) follows
the same rule, and every cited section exists in the document it names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCANNED = ("dsh_core", "dsh_testkit", "tools", "tests", "benchmarks", "e2e")
"""The directories whose Python and Markdown files must not cite outside documents."""
FIXTURE_READERS = ("tests", "benchmarks")
"""Where ``../shared/fixtures`` may be named: code that reads the optional fixtures."""
THIS_FILE = Path(__file__).resolve()

OUTSIDE = re.compile(
    r"(?<![\w/.-])wire\.md"  # the wire facts live in docs/wire.md: cite that path
    r"|dsh-(?:core|testing)-spec"  # the specifications' facts live in docs/design.md
    r"|/work/shared"  # a path on the machine the code was written on
    r"|seed[- ]rfc"
    r"|\.\./shared(?![\w-]|/fixtures)",  # only the fixtures are read from beside the checkout
    re.IGNORECASE,
)
PROSE_OUTSIDE = re.compile(
    r"dsh-(?:core|testing)-spec|/work/shared|seed[- ]rfc|\.\./shared(?![\w-]|/fixtures)",
    re.IGNORECASE,
)
"""The same rule for the documentation, where ``wire.md`` is a page of the site and may be linked."""
FIXTURES = re.compile(r"\.\./shared/fixtures")
CITATION = re.compile(
    r"docs/(?P<doc>wire|design)\.md`{0,2}\s*"
    r"(?P<refs>§\s?T?\d+(?:\.\d+)*(?:\s*(?:,|–|-|/|and)\s*§\s?T?\d+(?:\.\d+)*)*)"
)
REF = re.compile(r"§\s?(T?\d+(?:\.\d+)*)")
HEADING = re.compile(r"^#{2,4}\s+(\d+(?:\.\d+)*)\.?\s", re.M)
TESTING_ITEM = re.compile(r"^- \*\*(T\d+(?:\.\d+)*)\s", re.M)


@dataclass(frozen=True, slots=True, kw_only=True)
class Finding:
    path: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.text}"


def outside_citations(text: str, path: str) -> list[Finding]:
    """The lines of ``text`` (the file at ``path``, relative to the root) citing outside documents."""
    may_name_fixtures = path.split("/", 1)[0] in FIXTURE_READERS
    findings = []
    for number, line in enumerate(text.splitlines(), start=1):
        if OUTSIDE.search(line) or (FIXTURES.search(line) and not may_name_fixtures):
            findings.append(Finding(path=path, line=number, text=line.strip()))
    return findings


def sections(document: str) -> frozenset[str]:
    """The section numbers a document of docs/ defines (``1``, ``1.3``, ``T3.8``, …)."""
    return frozenset(HEADING.findall(document)) | frozenset(TESTING_ITEM.findall(document))


def cited_sections(text: str) -> list[tuple[str, str]]:
    """Every ``(document, section)`` that ``text`` cites, e.g. ``("wire", "1.4")``."""
    return [
        (match["doc"], ref)
        for match in CITATION.finditer(text)
        for ref in REF.findall(match["refs"])
    ]


def _scanned_files() -> list[Path]:
    files = []
    for top in SCANNED:
        for pattern in ("*.py", "*.md"):
            files += [p for p in (ROOT / top).rglob(pattern) if "__pycache__" not in p.parts]
    return sorted(p for p in files if p.resolve() != THIS_FILE)


FILES = _scanned_files()
PROSE = sorted(
    [*(ROOT / "docs").rglob("*.md"), *ROOT.glob("*.md"), *(ROOT / "cassettes").glob("*.md")]
)
"""The documentation: the site's pages, the top-level Markdown, the cassettes' README."""


def test_the_scan_covers_the_packages() -> None:
    scanned = {p.relative_to(ROOT).parts[0] for p in FILES}
    assert {"dsh_core", "dsh_testkit", "tests"} <= scanned, scanned
    assert len(FILES) > 100


def test_no_file_cites_a_document_outside_the_repository() -> None:
    findings = [
        finding
        for path in FILES
        for finding in outside_citations(
            path.read_text(encoding="utf-8"), path.relative_to(ROOT).as_posix()
        )
    ]
    assert not findings, "cite docs/wire.md or docs/design.md instead:\n" + "\n".join(
        map(str, findings)
    )


def test_the_documentation_cites_nothing_outside_the_repository() -> None:
    assert ROOT / "README.md" in PROSE and ROOT / "docs" / "design.md" in PROSE
    findings = [
        f"{page.relative_to(ROOT).as_posix()}:{number}: {line.strip()}"
        for page in PROSE
        for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), start=1)
        if PROSE_OUTSIDE.search(line)
    ]
    assert not findings, "\n".join(findings)


def test_every_cited_section_exists() -> None:
    defined = {
        doc: sections((ROOT / "docs" / f"{doc}.md").read_text(encoding="utf-8"))
        for doc in ("wire", "design")
    }
    missing = [
        f"{path.relative_to(ROOT).as_posix()}: docs/{doc}.md §{ref}"
        for path in FILES
        for doc, ref in cited_sections(path.read_text(encoding="utf-8"))
        if ref not in defined[doc]
    ]
    assert not missing, "these sections do not exist:\n" + "\n".join(missing)


@pytest.mark.parametrize(
    "line",
    [
        "The usage fields (wire.md §1.7).",
        "see ``wire.md`` §1.2",
        "The surface (dsh-core-spec §3).",
        "Replay (DSH-TESTING-SPEC §1.4)",
        "fixtures in /work/shared/fixtures",
        "the loop of the seed RFC",
        "see seed-rfc.md",
        "skips where ../shared is absent",
    ],
)
def test_the_scan_finds_each_kind_of_outside_citation(line: str) -> None:
    text = f'"""A docstring.\n\n{line}\n"""\n'
    assert outside_citations(text, "dsh_core/_x.py") == [
        Finding(path="dsh_core/_x.py", line=3, text=line)
    ]


@pytest.mark.parametrize(
    "line",
    [
        "The usage fields (docs/wire.md §1.7).",
        "The surface (docs/design.md §3).",
        "a shared prefix, ../sharedness is not a path",
        "shared_prefix(a, b)",
    ],
)
def test_the_scan_leaves_citations_inside_the_repository_alone(line: str) -> None:
    assert outside_citations(line, "dsh_core/_x.py") == []


def test_only_tests_and_benchmarks_may_name_the_fixtures_beside_the_checkout() -> None:
    line = "The recordings (``../shared/fixtures/real-deepseek-wire/``; skipped when absent)."
    assert outside_citations(line, "tests/testkit/mock/test_real_wire.py") == []
    assert outside_citations(line, "benchmarks/bench_calibrate.py") == []
    assert [f.line for f in outside_citations(line, "dsh_testkit/calibration/_calibrate.py")] == [1]


def test_cited_sections_are_read_with_their_lists_and_ranges() -> None:
    text = (
        "(docs/wire.md §3, §4.1) and (docs/wire.md §1.5–§1.9) and ``docs/wire.md`` §1.2; "
        "docs/design.md §2.7/§2.8 and docs/design.md §T3.8 and docs/design.md §10."
    )
    assert cited_sections(text) == [
        ("wire", "3"),
        ("wire", "4.1"),
        ("wire", "1.5"),
        ("wire", "1.9"),
        ("wire", "1.2"),
        ("design", "2.7"),
        ("design", "2.8"),
        ("design", "T3.8"),
        ("design", "10"),
    ]


def test_sections_are_read_from_headings_and_the_testing_list() -> None:
    document = "# Title\n\n## 1. Values\n\n### 1.3 Request fields\n\n- **T3.8 Wire faults**: x\n"
    assert sections(document) == {"1", "1.3", "T3.8"}
