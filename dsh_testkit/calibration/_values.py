"""Calibration's values: settings, the per-request comparison, skipped logs, the summary figures and
the report, each with its JSON form."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from dsh_core.providers import MODELS, UnitVisibility

from .._errors import TestkitError
from ..prompt._cache import PrefixCacheSimulator
from ..prompt._cache_values import CacheRules, CommonPrefixRule
from ..prompt._granularity import DEFAULT_GRANULARITY
from ..prompt._tokenizers import DeepSeekTokenizer, HeuristicTokenizer, Tokenizer

__all__ = [
    "CALIBRATION_FORMAT_VERSION",
    "CalibrationError",
    "CalibrationReport",
    "CalibrationSettings",
    "CalibrationSummary",
    "RequestCalibration",
    "Scope",
    "SkippedLog",
    "make_tokenizer",
]

CALIBRATION_FORMAT_VERSION: Final = 1
"""Version of the ``--json`` document."""

Scope: TypeAlias = Literal["log", "folder"]
"""One simulator per log, or one per folder (parent and subagent logs share it)."""

TokenizerName: TypeAlias = Literal["deepseek", "heuristic"]

_PLACEHOLDERS: Final = frozenset({"{{system}}", "{{tools}}"})
_SESSION_NAME: Final = re.compile(r"^(?P<stem>.+?)(?:\.(?P<n>\d+))?\.jsonl(?:\.zstd|\.zst|\.gz)?$")
_CHANGE_MARK: Final = re.compile(r"\n\n<!-- request/header change \d+ -->\n\n")
_SAME_RUN_MS: Final = 3_600_000
"""Two events at most this far apart (ms) are taken as one recording run's: a log that mixes
runs has them days apart, while a stream or a gap between steps lasts seconds to minutes."""
_ANCHOR_BASE: Final = 1 << 33
"""Anchored header tokens get ids above every real and heuristic id."""


class CalibrationError(TestkitError):
    """A calibration input cannot be used: a missing path or an unreadable sidecar.

    ``.path`` names the file or folder.
    """

    def __init__(self, message: str, *, path: str) -> None:
        super().__init__(message)
        self.path = path


# A traceback names it where users import it from, not this private module.
CalibrationError.__module__ = "dsh_testkit.calibration"


@dataclass(frozen=True, slots=True, kw_only=True)
class CalibrationSettings:
    """The simulator and tokenizer settings a calibration runs with."""

    rules: CacheRules = "2026"
    granularity: int | None = None
    """Tokens per reported unit; ``None`` (the default): each request's model's, from the model
    table (:attr:`dsh_core.providers.ModelInfo.cache`)."""
    interval_tokens: int | None = 4096
    visibility: UnitVisibility | Literal["live"] = "live"
    """Per-kind visibility delays; ``"live"`` (the default): each model's measured timing, from
    the model table."""
    common_prefix: CommonPrefixRule = "blocks"
    unknown_gap: float | None = None
    """Seconds assumed between a reply and the next request where the log cannot tell (its
    events are of different recording runs). ``None`` (the default): long enough for every unit
    persisted so far to be visible, as in an agent loop whose next request follows tool work;
    see docs/fidelity.md for the measurement behind it."""

    @property
    def unknown_gap_seconds(self) -> float:
        """:attr:`unknown_gap`, or the longest visibility delay when it is ``None``."""
        if self.unknown_gap is not None:
            return self.unknown_gap
        if self.visibility == "live":
            every = [
                visibility
                for info in MODELS.values()
                for visibility in (
                    info.cache.visibility,
                    *(v for _, v in info.cache.earlier_visibility),
                )
            ]
        else:
            every = [self.visibility]
        return max(max(v.input, v.output, v.common, v.interval) for v in every)

    tokenizer: TokenizerName = "deepseek"

    def simulator(
        self, clock: Callable[[], float], *, live_at: float | None = None
    ) -> PrefixCacheSimulator:
        """A fresh simulator with these settings on ``clock`` (seconds), with no expiry;
        ``live_at``: the Unix time whose live visibility ``"live"`` follows."""
        return PrefixCacheSimulator(
            live_at=live_at,
            rules=self.rules,
            granularity=self.granularity,
            interval_tokens=self.interval_tokens,
            visibility=self.visibility,
            common_prefix=self.common_prefix,
            ttl=None,
            clock=clock,
        )

    def to_json(self) -> dict[str, Any]:
        v = self.visibility
        return {
            "rules": self.rules,
            "granularity": self.granularity,
            "intervalTokens": self.interval_tokens,
            "visibility": v
            if v == "live"
            else {"input": v.input, "output": v.output, "common": v.common, "interval": v.interval},
            "commonPrefix": self.common_prefix,
            "unknownGap": self.unknown_gap,
            "tokenizer": self.tokenizer,
        }


class _Clock:
    """A clock the calibration sets to each event's time (seconds)."""

    __slots__ = ("now",)

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def make_tokenizer(name: TokenizerName) -> Tokenizer:
    """The named tokenizer: ``deepseek`` (the real V4 one, optional package) or ``heuristic``."""
    if name == "heuristic":
        return HeuristicTokenizer()
    return DeepSeekTokenizer()


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestCalibration:
    """One request: what the API reported and what the simulator gave."""

    log: str
    """The log's path, as given (or found under a given folder)."""
    index: int
    """Position of the request among the log's rebuilt requests (attempts included)."""
    turn: int | None
    """The turn, step and attempt of a session log's request; ``None`` for a trace's exchange
    (its wire traffic carries no turns)."""
    step: int | None
    attempt: int | None
    model: str
    live_prompt_tokens: int
    live_hit_tokens: int
    simulated_prompt_tokens: int
    simulated_hit_tokens: int
    simulated_unit: str
    """Kind of the unit the simulator hit (``input``, ``output``, ``common``, ``interval``,
    ``block``) or ``none``."""
    live_unit: str
    """Kind of the held unit nearest the live hit, ``none`` for a zero hit, ``other`` when the
    simulator holds no matching unit at all."""
    header_known: bool
    """The system prompt and tools are real (not anchored placeholders)."""
    granularity: int = DEFAULT_GRANULARITY
    """Tokens per reported unit of the request's model's cache, as simulated."""
    anchors: bool = False
    """An anchored header's size was taken from this request's live prompt, so its prompt
    tokens are measured, not predicted."""
    first_in_scope: bool
    """The first request its simulator saw."""
    gap_seconds: float | None
    """Seconds from the previous reply in the scope to this request (``None``: first, or the
    log's clock went back)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "log": self.log,
            "index": self.index,
            "turn": self.turn,
            "step": self.step,
            "attempt": self.attempt,
            "model": self.model,
            "livePromptTokens": self.live_prompt_tokens,
            "liveHitTokens": self.live_hit_tokens,
            "simulatedPromptTokens": self.simulated_prompt_tokens,
            "simulatedHitTokens": self.simulated_hit_tokens,
            "simulatedUnit": self.simulated_unit,
            "liveUnit": self.live_unit,
            "headerKnown": self.header_known,
            "anchors": self.anchors,
            "granularity": self.granularity,
            "firstInScope": self.first_in_scope,
            "gapSeconds": None if self.gap_seconds is None else round(self.gap_seconds, 3),
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class SkippedLog:
    """A log that was not compared, and why."""

    log: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"log": self.log, "reason": self.reason}


def _prompt_error(rows: Sequence[RequestCalibration]) -> float | None:
    """Mean absolute relative error of the rows' prompt tokens (``None`` for no rows)."""
    if not rows:
        return None
    total = sum(
        abs(r.simulated_prompt_tokens - r.live_prompt_tokens) / r.live_prompt_tokens for r in rows
    )
    return round(total / len(rows), 4)


