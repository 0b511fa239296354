"""A trajectory: what an agent did, as data — its tool calls in order with their arguments and
results, its answers, and the model turns they came in.

One :class:`Turn` is one model call (a request and its answer: pydantic-ai's
``ModelRequest``/``ModelResponse`` pair); its :attr:`Turn.steps` are what the answer held — the
text it said (an :class:`AnswerStep`), then the tools it called (one :class:`ToolStep` each,
with the result the agent sent back for it in a later request). :attr:`Turn.user` is the user
message the call answered, when the request ended with one: where a user's turn begins.

The same types describe an *expected* trajectory, written by hand with :func:`tool` and
:func:`answer`; there a field left ``None`` is not compared (``tool("search")``: any
arguments), and a value is compared with ``expected == actual`` (so ``unittest.mock.ANY`` and
dirty-equals matchers work) or, for a compiled regex, ``re.search``. Both round-trip through
JSON (:meth:`Trajectory.to_json`, the ``dsh-trajectory`` format, version 1) when their values
are JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from ._errors import TrajectoryError

__all__ = [
    "TRAJECTORY_FORMAT",
    "TRAJECTORY_VERSION",
    "AnswerStep",
    "Step",
    "ToolStep",
    "Trajectory",
    "Turn",
    "answer",
    "shown",
    "tool",
]

TRAJECTORY_FORMAT: Final = "dsh-trajectory"
TRAJECTORY_VERSION: Final = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolStep:
    """One tool call: its name, arguments and the result the agent sent back."""

    name: str
    """The tool's name."""
    args: Any = None
    """The arguments: the parsed JSON object the model sent (its raw string when it is not
    JSON). Expected: ``None`` compares none."""
    result: Any = None
    """The result the agent sent back (a tool message's text); ``None`` when the recording
    holds none (the run ended first). Expected: ``None`` compares none."""
    id: str | None = None
    """The call's id on the wire (never compared)."""
    kind: Literal["tool"] = "tool"

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise TrajectoryError(f"a tool step needs a non-empty name, got {self.name!r}")

    def describe(self) -> str:
        """``get_weather({"city":"Oslo"}) → "light snow"``."""
        args = "…" if self.args is None else shown(self.args, limit=60)
        out = f"{self.name}({args})"
        if self.result is not None:
            out += f" → {shown(self.result, limit=40)}"
        return out

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": "tool", "name": self.name}
        if self.args is not None:
            out["args"] = self.args
        if self.result is not None:
            out["result"] = self.result
        if self.id is not None:
            out["id"] = self.id
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class AnswerStep:
    """Text the model said: a final answer, or what it wrote beside its tool calls."""

    text: Any = None
    """The text. Expected: ``None`` matches any answer; a string equals; a compiled regex
    searches; anything else compares with ``==``."""
    kind: Literal["answer"] = "answer"

    def describe(self) -> str:
        return "answer " + ("…" if self.text is None else shown(self.text, limit=80))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": "answer"}
        if self.text is not None:
            out["text"] = self.text
        return out


