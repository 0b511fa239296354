"""Strategies for the core's values: JSON, system prompts, tools, call configs, headers and
header deltas (see the package docstring)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar, cast

from hypothesis import assume
from hypothesis import strategies as st

from dsh_core import (
    EpochHeader,
    HeaderDelta,
    LlmCallConfig,
    ToolSchema,
    ToolsPlaceholder,
    diff_header,
    freeze_json,
)

__all__ = [
    "call_configs",
    "edited_headers",
    "epoch_headers",
    "header_deltas",
    "header_pairs",
    "header_sequences",
    "json_values",
    "system_lines",
    "system_prompts",
    "tool_lists",
    "tool_names",
    "tool_schemas",
]

MAX_SAFE_INTEGER = 2**53 - 1

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _cached(factory: Callable[_P, _R]) -> Callable[_P, _R]:
    # Strategies are immutable and validating a fresh one is the dominant cost of drawing from
    # a composite in a loop, so each factory builds its strategy once per argument set.
    return cast(Callable[_P, _R], functools.cache(factory))


# Lines that recur across prompts, so edits produce duplicated lines and ambiguous
# common-prefix/suffix alignments; CRLF remnants and non-ASCII text included.
_COMMON_LINES = (
    "",
    "You are a careful coding agent.",
    "Be brief.",
    "# Rules",
    "- Use the tools.",
    "- Use the tools.",
    "  indented line",
    "line with a CR\r",
    "\r",
    "Grüße, 你好, مرحبا, 🙂",
    "{{cwd}}",
)


# ------------------------------------------------------------------------------------------ JSON


@_cached
def json_values(*, max_leaves: int = 20) -> st.SearchStrategy[Any]:
    """Lossless JSON values: what :func:`dsh_core.freeze_json` accepts (``-0.0`` excluded)."""
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER),
        st.floats(allow_nan=False, allow_infinity=False).map(lambda x: x + 0.0),  # no -0.0
        st.text(),
    )
    return st.recursive(
        scalars,
        lambda children: st.one_of(
            st.lists(children, max_size=4),
            st.dictionaries(st.text(max_size=8), children, max_size=4),
        ),
        max_leaves=max_leaves,
    )


# ------------------------------------------------------------------------------- system prompts


@_cached
def system_lines() -> st.SearchStrategy[str]:
    """One line of a system prompt (no ``\\n``): common lines often, so duplicates occur."""
    return st.one_of(
        st.sampled_from(_COMMON_LINES),
        st.text(st.characters(blacklist_characters="\n"), max_size=30),
    )


@_cached
def system_prompts(*, empty: bool = True) -> st.SearchStrategy[str | None]:
    """System prompts of 1–12 lines, some CRLF-terminated, some repeated — and, unless ``empty``
    is false, also ``None`` and ``""``.

    ``None`` (no system prompt) and ``""`` (an empty one) are yielded on purpose: a header keeps
    them apart (``EpochHeader.system``), and the header codec and the request builders must not
    confuse them. Pass ``empty=False`` where a test needs a prompt with text (a lines-of-text
    property, a prompt that must reach the wire: serializers send no system message for ``""``).
    """
    text = st.lists(system_lines(), min_size=1, max_size=12).map("\n".join)
    crlf = st.lists(system_lines(), min_size=1, max_size=6).map(
        lambda lines: "\r\n".join(lines) + "\r\n"
    )
    if not empty:
        # A prompt of only empty lines joined by "\n" can still be "": keep the text ones.
        return st.one_of(text, crlf).filter(bool)
    return st.one_of(text, crlf, st.none(), st.just(""))


# -------------------------------------------------------------------------------------- tools


@_cached
def tool_names() -> st.SearchStrategy[str]:
    """Tool names: ``snake_case``-like, from a space large enough that collisions are rare."""
    return st.from_regex(r"[a-z][a-z0-9_]{0,11}", fullmatch=True)


def _schema(properties: dict[str, Any], required: list[str], first: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"properties": properties, "required": required}
    # Key order is part of what the model sees: generate both orders.
    return {"type": "object", **body} if first else {**body, "type": "object"}


@_cached
def _properties() -> st.SearchStrategy[dict[str, Any]]:
    prop = st.fixed_dictionaries(
        {"type": st.sampled_from(["string", "integer", "boolean", "number"])},
        optional={"description": st.text(max_size=20)},
    )
    return st.dictionaries(tool_names(), prop, max_size=4)


@st.composite
def _parameters_drawn(draw: st.DrawFn) -> dict[str, Any]:
    # Drawn step by step from strategies built once: a strategy built per example (a flatmap)
    # is validated per example, which made drawing tool lists several times slower.
    properties = draw(_properties())
    required = [name for name in sorted(properties) if draw(st.booleans())]
    for k in range(len(required) - 1, 0, -1):  # the required names in any order
        j = draw(st.integers(0, k))
        required[k], required[j] = required[j], required[k]
    return _schema(properties, required, draw(st.booleans()))


@_cached
def _parameters() -> st.SearchStrategy[dict[str, Any]]:
    return _parameters_drawn()


@_cached
def _descriptions() -> st.SearchStrategy[str]:
    return st.one_of(st.just(""), st.text(max_size=40))


def tool_schemas(name: st.SearchStrategy[str] | None = None) -> st.SearchStrategy[ToolSchema]:
    """A :class:`ToolSchema` with a JSON Schema ``parameters`` object and any description."""
    return st.builds(
        lambda n, d, p: ToolSchema(name=n, description=d, parameters=p),
        name if name is not None else tool_names(),
        _descriptions(),
        _parameters(),
    )


@_cached
def tool_lists(*, min_size: int = 0, max_size: int = 8) -> st.SearchStrategy[list[ToolSchema]]:
    """Tool lists with unique names, in any (not only sorted) order."""
    return st.lists(
        tool_schemas(), min_size=min_size, max_size=max_size, unique_by=lambda t: t.name
    )


# ------------------------------------------------------------------------------------ headers


@_cached
def call_configs() -> st.SearchStrategy[LlmCallConfig]:
    """Call configs, including ``stop=()`` (distinct from absent) and integer temperatures."""
    return st.builds(
        LlmCallConfig,
        provider=st.sampled_from(["deepseek", "deepseek-official", "anthropic"]),
        model=st.sampled_from(["deepseek-v4-flash", "deepseek-v4-pro", "claude-x"]),
        reasoning_effort=st.one_of(st.none(), st.sampled_from(["high", "max"])),
        temperature=st.one_of(
            st.none(), st.sampled_from([0, 1]), st.floats(min_value=0, max_value=2)
        ),
        max_tokens=st.one_of(st.none(), st.integers(min_value=1, max_value=256_000)),
        stop=st.one_of(st.none(), st.lists(st.text(max_size=5), max_size=3).map(tuple)),
    )


@_cached
def epoch_headers() -> st.SearchStrategy[EpochHeader]:
    """Headers with absent, empty or populated system prompt and tools (often several tools,
    so edits can insert mid-list and reorder)."""
    # Hypothesis leans towards the first alternative: several tools come first on purpose.
    tools = st.one_of(
        tool_lists(min_size=3).map(tuple),
        tool_lists(min_size=2).map(tuple),
        st.none(),
        st.just(()),
        tool_lists(min_size=1).map(tuple),
    )
    return st.builds(
        lambda c, s, t: EpochHeader(config=c, system=s, tools=t),
        call_configs(),
        system_prompts(),
        tools,
    )


def _lines(system: str | None) -> list[str]:
    return system.split("\n") if system else []


def _join(lines: list[str]) -> str | None:
    return "\n".join(lines) if lines else None


@st.composite
def _edit_system(draw: st.DrawFn, system: str | None) -> str | None:
    lines = _lines(system)
    if system is None:  # flip between absent and empty on purpose
        ops = ["empty", "new"]
    elif not system:
        ops = ["absent", "new"]
    else:
        ops = ["duplicate", "crlf", "replace", "insert", "delete", "empty", "absent", "new"]
    op = draw(st.sampled_from(ops))
    if op == "empty":
        return ""
    if op == "absent":
        return None
    if op == "new" or not lines:
        return _join(draw(st.lists(system_lines(), min_size=1, max_size=6)))
    i = draw(st.integers(0, len(lines) - 1))
    if op == "replace":
        lines[i] = draw(system_lines())
    elif op == "insert":
        at = draw(st.integers(0, len(lines)))
        lines[at:at] = draw(st.lists(system_lines(), min_size=1, max_size=3))
    elif op == "delete":
        j = draw(st.integers(i, len(lines) - 1))
        del lines[i : j + 1]
    elif op == "duplicate":
        at = draw(st.integers(0, len(lines)))
        lines.insert(at, lines[i])
    else:  # crlf: one line, or every line, gains a trailing CR
        if draw(st.booleans()):
            lines[i] += "\r"
        else:
            lines = [line + "\r" for line in lines]
    return _join(lines)


def _positions(length: int) -> st.SearchStrategy[int]:
    """An insertion index into a list of ``length``: strictly inside it when possible."""
    anywhere = st.integers(0, length)
    return st.one_of(st.integers(1, length - 1), anywhere) if length >= 2 else anywhere


@st.composite
def _edit_tools(
    draw: st.DrawFn, tools: tuple[ToolSchema, ...] | None
) -> tuple[ToolSchema, ...] | None:
    current = list(tools or ())
    names = {t.name for t in current}
    fresh = tool_schemas(tool_names().filter(lambda n: n not in names))
    if tools is None:  # flip between absent and empty on purpose
        ops = ["empty", "insert"]
    elif not tools:
        ops = ["absent", "insert"]
    else:
        ops = [
            "insert",
            "change_move",
            "reorder",
            "insert",
            "change_move",
            "swap",
            "remove",
            "change",
            "empty",
            "absent",
        ]
    op = draw(st.sampled_from(ops))
    if op == "empty":
        return ()
    if op == "absent":
        return None
    if op == "insert" or not current:
        # The middle on purpose (the case a name-keyed codec without positions misses), or anywhere.
        current.insert(draw(_positions(len(current))), draw(fresh))
        return tuple(current)
    i = draw(st.integers(0, len(current) - 1))
    if op == "remove":
        del current[i]
    elif op == "reorder":
        shuffled = list(draw(st.permutations(current)))
        if shuffled == current:  # the identity is a permutation too; move one tool instead
            shuffled = shuffled[1:] + shuffled[:1]
        current = shuffled
    elif op == "swap":
        j = i
        if len(current) >= 2:  # another tool whenever there is another
            j = draw(st.integers(0, len(current) - 2))
            j += j >= i
        current[i], current[j] = current[j], current[i]
    else:  # change (and for change_move, also move) one tool's schema
        old = current[i]
        new = ToolSchema(
            name=old.name,
            description=draw(_descriptions()),
            parameters=freeze_json(draw(_parameters()), path="parameters"),
        )
        if new == old:  # a change on purpose
            new = ToolSchema(
                name=old.name, description=f"{old.description} (edited)", parameters=old.parameters
            )
        del current[i]
        at = i
        if op == "change_move" and current:  # somewhere else whenever there is somewhere else
            at = draw(st.integers(0, len(current) - 1))
            at += at >= i
        current.insert(at, new)
    return tuple(current)


@st.composite
def _edit_config(draw: st.DrawFn, config: LlmCallConfig) -> LlmCallConfig:
    fields = config.to_json()
    op = draw(st.sampled_from(["model", "temperature", "stop", "effort", "any"]))
    if op == "model":
        fields["model"] = draw(st.sampled_from(["deepseek-v4-flash", "deepseek-v4-pro", "m2"]))
    elif op == "temperature":
        fields["temperature"] = draw(st.sampled_from([0, 0.5, 1, 1.0]))
    elif op == "stop":  # absent ↔ [] ↔ populated
        stop = fields.pop("stop", None)
        if stop is None:
            fields["stop"] = draw(st.sampled_from([[], ["<END>"]]))
    elif op == "effort":
        if fields.pop("reasoningEffort", None) is None:
            fields["reasoningEffort"] = "max"
    else:
        return draw(call_configs())
    return LlmCallConfig.from_json(fields)


@st.composite
def _edited(draw: st.DrawFn, base: EpochHeader, max_edits: int) -> EpochHeader:
    system = base.system
    tools = base.tools if not isinstance(base.tools, ToolsPlaceholder) else None
    config = base.config
    # Mostly one edit (each hard case in its pure form), sometimes none or several at once.
    count = draw(st.sampled_from((1, 1, 1, 0, 2, max_edits)))
    for _ in range(min(count, max_edits)):
        part = draw(st.sampled_from(["tools", "system", "tools", "config"]))
        if part == "system":
            system = draw(_edit_system(system))
        elif part == "tools":
            tools = draw(_edit_tools(tools))
        else:
            config = draw(_edit_config(config))
    return EpochHeader(config=config, system=system, tools=tools)


def edited_headers(base: EpochHeader, *, max_edits: int = 4) -> st.SearchStrategy[EpochHeader]:
    """``base`` after 0–``max_edits`` deliberate edits (0 edits gives an equal header)."""
    return _edited(base, max_edits)


@_cached
def header_pairs(*, max_edits: int = 4) -> st.SearchStrategy[tuple[EpochHeader, EpochHeader]]:
    """``(before, after)`` where ``after`` is ``before`` with a few deliberate edits."""
    return epoch_headers().flatmap(
        lambda before: edited_headers(before, max_edits=max_edits).map(
            lambda after: (before, after)
        )
    )


@st.composite
def _sequence(draw: st.DrawFn, min_size: int, max_size: int, max_edits: int) -> list[EpochHeader]:
    headers = [draw(epoch_headers())]
    for _ in range(draw(st.integers(min_size - 1, max_size - 1))):
        headers.append(draw(edited_headers(headers[-1], max_edits=max_edits)))
    return headers


@_cached
def header_sequences(
    *, min_size: int = 1, max_size: int = 6, max_edits: int = 3
) -> st.SearchStrategy[list[EpochHeader]]:
    """Successive headers of one conversation, each an edit of the one before."""
    if min_size < 1:
        raise ValueError("a header sequence has at least one header")
    return _sequence(min_size, max_size, max_edits)


@st.composite
def _header_deltas(draw: st.DrawFn) -> tuple[EpochHeader, HeaderDelta]:
    before, after = draw(header_pairs(max_edits=4))
    delta = diff_header(before, after)
    assume(delta is not None)
    assert delta is not None
    return before, delta


@_cached
def header_deltas() -> st.SearchStrategy[tuple[EpochHeader, HeaderDelta]]:
    """``(base, delta)`` where ``delta`` is a real change that applies to ``base``."""
    return _header_deltas()
