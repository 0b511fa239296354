"""A team's agent, as a team writes it: the plain ``openai`` SDK, five tools, a tool loop.

Three short scenarios (``bugfix``: 5 user turns and 10 requests; ``review``: thinking mode, 4
turns, 8 requests; ``docs``: 6 turns, 11 requests), each under its own ``x-dsh-conversation``
key, and the harness changes a team gates in CI, each a small edit to how the agent builds its
requests (:data:`CHANGES`). The mock's answers are routes matched on the last user message and
on whether the request ends with a tool result, so a refused request never shifts the script.

Every clock is fixed (a timestamp either never ticks during a run, or ticks on every request),
so a run sends the same bytes every time: the verdicts cannot depend on the luck of the clock.
"""

from __future__ import annotations

import datetime as _dt
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

import openai

MODEL: Final = "deepseek-v4-flash"

SYSTEM_RULES: Final = (
    "You are Forge, a coding assistant working inside the user's repository.",
    "Rules:",
    "1. Read before you write: open a file with read_file before you change it.",
    "2. Prefer search_code to guessing where something is defined.",
    "3. Keep answers short: a sentence or two, then the evidence (file and line).",
    "4. Never invent file contents; quote what a tool returned.",
    "5. Run the relevant tests with run_tests after every change you make.",
    "6. When a test fails, say which assertion failed and why, before proposing a fix.",
    "7. Use write_file only for changes the user asked for; write whole files.",
    "8. Do not reformat code you were not asked to touch.",
    "9. When unsure what the user wants, ask one short question instead of guessing.",
    "10. Paths are relative to the repository root; never use absolute paths.",
    "11. Do not print secrets, tokens or credentials, even when a file contains them.",
    "12. Summaries name every file you changed.",
    "Style:",
    "- Use backticks for code, file names and commands.",
    "- No headings in short answers; bullets only when listing three or more items.",
    "- Quote at most ten lines of code at a time.",
    "Repository conventions:",
    "- Python 3.11, type hints everywhere, ruff and mypy --strict must pass.",
    "- Tests live under tests/ and mirror the package layout.",
    "- Public functions have docstrings; private helpers start with an underscore.",
)

EXTRA_RULES: Final = (
    "13. Mention the test command you ran and its outcome in one line.",
    "14. Prefer small, reviewable changes over large rewrites.",
    "15. Keep the user's naming; do not rename public symbols without being asked.",
    "16. When you read a long file, say which part you are quoting.",
    "17. Treat warnings from the type checker as errors.",
    "18. Never delete tests to make a build pass.",
    "19. Explain a regex in one sentence when you write one.",
    "20. If a tool fails, report the error verbatim before retrying.",
)

CHANGES: Final = {
    "baseline": "the agent as committed",
    "refactor": "history kept in a small class instead of a list: byte-identical requests",
    "timestamp": "'Current date and time: …' appended to the system prompt (a fast run: the "
    "clock never crosses a second)",
    "timestamp-ticking": "the same timestamp, one second later on every request",
    "tools-reordered": "the tool list rotated by one on every request",
    "args-reserialized": "tool-call arguments sent back as json.dumps(json.loads(a), "
    "sort_keys=True)",
    "args-respaced": "tool-call arguments sent back as json.dumps(json.loads(a)): spacing only",
    "reasoning-dropped": "reasoning_content stripped from the history (thinking mode: a 400)",
    "tool-appended": "a sixth tool (git_diff) appended at the end of the list",
    "history-trimmed": "the history trimmed to its last 6 messages before each request",
    "last-user-reworded": "only the last user message of each scenario reworded",
    "system-lines-2": "2 constant lines appended to the system prompt",
    "system-lines-5": "5 constant lines appended to the system prompt",
    "system-lines-8": "8 constant lines appended to the system prompt",
    "first-user-reworded": "the first user message of each scenario reworded (every later "
    "request shifts by a few tokens)",
    "tool-described": "one tool's description reworded (constant for the whole run)",
}

_START: Final = _dt.datetime(2026, 12, 7, 9, 0, 0)


def make_clock(change: str) -> Callable[[], str]:
    """The clock the timestamp changes read: frozen, or one second later on every call."""
    if change == "timestamp-ticking":
        ticks = iter(range(10**6))
        return lambda: (_START + _dt.timedelta(seconds=next(ticks))).strftime("%Y-%m-%d %H:%M:%S")
    return lambda: _START.strftime("%Y-%m-%d %H:%M:%S")


def system_prompt(change: str, clock: Callable[[], str]) -> str:
    lines = list(SYSTEM_RULES)
    if change.startswith("system-lines-"):
        lines += EXTRA_RULES[: int(change.rsplit("-", 1)[1])]
    text = "\n".join(lines)
    if change.startswith("timestamp"):
        text += f"\nCurrent date and time: {clock()}"
    return text


