"""Golden transcripts: syrupy extensions for sessions and for what the model saw.

- ``_extensions``: :class:`TranscriptExtension` and :class:`WireRequestsExtension`;
- ``_transcript``: the transcript and wire-request renderers;
- ``_normalize``: the normalization that makes goldens byte-stable across machines.
"""

from ._extensions import TranscriptExtension, WireRequestsExtension, render_trace_requests
from ._inputs import LogInput, SnapshotInputError
from ._normalize import CWD_TOKEN, TIME_KEYS, Normalizer, cwd_spellings
from ._transcript import TRANSCRIPT_FORMAT, TRANSCRIPT_FORMAT_VERSION, render_transcript
from ._wire import WIRE_FORMAT, WIRE_FORMAT_VERSION, render_wire_requests

__all__ = [
    "CWD_TOKEN",
    "TIME_KEYS",
    "TRANSCRIPT_FORMAT",
    "TRANSCRIPT_FORMAT_VERSION",
    "WIRE_FORMAT",
    "WIRE_FORMAT_VERSION",
    "LogInput",
    "Normalizer",
    "SnapshotInputError",
    "TranscriptExtension",
    "WireRequestsExtension",
    "cwd_spellings",
    "render_trace_requests",
    "render_transcript",
    "render_wire_requests",
]
