"""Golden files for agent sessions: syrupy extensions for transcripts and wire requests.

::

    from dsh_testkit.golden import TranscriptExtension, WireRequestsExtension

    def test_my_agent(snapshot):
        session = run_my_agent()                       # a dsh_core.Session (or loaded log)
        assert session == snapshot.use_extension(TranscriptExtension)
        assert session == snapshot.use_extension(WireRequestsExtension)

- :class:`TranscriptExtension` writes ``__snapshots__/<test file>/<test>.transcript.txt``: the
  session as turns and steps, the request-header timeline (first header in full, then diffs),
  every request the model saw, responses with finish reasons and cache usage, tool calls and
  results (:func:`render_transcript`).
- :class:`WireRequestsExtension` writes ``<test>.requests.jsonc``: the exact DeepSeek JSON body
  of every request, pretty-printed, for reviewing prompt changes (:func:`render_wire_requests`).
  It also takes any agent's traffic — a ``RequestCapture``, a cassette or trace file path
  (``pathlib.Path``), a :class:`~dsh_testkit.traces.Trace`, a ``MockDeepSeek`` — rendered by
  :func:`render_trace_requests`: each request's body as sent, grouped by conversation.
  (``.jsonc``, not ``.json``: syrupy's own JSON extension claims every ``*.json`` in a
  ``__snapshots__`` directory and would report ours as unused. The content is plain JSON.)

Both are byte-stable: normalized (:class:`Normalizer` — ids in first-seen order, times dropped,
the working directory as ``{{cwd}}``, stray UUIDs swept), written as UTF-8 with ``\\n`` line ends
on every platform, and versioned (:data:`TRANSCRIPT_FORMAT_VERSION`,
:data:`WIRE_FORMAT_VERSION`): a rendering change bumps the version, and a golden written by
another version fails with a note saying so. ``pytest --snapshot-update`` regenerates; a golden
whose content would not change is never rewritten. Either extension also accepts the string a
renderer returned (``render_transcript(logs, cwd=...)``) when the defaults need changing.
"""

from __future__ import annotations

import copy
import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Final

from syrupy.data import SnapshotCollection
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode
from syrupy.location import PyTestLocation
from syrupy.types import (
    PropertyFilter,
    PropertyMatcher,
    SerializableData,
    SerializedData,
    SnapshotIndex,
)

from .._test_ids import name_of_test
from ..prompt._wire_view import tool_ids_renamed
from ._inputs import LogInput, SnapshotInputError
from ._normalize import CWD_TOKEN, TIME_KEYS, Normalizer, cwd_spellings
from ._traffic import TRAFFIC_FORMAT, TRAFFIC_FORMAT_VERSION, render_traffic_transcript
from ._transcript import TRANSCRIPT_FORMAT, TRANSCRIPT_FORMAT_VERSION, render_transcript
from ._wire import (
    WIRE_FORMAT,
    WIRE_FORMAT_VERSION,
    load_wire_requests,
    render_wire_requests,
    wire_document,
)

__all__ = [
    "CWD_TOKEN",
    "TIME_KEYS",
    "TRAFFIC_FORMAT",
    "TRAFFIC_FORMAT_VERSION",
    "TRANSCRIPT_FORMAT",
    "TRANSCRIPT_FORMAT_VERSION",
    "WIRE_FORMAT",
    "WIRE_FORMAT_VERSION",
    "LogInput",
    "Normalizer",
    "SnapshotInputError",
    "TranscriptExtension",
    "WireRequestsExtension",
    "cwd_spellings",
    "load_wire_requests",
    "render_trace_requests",
    "render_traffic",
    "render_transcript",
    "render_wire_requests",
]

_WIRE_VERSION: Final = re.compile(r'^\{\s*"format": "([^"]*)",\s*"version": (\d+),')
_TRANSCRIPT_VERSION: Final = re.compile(r"^# (.*) · format (\d+)$", re.MULTILINE)


def _is_traffic(data: Any) -> bool:
    """Whether ``data`` is an agent's traffic (a trace's input) rather than a session."""
    from ..traces import Trace

    if isinstance(data, (Trace, os.PathLike)) or callable(getattr(data, "to_trace", None)):
        return True
    if isinstance(data, (list, tuple)) and data:
        first = data[0]
        return (
            callable(getattr(first, "to_trace_record", None))
            or (hasattr(first, "endpoint") and hasattr(first, "to_json"))
            or (isinstance(first, Mapping) and isinstance(first.get("messages"), list))
        )
    return False


