"""``compare``'s inputs: a run (a recording or a folder of them) read into scenarios, and the
scenarios of two runs matched (the rules are in ``_compare.py``'s docstring).

Only regular files are read, and at most :data:`MAX_FILE_BYTES` of each (``max_file_bytes``):
a folder may hold anything (a link to ``/dev/zero`` or to a file elsewhere, a named pipe, a
device, a file still growing), and reading it must neither hang nor take the machine's memory.
In a folder, an entry that is a symbolic link is not followed and one that is not a regular file
is not opened for reading (a named pipe is opened without waiting for a writer, then left): each
is skipped with a note naming it. A file named on the command line may be a link (the user named
it) but must lead to a regular file. A file larger than the cap is an error naming it and the
option that raises the cap; so is a file that grows past it while it is read.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final, Literal, TypeAlias

from ..traces import Exchange, Trace, TraceError, trace_of
from ..traces._compression import decompressed
from ..traces._readers import identify
from ._values import RunSummary

__all__ = [
    "MAX_FILE_BYTES",
    "Pair",
    "Run",
    "Scenario",
    "TraceLoader",
    "default_loader",
    "match",
    "read_regular_file",
    "read_run",
]

_HEAD_BYTES: Final = 65536
MAX_FILE_BYTES: Final = 256 << 20
"""The largest file ``compare`` reads by default (256 MiB; ``--max-file-bytes``)."""

# ------------------------------------------------------------------------------ reading


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """What is compared with its counterpart: a recording, or one conversation of it."""

    name: str
    """What matching by path compares: the path relative to the folder (``#key`` when split);
    for a single-file run only the ``#key`` part."""
    label: str
    """What the report calls it: what it is, never a run's file name — its declared id, else
    its conversation key, else its path inside the folder (the file's name for a single
    file)."""
    path: str | None
    """The file it was read from."""
    declared: str | None
    """The id the recording declares (a dsh-trace header's or a cassette's ``scenario``)."""
    key: str | None
    """The explicit conversation key every one of its requests carries."""
    trace: Trace
    """Its requests (renumbered from 0 for a part of a split file)."""
    failed: bool = False
    """The recording is marked failed (a dsh-trace header's ``failed``: its test failed, and
    its traffic was kept)."""
    context: Trace | None = None
    """For a part of a split file: the whole file (what was sent before this part)."""
    origin: tuple[int, ...] = ()
    """For a part of a split file: each request's index in :attr:`context`."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """One side of a comparison: what was read, and its scenarios."""

    summary: RunSummary
    scenarios: tuple[Scenario, ...]
    single: bool
    """A single recording, not a folder: two single-scenario runs pair whatever their names."""
    not_read: tuple[str, ...] = ()
    """Folder entries left unread, each with why (``leak.jsonl: a symbolic link, not
    followed``)."""


TraceLoader: TypeAlias = Callable[[str, str, bytes], Trace]
"""How a file becomes a trace: ``(path, reader name, content) → Trace`` (the CLI's loads
session logs with their sidecars)."""


def default_loader(path: str, reader: str, data: bytes) -> Trace:
    found = identify(data)
    assert found is not None and found.name == reader
    return found.read(data, path)


def _declared(reader: str, head: bytes) -> tuple[str | None, bool]:
    """The declared id — a dsh-trace header's ``scenario``, a cassette's ``metadata.scenario``
    — and whether a dsh-trace header marks the recording ``failed``."""
    text = head.decode("utf-8", "replace")
    if reader == "dsh-trace":
        try:
            first = json.loads(text.lstrip().split("\n", 1)[0])
        except ValueError:
            return None, False
        if not isinstance(first, dict):
            return None, False
        value = first.get("scenario")
        return (value if isinstance(value, str) and value else None), first.get("failed") is True
    return _declared_id(reader, text), False


def _declared_id(reader: str, text: str) -> str | None:
    """A cassette's ``metadata.scenario``."""
    if reader == "cassette":
        block = re.search(r"^metadata:[ \t]*\n((?:[ \t]+.*\n)+)", text, re.M)
        if block is None:
            return None
        import yaml

        try:
            metadata = yaml.safe_load(block.group(1))
        except yaml.YAMLError:
            return None
        value = metadata.get("scenario") if isinstance(metadata, dict) else None
        return str(value) if isinstance(value, (str, int)) and str(value) else None
    return None


def _split(
    trace: Trace, *, name: str, where: str | None, declared: str | None, failed: bool
) -> list[Scenario]:
    """One scenario, or one per explicit conversation key when the trace carries several.

    ``where``: the file's path inside its folder (``None`` for a single file): what a scenario
    is called when it declares no id and carries no key."""
    keys = dict.fromkeys(e.conversation for e in trace.exchanges)
    explicit = [k for k in keys if k is not None]
    if len(explicit) < 2:
        key = explicit[0] if explicit and None not in keys else None
        fallback = where or os.path.basename(trace.path or "") or "the recording"
        return [
            Scenario(
                name=name,
                label=declared or key or fallback,
                path=trace.path,
                declared=declared,
                key=key,
                trace=trace,
                failed=failed,
            )
        ]
    groups: dict[str | None, list[Exchange]] = {k: [] for k in keys}
    for exchange in trace.exchanges:
        groups[exchange.conversation].append(exchange)
    out = []
    for key, exchanges in groups.items():
        part = key if key is not None else "(no key)"
        out.append(
            Scenario(
                name=f"{name}#{part}",
                label=f"{declared or where}#{part}" if declared or where else part,
                path=trace.path,
                declared=None if declared is None else f"{declared}#{part}",
                key=key,
                trace=replace(
                    trace,
                    exchanges=tuple(replace(e, index=i) for i, e in enumerate(exchanges)),
                ),
                failed=failed,
                context=trace,
                origin=tuple(e.index for e in exchanges),
            )
        )
    return out


class _NotRegular(Exception):
    """A folder entry that is not read: a link, or not a regular file (``str``: why)."""


_KINDS: Final = (
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a folder"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def read_regular_file(path: str, max_bytes: int = MAX_FILE_BYTES, *, follow: bool = True) -> bytes:
    """The bytes of the regular file at ``path``, at most ``max_bytes`` of them.

    Raises :class:`~dsh_testkit.traces.TraceError` naming the file when it is not a regular file
    (a device, a named pipe: opened without waiting, never read), is larger than ``max_bytes``
    or grows past it while read; with ``follow=False``, also when it is a symbolic link.
    ``OSError`` when it cannot be opened."""
    try:
        return _read_regular(path, max_bytes, follow=follow)
    except _NotRegular as why:
        raise TraceError(str(why), path=path) from None


def _read_regular(path: str, max_bytes: int, *, follow: bool) -> bytes:
    """:func:`read_regular_file`, raising :class:`_NotRegular` for what is not read at all."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    if not follow:
        if os.path.islink(path):  # (and O_NOFOLLOW where the system has it: no race)
            raise _NotRegular("a symbolic link, not followed")
        flags |= getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise _NotRegular("a symbolic link, not followed") from None
        raise
    with open(fd, "rb", closefd=True) as file:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise _NotRegular(f"{_kind(status.st_mode)}, not a regular file: not read")
        if status.st_size > max_bytes:
            raise TraceError(_over(status.st_size, max_bytes), path=path)
        data = file.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise TraceError(_over(len(data), max_bytes, growing=True), path=path)
    return data


def _over(size: int, cap: int, *, growing: bool = False) -> str:
    what = "grew past" if growing else f"is {size:,} bytes, over"
    return f"the file {what} the {cap:,}-byte cap on what compare reads (--max-file-bytes)"


def read_run(target: Any, loader: TraceLoader, *, max_file_bytes: int = MAX_FILE_BYTES) -> Run:
    """One side of a comparison: a recording, a folder of them, or anything
    :func:`~dsh_testkit.traces.trace_of` takes; files read by :func:`read_regular_file`."""
    if isinstance(target, (str, os.PathLike)):
        path = os.fspath(target)
        if os.path.isdir(path):
            return _read_folder(path, loader, max_file_bytes)
        found = _read_file(path, loader, max_file_bytes)
        if found is None:
            raise TraceError("not a session log or any recognized trace", path=path)
        trace, declared, failed = found
        scenarios = _split(trace, name="", where=None, declared=declared, failed=failed)
        return Run(
            summary=RunSummary(path=path, traces=1, scenarios=len(scenarios)),
            scenarios=tuple(scenarios),
            single=True,
        )
    trace = trace_of(target)
    scenarios = _split(trace, name="", where=None, declared=None, failed=False)
    return Run(
        summary=RunSummary(path=trace.path, traces=1, scenarios=len(scenarios)),
        scenarios=tuple(scenarios),
        single=True,
    )


def _read_file(
    path: str, loader: TraceLoader, max_bytes: int, *, in_folder: bool = False
) -> tuple[Trace, str | None, bool] | None:
    """The file's trace, declared id and failed mark; ``None`` when it is of no known kind. In a
    folder, an entry that is a link or not a regular file raises :class:`_NotRegular`."""
    if in_folder:
        data = _read_regular(path, max_bytes, follow=False)
    else:
        data = read_regular_file(path, max_bytes)
    data = decompressed(data, path=path).data  # a gzip or zstd recording reads as its content
    reader = identify(data[:_HEAD_BYTES])
    if reader is None:
        return None
    declared, failed = _declared(reader.name, data[:_HEAD_BYTES])
    return loader(path, reader.name, data), declared, failed


def _read_folder(root: str, loader: TraceLoader, max_bytes: int) -> Run:
    scenarios: list[Scenario] = []
    skipped: list[str] = []
    not_read: list[str] = []
    traces = 0
    for directory, folders, files in os.walk(root):  # links to folders are not walked into
        linked = sorted(f for f in folders if os.path.islink(os.path.join(directory, f)))
        for folder in linked:
            if not folder.startswith("."):
                relative = os.path.relpath(os.path.join(directory, folder), root)
                not_read.append(f"{relative.replace(os.sep, '/')}: a symbolic link, not followed")
        folders[:] = sorted(f for f in folders if not f.startswith(".") and f not in linked)
        for filename in sorted(files):
            if filename.startswith("."):
                continue
            path = os.path.join(directory, filename)
            relative = os.path.relpath(path, root).replace(os.sep, "/")
            try:
                found = _read_file(path, loader, max_bytes, in_folder=True)
            except _NotRegular as why:
                not_read.append(f"{relative}: {why}")
                continue
            if found is None:
                skipped.append(relative)
                continue
            traces += 1
            trace, declared, failed = found
            scenarios.extend(
                _split(trace, name=relative, where=relative, declared=declared, failed=failed)
            )
    return Run(
        summary=RunSummary(
            path=root, traces=traces, scenarios=len(scenarios), skipped=tuple(skipped)
        ),
        scenarios=tuple(scenarios),
        single=False,
        not_read=tuple(sorted(not_read)),
    )


# ------------------------------------------------------------------------------- matching


Pair: TypeAlias = tuple[Scenario, Scenario, Literal["id", "conversation", "path", "file"]]


def _unique(items: Sequence[Scenario], attribute: str) -> dict[str, Scenario]:
    seen: dict[str, list[Scenario]] = {}
    for item in items:
        value = getattr(item, attribute)
        if value is not None:
            seen.setdefault(value, []).append(item)
    return {value: found[0] for value, found in seen.items() if len(found) == 1}


def match(base: Run, new: Run) -> tuple[list[Pair], list[Scenario], list[Scenario]]:
    """Pairs, then the base scenarios left (removed), then the new ones left (added)."""
    if base.single and new.single and len(base.scenarios) == len(new.scenarios) == 1:
        return [(base.scenarios[0], new.scenarios[0], "file")], [], []
    left, right = list(base.scenarios), list(new.scenarios)
    pairs: list[Pair] = []
    steps: tuple[tuple[Literal["id", "conversation", "path"], str], ...] = (
        ("id", "declared"),
        ("conversation", "key"),
        ("path", "name"),
    )
    for how, attribute in steps:
        on_left, on_right = _unique(left, attribute), _unique(right, attribute)
        taken: set[int] = set()
        for value, b in on_left.items():
            n = on_right.get(value)
            if n is not None:
                pairs.append((b, n, how))
                taken.update((id(b), id(n)))
        left = [s for s in left if id(s) not in taken]
        right = [s for s in right if id(s) not in taken]
    order = {id(s): i for i, s in enumerate(new.scenarios)}
    pairs.sort(key=lambda p: order[id(p[1])])
    return pairs, left, right
