"""Golden transcripts: syrupy extensions for sessions and for what the model saw.

- ``_extensions``: :class:`TranscriptExtension` and :class:`WireRequestsExtension`;
- ``_transcript``: the transcript and wire-request renderers;
- ``_normalize``: the normalization that makes goldens byte-stable across machines.
"""

from ._extensions import TranscriptExtension, WireRequestsExtension, render_trace_requests
from ._inputs import SnapshotInputError
from ._transcript import render_transcript
from ._wire import render_wire_requests

__all__ = [
    "SnapshotInputError",
    "TranscriptExtension",
    "WireRequestsExtension",
    "render_trace_requests",
    "render_transcript",
    "render_wire_requests",
]