def render_trace_requests(data: Any) -> str:
    """The wire-requests golden of any agent's traffic (what :func:`~dsh_testkit.traces.trace_of`
    takes): each request's body exactly as sent, in conversation order, normalized like the
    session goldens (tool-call ids in first-seen order, the working directory, stray UUIDs).

    Raises :class:`SnapshotInputError` when ``data`` cannot be read as a trace.
    """
    from ..doctor import conversations
    from ..traces import TraceError, trace_of

    try:
        trace = trace_of(data)
    except (TraceError, OSError) as exc:
        raise SnapshotInputError(
            f"cannot read the traffic to render: {exc}", value_type=type(data).__name__
        ) from exc
    normalizer = Normalizer()
    entries: list[dict[str, Any]] = []
    for conversation in conversations(trace):
        for exchange in conversation:
            body = tool_ids_renamed(
                copy.deepcopy(dict(exchange.body)), lambda i: normalizer.token("call", i)
            )
            entries.append(
                {
                    "conversation": conversation.key,
                    "request": exchange.index + 1,
                    "endpoint": exchange.endpoint,
                    "body": normalizer.json(body, zero_times=False),
                }
            )
    return json.dumps(wire_document(entries), ensure_ascii=False, indent=2) + "\n"


@dataclass(frozen=True, slots=True, kw_only=True)
class _RenamedLocation:
    """The one attribute syrupy's base naming reads of a test location, with another value."""

    snapshot_name: str


def _runner_free_name(test_location: PyTestLocation) -> str | None:
    """The test's snapshot name without anyio's backend parameter, or ``None`` if it has none.

    anyio parametrizes every ``@pytest.mark.anyio`` test with ``anyio_backend`` (the node is
    ``test_x[asyncio]``); the same test under pytest-asyncio is ``test_x``. Its golden, like its
    cassette, is one file whichever runner the project uses.
    """
    item = test_location.item
    params = getattr(getattr(item, "callspec", None), "params", {})
    if "anyio_backend" not in params or test_location.is_doctest:
        return None
    return name_of_test(item)


class _TextGolden(SingleFileSnapshotExtension):
    """A single-file text golden written byte for byte: UTF-8, ``\\n`` line ends everywhere.

    (syrupy's text mode would write the platform's line ends, so a golden committed on Linux
    would be rewritten on Windows.) Its file name leaves out anyio's ``[asyncio]`` backend
    parameter, as cassette names do.
    """

    _write_mode = WriteMode.TEXT
    format_name: ClassVar[str] = ""
    format_version: ClassVar[int] = 0
    other_formats: ClassVar[tuple[tuple[str, int], ...]] = ()
    """Other renderings the extension writes (the traffic transcript beside the session's)."""

    @classmethod
    def get_snapshot_name(cls, *, test_location: PyTestLocation, index: SnapshotIndex = 0) -> str:
        plain = _runner_free_name(test_location)
        if plain is None:
            return super().get_snapshot_name(test_location=test_location, index=index)
        renamed: Any = _RenamedLocation(snapshot_name=plain)
        return super().get_snapshot_name(test_location=renamed, index=index)

    @classmethod
    def matches_test_location(
        cls, *, test_location: PyTestLocation, snapshot_location: str
    ) -> bool:
        # syrupy claims a parametrized test's file by its full id (test_x[asyncio]); without
        # this, a runner-free golden would be reported unused and deleted by --snapshot-update.
        if super().matches_test_location(
            test_location=test_location, snapshot_location=snapshot_location
        ):
            return True
        if _runner_free_name(test_location) is None:
            return False
        location = Path(snapshot_location)
        suffix = f".{cls.file_extension}"
        if (
            location.parent.name != test_location.basename
            or not location.name.endswith(suffix)
            or not test_location.matches_snapshot_site(snapshot_location)
        ):
            return False
        stem = location.name[: -len(suffix)]
        name = cls.get_snapshot_name(test_location=test_location)
        return stem == name or stem.startswith((f"{name}.", f"{name}["))

    def render(self, data: LogInput) -> str:
        raise NotImplementedError

    def serialize(
        self,
        data: SerializableData,
        *,
        exclude: PropertyFilter | None = None,
        include: PropertyFilter | None = None,
        matcher: PropertyMatcher | None = None,
    ) -> SerializedData:
        # syrupy always passes a matcher of its own; property matchers and filters address
        # paths inside a serialized object, which a rendered session does not have.
        if exclude is not None or include is not None:
            raise SnapshotInputError(
                f"{type(self).__name__} renders whole sessions: exclude/include filters are not "
                "supported (the normalization is built in)",
                value_type=type(data).__name__,
            )
        if isinstance(data, str):
            known = {(self.format_name, self.format_version), *self.other_formats}
            if self.version_of(data) not in known and self.version_of(data) is None:
                raise SnapshotInputError(
                    f"{type(self).__name__} got a string that is not a {self.format_name} "
                    "rendering; pass the session itself, or the output of the matching "
                    "render_* function",
                    value_type="str",
                )
            return data
        return self.render(data)

    def version_of(self, text: str) -> tuple[str, int] | None:
        """``(format name, version)`` written at the top of ``text``, or ``None``."""
        raise NotImplementedError

    def read_snapshot_data_from_location(
        self, *, snapshot_location: str, snapshot_name: str, session_id: str
    ) -> SerializableData | None:
        try:
            return Path(snapshot_location).read_bytes().decode("utf-8")
        except FileNotFoundError:
            return None

    @classmethod
    def write_snapshot_collection(
        cls,
        *,
        snapshot_collection: SnapshotCollection,
        name_order: dict[str, int] | None = None,
    ) -> None:
        data = next(iter(snapshot_collection)).data
        if not isinstance(data, str):
            raise SnapshotInputError(
                f"{cls.__name__} writes text, got {type(data).__name__}",
                value_type=type(data).__name__,
            )
        Path(snapshot_collection.location).write_bytes(data.encode("utf-8"))

    def diff_lines(
        self, serialized_data: SerializedData, snapshot_data: SerializedData
    ) -> Iterator[str]:
        stored = self.version_of(str(snapshot_data)) if snapshot_data else None
        written = self.version_of(str(serialized_data)) if serialized_data else None
        current = written or (self.format_name, self.format_version)
        if stored is not None and stored != current:
            yield (
                f"the golden was written by {stored[0]} format {stored[1]}; this build writes "
                f"{current[0]} format {current[1]}: review, then regenerate it with pytest "
                "--snapshot-update"
            )
        yield from super().diff_lines(serialized_data, snapshot_data)


