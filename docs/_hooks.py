"""MkDocs hooks: the site's view of the generated sections.

The generated sections of ``docs/`` are committed between ``<!-- dsh:NAME -->`` and
``<!-- /dsh:NAME -->`` markers, so each page reads complete in the repository;
``tools/gen_docs.py`` (``python -m tools.gen_docs``, ``make docs-gen``) writes them and
``tests/test_docs_generated.py`` fails when one is stale. On the site:

- every generated section is rendered again from the code (the site can never be staler than
  the code it is built from);
- an ``api`` section (a table of names and first docstring lines in the repository) becomes
  mkdocstrings' full reference of the same names.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # mkdocs loads this file by path; tools/ lives at the root
    sys.path.insert(0, str(ROOT))

from tools import gen_docs  # noqa: E402


def _mkdocstrings(args: str) -> str:
    module, names = gen_docs._api_args(args)
    lines = [f"::: {module}", "    options:", "      show_root_heading: false"]
    if names:
        lines.append(f"      members: [{', '.join(names)}]")
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any = None, **_: Any) -> str:
    where = getattr(getattr(page, "file", None), "src_path", "a page")
    markdown = gen_docs.render(markdown, where=str(where))

    def site_view(match: Any) -> str:
        if match.group("name") == "api":
            return _mkdocstrings(match.group("args"))
        return str(match.group("body"))

    return gen_docs.SECTION.sub(site_view, markdown)
