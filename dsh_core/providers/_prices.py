"""What DeepSeek charges per million tokens, dated: the figures cost estimates start from.

Prices move (docs/wire.md §2.6 lists them with their sources and dates); each entry says from
when it holds and where it comes from, and every estimate that uses one names it, so a reader
can tell an old price from a current one. Callers may pass their own (:class:`Prices`).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from datetime import datetime

from ._models import resolve_model

__all__ = ["PRICE_TABLE", "Prices", "prices_for"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Prices:
    """US dollars per million tokens."""

    hit: float
    """A prompt token served from the prefix cache."""
    miss: float
    """A prompt token not served from the cache."""
    output: float
    """A completion token."""
    label: str = "custom"
    """Which table entry (``deepseek-v4-flash since 2026-04-24``) or ``custom``."""

    def __post_init__(self) -> None:
        for name in ("hit", "miss", "output"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"Prices.{name} must be a non-negative number, got {value!r}")

    def cost(self, *, hit_tokens: int, miss_tokens: int, output_tokens: int = 0) -> float:
        """The dollars a request with these token counts costs."""
        return (hit_tokens * self.hit + miss_tokens * self.miss + output_tokens * self.output) / 1e6

    def to_json(self) -> dict[str, object]:
        return {"hit": self.hit, "miss": self.miss, "output": self.output, "label": self.label}


PRICE_TABLE: tuple[tuple[str, str, Prices], ...] = (
    # (family, since, prices); docs/wire.md §2.6. Families: "v3-chat", "v3-reasoner", "flash", "pro".
    ("v3-chat", "2025-01-01", Prices(hit=0.07, miss=0.27, output=1.10, label="deepseek-chat (V3)")),
    (
        "v3-reasoner",
        "2025-01-01",
        Prices(hit=0.14, miss=0.55, output=2.19, label="deepseek-reasoner (V3)"),
    ),
    ("flash", "2026-04-24", Prices(hit=0.0028, miss=0.14, output=0.28, label="deepseek-v4-flash")),
    ("pro", "2026-04-24", Prices(hit=0.003625, miss=0.435, output=0.87, label="deepseek-v4-pro")),
)
"""Each model family's list prices from a date on, oldest first (docs/wire.md §2.6)."""

_V4_START = datetime.fromisoformat("2026-04-24T00:00:00+00:00").timestamp()


def _family(model: str | None, when: float | None) -> str:
    if when is not None and when < _V4_START:
        return "v3-reasoner" if model == "deepseek-reasoner" else "v3-chat"
    info = resolve_model(model) if model else None
    served = (info.served_by if info is not None else (model or "")).lower()
    return "pro" if "pro" in served else "flash"


def _since(since: str) -> float:
    return datetime.fromisoformat(since + "T00:00:00+00:00").timestamp()


_DATES: tuple[float, ...] = tuple(sorted({_V4_START, *(_since(s) for _, s, _ in PRICE_TABLE)}))
"""Every instant :func:`prices_for`'s answer can change at (the family rule's and the table's):
between two of them it depends on the model alone."""


def prices_for(model: str | None, when: float | None = None) -> Prices:
    """The list prices for ``model`` at ``when`` (Unix seconds; ``None``: now), labelled with
    the entry and its date."""
    if when is not None and when != when:  # NaN compares with no date: not in a period
        return _prices_for(model, when)
    key = (model, None if when is None else bisect.bisect_right(_DATES, when))
    found = _MEMO.get(key)
    if found is None:  # (a trace asks once per request: the table is read once per period)
        if len(_MEMO) >= _MEMO_ENTRIES:
            _MEMO.clear()
        found = _MEMO[key] = _prices_for(model, when)
    return found


_MEMO: dict[tuple[str | None, int | None], Prices] = {}
_MEMO_ENTRIES = 512


def _prices_for(model: str | None, when: float | None) -> Prices:
    family = _family(model, when)
    chosen: tuple[str, Prices] | None = None
    for name, since, prices in PRICE_TABLE:
        if name != family:
            continue
        start = _since(since)
        if chosen is None or when is None or when >= start:
            chosen = (since, prices)
    assert chosen is not None  # every family has an entry
    since, prices = chosen
    return Prices(
        hit=prices.hit,
        miss=prices.miss,
        output=prices.output,
        label=f"{prices.label} since {since}",
    )
