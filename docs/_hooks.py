"""MkDocs hooks: the site's view of the generated sections.

The generated sections of ``docs/`` are committed between ``<!-- dsh:NAME -->`` and
``<!-- /dsh:NAME -->`` markers, so each page reads complete in the repository;
``tools/gen_docs.py`` (``python -m tools.gen_docs``, ``make docs-gen``) writes them and
``tests/test_docs_generated.py`` fails when one is stale. On the site:

- every generated section is rendered again from the code (the site can never be staler than
  the code it is built from);
- an ``api`` section (a table of names and first docstring lines in the repository) becomes
  mkdocstrings' full reference of the same names;
- the ``explorer-screenshots`` section (a note in the repository) becomes the Cache Explorer's
  screenshots, taken during the build by the system's Chromium (:func:`on_files`;
  ``tools/explorer_screenshots.py``), or keeps its note where Chromium is absent.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # mkdocs loads this file by path; tools/ lives at the root
    sys.path.insert(0, str(ROOT))

from tools import gen_docs  # noqa: E402

EXPLORER_SHOTS = "guides/cache-explorer"
"""Where the screenshots are placed in the site, beside the guide that shows them."""
_explorer_shots: list[str] = []


def _mkdocstrings(args: str) -> str:
    module, names = gen_docs._api_args(args)
    lines = [f"::: {module}", "    options:", "      show_root_heading: false"]
    if names:
        lines.append(f"      members: [{', '.join(names)}]")
    return "\n".join(lines)


def on_files(files: Any, config: Any, **_: Any) -> Any:
    """The Cache Explorer's screenshots, taken now by Chromium, added to the site's files."""
    from mkdocs.structure.files import File

    from tools.explorer_screenshots import screenshots

    _explorer_shots.clear()
    for name, data in screenshots().items():
        files.append(File.generated(config, f"{EXPLORER_SHOTS}/{name}", content=data))
        _explorer_shots.append(name)
    return files


def _explorer_screenshots(note: str) -> str:
    from tools.explorer_screenshots import SHOTS

    if not _explorer_shots:
        return note
    folder = EXPLORER_SHOTS.rsplit("/", 1)[-1]
    return "\n\n".join(
        f"![{SHOTS[name][0]}]({folder}/{name})\n\n*{SHOTS[name][0]}*" for name in _explorer_shots
    )


def on_page_markdown(markdown: str, page: Any = None, **_: Any) -> str:
    where = getattr(getattr(page, "file", None), "src_path", "a page")
    markdown = gen_docs.render(markdown, where=str(where))

    def site_view(match: Any) -> str:
        name = match.group("name")
        if name == "api":
            return _mkdocstrings(match.group("args"))
        if name == "explorer-screenshots":
            return _explorer_screenshots(str(match.group("body")))
        return str(match.group("body"))

    return gen_docs.SECTION.sub(site_view, markdown)