def _tool(name: str, description: str, properties: dict[str, Any], required: list[str]) -> Any:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


def _path(what: str) -> dict[str, str]:
    return {"type": "string", "description": what}


TOOLS: Final = (
    _tool(
        "read_file",
        "Read a text file of the repository and return its content with line numbers.",
        {
            "path": _path("path relative to the repository root"),
            "start_line": {"type": "integer", "description": "first line to return (1-based)"},
        },
        ["path"],
    ),
    _tool(
        "search_code",
        "Search the repository for a regular expression; returns matching lines as "
        "path:line: text.",
        {
            "pattern": _path("a Python regular expression"),
            "path": _path("folder to search (default: the root)"),
        },
        ["pattern"],
    ),
    _tool(
        "list_dir",
        "List the entries of a folder, folders first, with file sizes.",
        {"path": _path("folder relative to the repository root")},
        ["path"],
    ),
    _tool(
        "run_tests",
        "Run pytest on a target (a file, folder or node id) and return the summary and any "
        "failures.",
        {
            "target": _path("what to run, e.g. tests/test_retry.py"),
            "verbose": {"type": "boolean", "description": "include passing tests in the output"},
        },
        ["target"],
    ),
    _tool(
        "write_file",
        "Write a whole text file (creating folders as needed); returns the number of bytes "
        "written.",
        {
            "path": _path("path relative to the repository root"),
            "content": _path("the complete new content"),
        },
        ["path", "content"],
    ),
)

EXTRA_TOOL: Final = _tool(
    "git_diff",
    "Show the uncommitted changes of the working tree as a unified diff.",
    {"path": _path("limit the diff to this path")},
    [],
)

_RETRY_PY: Final = '''"""Retry policy for outgoing HTTP calls."""

from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 4
    base_delay: float = 0.5

    def should_retry(self, attempt, status):
        if attempt > self.max_attempts:
            return False
        return status in (429, 500, 502, 503, 504)
'''

_CLIENT_PY: Final = '''"""The HTTP client every service call goes through."""

import httpx

from .retry import RetryPolicy

POLICY = RetryPolicy()


class Client:
    def get(self, path):
        attempt = 0
        while True:
            attempt += 1
            response = self._http.get(path)
            if response.status_code < 400:
                return response.json()
            if not POLICY.should_retry(attempt, response.status_code):
                response.raise_for_status()
            # TODO: honour Retry-After on 429
'''

_README: Final = "# forge-demo\n\nA small service client.\n\n    pip install forge-demo==0.3\n"

FILES: Final = {
    "src/retry.py": _RETRY_PY,
    "src/client.py": _CLIENT_PY,
    "README.md": _README,
    "pyproject.toml": '[project]\nname = "forge-demo"\nversion = "0.4.1"\n',
    "docs/index.md": "# forge-demo\n\nSee the README.\n",
    "docs/usage.md": "# Usage\n\nCreate a Client and call get().\n",
}


def run_tool(name: str, args: dict[str, Any], files: dict[str, str]) -> str:
    """The tools, over an in-memory repository (deterministic output)."""
    if name == "read_file":
        text = files.get(args.get("path", ""))
        if text is None:
            return f"error: no such file: {args.get('path')}"
        return "\n".join(f"{i:4d}  {line}" for i, line in enumerate(text.splitlines(), 1))
    if name == "search_code":
        import re

        pattern = re.compile(args.get("pattern", ""))
        hits = [
            f"{path}:{i}: {line.strip()}"
            for path, text in sorted(files.items())
            if path.startswith(args.get("path", ""))
            for i, line in enumerate(text.splitlines(), 1)
            if pattern.search(line)
        ]
        return "\n".join(hits) or "no match"
    if name == "list_dir":
        root = args.get("path", "").rstrip("/") + "/"
        entries = sorted(p[len(root) :] for p in files if p.startswith(root))
        return "\n".join(f"{e}  {len(files[root + e])} bytes" for e in entries) or "empty"
    if name == "run_tests":
        target = args.get("target", "")
        if target == "docs":
            return "mkdocs build --strict: 2 pages built, 0 warnings (0.41 s)"
        if ">=" in files.get("src/retry.py", ""):
            return f"pytest {target}: 6 passed in 0.21 s"
        return (
            f"pytest {target}: 5 passed, 1 failed in 0.23 s\n"
            "FAILED tests/test_retry.py::test_gives_up_after_max_attempts - "
            "AssertionError: expected 4 calls, got 5"
        )
    if name == "write_file":
        files[args["path"]] = args.get("content", "")
        return f"wrote {len(args.get('content', '').encode())} bytes to {args['path']}"
    return "no changes"


