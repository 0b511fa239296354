"""A trace file diagnosed as a stream: memory for the open conversations, not the file.

:func:`diagnose` holds the whole trace, then every diagnosis. :func:`diagnose_stream` reads a
dsh-trace file twice, one line at a time (:class:`~dsh_testkit.traces._stream.TraceStream`):

1. **Plan**: each request linked to its conversation (the brancher, as one process links it),
   and what the report needs of the whole trace (the cache granularity from every hit, whether
   the trace reports usage, the notes). From the links, each request's last child (after which
   no request is compared with it) and each conversation's last request. Kept per request:
   its link, packed in arrays (about 30 bytes).
2. **Diagnose**: each request with its planned link. A request is forgotten once its last
   child is diagnosed; a conversation, once its last request is, goes to a spill file (its
   diagnoses as plain tuples, pickled) and leaves memory.

The report's :attr:`~DoctorReport.conversations` is then a sequence read back from the spill
file one conversation at a time, in the order one process gives (conversations by first
request): the same report, so every document and table made of it is the same bytes.

What grows with the trace besides the spill file: the links (about 30 bytes a request) and the
brancher's table of prefixes during the plan (every distinct prefix of every conversation:
about 1 KB a request on the benchmark's trace). A third pass is made only when a credential named
late in the file must be scrubbed from earlier requests before they are linked.
"""

from __future__ import annotations

import os
import pickle
import tempfile
import weakref
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from typing import IO, Any, Final, overload

from dsh_core.providers import Prices

from ..prompt._granularity import CacheGranularity
from ..traces import TraceError
from ..traces._model import paused_gc
from ..traces._stream import StreamSummary, TraceStream
from ._branches import Link, Relation
from ._diagnose import conversation_key, figures_notes
from ._engine import Doctor, Planned, view_of
from ._model_facts import GranularityTally
from ._pool import flat_diagnosis, unflat_diagnosis
from ._report import ConversationDiagnosis, DoctorReport, RequestDiagnosis, group_findings

__all__ = [
    "STREAM_BYTES",
    "SpilledConversations",
    "allowed_lazily",
    "diagnose_stream",
]

STREAM_BYTES: Final = 256 * 2**20
"""``cache-report`` streams a dsh-trace file this large or larger, decompressed when it is
compressed (``--stream`` for any size)."""

_RELATIONS: Final[tuple[Relation, ...]] = ("first", "extends", "repeats", "diverges", "branch")
_NONE: Final = -1


class _Spill:
    """The spill file, shared by the sequences read from it; one this module opened is closed
    (and, unnamed, gone) once none of them is left."""

    def __init__(self, file: IO[bytes], *, owned: bool) -> None:
        self.file = file
        if owned:
            weakref.finalize(self, file.close)


class SpilledConversations(Sequence[ConversationDiagnosis]):
    """Conversations in a spill file, read back one at a time (nothing is cached: iterate once
    per use). ``transform`` is applied to each as it is read (``--allow``)."""

    def __init__(
        self,
        spill: _Spill,
        spans: Sequence[tuple[int, int]],
        transform: Callable[[ConversationDiagnosis], ConversationDiagnosis] | None = None,
    ) -> None:
        self._spill = spill
        self._spans = spans
        self._transform = transform

    def mapped(
        self, transform: Callable[[ConversationDiagnosis], ConversationDiagnosis]
    ) -> SpilledConversations:
        """The same conversations, each through ``transform`` (after this one's own)."""
        before = self._transform
        return SpilledConversations(
            self._spill,
            self._spans,
            transform if before is None else (lambda c: transform(before(c))),
        )

    def __len__(self) -> int:
        return len(self._spans)

    @overload
    def __getitem__(self, index: int) -> ConversationDiagnosis: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[ConversationDiagnosis]: ...
    def __getitem__(
        self, index: int | slice
    ) -> ConversationDiagnosis | Sequence[ConversationDiagnosis]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        at, size = self._spans[index]
        file = self._spill.file
        file.seek(at)
        key, flat, groups = pickle.loads(file.read(size))
        conversation = ConversationDiagnosis(
            key=key, requests=tuple(unflat_diagnosis(item) for item in flat), groups=groups
        )
        return conversation if self._transform is None else self._transform(conversation)

    def __iter__(self) -> Iterator[ConversationDiagnosis]:
        for index in range(len(self._spans)):
            yield self[index]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or len(other) != len(self):
            return NotImplemented if not isinstance(other, Sequence) else False
        return all(a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]


class _Plan:
    """Every request's link, packed (a ``Link`` object is ~150 bytes; this is ~30)."""

    def __init__(self) -> None:
        self.parent = array("q")
        self.relation = array("b")
        self.shared = array("q")
        self.conversation = array("q")
        self.returns_to: dict[int, int] = {}
        self.keys: dict[str, int] = {}
        self.names: list[str] = []

    def add(self, link: Link) -> None:
        number = self.keys.get(link.conversation)
        if number is None:
            number = self.keys[link.conversation] = len(self.names)
            self.names.append(link.conversation)
        self.parent.append(_NONE if link.parent is None else link.parent)
        self.relation.append(_RELATIONS.index(link.relation))
        self.shared.append(link.shared_parts)
        self.conversation.append(number)
        if link.returns_to is not None:
            self.returns_to[link.index] = link.returns_to

    def link(self, index: int) -> Link:
        parent = self.parent[index]
        return Link(
            index=index,
            parent=None if parent == _NONE else parent,
            relation=_RELATIONS[self.relation[index]],
            shared_parts=self.shared[index],
            conversation=self.names[self.conversation[index]],
            returns_to=self.returns_to.get(index),
        )


