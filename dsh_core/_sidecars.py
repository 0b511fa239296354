"""Placeholders of normalized logs, and the sidecar files that fill them.

The reference harness stores its snapshot logs normalized: the header's system prompt is
``"{{system}}"``, its tools ``"{{tools}}"`` (or a list of tool names), each message-prefix entry
``"{{messagePrefix}}"``, and strings such as the working directory read ``{{cwd}}``. A "pin"
scenario keeps the real values beside the log in sidecar files:

- ``system-prompt.expected.md``: one prompt per header epoch, newline-terminated, the prompts of
  later epochs each introduced by a ``<!-- request/header change k -->`` line between blank lines;
- ``tool-schemas.expected.json``: ``{"initial": [schema, …], "changes": [[schema, …], …]}``;
- ``message-prefix.expected.json`` (this project's convention, same shape, messages as JSON).

A log named ``session.N.jsonl`` (a subagent's) uses ``system-prompt.N.expected.md`` and so on.
A header *epoch* is the initial ``request/header`` snapshot and each later snapshot with reason
``change`` or ``fallback`` (a ``resume`` snapshot stays in the epoch before it).

:class:`Sidecars` is the public API: ``load_session(path, fill=Sidecars.from_dir(dir))``, or
:meth:`Sidecars.fill` on a loaded log. Filling rewrites the header events in memory (the file is
never touched); a placeholder with no sidecar value stays, and sending a request that still holds
one raises :class:`UnfilledPlaceholderError` naming it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Protocol, TypeVar

from ._errors import DshError, HeaderError, SidecarError
from ._events import Event
from ._header import ToolSchema, is_placeholder
from ._json import FrozenDict, freeze_json, thaw_json
from ._messages import Message

if TYPE_CHECKING:
    from ._session import SessionInfo


class _LoadedLike(Protocol):
    """What :meth:`Sidecars.fill` reads of a loaded log (``persistence.LoadedLog``), named
    structurally so this module does not import the persistence layer."""

    @property
    def info(self) -> SessionInfo: ...

    @property
    def events(self) -> tuple[Event, ...]: ...

    @property
    def closers(self) -> tuple[Event, ...]: ...


_Loaded = TypeVar("_Loaded", bound=_LoadedLike)

__all__ = ["PLACEHOLDERS", "Sidecars", "sidecar_paths"]

PLACEHOLDERS: Final = ("{{system}}", "{{tools}}", "{{messagePrefix}}", "{{cwd}}", "{{sessionId}}")
"""The placeholders the reference harness's normalizer writes."""

_CHANGE_MARK: Final = re.compile(r"\n\n<!-- request/header change (\d+) -->\n\n")
_EPOCH_REASONS: Final = frozenset({"change", "fallback"})


def sidecar_paths(log: str | os.PathLike[str]) -> dict[str, Path]:
    """The sidecar files that belong to ``log`` (present or not), by kind.

    ``session.jsonl`` → ``system-prompt.expected.md``; ``session.2.jsonl`` →
    ``system-prompt.2.expected.md``; the same for ``tool-schemas`` and ``message-prefix``. A
    compressed log's suffix is not part of its name (``session.2.jsonl.zstd`` is
    ``session.2.jsonl``'s: the reference harness compresses its logs by default).
    """
    path = Path(log)
    name = path.name
    for suffix in (".zstd", ".zst", ".gz"):
        name = name.removesuffix(suffix)
    stem = name.removesuffix(".jsonl")
    index = stem.rsplit(".", 1)[1] if "." in stem and stem.rsplit(".", 1)[1].isdigit() else ""
    infix = f".{index}" if index else ""
    return {
        "system": path.parent / f"system-prompt{infix}.expected.md",
        "tools": path.parent / f"tool-schemas{infix}.expected.json",
        "messagePrefix": path.parent / f"message-prefix{infix}.expected.json",
    }


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SidecarError(
            f"cannot read sidecar {path}: {exc.strerror or exc}", path=str(path)
        ) from exc
    except UnicodeDecodeError as exc:
        raise SidecarError(
            f"sidecar {path} is not UTF-8 text (byte {exc.start}: {exc.reason})", path=str(path)
        ) from exc


