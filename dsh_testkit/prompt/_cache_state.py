"""The prefix-cache simulator's bookkeeping: a unit, one key's state, and the block-chain
hashes that identify a token prefix in one dictionary lookup (see ``_cache.py``)."""

from __future__ import annotations

from collections.abc import Sequence

from dsh_core.providers import UnitVisibility

from ._cache_values import PrefixUnitKind

__all__: list[str] = []


class _Unit:
    """A unit's mutable bookkeeping."""

    __slots__ = ("kind", "last_used", "length", "visible_at")

    def __init__(self, length: int, kind: PrefixUnitKind, visible_at: float, now: float) -> None:
        self.length = length
        self.kind: PrefixUnitKind = kind
        self.visible_at = visible_at
        self.last_used = now


class _KeyState:
    """Everything one isolation key has cached, and the granularity and visibility its model's
    units follow."""

    __slots__ = (
        "granularity",
        "last_sweep",
        "length_counts",
        "lengths",
        "recent",
        "units",
        "visibility",
    )

    def __init__(self, now: float, granularity: int, visibility: UnitVisibility) -> None:
        self.granularity = granularity
        self.visibility = visibility
        self.units: dict[int, _Unit] = {}
        """Prefix hash → unit, least recently used first (dict order)."""
        self.lengths: list[int] = []
        """Distinct unit lengths, ascending (rules 2026)."""
        self.length_counts: dict[int, int] = {}
        self.recent: dict[int, tuple[float, float]] = {}
        """Block-chain hashes of recent prompts → (first seen, last seen); shorter prefixes are
        more recent in dict order."""
        self.last_sweep = now


_SEED = 0x5EED


def _extend_chain(chain: list[int], tail: Sequence[int], granularity: int) -> list[int]:
    """Append to ``chain`` the hashes of the full blocks of ``tail``, which starts where the
    blocks ``chain`` covers end (``chain[k]`` is the hash of the first ``k`` blocks)."""
    last = chain[-1]
    for start in range(0, len(tail) - granularity + 1, granularity):
        last = hash((last, tuple(tail[start : start + granularity])))
        chain.append(last)
    return chain


def _extend_with_output(
    chain: list[int], tokens: Sequence[int], output: Sequence[int], granularity: int
) -> int:
    """Extend the prompt's ``chain`` over ``tokens + output`` without copying the prompt;
    return the prefix hash of the whole sequence."""
    start = (len(chain) - 1) * granularity
    tail = [*tokens[start:], *output]
    _extend_chain(chain, tail, granularity)
    blocks = (start + len(tail)) // granularity
    return hash((chain[blocks], tuple(tail[blocks * granularity - start :])))


def _prefix_hash(chain: Sequence[int], tokens: Sequence[int], length: int, granularity: int) -> int:
    """The identity of the first ``length`` tokens: their full blocks' chain, then the tail."""
    blocks = length // granularity
    return hash((chain[blocks], tuple(tokens[blocks * granularity : length])))


def _aligned_hash(chain_hash: int) -> int:
    """:func:`_prefix_hash` of a block-aligned length (an empty tail), from its chain hash."""
    return hash((chain_hash, ()))
