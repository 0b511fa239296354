"""Golden transcripts: syrupy extensions for sessions and for what the model saw.

- ``_extensions``: :class:`TranscriptExtension` and :class:`WireRequestsExtension`;
- ``_transcript``: the transcript and wire-request renderers;
- ``_normalize``: the normalization that makes goldens byte-stable across machines.
"""

from ._extensions import (
    TranscriptExtension,
    WireRequestsExtension,
    load_wire_requests,
    render_trace_requests,
    render_traffic,
    render_transcript,
    render_wire_requests,
)
from ._inputs import SnapshotInputError

__all__ = [
    "SnapshotInputError",
    "TranscriptExtension",
    "WireRequestsExtension",
    "load_wire_requests",
    "render_trace_requests",
    "render_traffic",
    "render_transcript",
    "render_wire_requests",
]
