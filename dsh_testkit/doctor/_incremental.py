"""The doctor's report of a growing trace, one exchange at a time, in bounded memory.

The recording proxy feeds each exchange here as it is written (the exchange itself is read
back from the trace file when it is needed, by its index); :meth:`IncrementalReport.report`
gives the report so far without diagnosing anything twice. Memory stays bounded over a long
session: the doctor keeps the latest ``window`` requests as possible parents (older ones are
read back from the file by ``lookup``), and the report keeps the latest ``keep`` requests'
diagnoses (each with its figures and findings) and counts every one in the totals it notes.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Final

from dsh_core.providers import Prices

from ..prompt._granularity import DEFAULT_GRANULARITY, CacheGranularity, table_granularity
from ..traces import Exchange
from ._engine import Doctor
from ._report import ConversationDiagnosis, DoctorReport, RequestDiagnosis, group_findings

__all__ = ["IncrementalReport"]

KEEP: Final = 5000
"""Diagnoses kept for the report (the latest)."""

WINDOW: Final = 2000
"""Earlier requests the doctor holds as possible parents (older ones are read back)."""


class IncrementalReport:
    """Diagnoses exchanges as they come (thread-safe); :meth:`report` says where things stand.

    ``lookup`` returns an earlier exchange by its index (the proxy reads it back from its
    file). The cache granularity comes from the model table for the first exchange's model and date,
    and the figures are the provider's when the first exchange carries a cache figure, else
    simulated.
    """

    def __init__(
        self,
        *,
        lookup: Callable[[int], Exchange],
        source: str = "proxy",
        keep: int = KEEP,
        window: int = WINDOW,
        prices: Prices | None = None,
        time_resolution: float | None = 1e-6,
    ) -> None:
        if keep < 1 or window < 1:
            raise ValueError("keep and window must be at least 1")
        self._lookup = lookup
        self._source = source
        self._window = window
        self._prices = prices
        self._resolution = time_resolution
        self._doctor: Doctor | None = None
        self._kept: deque[RequestDiagnosis] = deque(maxlen=keep)
        self._lock = threading.Lock()
        self.count = 0
        """Exchanges diagnosed so far."""

    def add(self, exchange: Exchange) -> RequestDiagnosis:
        """Diagnose the next exchange (exchanges come in trace order, indexes from 0)."""
        with self._lock:
            if self._doctor is None:
                usage = exchange.usage
                self._doctor = Doctor(
                    granularity=table_granularity(
                        exchange.model, exchange.started, endpoint=exchange.endpoint
                    ),
                    simulate=usage is None or usage.hit_tokens is None,
                    time_resolution=self._resolution,
                    prices=self._prices,
                    window=self._window,
                    lookup=self._lookup,
                )
            diagnosis = self._doctor.add(exchange)
            self._kept.append(diagnosis)
            self.count += 1
            return diagnosis

    def report(self, *, path: str | None = None) -> DoctorReport:
        """The report of the exchanges so far (the latest :data:`KEEP` of them in detail)."""
        with self._lock:
            doctor, kept, count = self._doctor, list(self._kept), self.count
        by_key: dict[str, list[RequestDiagnosis]] = {}
        for diagnosis in kept:
            by_key.setdefault(diagnosis.conversation, []).append(diagnosis)
        notes: list[str] = []
        if count == 0:
            notes.append("the trace is empty: it holds no model requests")
        elif len(kept) < count:
            notes.append(
                f"the live report shows the latest {len(kept):,} of {count:,} requests (their "
                "figures make the totals); run dsh-testkit cache-report on the trace file for "
                "all of them"
            )
        granularity = (
            doctor.granularity
            if doctor is not None
            else CacheGranularity(
                tokens=DEFAULT_GRANULARITY, origin="model-table", detail="no request yet"
            )
        )
        return DoctorReport(
            source=self._source,
            path=path,
            figures="simulated" if doctor is not None and doctor.simulate else "reported",
            granularity=granularity,
            conversations=tuple(
                ConversationDiagnosis(key=key, requests=tuple(items), groups=group_findings(items))
                for key, items in by_key.items()
            ),
            notes=tuple(notes),
            prices=self._prices,
            time_resolution=self._resolution,
        )