def _ratio(hits: int, total: int) -> float | None:
    return round(hits / total, 4) if total else None


@dataclass(frozen=True, slots=True, kw_only=True)
class CalibrationSummary:
    """The agreement figures (see the module docstring); ``None`` where nothing was compared."""

    requests: int
    logs: int
    classification_agreement: float | None
    exact_hit_match: float | None
    within_one_unit: float | None
    unit_agreement: float | None
    unit_requests: int
    """Later requests ``unit_agreement`` is over."""
    hit_tokens_mae: float | None
    prompt_tokens_error: float | None
    """Mean absolute relative error of prompt tokens over every request whose prompt size is a
    prediction: those with a known header, and anchored ones after the request that sized their
    anchor (that one's size is the live one by construction, so it is left out)."""
    prompt_requests: int
    """Requests ``prompt_tokens_error`` is over."""
    known_header_prompt_tokens_error: float | None = None
    """The same over requests with a known header only (real system prompt and tools)."""
    known_header_prompt_requests: int = 0
    """Requests ``known_header_prompt_tokens_error`` is over."""
    anchored_prompt_tokens_error: float | None = None
    """Mean absolute relative error of prompt tokens over requests whose anchored header was
    sized at an earlier request: the header's size is measured, everything after it (messages,
    turn and tool framing, reasoning pass-back) predicted. ``None`` when there are none."""
    anchored_prompt_requests: int = 0
    """Requests ``anchored_prompt_tokens_error`` is over."""

    @classmethod
    def of(
        cls, rows: Sequence[RequestCalibration], *, logs: int, granularity: int | None = None
    ) -> CalibrationSummary:
        """The figures over ``rows``; "within one unit" is one ``granularity``, by default each
        row's own."""
        n = len(rows)
        later = [r for r in rows if not r.first_in_scope]
        known = [r for r in rows if r.header_known and r.live_prompt_tokens > 0]
        anchored = [
            r for r in rows if not r.header_known and not r.anchors and r.live_prompt_tokens > 0
        ]
        diffs = [abs(r.simulated_hit_tokens - r.live_hit_tokens) for r in rows]
        return cls(
            requests=n,
            logs=logs,
            classification_agreement=_ratio(
                sum((r.simulated_hit_tokens > 0) == (r.live_hit_tokens > 0) for r in rows), n
            ),
            exact_hit_match=_ratio(sum(d == 0 for d in diffs), n),
            within_one_unit=_ratio(
                sum(
                    d <= (granularity if granularity is not None else r.granularity)
                    for d, r in zip(diffs, rows, strict=True)
                ),
                n,
            ),
            unit_agreement=_ratio(sum(r.simulated_unit == r.live_unit for r in later), len(later)),
            unit_requests=len(later),
            hit_tokens_mae=round(sum(diffs) / n, 2) if n else None,
            prompt_tokens_error=_prompt_error([*known, *anchored]),
            prompt_requests=len(known) + len(anchored),
            known_header_prompt_tokens_error=_prompt_error(known),
            known_header_prompt_requests=len(known),
            anchored_prompt_tokens_error=_prompt_error(anchored),
            anchored_prompt_requests=len(anchored),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "logs": self.logs,
            "classification_agreement": self.classification_agreement,
            "exact_hit_match": self.exact_hit_match,
            "within_one_unit": self.within_one_unit,
            "unit_agreement": self.unit_agreement,
            "unit_requests": self.unit_requests,
            "hit_tokens_mae": self.hit_tokens_mae,
            "prompt_tokens_error": self.prompt_tokens_error,
            "prompt_requests": self.prompt_requests,
            "known_header_prompt_tokens_error": self.known_header_prompt_tokens_error,
            "known_header_prompt_requests": self.known_header_prompt_requests,
            "anchored_prompt_tokens_error": self.anchored_prompt_tokens_error,
            "anchored_prompt_requests": self.anchored_prompt_requests,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class CalibrationReport:
    """Every compared request, the skipped logs and the summary."""

    settings: CalibrationSettings
    scope: Scope
    requests: tuple[RequestCalibration, ...]
    skipped: tuple[SkippedLog, ...]
    notes: tuple[str, ...]
    """What the calibration had to decide about its input (sidecars that do not fit, …)."""
    summary: CalibrationSummary

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` document: the summary's metrics at the top level, then the detail."""
        return {
            "formatVersion": CALIBRATION_FORMAT_VERSION,
            "kind": "dsh-testkit/calibrate",
            **self.summary.to_json(),
            "scope": self.scope,
            "settings": self.settings.to_json(),
            "perRequest": [r.to_json() for r in self.requests],
            "skipped": [s.to_json() for s in self.skipped],
            "notes": list(self.notes),
        }


# -- finding logs and sidecars ---------------------------------------------------------------
