"""The session-log half of the adversarial suite: cut, corrupt and resume real logs, and judge
every outcome against what the store promises.

Used by the bounded tests in this package (``make test``) and by ``make stress``
(:mod:`tests.adversarial.stress`), which runs the same checks for longer. Every check returns an
:class:`Outcome` label or raises ``AssertionError`` naming the broken promise and the input that
broke it, so a failure is reproducible from its message.

The promises judged:

* loading a log never raises anything but :class:`CorruptLogError` (with a line for a line-level
  fault), and neither do the audit and the cache report built on what loaded;
* a log cut at any byte loads the records that were complete before the cut (a cut inside the
  header is a typed error), and resuming it never changes a committed byte;
* a corrupted log either fails with a typed error and nothing on disk changes, or loads exactly
  what its lines say: no complete record is dropped or altered on the way.
"""

from __future__ import annotations

import json
import random
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsh_core import CorruptLogError, DshError
from dsh_core._json_text import dumps_canonical
from dsh_core.persistence import LoadedLog, load_session, open_session
from dsh_core.persistence._chunk_rows import ChunkRow
from dsh_testkit.doctor import diagnose
from dsh_testkit.reports._audit import audit_loaded
from dsh_testkit.traces._readers._session_log import session_log_trace
from tests._support import REFERENCE_LOGS

RECORDINGS = Path(__file__).resolve().parents[1] / "scenarios" / "recordings"


def real_logs() -> list[Path]:
    """The repository's recorded logs, plus the reference harness's when they are present."""
    logs = sorted(RECORDINGS.glob("*.jsonl"))
    if REFERENCE_LOGS.is_dir():
        logs += sorted(REFERENCE_LOGS.glob("*/*.jsonl"))
    return logs


@dataclass(slots=True)
class Tally:
    """What a run tried and how each attempt ended (the figures RELIABILITY.md reports)."""

    tried: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)

    def add(self, outcome: str) -> None:
        self.tried += 1
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1


def _load(path: Path) -> LoadedLog | CorruptLogError:
    try:
        return load_session(path, audit=True)
    except CorruptLogError as exc:
        return exc
    except DshError as exc:  # pragma: no cover - a failure report
        raise AssertionError(  # noqa: B904 (the report carries the error)
            f"{path}: the loader raised {type(exc).__name__}, not a log error: {exc}"
        )


def _reports_do_not_crash(loaded: LoadedLog, where: str) -> None:
    """The audit and the cache report over a loaded log: a report or a typed error, no crash."""

    def cache_report(log: LoadedLog) -> object:
        return diagnose(session_log_trace(log))

    for name, build in (("audit", audit_loaded), ("cache-report", cache_report)):
        try:
            build(loaded)
        except DshError:
            pass
        except Exception as exc:  # pragma: no cover - a failure report
            raise AssertionError(
                f"{where}: {name} crashed with {type(exc).__name__}: {exc}"
            ) from exc


def _expected_events(raw: bytes) -> list[str]:
    """What a correct load must hold: every record line of ``raw`` (rows expanded), as sorted
    canonical JSON, read by an independent path (``json.loads`` line by line)."""
    out: list[str] = []
    for body in raw.split(b"\n")[1:]:
        if not body.strip(b" \t\r"):
            continue
        record = json.loads(body)
        if record.get("type") in {"text-chunks", "reasoning-chunks", "tool-call-chunks"}:
            out.extend(
                dumps_canonical(e.to_json(), sort_keys=True)
                for e in ChunkRow.from_json(record).expand()
            )
        else:
            out.append(dumps_canonical(record, sort_keys=True))
    return out


def judge_load(path: Path, where: str) -> str:
    """Load a (damaged) file and check the outcome; returns its label.

    A typed error must name a line when the file has a readable header; a successful load must
    hold exactly the file's records (a dropped tail only when the last line is unterminated),
    and the reports over it must not crash.
    """
    raw = path.read_bytes()
    try:
        result = _load(path)
    except AssertionError:
        raise
    except Exception as exc:
        raise AssertionError(
            f"{where}: load_session crashed with {type(exc).__name__}: {exc}"
        ) from exc
    if isinstance(result, CorruptLogError):
        assert str(path) in str(result), f"{where}: the error does not name the file: {result}"
        return "typed error"
    loaded = result
    kept = raw if loaded.dropped is None else raw[: loaded.dropped.offset]
    if loaded.dropped is not None:
        assert b"\n" not in loaded.dropped.data, (
            f"{where}: a newline-terminated line was dropped as a crash tail: {loaded.dropped}"
        )
    got = [dumps_canonical(e.to_json(), sort_keys=True) for e in loaded.events]
    assert got == _expected_events(kept), f"{where}: the loaded events differ from the file's lines"
    _reports_do_not_crash(loaded, where)
    return "loaded, tail dropped" if loaded.dropped is not None else "loaded"


