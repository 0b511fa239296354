"""Regenerate the sections of ``docs/`` that are generated from the code.

``python -m tools.gen_docs`` (``make docs-gen``) rewrites them in place; ``--check`` only says
which files are stale (exit status 1). ``tests/test_docs_generated.py`` runs the check, so a
stale page fails the suite naming the file and this command.

A generated section sits between two markers and is committed, so every page reads complete in
the repository (and on GitHub), not only on the built site::

    <!-- dsh:cli-reference -->
    ...generated, do not edit...
    <!-- /dsh:cli-reference -->

Sections and where their text comes from:

- ``cli-reference``: the ``dsh-testkit`` argument parser (``dsh_testkit.cli.build_parser``),
  rendered from its actions (not argparse's help layout, which changes between Pythons);
- ``script-schema``: the mock script's JSON Schema (``dsh_testkit.mock._schema``, what
  ``dsh-testkit serve --print-schema`` prints);
- ``cause-codes`` and ``report-legend``: the cache doctor's cause codes and the terms of its
  report (``dsh_testkit.doctor._codes``, the one module that words them);
- ``explorer-screenshots``: in the repository a note; the site (``docs/_hooks.py``) puts the
  Cache Explorer's screenshots there, taken by Chromium while it builds;
- ``api MODULE: NAME, NAME``: a table of the public names with the first line of each
  docstring; the site (``docs/_hooks.py``) shows mkdocstrings' full reference instead.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import inspect
import json
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Final

ROOT: Final = Path(__file__).resolve().parents[1]
DOCS: Final = ROOT / "docs"
COMMAND: Final = "python -m tools.gen_docs (make docs-gen)"

SECTION: Final = re.compile(
    r"(?P<open><!-- dsh:(?P<name>[a-z-]+)(?P<args>[^>]*?) -->\n)(?P<body>.*?)"
    r"(?P<close><!-- /dsh:(?P=name) -->)",
    re.S,
)
"""A generated section: the opening marker (with arguments), the body, the closing marker."""
_OPEN_ALONE: Final = re.compile(r"<!-- dsh:([a-z-]+)[^>]*? -->")


# ---------------------------------------------------------------------------------- renderers


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _expand_help(action: argparse.Action, prog: str) -> str:
    """An action's help with ``%(default)s`` and friends filled in, as argparse does."""
    text = action.help or ""
    if "%" not in text:
        return text
    params: dict[str, Any] = dict(vars(action), prog=prog)
    params = {k: v for k, v in params.items() if v is not argparse.SUPPRESS}
    for name, value in list(params.items()):
        if hasattr(value, "__name__"):
            params[name] = value.__name__
    if params.get("choices") is not None:
        params["choices"] = ", ".join(str(c) for c in params["choices"])
    return text % params


def _invocation(action: argparse.Action) -> str:
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        value = "{" + ",".join(str(c) for c in action.choices) + "}"
    else:
        metavar = action.metavar
        value = metavar if isinstance(metavar, str) else action.dest.upper()
    if not action.option_strings:
        shown = value if action.metavar else action.dest
        return f"{shown} …" if action.nargs in ("+", "*") else shown
    if action.nargs == 0:
        return ", ".join(action.option_strings)
    return ", ".join(f"{option} {value}" for option in action.option_strings)


def _usage(prog: str, parser: argparse.ArgumentParser) -> str:
    parts = [prog, "[options]"]
    for action in parser._actions:
        if not action.option_strings and not isinstance(action, argparse._SubParsersAction):
            parts.append(_invocation(action))
        elif getattr(action, "required", False) and action.option_strings:
            parts.append(_invocation(action).split(", ")[-1])
    return " ".join(parts)


def _action_rows(parser: argparse.ArgumentParser, prog: str) -> list[str]:
    lines: list[str] = []
    exclusive = {id(a) for g in parser._mutually_exclusive_groups for a in g._group_actions}
    for group in parser._action_groups:
        actions = [
            a
            for a in group._group_actions
            if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction))
            and a.help is not argparse.SUPPRESS
        ]
        if not actions:
            continue
        title = group.title or "options"
        lines += ["", f"*{title}*", "", "| argument | what it does |", "|---|---|"]
        for action in actions:
            text = _expand_help(action, prog)
            if action.option_strings and getattr(action, "required", False):
                text += " (required)"
            if id(action) in exclusive:
                text += " (one of a mutually exclusive group)"
            lines.append(f"| `{_cell(_invocation(action))}` | {_cell(text)} |")
    return lines


