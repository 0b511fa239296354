"""A simulator of DeepSeek's prefix cache ("context caching on disk"), in token space.

DeepSeek caches automatically, per account and ``user_id``, and reports
``prompt_cache_hit_tokens`` / ``prompt_cache_miss_tokens`` (docs/wire.md §2). A mock that answers
every request with a zero hit cannot tell a cache-friendly agent from one that rewrites its
history, so the mock runs every request through :class:`PrefixCacheSimulator`.

Rules ``"2026"`` (the default; docs/wire.md §2.1, §2.4), per isolation key:

- After a request, *cache prefix units* are persisted: one ending at the end of the user input
  (:attr:`RenderedPrompt.input_end`), one ending at the end of the model output (prompt +
  completion), and one at every multiple of ``interval_tokens`` inside that sequence.
- A request hits the **longest** visible unit it matches **in full** (no partial use of a unit);
  the hit is reported rounded down to whole ``granularity`` units (by default the key's model's,
  from the model table: 128 for every V4-era model, as every live hit measured is a multiple of
  it). Units shorter than one granularity are never persisted.
- Common prefixes (``common_prefix``): ``"blocks"`` (default, measured on live traffic) makes
  every granularity-aligned prefix of every earlier prompt of the key reusable, so a new
  session hits the system prompt an earlier one sent; ``"detected"`` persists a common prefix
  only once two requests share it, the documented example taken literally ("A+B then A+C
  persists A", cut at the last ``granularity`` boundary inside the shared part).
- Visibility (:class:`UnitVisibility`): each unit kind becomes visible a delay after it was
  persisted: input-side units counted from the lookup (the input was read), output-side units
  from the commit (the reply's last chunk). The default is no delay, so back-to-back test
  requests hit deterministically; ``visibility="live"`` takes each key's model's measured timing
  from the model table (``CacheFacts``: today every unit by the next request; before mid-July
  2026, output-end units about 1.45 s after the reply; ``live_at`` picks the date). The older
  ``visibility_delay`` applies one delay to every unit
  from the commit. A unit is forgotten after ``ttl`` idle seconds (a hit refreshes it) or when
  the key holds more than ``max_units_per_key`` units (least recently used first).
- Keys (:class:`CacheKey`): account, ``user_id`` and the serving model; aliases of one model
  share its units.

The rules, their sources and how well they agree with live traffic: docs/fidelity.md
(``dsh-testkit calibrate`` measures them on any logs with live usage).

Rules ``"2024"`` (docs/wire.md §2.2): every ``granularity``-token block boundary of every earlier
prompt and output is a unit, so a request hits its longest shared block-aligned prefix with any
of them; shorter than one granularity is never cached.

How to use it: ``lookup(key, prompt)`` at request time returns a :class:`CacheLookup` whose
``usage`` is the hit/miss split; ``commit(lookup, completion)`` once the reply is known persists
the units (``completion=None`` when the request produced no output but its input was read).
``process(key, prompt, completion)`` does both. Two requests looked up before either commits
both miss, as concurrent requests do on the real service.

Efficiency: a prompt is hashed once, as a chain of ``granularity``-token blocks (``chain[k]`` is
the hash of the first ``k`` blocks); a unit of any length ``L`` is identified by
``hash((chain[L // G], tokens[L // G * G : L]))``, so checking a unit costs one dictionary
lookup, and a 1M-token prompt hashes in about 15 ms. Hashes are Python's ``hash`` of ints and
tuples, which is not randomized per process, so a simulation is reproducible.
"""

from __future__ import annotations

import time
from bisect import bisect_right, insort
from collections.abc import Callable, Hashable, Sequence
from itertools import islice
from typing import Literal

from dsh_core.providers import MODELS, CacheFacts, UnitVisibility

from ._cache_state import (
    _SEED,
    _aligned_hash,
    _extend_chain,
    _extend_with_output,
    _KeyState,
    _prefix_hash,
    _Unit,
)
from ._cache_values import (
    _RECENT_BLOCKS_PER_KEY,
    CacheKey,
    CacheLookup,
    CacheRules,
    CacheUsage,
    CommonPrefixRule,
    PrefixUnit,
    PrefixUnitKind,
)
from ._granularity import DEFAULT_GRANULARITY
from ._template_tokens import RenderedCompletion, RenderedPrompt

