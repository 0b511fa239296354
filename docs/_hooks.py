"""MkDocs hooks: pages generated from the code, so the reference cannot drift from it.

- ``<!-- dsh:cli-reference -->`` becomes the help of ``dsh-testkit`` and of each subcommand, as
  argparse prints it.
- ``<!-- dsh:script-schema -->`` becomes the mock script's JSON Schema, field by field, and the
  schema itself.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

CLI_MARKER = "<!-- dsh:cli-reference -->"
SCHEMA_MARKER = "<!-- dsh:script-schema -->"


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


def _describe(schema: dict[str, Any], path: str, rows: list[str], defs: dict[str, Any]) -> None:
    if "$ref" in schema:
        schema = defs.get(schema["$ref"].rsplit("/", 1)[-1], {})
    kind = schema.get("type", " | ".join(s.get("type", "?") for s in schema.get("oneOf", [])) or "")
    desc = (schema.get("description") or "").replace("\n", " ")
    if path:
        rows.append(f"| `{path}` | {kind} | {desc} |")
    for name, sub in schema.get("properties", {}).items():
        _describe(sub, f"{path}.{name}" if path else name, rows, defs)
    if isinstance(schema.get("items"), dict):
        _describe(schema["items"], f"{path}[]", rows, defs)


def script_reference() -> str:
    from dsh_testkit.mock import _schema as mock  # the function b2 exports publicly

    schema: dict[str, Any] = mock.script_schema()
    rows = ["| field | type | meaning |", "|---|---|---|"]
    _describe(schema, "", rows, schema.get("$defs", {}))
    body = json.dumps(schema, indent=2, sort_keys=True)
    return "\n".join([*rows, "", "The schema itself:", "", "```json", body, "```"])


def on_page_markdown(markdown: str, **_: Any) -> str:
    if CLI_MARKER in markdown:
        markdown = markdown.replace(CLI_MARKER, cli_reference())
    if SCHEMA_MARKER in markdown:
        markdown = markdown.replace(SCHEMA_MARKER, script_reference())
    return markdown
