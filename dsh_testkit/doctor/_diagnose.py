"""``diagnose``: a whole trace (or anything that holds one) through the engine, as a report."""

from __future__ import annotations

from typing import Any

from dsh_core.providers import Prices

from ..traces import Trace, trace_of
from ..traces._model import paused_gc
from ._engine import Doctor
from ._model_facts import cache_granularity
from ._pool import POOL_THRESHOLD, can_pool, diagnose_pooled
from ._report import ConversationDiagnosis, DoctorReport, RequestDiagnosis, group_findings

__all__ = ["conversation_key", "diagnose", "figures_notes"]


def diagnose(
    value: Any,
    *,
    simulate: bool | None = None,
    conversation: str | None = None,
    granularity: int | None = None,
    prices: Prices | None = None,
    jobs: int = 1,
) -> DoctorReport:
    """The cache doctor's report of a trace (anything :func:`~dsh_testkit.traces.trace_of`
    takes: a trace, a file of any supported kind, a capture, a mock, a list of requests).

    ``simulate``: ``True`` runs the mock's prefix-cache simulator for every hit figure,
    ``False`` uses the trace's reported usage only (a request without a cache figure is counted
    as unknown); ``None`` (default) takes each request's reported figures and simulates the hit
    of those without one (all of them when the trace has no cache figure). A reported prompt
    count is kept in every mode; each request says which of its figures are simulated.
    ``conversation`` restricts the report to one conversation (``KeyError`` naming the keys
    otherwise). ``granularity`` sets the cache granularity in tokens (default: from the trace's hits or
    the model table). ``prices`` overrides the list prices the cost figures use.

    ``jobs`` (default 1) diagnoses the conversations of a large trace (2,000 requests or more)
    in that many processes, forked from this one (where the platform forks): the report is the
    same as one process's. Simulated figures are diagnosed in one process (the simulated cache
    is shared by every conversation). Fork only from a process that runs no other thread.
    """
    if jobs < 1:
        raise ValueError(f"jobs must be 1 or more, not {jobs}")
    with paused_gc():
        trace = trace_of(value)
        return _diagnose(trace, simulate, conversation, granularity, prices, jobs)


def _diagnose(
    trace: Trace,
    simulate: bool | None,
    conversation: str | None,
    given: int | None,
    prices: Prices | None,
    jobs: int = 1,
) -> DoctorReport:
    use_simulator = (not trace.has_usage) if simulate is None else simulate
    missing = simulate is None and not use_simulator and _lacks_hits(trace)
    granularity = cache_granularity(trace, given)

    def make_doctor() -> Doctor:
        return Doctor(
            granularity=granularity,
            simulate=use_simulator,
            simulate_missing=missing,
            time_resolution=trace.time_resolution,
            prices=prices,
        )

    by_key: dict[str, list[RequestDiagnosis]] = {}
    if (
        jobs > 1
        and not (use_simulator or missing)
        and len(trace) >= POOL_THRESHOLD
        and can_pool()
        and all(e.index == i for i, e in enumerate(trace))
    ):
        by_key = diagnose_pooled(trace, make_doctor, jobs)
    else:
        doctor = make_doctor()
        for exchange in trace:
            diagnosis = doctor.add(exchange)
            by_key.setdefault(diagnosis.conversation, []).append(diagnosis)
    if conversation is not None:
        key = conversation_key(conversation, list(by_key))
        by_key = {key: by_key[key]}
    notes = figures_notes(
        list(trace.notes),
        simulate=simulate,
        use_simulator=use_simulator,
        missing=missing,
        count=len(trace),
        reported=sum(1 for e in trace if e.usage is not None),
        lacking=sum(
            1 for e in trace if not e.refused and (e.usage is None or e.usage.hit_tokens is None)
        ),
    )
    return DoctorReport(
        source=trace.source,
        path=trace.path,
        figures="simulated" if use_simulator else "mixed" if missing else "reported",
        granularity=granularity,
        conversations=tuple(
            ConversationDiagnosis(key=key, requests=tuple(items), groups=group_findings(items))
            for key, items in by_key.items()
        ),
        notes=tuple(notes),
        prices=prices,
        time_resolution=trace.time_resolution,
    )


def _lacks_hits(trace: Trace) -> bool:
    """Whether some answered request has no cache figure (while others have one)."""
    return any(not e.refused and (e.usage is None or e.usage.hit_tokens is None) for e in trace)


def figures_notes(
    notes: list[str],
    *,
    simulate: bool | None,
    use_simulator: bool,
    missing: bool,
    count: int,
    reported: int,
    lacking: int,
) -> list[str]:
    """``notes`` (the trace's) and what the report says of where its figures come from:
    ``count`` requests, ``reported`` of them with usage, ``lacking`` answered ones without a
    cache figure."""
    if use_simulator and simulate is None and count:
        notes.append(
            "the trace carries no cache usage: hits are simulated"
            + (
                f" (the prompt counts of {reported} request(s) are the provider's, kept)"
                if reported
                else ", prompts too"
            )
        )
    if missing:
        notes.append(
            f"{lacking} request(s) have no cache figure in the trace: their hits are simulated "
            "(marked), the other figures are the provider's"
        )
    if not count:
        notes.append("the trace is empty: it holds no model requests")
    return notes


def conversation_key(asked: str, keys: list[str]) -> str:
    """The conversation ``asked`` names: a key, or ``#N``, the Nth conversation as found
    (whether or not the trace names its conversations); ``KeyError`` naming the keys otherwise."""
    if asked in keys:
        return asked
    number = asked[1:] if asked.startswith("#") else ""
    if number.isdigit() and 1 <= int(number) <= len(keys):
        return keys[int(number) - 1]
    found = ", ".join(keys) or "none"
    raise KeyError(
        f"no conversation {asked!r} in the trace; it has: {found}"
        + (f" (or #1 … #{len(keys)}, as found)" if keys else "")
    )