Step: TypeAlias = ToolStep | AnswerStep
"""One step of a trajectory (switch on ``kind``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Turn:
    """One model call and the steps its answer held."""

    steps: tuple[Step, ...]
    """The answer's text first (when it had any), then its tool calls in the order sent."""
    user: str | None = None
    """The user message this call answered, when the request ended with one (a user's turn
    begins here); ``None`` after tool results, and in a hand-written trajectory."""
    reasoning: str | None = None
    """The reasoning the answer carried (thinking mode); never compared."""
    exchange: int | None = None
    """The request's index in the trace it came from."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"steps": [s.to_json() for s in self.steps]}
        if self.user is not None:
            out["user"] = self.user
        if self.reasoning is not None:
            out["reasoning"] = self.reasoning
        if self.exchange is not None:
            out["exchange"] = self.exchange
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Trajectory:
    """Turns in order. ``grouped`` says whether the turn boundaries are known: a recorded
    trajectory's are; a hand-written one's only when it was written in groups (see
    :meth:`of`), and only then does an ``exact`` match compare them."""

    turns: tuple[Turn, ...]
    grouped: bool = True

    @classmethod
    def of(cls, *items: Step | Sequence[Step]) -> Trajectory:
        """An expected trajectory: steps, or groups of steps (a list per model turn)::

            Trajectory.of(tool("get_weather", city="Oslo"), answer("Light snow."))
            Trajectory.of([tool("get_weather", city="Oslo"), tool("get_time")], [answer()])

        Give groups for every item or for none."""
        groups = [isinstance(i, Sequence) and not isinstance(i, str) for i in items]
        if any(groups) and not all(groups):
            raise TrajectoryError(
                "give every item as a group (a list of steps per model turn) or none: "
                f"items {[i for i, g in enumerate(groups) if not g]} are single steps"
            )
        if all(groups) and items:
            turns = tuple(
                Turn(steps=_steps(group, where=f"turn {n}"))
                for n, group in enumerate(items, 1)
                if isinstance(group, Sequence)
            )
            return cls(turns=turns, grouped=True)
        return cls(turns=(Turn(steps=_steps(items, where="steps")),), grouped=False)

    # -- views ----------------------------------------------------------------------------------

    @property
    def steps(self) -> tuple[Step, ...]:
        """Every step, in order, across turns."""
        return tuple(step for turn in self.turns for step in turn.steps)

    @property
    def tool_calls(self) -> tuple[ToolStep, ...]:
        """The tool steps, in order."""
        return tuple(s for s in self.steps if isinstance(s, ToolStep))

    @property
    def tool_names(self) -> tuple[str, ...]:
        """The tools called, in order (repeats kept)."""
        return tuple(s.name for s in self.tool_calls)

    @property
    def answers(self) -> tuple[str, ...]:
        """The texts the model said, in order."""
        return tuple(s.text for s in self.steps if isinstance(s, AnswerStep))

    @property
    def final_answer(self) -> str | None:
        """The last turn's text when that turn called no tool (the run's answer), else
        ``None``."""
        if not self.turns:
            return None
        last = self.turns[-1]
        if any(isinstance(s, ToolStep) for s in last.steps):
            return None
        texts = [s.text for s in last.steps if isinstance(s, AnswerStep)]
        return texts[-1] if texts else None

    def __iter__(self) -> Iterator[Step]:
        return iter(self.steps)

    def __len__(self) -> int:
        return len(self.steps)

    def __str__(self) -> str:
        return "\n".join(self.lines()) or "(no steps)"

    def lines(self) -> list[str]:
        """The trajectory as text: one line per step, numbered, under its turn."""
        out: list[str] = []
        n = 0
        for t, turn in enumerate(self.turns, 1):
            if self.grouped:
                head = f"turn {t}"
                if turn.user is not None:
                    head += f" (user: {shown(turn.user, limit=60)})"
                out.append(head)
            for step in turn.steps:
                n += 1
                out.append(f"{'  ' if self.grouped else ''}{n}. {step.describe()}")
        return out

    # -- JSON -----------------------------------------------------------------------------------

    def to_json(self) -> dict[str, Any]:
        """The ``dsh-trajectory`` document (version 1)."""
        return {
            "format": TRAJECTORY_FORMAT,
            "version": TRAJECTORY_VERSION,
            "grouped": self.grouped,
            "turns": [turn.to_json() for turn in self.turns],
        }

    @classmethod
    def from_json(cls, document: object) -> Trajectory:
        """A trajectory from its ``dsh-trajectory`` document; :class:`TrajectoryError` names
        the bad field."""
        if not isinstance(document, Mapping):
            raise TrajectoryError(f"a trajectory document is an object, got {document!r:.60}")
        if document.get("format") != TRAJECTORY_FORMAT:
            raise TrajectoryError(
                f"format: expected {TRAJECTORY_FORMAT!r}, got {document.get('format')!r}"
            )
        if document.get("version") != TRAJECTORY_VERSION:
            raise TrajectoryError(
                f"version: this kit reads version {TRAJECTORY_VERSION}, got "
                f"{document.get('version')!r}"
            )
        turns = document.get("turns")
        if not isinstance(turns, list):
            raise TrajectoryError("turns: expected a list")
        grouped = document.get("grouped", True)
        if not isinstance(grouped, bool):
            raise TrajectoryError(f"grouped: expected true or false, got {grouped!r}")
        return cls(
            turns=tuple(_turn_from_json(t, f"turns[{i}]") for i, t in enumerate(turns)),
            grouped=grouped,
        )


def _turn_from_json(obj: object, where: str) -> Turn:
    if not isinstance(obj, Mapping) or not isinstance(obj.get("steps"), list):
        raise TrajectoryError(f"{where}: expected an object with a 'steps' list")
    steps: list[Step] = []
    for i, s in enumerate(obj["steps"]):
        path = f"{where}.steps[{i}]"
        if not isinstance(s, Mapping):
            raise TrajectoryError(f"{path}: expected an object")
        if s.get("kind") == "tool":
            if not isinstance(s.get("name"), str):
                raise TrajectoryError(f"{path}.name: expected a string")
            steps.append(
                ToolStep(name=s["name"], args=s.get("args"), result=s.get("result"), id=s.get("id"))
            )
        elif s.get("kind") == "answer":
            steps.append(AnswerStep(text=s.get("text")))
        else:
            raise TrajectoryError(
                f"{path}.kind: expected 'tool' or 'answer', got {s.get('kind')!r}"
            )
    for key in ("user", "reasoning"):
        if obj.get(key) is not None and not isinstance(obj[key], str):
            raise TrajectoryError(f"{where}.{key}: expected a string")
    exchange = obj.get("exchange")
    if exchange is not None and (not isinstance(exchange, int) or isinstance(exchange, bool)):
        raise TrajectoryError(f"{where}.exchange: expected an integer")
    return Turn(
        steps=tuple(steps), user=obj.get("user"), reasoning=obj.get("reasoning"), exchange=exchange
    )


def _steps(items: Sequence[object], *, where: str) -> tuple[Step, ...]:
    out: list[Step] = []
    for i, item in enumerate(items):
        if not isinstance(item, (ToolStep, AnswerStep)):
            raise TrajectoryError(
                f"{where}[{i}]: expected a step (tool(...) or answer(...)), got {item!r:.60}"
            )
        out.append(item)
    return tuple(out)


def tool(
    name: str, args: Mapping[str, Any] | None = None, /, *, result: Any = None, **kwargs: Any
) -> ToolStep:
    """An expected tool call: ``tool("get_weather", city="Oslo")`` or
    ``tool("get_weather", {"city": "Oslo"}, result="light snow")``. Without arguments, any
    arguments match (``tool("f", {})`` asks for none); without ``result``, any result does."""
    if args is not None and kwargs:
        raise TrajectoryError(f"tool({name!r}): give the arguments as a mapping or as keywords")
    if args is not None and not isinstance(args, Mapping):
        raise TrajectoryError(f"tool({name!r}): arguments must be a mapping, got {args!r:.60}")
    return ToolStep(name=name, args=dict(kwargs) if kwargs else args, result=result)


def answer(text: Any = None) -> AnswerStep:
    """An expected answer: its text (``==``), a compiled regex (searched), or nothing (any
    answer)."""
    return AnswerStep(text=text)


def shown(value: Any, *, limit: int = 80) -> str:
    """A value in a line: JSON when it is JSON (compact), its ``repr`` otherwise (a matcher),
    cut at ``limit``."""
    if isinstance(value, re.Pattern):
        text = f"/{value.pattern}/"
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
        except (TypeError, ValueError):
            text = repr(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
