"""One change between a request and the one it is compared with, placed in the prompt."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ._codes import CauseCode
from ._text import TextDiff

__all__ = ["PARAMS_COMPONENT", "Change"]

PARAMS_COMPONENT: Final = -1
"""The component of a change in the request's parameters (the cache key, thinking mode)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Change:
    """One difference between a request and the one it is compared with."""

    code: CauseCode
    detail: str
    """What happened, in wire terms (``tool 'grep' inserted at position 1 of 3``)."""
    evidence: tuple[str, ...] = ()
    """Lines showing it (both sides around the first difference, in the project's wording)."""
    where: str | None = None
    """The wire location (``system line 31 column 9``, ``tools[1]``, ``messages[3]``)."""
    component: int = PARAMS_COMPONENT
    """Which component of the request's prompt it sits in: 0 the system prompt, 1 the tools,
    2 + i the view's message i; :data:`PARAMS_COMPONENT` for parameters."""
    rendered: bool = True
    """Whether DeepSeek's chat template renders the difference (else it never reaches the
    prompt)."""
    rejected: bool = False
    """Whether the API refuses the request for it (the reasoning pass-back rule)."""
    diff: TextDiff | None = None
    """The differing text, when it is text."""
    signature: str = ""
    """What makes two findings "the same change" across requests (code, place and the
    differing text)."""