def judge_resume(path: Path, where: str) -> str:
    """Resume a (damaged) file with ``open_session``: on failure nothing on disk changed; on
    success every committed byte is still there and the result loads cleanly."""
    before = path.read_bytes()
    try:
        writer = open_session(path, audit=True)
    except CorruptLogError:
        assert path.read_bytes() == before, f"{where}: a refused resume changed the file"
        return "resume refused"
    except Exception as exc:
        raise AssertionError(
            f"{where}: open_session crashed with {type(exc).__name__}: {exc}"
        ) from exc
    loaded = writer.loaded
    writer.close()
    assert loaded is not None
    after = path.read_bytes()
    committed = before[: loaded.committed_bytes]
    assert after.startswith(committed), f"{where}: resuming changed committed bytes"
    again = load_session(path, audit=True)
    assert again.dropped is None and not again.interrupted, f"{where}: a resumed log is not clean"
    return "resumed"


# ------------------------------------------------------------------------------ truncation


def record_ends(raw: bytes) -> list[int]:
    """Byte offsets just past each line's newline."""
    return [i + 1 for i, byte in enumerate(raw) if byte == 0x0A]


def judge_cut(raw: bytes, cut: int, scratch: Path, where: str) -> str:
    """Cut ``raw`` at ``cut`` bytes: the load holds exactly the complete records before the cut;
    a resume keeps every committed byte."""
    data = raw[:cut]
    scratch.write_bytes(data)
    header_end = raw.index(b"\n") + 1
    if cut < header_end - 1:  # the header itself is cut: nothing to recover, a typed error
        try:
            load_session(scratch, audit=True)
        except CorruptLogError:
            return "typed error (header cut)"
        raise AssertionError(f"{where}: a log with a cut header loaded")
    loaded = load_session(scratch, audit=True)
    complete = [end for end in record_ends(raw) if end <= cut]
    # A cut exactly before a newline leaves a whole record without it: that record is complete.
    boundary = complete[-1] if complete else 0
    if cut > boundary and raw[cut : cut + 1] == b"\n":
        boundary = cut
    expected = _expected_events(raw[:boundary])
    got = [dumps_canonical(e.to_json(), sort_keys=True) for e in loaded.events]
    assert got == expected, (
        f"{where}: cut at {cut}: recovered {len(got)} events, {len(expected)} complete"
    )
    assert loaded.committed_bytes == boundary, f"{where}: cut at {cut}: committed bytes differ"
    outcome = judge_resume(scratch, f"{where} cut at {cut}")
    assert outcome == "resumed", f"{where}: cut at {cut}: a cut log did not resume"
    return "recovered"