def cli_reference() -> str:
    """Every ``dsh-testkit`` subcommand: usage, description, arguments, notes."""
    from dsh_testkit.cli import build_parser

    parser = build_parser()
    out = [f"`{parser.prog}` — {parser.description}", ""]
    subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    summaries = {c.dest: c.help for s in subparsers for c in s._choices_actions}
    out += ["| command | what it does |", "|---|---|"]
    for name, summary in summaries.items():
        out.append(f"| [`{name}`](#dsh-testkit-{name}) | {_cell(summary or '')} |")
    for action in subparsers:
        for name, sub in action.choices.items():
            prog = f"{parser.prog} {name}"
            out += ["", f"## `{prog}`", "", "```text", _usage(prog, sub), "```", ""]
            if sub.description:
                out.append(" ".join(sub.description.split()))
            out += _action_rows(sub, prog)
            if sub.epilog:
                out += ["", " ".join(sub.epilog.split())]
    return "\n".join(out)


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


def _schema_table(schema: dict[str, Any]) -> list[str]:
    required = set(schema.get("required", ()))
    rows = ["| field | type | meaning |", "|---|---|---|"]
    for name, sub in schema.get("properties", {}).items():
        mark = " (required)" if name in required else ""
        rows.append(f"| `{name}`{mark} | {_type_of(sub)} | {_cell(sub.get('description') or '')} |")
    return rows


def script_reference() -> str:
    """The mock script's JSON Schema, field by field, then the schema itself."""
    from dsh_testkit.mock._schema import script_schema

    schema: dict[str, Any] = script_schema()
    parts = ["## The script document", "", *_schema_table(schema)]
    for name, definition in sorted(schema.get("$defs", {}).items()):
        parts += ["", f"## {name}", ""]
        if definition.get("description"):
            parts += [" ".join(definition["description"].split()), ""]
        if "properties" in definition:
            parts += _schema_table(definition)
        else:
            parts.append(f"One of: {_type_of(definition)}")
    body = json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False)
    return "\n".join([*parts, "", "## The schema itself", "", "```json", body, "```"])


def cause_codes() -> str:
    """The cache doctor's cause codes: sentence, kind and advice of each."""
    from dsh_testkit.doctor._codes import cause_codes_markdown

    return cause_codes_markdown()


def report_legend() -> str:
    """The terms of the cache doctor's report, as the legend under every report has them."""
    from dsh_testkit.doctor._codes import terms_markdown

    return terms_markdown()


EXPLORER_NOTE: Final = (
    '!!! note "Screenshots"\n    The site puts screenshots of the page here: `make docs` takes '
    "them with the system's Chromium (`apt-get install chromium`), which the machine that "
    "built these pages did not have."
)


def _api_args(args: str) -> tuple[str, list[str]]:
    module, _, names = args.strip().partition(":")
    return module.strip(), [n.strip() for n in names.split(",") if n.strip()]


def api_summary(args: str) -> str:
    """A table of a module's public names (or the listed ones): kind and docstring summary."""
    module_name, names = _api_args(args)
    module = importlib.import_module(module_name)
    public = list(module.__all__)
    if not_public := [name for name in names if name not in public]:
        raise ValueError(f"api {module_name}: not in its __all__: {', '.join(not_public)}")
    names = names or public
    rows = ["| name | what it is |", "|---|---|"]
    for name in names:
        value = getattr(module, name)
        kind = (
            "class"
            if inspect.isclass(value)
            else "function"
            if inspect.isroutine(value)
            else "value"
        )
        doc = (
            inspect.getdoc(value) if kind != "value" else _attribute_doc(module_name, name)
        ) or ""
        first = doc.split("\n\n", 1)[0]
        shown = f"`{name}()`" if kind == "function" else f"`{name}`"
        rows.append(f"| {shown} | {_cell(_plain(first))} |")
    return "\n".join(rows)