def _prompts(text: str, path: Path) -> tuple[str, ...]:
    parts = _CHANGE_MARK.split(text)
    prompts = [parts[0]]
    for k, (number, body) in enumerate(zip(parts[1::2], parts[2::2], strict=True), start=1):
        if int(number) != k:
            raise SidecarError(
                f"{path.name}: change marker {number} where change {k} was expected",
                path=str(path),
            )
        prompts.append(body)
    # The file is newline-terminated; the prompts themselves are not.
    prompts[-1] = prompts[-1].removesuffix("\n")
    return tuple(prompts)


def _epochs_json(text: str, path: Path) -> list[Any]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise SidecarError(f"{path.name} is not valid JSON: {exc}", path=str(path)) from exc
    if (
        not isinstance(value, dict)
        or set(value) != {"initial", "changes"}
        or not isinstance(value["initial"], list)
        or not isinstance(value["changes"], list)
        or not all(isinstance(c, list) for c in value["changes"])
    ):
        raise SidecarError(
            f'{path.name} must be {{"initial": [...], "changes": [[...], ...]}}', path=str(path)
        )
    return [value["initial"], *value["changes"]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Sidecars:
    """Real values for a normalized log's placeholders, one entry per header epoch."""

    system_prompts: tuple[str, ...] | None = None
    """The system prompt of each header epoch (``None``: no prompt sidecar)."""
    tool_lists: tuple[tuple[ToolSchema, ...], ...] | None = None
    """The tool schemas of each header epoch, in the order the model saw them."""
    message_prefixes: tuple[tuple[Message, ...], ...] | None = None
    """The message prefix of each header epoch; each ``{{messagePrefix}}`` entry takes the
    message at its position."""
    values: FrozenDict = field(default_factory=FrozenDict)
    """Inline placeholders replaced inside every string of the log, e.g.
    ``{"{{cwd}}": "/home/me/project"}`` (the session header record included)."""
    source: str | None = None
    """Where the sidecars were read from (for messages)."""

    def __post_init__(self) -> None:
        for key in self.values:
            if not is_placeholder(key) or not isinstance(self.values[key], str):
                raise SidecarError(
                    f"sidecar values map placeholders such as '{{{{cwd}}}}' to strings, got "
                    f"{key!r}: {self.values[key]!r}",
                    path=self.source,
                )
        if type(self.values) is not FrozenDict:
            object.__setattr__(self, "values", FrozenDict(dict(self.values)))

    @property
    def empty(self) -> bool:
        """Nothing to fill."""
        return (
            self.system_prompts is None
            and self.tool_lists is None
            and self.message_prefixes is None
            and not self.values
        )

    @classmethod
    def from_dir(
        cls,
        directory: str | os.PathLike[str],
        *,
        log_name: str = "session.jsonl",
        values: Mapping[str, str] | None = None,
    ) -> Sidecars:
        """Read the sidecars of the log named ``log_name`` in ``directory`` (absent files: no
        values for that part). Raises :class:`SidecarError` for a file that does not parse."""
        return cls.for_log(Path(directory) / log_name, values=values, source=str(directory))

    @classmethod
    def for_log(
        cls,
        log: str | os.PathLike[str],
        *,
        values: Mapping[str, str] | None = None,
        source: str | None = None,
    ) -> Sidecars:
        """The sidecars found beside ``log`` (see :func:`sidecar_paths`)."""
        paths = sidecar_paths(log)
        prompts: tuple[str, ...] | None = None
        tools: tuple[tuple[ToolSchema, ...], ...] | None = None
        prefixes: tuple[tuple[Message, ...], ...] | None = None
        if paths["system"].is_file():
            prompts = _prompts(_read(paths["system"]), paths["system"])
        if paths["tools"].is_file():
            path = paths["tools"]
            try:
                tools = tuple(
                    tuple(ToolSchema.from_json(t) for t in epoch)
                    for epoch in _epochs_json(_read(path), path)
                )
            except HeaderError as exc:
                raise SidecarError(f"{path.name}: {exc}", path=str(path)) from exc
        if paths["messagePrefix"].is_file():
            path = paths["messagePrefix"]
            try:
                prefixes = tuple(
                    tuple(Message.from_json(freeze_json(m, path="message")) for m in epoch)
                    for epoch in _epochs_json(_read(path), path)
                )
            except SidecarError:
                raise
            except DshError as exc:
                raise SidecarError(f"{path.name}: {exc}", path=str(path)) from exc
        return cls(
            system_prompts=prompts,
            tool_lists=tools,
            message_prefixes=prefixes,
            values=FrozenDict(dict(values or {})),
            source=source or str(Path(log).parent),
        )

    # ----------------------------------------------------------------------------------------

    def fill_events(self, events: Sequence[Event]) -> tuple[Event, ...]:
        """``events`` with placeholders replaced (unchanged events are the same objects).

        Raises :class:`SidecarError` when a sidecar holds fewer epochs than the log has.
        """
        out: list[Event] = []
        epoch = -1
        for event in events:
            if event.type == "request/header":
                data = event.data if isinstance(event.data, Mapping) else {}
                if epoch < 0 or data.get("reason") in _EPOCH_REASONS:
                    epoch += 1
                header = data.get("header")
                if isinstance(header, Mapping):
                    filled = self._fill_header(header, max(epoch, 0), event.seq)
                    if filled is not header:
                        event = _with_data(event, {**data, "header": filled})
            if self.values:
                event = _replace_values(event, self.values)
            out.append(event)
        return tuple(out)

    def fill(self, loaded: _Loaded) -> _Loaded:
        """A loaded log (:class:`dsh_core.persistence.LoadedLog`) with its placeholders filled,
        header record included."""
        from dataclasses import replace

        info = loaded.info
        if self.values:
            raw = _deep_replace(info.to_json(), self.values)
            info = type(info).from_json(freeze_json(raw, path="header"))
        return replace(  # type: ignore[type-var]  # every _LoadedLike here is a dataclass
            loaded,
            info=info,
            events=self.fill_events(loaded.events),
            closers=self.fill_events(loaded.closers) if self.values else loaded.closers,
        )

    def _pick(self, values: tuple[Any, ...] | None, epoch: int, what: str, seq: int) -> Any:
        if values is None:
            return None
        if epoch >= len(values):
            raise SidecarError(
                f"the {what} sidecar holds {len(values)} header epoch(s) but the request/header "
                f"at seq {seq} opens epoch {epoch + 1}",
                path=self.source,
            )
        return values[epoch]

    def _fill_header(self, header: Mapping[str, Any], epoch: int, seq: int) -> Mapping[str, Any]:
        out = dict(header)
        system = header.get("system")
        if system == "{{system}}":
            prompt = self._pick(self.system_prompts, epoch, "system-prompt", seq)
            if prompt is not None:
                out["system"] = prompt
        tools = header.get("tools")
        if tools == "{{tools}}" or (
            isinstance(tools, Sequence)
            and not isinstance(tools, str)
            and tools
            and all(isinstance(t, str) for t in tools)
        ):
            schemas = self._pick(self.tool_lists, epoch, "tool-schemas", seq)
            if schemas is not None:
                if not isinstance(tools, str) and [t.name for t in schemas] != list(tools):
                    raise SidecarError(
                        f"the request/header at seq {seq} names the tools {list(tools)} but the "
                        f"tool-schemas sidecar has {[t.name for t in schemas]} for epoch "
                        f"{epoch + 1}",
                        path=self.source,
                    )
                out["tools"] = [t.to_json() for t in schemas]
        prefix = header.get("messagePrefix")
        if isinstance(prefix, Sequence) and not isinstance(prefix, str):
            real = self._pick(self.message_prefixes, epoch, "message-prefix", seq)
            if real is not None and any(is_placeholder(p) for p in prefix):
                if len(real) != len(prefix):
                    raise SidecarError(
                        f"the request/header at seq {seq} has {len(prefix)} prefix message(s) "
                        f"but the message-prefix sidecar has {len(real)} for epoch {epoch + 1}",
                        path=self.source,
                    )
                out["messagePrefix"] = [
                    r.to_json() if is_placeholder(p) else p
                    for p, r in zip(prefix, real, strict=True)
                ]
        return header if out == dict(header) else out


def _with_data(event: Event, data: Mapping[str, Any]) -> Event:
    raw = event.to_json()
    raw["data"] = thaw_json(data) if isinstance(data, FrozenDict) else data
    return Event.from_json(freeze_json(raw, path="event"))


def _deep_replace(value: Any, values: Mapping[str, str]) -> Any:
    if isinstance(value, str):
        for key, real in values.items():
            if key in value:
                value = value.replace(key, real)
        return value
    if isinstance(value, Mapping):
        return {k: _deep_replace(v, values) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_deep_replace(v, values) for v in value]
    return value


def _replace_values(event: Event, values: Mapping[str, str]) -> Event:
    raw = thaw_json(event.to_json())
    replaced = _deep_replace(raw, values)
    if replaced == raw:
        return event
    return Event.from_json(freeze_json(replaced, path="event"))