@dataclass(frozen=True)
class Turn:
    user: str
    match: str
    """A regex the route matches on the last user message (kept by every rewording)."""
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    answer: str = ""
    reasoning: str | None = None
    reworded: str | None = None


@dataclass(frozen=True)
class Scenario:
    name: str
    thinking: bool
    turns: list[Turn]


_FIXED: Final = _RETRY_PY.replace("attempt > self.max_attempts", "attempt >= self.max_attempts")

SCENARIOS: Final = (
    Scenario(
        "bugfix",
        thinking=False,
        turns=[
            Turn(
                "test_retry fails intermittently in CI. Where is the retry policy defined?",
                r"retry policy defined",
                [("search_code", {"pattern": "class RetryPolicy|POLICY =", "path": "src"})],
                "`RetryPolicy` is in `src/retry.py`; `src/client.py` builds `POLICY` from it.",
                reworded="Our retry test is flaky in CI: where is the retry policy defined?",
            ),
            Turn(
                "Show me how it decides whether to retry.",
                r"decides whether to retry",
                [("read_file", {"path": "src/retry.py", "start_line": 1})],
                "`should_retry` gives up only when `attempt > self.max_attempts`: one too many.",
            ),
            Turn(
                "Run the retry tests to confirm.",
                r"retry tests to confirm",
                [("run_tests", {"target": "tests/test_retry.py", "verbose": False})],
                "Confirmed: `test_gives_up_after_max_attempts` fails with 5 calls, not 4.",
            ),
            Turn(
                "Fix the off-by-one and rerun the tests.",
                r"off-by-one",
                [
                    ("write_file", {"path": "src/retry.py", "content": _FIXED}),
                    ("run_tests", {"target": "tests/test_retry.py", "verbose": False}),
                ],
                "Fixed: `should_retry` now stops at `attempt >= self.max_attempts`; all pass.",
            ),
            Turn(
                "Thanks. Summarise the change in one line for the commit message.",
                r"ummari[sz](e|ing) the change",
                [],
                "retry: stop after max_attempts attempts (was max_attempts + 1)",
                reworded="Write a one-line commit message summarising the change.",
            ),
        ],
    ),
    Scenario(
        "review",
        thinking=True,
        turns=[
            Turn(
                "Review src/client.py for error-handling gaps.",
                r"error-handling gaps",
                [("list_dir", {"path": "src"}), ("read_file", {"path": "src/client.py"})],
                "Two gaps: a 429 ignores `Retry-After`, and the loop never sleeps.",
                reasoning="I listed src and read client.py; the loop retries at once.",
                reworded="Please review src/client.py and list its error-handling gaps.",
            ),
            Turn(
                "What exactly happens on a 429 today?",
                r"happens on a 429",
                [("search_code", {"pattern": "429|Retry-After", "path": "src"})],
                "A 429 is retried at once with no delay; `Retry-After` is only a TODO.",
                reasoning="search_code shows 429 among the retried statuses and the TODO.",
            ),
            Turn(
                "Would the current tests catch a regression there?",
                r"tests catch a regression",
                [("run_tests", {"target": "tests/test_client.py", "verbose": True})],
                "No: none of the client tests sends a 429.",
                reasoning="run_tests passes, yet nothing there exercises a 429.",
            ),
            Turn(
                "Write the review as three bullet points.",
                r"three (short )?bullet points",
                [],
                "- Honour `Retry-After`.\n- Sleep between attempts.\n- Add a 429 test.",
                reasoning="Three bullets: Retry-After, backoff, a test.",
                reworded="Give me the review as three short bullet points.",
            ),
        ],
    ),
    Scenario(
        "docs",
        thinking=False,
        turns=[
            Turn(
                "List the docs folder.",
                r"docs folder",
                [("list_dir", {"path": "docs"})],
                "`docs/` holds `index.md` and `usage.md`.",
                reworded="What is in the docs folder? List it.",
            ),
            Turn(
                "Read the README.",
                r"Read the README",
                [("read_file", {"path": "README.md"})],
                "The README installs `forge-demo==0.3`.",
            ),
            Turn(
                "Is the install line up to date with pyproject?",
                r"up to date with pyproject",
                [("read_file", {"path": "pyproject.toml"})],
                "No: `pyproject.toml` says 0.4.1, the README installs 0.3.",
            ),
            Turn(
                "Update the install line in the README.",
                r"Update the install line",
                [("write_file", {"path": "README.md", "content": _README.replace("0.3", "0.4.1")})],
                "Updated: the README now installs `forge-demo==0.4.1`.",
            ),
            Turn(
                "Check that the docs still build.",
                r"docs still build",
                [("run_tests", {"target": "docs"})],
                "The docs build: 2 pages, no warnings.",
            ),
            Turn(
                "Thanks, that's all for now.",
                r"that's all",
                [],
                "You're welcome.",
                reworded="Great, that's all I needed, thanks.",
            ),
        ],
    ),
)