def render_traffic(data: Any) -> str:
    """The traffic transcript of any agent's traffic (what :func:`~dsh_testkit.traces.trace_of`
    takes: a ``RequestCapture``, the mock, a cassette or trace path, a ``Trace``): per
    conversation, each request with what it adds — system prompt, tools and options when they
    first appear or change, the messages after the history it shares with an earlier request —
    and the answer it got, its status and usage.

    Raises :class:`SnapshotInputError` when ``data`` cannot be read as a trace.
    """
    from ..traces import TraceError, trace_of

    try:
        trace = trace_of(data)
    except (TraceError, OSError) as exc:
        raise SnapshotInputError(
            f"cannot read the traffic to render: {exc}", value_type=type(data).__name__
        ) from exc
    return render_traffic_transcript(trace)


class TranscriptExtension(_TextGolden):
    """syrupy extension: a session rendered by :func:`render_transcript`, or any agent's
    traffic by :func:`render_traffic` (``.transcript.txt``)."""

    file_extension = "transcript.txt"
    format_name = TRANSCRIPT_FORMAT
    format_version = TRANSCRIPT_FORMAT_VERSION
    other_formats = ((TRAFFIC_FORMAT, TRAFFIC_FORMAT_VERSION),)

    def render(self, data: LogInput) -> str:
        if _is_traffic(data):
            return render_traffic(data)
        return render_transcript(data)

    def version_of(self, text: str) -> tuple[str, int] | None:
        first = text.split("\n", 1)[0]
        match = _TRANSCRIPT_VERSION.fullmatch(first)
        return (match.group(1), int(match.group(2))) if match else None


class WireRequestsExtension(_TextGolden):
    """syrupy extension: every request's DeepSeek body by :func:`render_wire_requests`
    (``.requests.jsonc``)."""

    file_extension = "requests.jsonc"
    format_name = WIRE_FORMAT
    format_version = WIRE_FORMAT_VERSION

    def render(self, data: LogInput) -> str:
        if _is_traffic(data):
            return render_trace_requests(data)
        return render_wire_requests(data)

    def version_of(self, text: str) -> tuple[str, int] | None:
        match = _WIRE_VERSION.match(text)
        return (match.group(1), int(match.group(2))) if match else None