__all__ = ["PrefixCacheSimulator"]


class PrefixCacheSimulator:
    """DeepSeek's prefix cache, per isolation key. See the module docstring for the rules.

    Parameters (all keyword-only):

    - ``rules``: ``"2026"`` (default) or ``"2024"``.
    - ``granularity``: tokens per cache unit (hits are whole numbers of them) for every key;
      ``None`` (the default): each key's model's (:attr:`CacheKey.model` in the model table,
      :func:`~dsh_testkit.prompt._granularity.table_granularity`: 128 for every V4-era model, the
      table's default for a key without a known model; the 2024 documentation's storage unit
      was 64).
    - ``interval_tokens``: rules 2026, a unit every this many tokens inside long sequences
      (default 4096; a multiple of ``granularity``; ``None`` turns interval units off). DeepSeek
      does not publish its interval.
    - ``visibility``: a :class:`UnitVisibility`, the delay of each unit kind for every key. The
      default is no delay at all, so a test's back-to-back requests hit deterministically
      whatever the machine's speed; ``"live"``: each key's model's measured timing from the
      model table (``CacheFacts.visibility_at(live_at)``), for a simulation on a log's clock.
    - ``visibility_delay``: the older single setting; when given (and ``visibility`` is not), every
      unit becomes visible this many seconds after :meth:`commit`.
    - ``common_prefix``: rules 2026, a :data:`CommonPrefixRule` (default ``"blocks"``).
    - ``live_at``: with ``visibility="live"``, the Unix time whose live behaviour to follow (the
      service changed in July 2026); ``None`` (the default): today's.
    - ``ttl``: idle seconds before a unit is forgotten (default 6 h; the real service keeps
      units hours to days; ``None`` never expires).
    - ``max_units_per_key``: bound per key, least recently used evicted first (default 10 000).
    - ``clock``: seconds as a float (default ``time.monotonic``); inject a fake one in tests.
    """

    __slots__ = (
        "_clock",
        "_common_prefix",
        "_delay",
        "_granularity",
        "_interval",
        "_keys",
        "_live_at",
        "_max_units",
        "_per_model",
        "_rules",
        "_ttl",
        "_visibility",
    )

    def __init__(
        self,
        *,
        rules: CacheRules = "2026",
        granularity: int | None = None,
        interval_tokens: int | None = 4096,
        visibility: UnitVisibility | Literal["live"] | None = None,
        visibility_delay: float | None = None,
        common_prefix: CommonPrefixRule = "blocks",
        live_at: float | None = None,
        ttl: float | None = 6 * 3600.0,
        max_units_per_key: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if rules not in ("2026", "2024"):
            raise ValueError(f'rules must be "2026" or "2024", got {rules!r}')
        if granularity is not None and granularity < 1:
            raise ValueError(f"granularity must be a positive number of tokens, got {granularity}")
        granularities = (
            {granularity}
            if granularity is not None
            else {DEFAULT_GRANULARITY, *(info.cache.granularity for info in MODELS.values())}
        )
        for each in sorted(granularities):
            if interval_tokens is not None and (interval_tokens < each or interval_tokens % each):
                raise ValueError(
                    f"interval_tokens must be a positive multiple of granularity ({each}) or "
                    f"None to disable interval units, got {interval_tokens}"
                )
        if (
            visibility is not None
            and visibility != "live"
            and not isinstance(visibility, UnitVisibility)
        ):
            raise ValueError(
                f'visibility must be a UnitVisibility, "live" or None, got {visibility!r}'
            )
        if visibility_delay is not None and visibility_delay < 0:
            raise ValueError(f"visibility_delay must be >= 0 seconds, got {visibility_delay}")
        if visibility is not None and visibility_delay is not None:
            raise ValueError("pass visibility or visibility_delay, not both")
        if common_prefix not in ("blocks", "detected"):
            raise ValueError(f'common_prefix must be "blocks" or "detected", got {common_prefix!r}')
        if ttl is not None and ttl <= 0:
            raise ValueError(f"ttl must be > 0 seconds or None for no expiry, got {ttl}")
        if max_units_per_key < 1:
            raise ValueError(f"max_units_per_key must be at least 1, got {max_units_per_key}")
        self._rules: CacheRules = rules
        self._granularity = granularity
        self._interval = interval_tokens
        # ``_delay`` set: the single delay, counted from the commit, for every unit.
        self._delay = visibility_delay
        self._visibility: UnitVisibility | Literal["live"] = (
            visibility if visibility is not None else UnitVisibility.uniform(0.0)
        )
        self._per_model: dict[str, tuple[int, UnitVisibility]] = {}
        self._live_at = live_at
        self._common_prefix: CommonPrefixRule = common_prefix
        self._ttl = ttl
        self._max_units = max_units_per_key
        self._clock = clock
        self._keys: dict[Hashable, _KeyState] = {}

    def __repr__(self) -> str:
        return (
            f"PrefixCacheSimulator(rules={self._rules!r}, granularity={self._granularity}, "
            f"interval_tokens={self._interval}, visibility={self._visibility_setting()!r}, "
            f"common_prefix={self._common_prefix!r}, ttl={self._ttl}, "
            f"max_units_per_key={self._max_units}, keys={len(self._keys)})"
        )

    @property
    def rules(self) -> CacheRules:
        """The rule set simulated."""
        return self._rules

    @property
    def granularity(self) -> int:
        """Tokens per reported unit for a key without a model in the table (the one set, or
        :data:`DEFAULT_GRANULARITY`); :meth:`granularity_for` gives a key's."""
        return self._granularity if self._granularity is not None else DEFAULT_GRANULARITY

    @property
    def visibility(self) -> UnitVisibility:
        """The delay of each unit kind for a key without a model in the table (a uniform one
        when built with ``visibility_delay``); :meth:`visibility_for` gives a key's."""
        return self.visibility_for(None)

    def granularity_for(self, key: Hashable) -> int:
        """Tokens per reported unit under ``key``: the one set, else the granularity of the
        key's model in the model table (:attr:`CacheKey.model`)."""
        return self._facts(key)[0]

    def visibility_for(self, key: Hashable) -> UnitVisibility:
        """The delay of each unit kind under ``key``: the one set; with ``"live"``, the
        visibility of the key's model in the model table."""
        return self._facts(key)[1]

    def _visibility_setting(self) -> UnitVisibility | str:
        if self._delay is not None:
            return UnitVisibility.uniform(self._delay)
        return self._visibility

    def _facts(self, key: Hashable) -> tuple[int, UnitVisibility]:
        """The granularity and visibility of ``key``'s units: the settings, and where they
        leave it to the model, the model table's :class:`~dsh_core.providers.CacheFacts`."""
        model = key.model if isinstance(key, CacheKey) else ""
        found = self._per_model.get(model)
        if found is None:
            info = MODELS.get(model)
            facts = info.cache if info is not None else CacheFacts()
            granularity = self._granularity if self._granularity is not None else facts.granularity
            if self._delay is not None:
                visibility = UnitVisibility.uniform(self._delay)
            elif self._visibility == "live":
                visibility = facts.visibility_at(self._live_at)
            else:
                visibility = self._visibility
            found = self._per_model[model] = (granularity, visibility)
        return found

    # -- the two calls per request ----------------------------------------------------------

    def lookup(self, key: Hashable, prompt: RenderedPrompt | Sequence[int]) -> CacheLookup:
        """The cache outcome of a request with ``prompt`` under ``key``, at the clock's now.

        A raw token sequence is taken as a prompt whose input ends at its end. The unit that
        hits has its idle timer refreshed; nothing is persisted until :meth:`commit`.
        """
        now = self._clock()
        if isinstance(prompt, RenderedPrompt):
            rendered: RenderedPrompt | None = prompt
            tokens: Sequence[int] = prompt.tokens
            input_end = prompt.input_end
        else:  # a copy, so a caller reusing its list cannot change what commit persists
            rendered, tokens, input_end = None, tuple(prompt), len(prompt)
        granularity = self._facts(key)[0]
        chain = _extend_chain([_SEED], tokens, granularity)
        state = self._keys.get(key)
        unit_tokens = 0
        kind: PrefixUnitKind | None = None
        if state is not None:
            if self._rules == "2026":
                unit_tokens, kind = self._match_unit(state, tokens, chain, now)
                if self._common_prefix == "blocks":
                    common = self._visible_common_blocks(state, chain, now) * granularity
                    if common > unit_tokens:
                        unit_tokens, kind = common, "common"
            else:
                unit_tokens = self._match_blocks(state, chain, now)
                kind = "block" if unit_tokens else None
        hit = unit_tokens // granularity * granularity
        usage = CacheUsage(
            prompt_tokens=len(tokens),
            hit_tokens=hit,
            miss_tokens=len(tokens) - hit,
            unit_tokens=unit_tokens,
        )
        return CacheLookup(
            key=key,
            usage=usage,
            prompt=rendered,
            tokens=tokens,
            input_end=input_end,
            chain=tuple(chain),
            time=now,
            unit_kind=kind,
        )

    def commit(
        self, lookup: CacheLookup, completion: RenderedCompletion | Sequence[int] | None
    ) -> None:
        """Persist the units of a looked-up request, now that its reply is ``completion``.

        ``None``: the input was read but no output was produced (a fault after prefill); only
        input-side units are persisted.
        """
        now = self._clock()
        state = self._keys.get(lookup.key)
        if state is None:
            state = self._keys[lookup.key] = _KeyState(now, *self._facts(lookup.key))
        self._sweep(state, now)
        output: Sequence[int] = ()
        if isinstance(completion, RenderedCompletion):
            output = completion.tokens
        elif completion is not None:
            output = completion
        if self._rules == "2026":
            self._commit_units(state, lookup, output, now)
        else:
            self._commit_blocks(state, lookup, output, now)
        self._evict(state)

    def _visible_at(
        self, state: _KeyState, kind: PrefixUnitKind, read_at: float, now: float, *, output: bool
    ) -> float:
        """When a unit of ``kind`` persisted now becomes visible; ``output``: it ends inside the
        reply (counted from the commit), else inside the prompt (counted from the lookup)."""
        if self._delay is not None:
            return now + self._delay
        rule = state.visibility
        if kind == "output":
            return now + rule.output
        if kind == "interval" or kind == "block":
            return (now if output else read_at) + rule.interval
        if kind == "common":
            return read_at + rule.common
        return read_at + rule.input

    def process(
        self,
        key: Hashable,
        prompt: RenderedPrompt | Sequence[int],
        completion: RenderedCompletion | Sequence[int] | None = None,
    ) -> CacheUsage:
        """:meth:`lookup` then :meth:`commit` in one call; returns the request's usage."""
        found = self.lookup(key, prompt)
        self.commit(found, completion)
        return found.usage

    # -- inspection -------------------------------------------------------------------------

    def units(self, key: Hashable) -> tuple[PrefixUnit, ...]:
        """The units ``key`` holds now (expired ones excluded), shortest first."""
        state = self._keys.get(key)
        if state is None:
            return ()
        now = self._clock()
        return tuple(
            sorted(
                (
                    PrefixUnit(
                        length=unit.length,
                        kind=unit.kind,
                        visible_at=unit.visible_at,
                        last_used=unit.last_used,
                    )
                    for unit in state.units.values()
                    if not self._expired(unit, now)
                ),
                key=lambda unit: (unit.length, unit.visible_at),
            )
        )

    def clear(self, key: Hashable | None = None) -> None:
        """Forget everything cached for ``key``, or for every key when ``None``."""
        if key is None:
            self._keys.clear()
        else:
            self._keys.pop(key, None)

    # -- rules 2026 -------------------------------------------------------------------------

    def _match_unit(
        self, state: _KeyState, tokens: Sequence[int], chain: Sequence[int], now: float
    ) -> tuple[int, PrefixUnitKind | None]:
        granularity = state.granularity
        lengths = state.lengths
        for position in range(bisect_right(lengths, len(tokens)) - 1, -1, -1):
            length = lengths[position]
            prefix = _prefix_hash(chain, tokens, length, granularity)
            unit = state.units.get(prefix)
            if unit is None or unit.length != length or unit.visible_at > now:
                continue
            if self._expired(unit, now):
                self._drop(state, prefix)
                continue
            unit.last_used = now
            state.units[prefix] = state.units.pop(prefix)
            return length, unit.kind
        return 0, None

    def matching_units(
        self, key: Hashable, prompt: RenderedPrompt | Sequence[int]
    ) -> tuple[PrefixUnit, ...]:
        """Every unit ``key`` holds (visible or not yet) that ``prompt`` matches in full,
        shortest first; rules ``"2026"`` only (``()`` under ``"2024"``). An inspection call: it
        refreshes nothing."""
        state = self._keys.get(key)
        if state is None or self._rules != "2026":
            return ()
        now = self._clock()
        tokens = prompt.tokens if isinstance(prompt, RenderedPrompt) else tuple(prompt)
        granularity = state.granularity
        chain = _extend_chain([_SEED], tokens, granularity)
        found: list[PrefixUnit] = []
        for length in state.lengths:
            if length > len(tokens):
                break
            unit = state.units.get(_prefix_hash(chain, tokens, length, granularity))
            if unit is None or unit.length != length or self._expired(unit, now):
                continue
            found.append(
                PrefixUnit(
                    length=length,
                    kind=unit.kind,
                    visible_at=unit.visible_at,
                    last_used=unit.last_used,
                )
            )
        return tuple(found)

    def _commit_units(
        self,
        state: _KeyState,
        lookup: CacheLookup,
        output: Sequence[int],
        now: float,
    ) -> None:
        granularity = state.granularity
        tokens = lookup.tokens
        read_at = lookup.time
        chain = list(lookup.chain)
        if self._common_prefix == "detected":
            common = self._common_prefix_blocks(state, chain) * granularity
            if common > lookup.usage.unit_tokens:
                prefix = _aligned_hash(chain[common // granularity])
                visible = self._visible_at(state, "common", read_at, now, output=False)
                self._persist(state, prefix, common, "common", visible, now)
        self._remember_prompt(state, chain, read_at, now)
        visible = self._visible_at(state, "input", read_at, now, output=False)
        self._persist_length(state, tokens, chain, lookup.input_end, "input", visible, now)
        end = len(tokens)
        if output:
            whole = _extend_with_output(chain, tokens, output, granularity)
            end += len(output)
            if end >= granularity:
                visible = self._visible_at(state, "output", read_at, now, output=True)
                self._persist(state, whole, end, "output", visible, now)
        if self._interval is not None:
            for length in range(self._interval, end, self._interval):
                prefix = _aligned_hash(chain[length // granularity])
                visible = self._visible_at(
                    state, "interval", read_at, now, output=length > len(tokens)
                )
                self._persist(state, prefix, length, "interval", visible, now)

    def _persist_length(
        self,
        state: _KeyState,
        tokens: Sequence[int],
        chain: Sequence[int],
        length: int,
        kind: PrefixUnitKind,
        visible_at: float,
        now: float,
    ) -> None:
        if length >= state.granularity:
            prefix = _prefix_hash(chain, tokens, length, state.granularity)
            self._persist(state, prefix, length, kind, visible_at, now)

    def _persist(
        self,
        state: _KeyState,
        prefix: int,
        length: int,
        kind: PrefixUnitKind,
        visible_at: float,
        now: float,
    ) -> None:
        """Store the unit whose prefix hash is ``prefix`` (``length`` tokens), or refresh it."""
        unit = state.units.pop(prefix, None)
        if unit is None or unit.length != length:
            unit = _Unit(length, kind, visible_at, now)
            if self._rules == "2026":
                count = state.length_counts.get(length, 0)
                if count == 0:
                    insort(state.lengths, length)
                state.length_counts[length] = count + 1
        else:
            unit.visible_at = min(unit.visible_at, visible_at)
            unit.last_used = now
        state.units[prefix] = unit

    def _common_prefix_blocks(self, state: _KeyState, chain: Sequence[int]) -> int:
        """Blocks this prompt shares with a recent prompt of the key (binary search)."""
        recent = state.recent
        low, high = 0, len(chain) - 1
        while low < high:
            middle = (low + high + 1) // 2
            if chain[middle] in recent:
                low = middle
            else:
                high = middle - 1
        return low

    def _visible_common_blocks(self, state: _KeyState, chain: Sequence[int], now: float) -> int:
        """Blocks this prompt shares with an earlier prompt of the key whose prefix is visible
        by now (rule ``"blocks"``). A shorter prefix was always first seen no later than a longer
        one, so the predicate is monotonic and a binary search finds the longest."""
        recent = state.recent
        delay = state.visibility.common
        ttl = self._ttl
        low, high = 0, len(chain) - 1
        while low < high:
            middle = (low + high + 1) // 2
            seen = recent.get(chain[middle])
            if (
                seen is not None
                and seen[0] + delay <= now
                and (ttl is None or now - seen[1] <= ttl)
            ):
                low = middle
            else:
                high = middle - 1
        return low

    def _remember_prompt(
        self, state: _KeyState, chain: Sequence[int], read_at: float, now: float
    ) -> None:
        recent = state.recent
        # Longest prefix first, so shorter prefixes are more recent in dict order and eviction
        # from the front never removes a prefix while keeping one of its extensions.
        for block_hash in reversed(chain[1:]):
            seen = recent.pop(block_hash, None)
            recent[block_hash] = (min(seen[0], read_at) if seen else read_at, now)
        excess = len(recent) - _RECENT_BLOCKS_PER_KEY
        if excess > 0:
            for block_hash in list(islice(recent, excess)):
                del recent[block_hash]

    # -- rules 2024 -------------------------------------------------------------------------

    def _match_blocks(self, state: _KeyState, chain: Sequence[int], now: float) -> int:
        blocks = 0
        units = state.units
        for block in range(1, len(chain)):
            unit = units.get(_aligned_hash(chain[block]))
            if unit is None or unit.visible_at > now or self._expired(unit, now):
                break
            blocks = block
        return blocks * state.granularity

    def _commit_blocks(
        self,
        state: _KeyState,
        lookup: CacheLookup,
        output: Sequence[int],
        now: float,
    ) -> None:
        granularity = state.granularity
        chain = list(lookup.chain)
        prompt_blocks = len(chain) - 1
        if output:
            _extend_with_output(chain, lookup.tokens, output, granularity)
        # Deepest block first: shorter prefixes end more recent, so LRU eviction keeps the
        # persisted blocks prefix-closed.
        for block in range(len(chain) - 1, 0, -1):
            prefix = _aligned_hash(chain[block])
            visible = self._visible_at(
                state, "block", lookup.time, now, output=block > prompt_blocks
            )
            self._persist(state, prefix, block * granularity, "block", visible, now)

    # -- expiry and eviction ----------------------------------------------------------------

    def _expired(self, unit: _Unit, now: float) -> bool:
        return self._ttl is not None and now - max(unit.last_used, unit.visible_at) > self._ttl

    def _drop(self, state: _KeyState, prefix: int) -> None:
        unit = state.units.pop(prefix)
        if self._rules == "2026":
            count = state.length_counts[unit.length] - 1
            if count:
                state.length_counts[unit.length] = count
            else:
                del state.length_counts[unit.length]
                del state.lengths[bisect_right(state.lengths, unit.length) - 1]

    def _sweep(self, state: _KeyState, now: float) -> None:
        ttl = self._ttl
        if ttl is None or now - state.last_sweep < ttl:
            return
        state.last_sweep = now
        for prefix in [p for p, unit in state.units.items() if self._expired(unit, now)]:
            self._drop(state, prefix)
        state.recent = {h: seen for h, seen in state.recent.items() if now - seen[1] <= ttl}

    def _evict(self, state: _KeyState) -> None:
        excess = len(state.units) - self._max_units
        if excess > 0:
            for prefix in list(islice(state.units, excess)):
                self._drop(state, prefix)