class _Facts:
    """What the report needs of the whole trace, gathered during the plan."""

    def __init__(self) -> None:
        self.tally = GranularityTally()
        self.has_usage = False
        self.lacks_hits = False
        self.reported = 0
        self.lacking = 0

    def add(self, exchange: Any) -> None:
        self.tally.add(exchange)
        usage = exchange.usage
        if usage is not None:
            self.reported += 1
            if usage.hit_tokens is not None:
                self.has_usage = True
        if not exchange.refused and (usage is None or usage.hit_tokens is None):
            self.lacks_hits = True
            self.lacking += 1


def _plan(stream: TraceStream) -> tuple[_Plan, _Facts, StreamSummary]:
    planner = Doctor(granularity=CacheGranularity.given(1))  # plans only: links and views
    plan, facts = _Plan(), _Facts()
    for exchange in stream.read():
        plan.add(planner.plan(exchange).link)
        facts.add(exchange)
    assert stream.summary is not None
    return plan, facts, stream.summary


def diagnose_stream(
    path: str | os.PathLike[str],
    *,
    simulate: bool | None = None,
    conversation: str | None = None,
    granularity: int | None = None,
    prices: Prices | None = None,
    spill: IO[bytes] | None = None,
) -> DoctorReport:
    """The cache doctor's report of the dsh-trace file at ``path`` (compressed with zstd or gzip
    or not), read as a stream (see the module docstring): the report :func:`diagnose` gives for
    the same file, its conversations read back from ``spill`` (a binary file open for reading
    and writing; default: an unnamed temporary file, gone when the report is). Raises
    :class:`~dsh_testkit.traces.TraceError` as ``load_trace`` does for the same file, and
    :class:`~dsh_testkit.traces.CompressedDataError` for a damaged frame or member."""
    stream = TraceStream(path)
    with paused_gc():
        plan, facts, summary = _plan(stream)
        if summary.late:  # the links must be made on the scrubbed requests
            plan, facts, summary = _plan(stream)
        use_simulator = (not facts.has_usage) if simulate is None else simulate
        missing = simulate is None and not use_simulator and facts.lacks_hits
        chosen = facts.tally.granularity(granularity)
        wanted: int | None = None
        if conversation is not None:
            wanted = plan.keys[conversation_key(conversation, plan.names)]
        count = len(plan.parent)
        last_child = array("q", [_NONE]) * count
        last_of = array("q", [_NONE]) * len(plan.names)
        for index in range(count):
            parent = plan.parent[index]
            if parent != _NONE:
                last_child[parent] = index
            last_of[plan.conversation[index]] = index
        doctor = Doctor(
            granularity=chosen,
            simulate=use_simulator,
            simulate_missing=missing,
            time_resolution=summary.time_resolution,
            prices=prices,
        )
        # the report owns it: closed (and, unnamed, gone) when the report is collected
        file = spill if spill is not None else tempfile.TemporaryFile()  # noqa: SIM115
        holder = _Spill(file, owned=spill is None)
        spans: dict[int, tuple[int, int]] = {}
        open_: dict[int, list[RequestDiagnosis]] = {}
        for exchange in stream.read():
            index = exchange.index
            if index >= count:
                raise TraceError("the file changed between two passes over it", path=str(path))
            number = plan.conversation[index]
            link = plan.link(index)
            diagnosis = doctor.add(exchange, Planned(view=view_of(exchange), link=link))
            if wanted is None or number == wanted:
                open_.setdefault(number, []).append(diagnosis)
            parent = plan.parent[index]
            if parent != _NONE and last_child[parent] == index:
                doctor.forget(parent)
            if last_child[index] == _NONE:
                doctor.forget(index)
            if last_of[number] == index and number in open_:
                items = open_.pop(number)
                data = pickle.dumps(
                    (
                        plan.names[number],
                        [flat_diagnosis(item) for item in items],
                        group_findings(items),
                    ),
                    protocol=pickle.HIGHEST_PROTOCOL,
                )
                file.seek(0, os.SEEK_END)
                spans[number] = (file.tell(), len(data))
                file.write(data)
        file.flush()
    ordered = [spans[number] for number in sorted(spans)]
    notes = figures_notes(
        list(summary.notes),
        simulate=simulate,
        use_simulator=use_simulator,
        missing=missing,
        count=summary.count,
        reported=facts.reported,
        lacking=facts.lacking,
    )
    return DoctorReport(
        source=summary.source,
        path=summary.path,
        figures="simulated" if use_simulator else "mixed" if missing else "reported",
        granularity=chosen,
        conversations=SpilledConversations(holder, ordered),
        notes=tuple(notes),
        prices=prices,
        time_resolution=summary.time_resolution,
    )


def allowed_lazily(
    report: DoctorReport, transform: Callable[[ConversationDiagnosis], ConversationDiagnosis]
) -> DoctorReport | None:
    """``report`` with ``transform`` applied to each conversation as it is read back, when its
    conversations are spilled (``None`` otherwise)."""
    conversations = report.conversations
    if isinstance(conversations, SpilledConversations):
        return replace(report, conversations=conversations.mapped(transform))
    return None