def cuts(raw: bytes, budget: int | None, rng: random.Random) -> list[int]:
    """Every offset when ``budget`` is None or covers them all, else a sample that always holds
    the record boundaries' neighbours (where off-by-one bugs live)."""
    every = list(range(len(raw) + 1))
    if budget is None or budget >= len(every):
        return every
    edges = {e + d for e in record_ends(raw) for d in (-2, -1, 0, 1) if 0 <= e + d <= len(raw)}
    picked = sorted(edges)[: budget // 2]
    rest = [c for c in every if c not in edges]
    picked += rng.sample(rest, min(len(rest), budget - len(picked)))
    return sorted(picked)


# ------------------------------------------------------------------------------ corruption

WRONG_VALUES: tuple[Any, ...] = (None, True, 0, -1, 1.5, 2**60, "", "x", [], [1], {}, {"k": 1})
"""Replacement values of every JSON kind (and edge numbers) for field-type corruption."""


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    return type(value).__name__


def field_paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path to a field of a JSON record (containers and leaves, not the root)."""
    stack: list[tuple[Any, tuple[Any, ...]]] = [(value, prefix)]
    while stack:
        node, path = stack.pop()
        if path:
            yield path
        if isinstance(node, dict):
            stack.extend((child, (*path, key)) for key, child in node.items())
        elif isinstance(node, list):
            stack.extend((child, (*path, i)) for i, child in enumerate(node))


def _get(value: Any, path: Sequence[Any]) -> Any:
    for key in path:
        value = value[key]
    return value


def _replaced(record: Any, path: Sequence[Any], new: Any) -> Any:
    copy = json.loads(json.dumps(record))
    _get(copy, path[:-1])[path[-1]] = new
    return copy


@dataclass(frozen=True, slots=True)
class Corruption:
    """One damaged copy of a log: a label to reproduce it and the damaged bytes."""

    label: str
    data: bytes


FieldSpec = tuple[int, tuple[Any, ...], Any]
"""A field corruption, small enough to pool by the thousand: (line index, field path, value)."""


def field_specs(raw: bytes) -> Iterator[FieldSpec]:
    """Every field of every record (envelope and payload, at any depth) paired with each value
    of another JSON kind."""
    for index, body in enumerate(raw.split(b"\n")):
        if not body.strip():
            continue
        record = json.loads(body)
        for path in field_paths(record):
            old = _get(record, path)
            for new in WRONG_VALUES:
                if _kind(new) == _kind(old) and not isinstance(old, (dict, list)):
                    continue
                yield index, path, new


def apply_field(raw: bytes, spec: FieldSpec) -> Corruption:
    index, path, new = spec
    lines = raw.split(b"\n")
    record = json.loads(lines[index])
    changed = json.dumps(_replaced(record, path, new), separators=(",", ":"), ensure_ascii=False)
    damaged = [*lines[:index], changed.encode(), *lines[index + 1 :]]
    return Corruption(
        f"line {index + 1} field {'/'.join(map(str, path))} = {json.dumps(new)}",
        b"\n".join(damaged),
    )


def field_corruptions(raw: bytes) -> Iterator[Corruption]:
    """:func:`field_specs` applied, one damaged copy at a time."""
    for spec in field_specs(raw):
        yield apply_field(raw, spec)


def byte_corruptions(raw: bytes, rng: random.Random, count: int) -> Iterator[Corruption]:
    """Random byte damage: flipped bits, dropped and duplicated newlines, duplicated and
    swapped lines, a newline replaced by another byte."""
    newlines = [i for i, b in enumerate(raw) if b == 0x0A]
    lines = raw.split(b"\n")
    kinds: list[Callable[[], Corruption]] = []

    def flip() -> Corruption:
        at = rng.randrange(len(raw))
        bit = 1 << rng.randrange(8)
        return Corruption(
            f"flip bit {bit:#04x} at byte {at}", raw[:at] + bytes([raw[at] ^ bit]) + raw[at + 1 :]
        )

    def drop_newline() -> Corruption:
        at = rng.choice(newlines)
        return Corruption(f"drop the newline at byte {at}", raw[:at] + raw[at + 1 :])

    def garble_newline() -> Corruption:
        at = rng.choice(newlines)
        byte = rng.choice(b" x}{,\r\x00")
        return Corruption(
            f"newline at byte {at} becomes {byte:#04x}", raw[:at] + bytes([byte]) + raw[at + 1 :]
        )

    def duplicate_newline() -> Corruption:
        at = rng.choice(newlines)
        return Corruption(f"duplicate the newline at byte {at}", raw[:at] + b"\n" + raw[at:])

    def duplicate_line() -> Corruption:
        at = rng.randrange(len(lines) - 1)
        return Corruption(
            f"duplicate line {at + 1}", b"\n".join([*lines[: at + 1], lines[at], *lines[at + 1 :]])
        )

    def swap_lines() -> Corruption:
        at = rng.randrange(1, max(2, len(lines) - 2))
        swapped = [*lines[:at], lines[at + 1], lines[at], *lines[at + 2 :]]
        return Corruption(f"swap lines {at + 1} and {at + 2}", b"\n".join(swapped))

    kinds = [
        flip,
        flip,
        flip,
        drop_newline,
        garble_newline,
        duplicate_newline,
        duplicate_line,
        swap_lines,
    ]
    for _ in range(count):
        yield rng.choice(kinds)()


def judge_corruption(corruption: Corruption, scratch: Path, where: str) -> str:
    """A damaged file: a typed error or a correct load, and a resume that loses nothing."""
    scratch.write_bytes(corruption.data)
    label = f"{where}: {corruption.label}"
    outcome = judge_load(scratch, label)
    judge_resume(scratch, label)
    return outcome


def copy_to(path: Path, scratch: Path) -> bytes:
    shutil.copyfile(path, scratch)
    return scratch.read_bytes()