def routes(scenario: Scenario) -> list[dict[str, Any]]:
    """The mock's answers for one scenario, as ``POST /_dsh/routes`` documents."""
    out: list[dict[str, Any]] = []
    for turn in scenario.turns:
        match: dict[str, Any] = {"lastUser": {"regex": turn.match}}
        steps: list[dict[str, Any]] = []
        for name, args in turn.calls:
            entry: dict[str, Any] = {"toolCalls": [{"name": name, "arguments": args}]}
            if turn.reasoning is not None:
                entry["reasoning"] = f"{turn.reasoning} Next: call {name}."
            steps.append(entry)
        final: dict[str, Any] = {"text": turn.answer}
        if turn.reasoning is not None:
            final["reasoning"] = turn.reasoning
        steps.append(final)
        out.append({"match": {**match, "afterToolResult": False}, "reply": steps[0]})
        if len(steps) > 1:
            rest = steps[1:]
            later: dict[str, Any] = {"match": {**match, "afterToolResult": True}}
            if len(rest) == 1:
                later["reply"] = rest[0]
            else:
                later["replies"] = rest
            out.append(later)
    return out


def _trim(history: list[dict[str, Any]], keep: int = 6) -> list[dict[str, Any]]:
    if len(history) <= keep:
        return history
    tail = history[-keep:]
    while tail and tail[0]["role"] != "user":
        tail = tail[1:]
    return tail or history[-1:]


def _user_text(change: str, scenario: Scenario, i: int) -> str:
    turn = scenario.turns[i]
    last = i == len(scenario.turns) - 1
    if turn.reworded and (
        (change == "last-user-reworded" and last) or (change == "first-user-reworded" and i == 0)
    ):
        return turn.reworded
    return turn.user


def _tools(change: str, sent: int) -> list[Any]:
    tools = [dict(t) for t in TOOLS]
    if change == "tool-appended":
        tools.append(EXTRA_TOOL)
    if change == "tool-described":
        first = json.loads(json.dumps(tools[0]))
        first["function"]["description"] = "Return a repository file's text, lines numbered."
        tools[0] = first
    if change == "tools-reordered":
        k = sent % len(tools)
        tools = tools[k:] + tools[:k]
    return tools


def _echo(change: str, message: Any) -> dict[str, Any]:
    """The assistant turn as the agent keeps it in its history."""
    if change not in ("args-reserialized", "args-respaced") or not message.tool_calls:
        dumped: dict[str, Any] = message.model_dump(exclude_none=True)
        return dumped
    kept: dict[str, Any] = {"role": "assistant", "content": message.content or ""}
    reasoning = getattr(message, "reasoning_content", None)
    if reasoning is not None:
        kept["reasoning_content"] = reasoning
    kept["tool_calls"] = [
        {
            "id": call.id,
            "type": "function",
            "function": {
                "name": call.function.name,
                "arguments": json.dumps(
                    json.loads(call.function.arguments), sort_keys=change == "args-reserialized"
                ),
            },
        }
        for call in message.tool_calls
    ]
    return kept


def run_scenario(
    client: openai.OpenAI, scenario: Scenario, change: str, clock: Callable[[], str]
) -> None:
    """Play one scenario; raises what the SDK raises (a refused request: a 400)."""
    history: list[dict[str, Any]] = []
    files = dict(FILES)
    sent = 0
    extra_body = {"thinking": {"type": "enabled" if scenario.thinking else "disabled"}}
    headers = {"x-dsh-conversation": scenario.name}
    for i in range(len(scenario.turns)):
        history.append({"role": "user", "content": _user_text(change, scenario, i)})
        while True:
            messages = [dict(m) for m in history] if change == "refactor" else list(history)
            if change == "history-trimmed":
                messages = _trim(messages)
            if change == "reasoning-dropped":
                messages = [
                    {k: v for k, v in m.items() if k != "reasoning_content"} for m in messages
                ]
            wire: Any = [{"role": "system", "content": system_prompt(change, clock)}, *messages]
            reply = client.chat.completions.create(
                model=MODEL,
                messages=wire,
                tools=_tools(change, sent),
                extra_body=extra_body,
                extra_headers=headers,
            )
            sent += 1
            message = reply.choices[0].message
            history.append(_echo(change, message))
            if not message.tool_calls:
                break
            for call in message.tool_calls:
                function = getattr(call, "function", None)
                assert function is not None
                result = run_tool(function.name, json.loads(function.arguments), files)
                history.append({"role": "tool", "tool_call_id": call.id, "content": result})
