"""The JSONL header record, written so the reference harness's reader accepts it.

The reference harness's JSONL reader refuses a first line that is not
``{"type": "session", "version": <number>, "id": <string>, "createdAt": <safe integer ≥ 0>,
"delegationDepth": <safe integer ≥ 0>, …}``, with ``origin`` (when present) exactly
``"subagent"`` and ``agentPreset`` (when present) a string; it writes the fields in the order
type, version, id, createdAt, cwd, parentSession, seedLength, origin, delegationDepth,
agentPreset (see docs/reference-logs.md). :func:`header_line` writes our
:class:`~dsh_core.SessionInfo` that way: ``delegationDepth`` defaults to 0 (a session no agent
delegated to), and fields other harnesses wrote are kept after the known ones.
"""

from __future__ import annotations

from typing import Any, Final

from .._errors import InvalidEventError
from .._session import SessionInfo

__all__ = ["HEADER_LINE_FIELDS", "header_line"]

HEADER_LINE_FIELDS: Final = (
    "type",
    "version",
    "id",
    "createdAt",
    "cwd",
    "parentSession",
    "seedLength",
    "origin",
    "delegationDepth",
    "agentPreset",
)
"""The header-line fields the reference reader knows, in the order it writes them."""


def _safe_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 2**53 - 1


def header_line(info: SessionInfo) -> dict[str, Any]:
    """The header record for ``info``: every field the reference reader requires, in its order.

    Raises :class:`InvalidEventError` when ``info`` carries a value the reference reader would
    refuse (a negative ``delegationDepth``, an ``origin`` other than ``"subagent"``, a non-string
    ``agentPreset``): a log we write must open in the reference harness's tools.
    """
    raw = info.to_json()
    raw.setdefault("delegationDepth", 0)
    if not _safe_count(raw["delegationDepth"]):
        raise InvalidEventError(
            f"session header delegationDepth must be a non-negative safe integer, got "
            f"{raw['delegationDepth']!r}"
        )
    if "origin" in raw and raw["origin"] != "subagent":
        raise InvalidEventError(f"session header origin must be 'subagent', got {raw['origin']!r}")
    if "agentPreset" in raw and not isinstance(raw["agentPreset"], str):
        raise InvalidEventError(
            f"session header agentPreset must be a string, got {raw['agentPreset']!r}"
        )
    out: dict[str, Any] = {key: raw[key] for key in HEADER_LINE_FIELDS if key in raw}
    out.update((key, value) for key, value in raw.items() if key not in out)
    return out