def _attribute_doc(module_name: str, name: str) -> str | None:
    """The docstring under a constant's or an alias's assignment (as mkdocstrings reads it),
    followed through the imports that re-export it."""
    module = importlib.import_module(module_name)
    path = Path(module.__file__ or "")
    package = module_name if path.name == "__init__.py" else module_name.rpartition(".")[0]
    body = ast.parse(path.read_text(encoding="utf-8")).body
    for index, node in enumerate(body):
        if isinstance(node, ast.ImportFrom) and any(a.name == name for a in node.names):
            base = package.split(".")[: len(package.split(".")) - max(node.level - 1, 0)]
            source = ".".join([*base, node.module or ""]) if node.level else node.module
            return _attribute_doc((source or "").rstrip("."), name)
        targets = [node.target] if isinstance(node, ast.AnnAssign) else getattr(node, "targets", [])
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            after = body[index + 1] if index + 1 < len(body) else None
            if isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant):
                return inspect.cleandoc(str(after.value.value))
            return None
    return None


def _plain(text: str) -> str:
    """A docstring's reST roles and literals as Markdown: ``:class:`~a.B``` → ``B``."""
    text = re.sub(
        r":[a-z]+:`~?([^`<]*?)(?:\s*<([^>]+)>)?`", lambda m: f"`{m.group(1).split('.')[-1]}`", text
    )
    return text.replace("``", "`")


GENERATORS: Final[dict[str, Callable[[str], str]]] = {
    "cli-reference": lambda _: cli_reference(),
    "script-schema": lambda _: script_reference(),
    "cause-codes": lambda _: cause_codes(),
    "report-legend": lambda _: report_legend(),
    "explorer-screenshots": lambda _: EXPLORER_NOTE,
    "api": api_summary,
}


# ------------------------------------------------------------------------------------ pages


class GenerationError(Exception):
    """A page's markers cannot be regenerated (an unknown section, an unclosed marker)."""


def render(text: str, *, where: str) -> str:
    """``text`` with every generated section regenerated."""
    opened = {m.start() for m in _OPEN_ALONE.finditer(text)}
    closed = set()

    def replace(match: re.Match[str]) -> str:
        name = match.group("name")
        generator = GENERATORS.get(name)
        if generator is None:
            raise GenerationError(f"{where}: unknown generated section {name!r}")
        closed.add(match.start())
        body = generator(match.group("args")).rstrip("\n")
        return f"{match.group('open')}{body}\n{match.group('close')}"

    result = SECTION.sub(replace, text)
    unclosed = opened - closed
    if unclosed:
        line = text.count("\n", 0, min(unclosed)) + 1
        raise GenerationError(
            f"{where}:{line}: a <!-- dsh:… --> marker without its closing <!-- /dsh:… -->"
        )
    return result


def pages() -> list[Path]:
    """The pages holding generated sections."""
    return [p for p in sorted(DOCS.rglob("*.md")) if _OPEN_ALONE.search(p.read_text("utf-8"))]


def stale(paths: Iterable[Path] | None = None) -> list[tuple[Path, str]]:
    """``(page, regenerated text)`` for every page whose generated sections are out of date."""
    out = []
    for path in pages() if paths is None else paths:
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        fresh = render(text, where=str(where))
        if fresh != text:
            out.append((path, fresh))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.gen_docs",
        description="Regenerate the generated sections of docs/ (between <!-- dsh:NAME --> and "
        "<!-- /dsh:NAME -->).",
    )
    parser.add_argument("--check", action="store_true", help="only list stale pages (exit 1)")
    args = parser.parse_args(argv)
    try:
        found = stale()
    except GenerationError as exc:
        print(f"gen_docs: {exc}", file=sys.stderr)
        return 2
    for path, fresh in found:
        shown = path.relative_to(ROOT)
        if args.check:
            print(f"stale: {shown}")
        else:
            path.write_text(fresh, encoding="utf-8", newline="\n")
            print(f"regenerated {shown}")
    if args.check and found:
        print(f"regenerate with: {COMMAND}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
