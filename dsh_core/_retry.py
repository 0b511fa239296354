"""The retry policy for failed model calls: which failures to retry, and how long to wait.

A retry resends the very same frozen request (a byte-identical body): nothing about the
conversation changed, only the provider had a bad moment. The loop logs ``llm/retry`` before it
waits, so the log explains the second run of chunks in the same step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ._errors import AgentError
from ._stream import LlmFailure

__all__ = ["DEFAULT_RETRYABLE_CODES", "DEFAULT_RETRYABLE_STATUSES", "RetryPolicy"]

DEFAULT_RETRYABLE_CODES: frozenset[str] = frozenset(
    {
        "EMPTY_RESPONSE",
        "INSUFFICIENT_SYSTEM_RESOURCE",
        "RATE_LIMIT",
        "SERVER",
        "STREAM_CLOSED",
        "TIMEOUT",
        "TRANSPORT",
    }
)
"""Failure codes worth a retry, as the providers emit them (``providers._failures``): rate
limits, server errors and overload, timeouts, transport failures, an empty answer — and
``STREAM_CLOSED`` (the stream ended mid-answer), which the providers do not flag retryable (the
reference harness gives up there) but this loop deliberately retries. ``QUOTA`` (402
"Insufficient Balance", or a 429 worded as a quota) is not here: waiting never refills an
account."""

DEFAULT_RETRYABLE_STATUSES: frozenset[int] = frozenset({408, 429, 500, 502, 503, 504})
"""HTTP statuses worth a retry when the provider could not classify the failure (its code is
``HTTP_<status>``); a classified code is the verdict, so a ``QUOTA`` 429 is never retried."""

_UNCLASSIFIED_PREFIX = "HTTP_"


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """Exponential backoff with jitter, honoring the provider's Retry-After, bounded attempts.

    The ``n``-th retry (1-based) waits ``min(max_delay_ms, base_delay_ms * 2**(n-1))``, scaled by
    a random factor in ``[1 - jitter, 1 + jitter]``. A provider ``Retry-After`` no longer than
    ``max_delay_ms`` replaces the backoff exactly (a longer one is capped at ``max_delay_ms``).
    """

    max_retries: int = 5
    """Retries after the first attempt (0 disables retrying)."""
    base_delay_ms: int = 500
    max_delay_ms: int = 10_000
    jitter: float = 0.1
    """Relative spread of the backoff, in ``[0, 1]``."""
    retryable_codes: frozenset[str] = field(default=DEFAULT_RETRYABLE_CODES)
    """Codes retried even when the provider did not flag the failure retryable."""
    retryable_statuses: frozenset[int] = field(default=DEFAULT_RETRYABLE_STATUSES)
    """Statuses retried for an unclassified (``HTTP_<status>``) failure."""

    def __post_init__(self) -> None:
        if self.max_retries < 0 or self.base_delay_ms < 0 or self.max_delay_ms < 0:
            raise AgentError(
                f"RetryPolicy needs non-negative counts and delays, got max_retries="
                f"{self.max_retries}, base_delay_ms={self.base_delay_ms}, max_delay_ms={self.max_delay_ms}"
            )
        if not 0 <= self.jitter <= 1:
            raise AgentError(f"RetryPolicy.jitter must lie in [0, 1], got {self.jitter}")

    def is_retryable(self, failure: LlmFailure) -> bool:
        """Whether this failure may go away when the same request is sent again.

        The provider's ``retryable`` flag first; then the code (:attr:`retryable_codes`); the
        HTTP status (:attr:`retryable_statuses`) only for a failure no provider classified
        (code ``HTTP_<status>``), so a classified ``QUOTA`` or ``AUTH`` is never retried
        whatever its status.
        """
        if failure.retryable or failure.code in self.retryable_codes:
            return True
        return (
            failure.code.startswith(_UNCLASSIFIED_PREFIX)
            and failure.status is not None
            and failure.status in self.retryable_statuses
        )

    def should_retry(self, failure: LlmFailure, retries_done: int) -> bool:
        """True when ``failure`` is retryable and the budget allows one more retry."""
        return retries_done < self.max_retries and self.is_retryable(failure)

    def delay_ms(self, retry: int, failure: LlmFailure, random: Callable[[], float]) -> int:
        """How long to wait before the ``retry``-th retry (1-based); ``random()`` is in [0, 1)."""
        after = failure.retry_after_ms
        if after is not None and after >= 0:
            return min(after, self.max_delay_ms)
        backoff: int = min(self.max_delay_ms, self.base_delay_ms * (1 << max(retry - 1, 0)))
        factor = 1 + self.jitter * (2 * random() - 1)
        return max(0, min(self.max_delay_ms, round(backoff * factor)))
