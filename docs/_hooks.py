"""MkDocs hooks: pages generated from the code, so the reference cannot drift from it.

- ``<!-- dsh:cli-reference -->`` becomes the help of ``dsh-testkit`` and of each subcommand, as
  argparse prints it.
- ``<!-- dsh:script-schema -->`` becomes the mock script's JSON Schema, field by field, and the
  schema itself.
- ``<!-- dsh:cause-codes -->`` and ``<!-- dsh:report-legend -->`` become the cache doctor's cause
  codes and the terms of its report, with the sentences the report itself prints.
- ``<!-- dsh:explorer-screenshots -->`` becomes the Cache Explorer's screenshots, taken during the
  build by the system's Chromium (:func:`on_files`; ``tools/explorer_screenshots.py``), or a
  note saying how to get them where Chromium is absent.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

CLI_MARKER = "<!-- dsh:cli-reference -->"
SCHEMA_MARKER = "<!-- dsh:script-schema -->"
CAUSES_MARKER = "<!-- dsh:cause-codes -->"
LEGEND_MARKER = "<!-- dsh:report-legend -->"
EXPLORER_MARKER = "<!-- dsh:explorer-screenshots -->"
EXPLORER_SHOTS = "guides/cache-explorer"
"""Where the screenshots are placed in the site, beside the guide that shows them."""
_explorer_shots: list[str] = []


def _parser() -> argparse.ArgumentParser:
    from dsh_testkit.cli import build_parser

    return build_parser()


def cli_reference() -> str:
    parser = _parser()
    parts = ["```text", parser.format_help().rstrip(), "```"]
    for action in parser._actions:  # argparse keeps subparsers here; no public accessor exists
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                parts += [
                    f"\n## `dsh-testkit {name}`\n",
                    "```text",
                    sub.format_help().rstrip(),
                    "```",
                ]
    return "\n".join(parts)


def _type_of(schema: dict[str, Any]) -> str:
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    if "oneOf" in schema or "anyOf" in schema:
        return " \\| ".join(_type_of(s) for s in schema.get("oneOf", schema.get("anyOf", [])))
    kind = schema.get("type", "")
    kinds = kind if isinstance(kind, list) else [kind]
    if "array" in kinds and isinstance(schema.get("items"), dict):
        return f"array of {_type_of(schema['items'])}"
    return " \\| ".join(str(k) for k in kinds if k)


def _table(schema: dict[str, Any]) -> list[str]:
    required = set(schema.get("required", ()))
    rows = ["| field | type | meaning |", "|---|---|---|"]
    for name, sub in schema.get("properties", {}).items():
        desc = (sub.get("description") or "").replace("\n", " ").replace("|", "\\|")
        mark = " (required)" if name in required else ""
        rows.append(f"| `{name}`{mark} | {_type_of(sub)} | {desc} |")
    return rows


def script_reference() -> str:
    from dsh_testkit import mock

    schema: dict[str, Any] = mock.script_schema()
    parts = ["## The script document", "", *_table(schema)]
    for name, definition in sorted(schema.get("$defs", {}).items()):
        parts += ["", f"## {name}", ""]
        if definition.get("description"):
            parts += [definition["description"], ""]
        if "properties" in definition:
            parts += _table(definition)
        else:
            parts.append(f"One of: {_type_of(definition)}")
    body = json.dumps(schema, indent=2, sort_keys=True)
    return "\n".join([*parts, "", "## The schema itself", "", "```json", body, "```"])


def cause_codes() -> str:
    from dsh_testkit.doctor._codes import cause_codes_markdown

    return cause_codes_markdown()


def report_legend() -> str:
    from dsh_testkit.doctor._codes import terms_markdown

    return terms_markdown()


def on_files(files: Any, config: Any, **_: Any) -> Any:
    """The Cache Explorer's screenshots, taken now by Chromium, added to the site's files."""
    from mkdocs.structure.files import File

    from tools.explorer_screenshots import screenshots

    _explorer_shots.clear()
    for name, data in screenshots().items():
        files.append(File.generated(config, f"{EXPLORER_SHOTS}/{name}", content=data))
        _explorer_shots.append(name)
    return files


def explorer_screenshots() -> str:
    from tools.explorer_screenshots import SHOTS

    if not _explorer_shots:
        return (
            '!!! note "Screenshots"\n    `make docs` takes screenshots of the page here with '
            "the system's Chromium; it is not installed on the machine that built these docs "
            "(`apt-get install chromium`)."
        )
    folder = EXPLORER_SHOTS.rsplit("/", 1)[-1]
    return "\n\n".join(
        f"![{SHOTS[name][0]}]({folder}/{name})\n\n*{SHOTS[name][0]}*" for name in _explorer_shots
    )


def on_page_markdown(markdown: str, **_: Any) -> str:
    if CLI_MARKER in markdown:
        markdown = markdown.replace(CLI_MARKER, cli_reference())
    if SCHEMA_MARKER in markdown:
        markdown = markdown.replace(SCHEMA_MARKER, script_reference())
    if CAUSES_MARKER in markdown:
        markdown = markdown.replace(CAUSES_MARKER, cause_codes())
    if LEGEND_MARKER in markdown:
        markdown = markdown.replace(LEGEND_MARKER, report_legend())
    if EXPLORER_MARKER in markdown:
        markdown = markdown.replace(EXPLORER_MARKER, explorer_screenshots())
    return markdown
