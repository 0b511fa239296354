"""Traces: any agent's traffic, from any recording, in one typed model.

The cache doctor (``dsh-testkit cache-report``), the wire-level audit checks,
:func:`~dsh_testkit.capture.assert_cache_friendly` and the wire-request goldens read a
:class:`Trace`. Readers (:func:`load_trace`, :func:`trace_of`) detect the recording's kind: a
``dsh_core`` session log, a dsh cassette, the mock's request log, a ``RequestCapture``, a HAR 1.2
file, or the trace file ``dsh-testkit proxy`` writes (:class:`TraceWriter`)::

    trace = load_trace("session.har")
    for conversation in trace.conversations():
        print(conversation.key, len(conversation))
"""

from ._errors import CacheUnfriendly, TraceError
from ._file import TRACE_FORMAT, TRACE_FORMAT_VERSION, TraceWriter
from ._model import (
    DEFAULT_UNIT_TOKENS,
    Conversation,
    Endpoint,
    Exchange,
    Trace,
    TraceSource,
    TraceUsage,
    wire_parts,
)
from ._readers import load_trace, loads_trace, trace_of

__all__ = [
    "DEFAULT_UNIT_TOKENS",
    "TRACE_FORMAT",
    "TRACE_FORMAT_VERSION",
    "CacheUnfriendly",
    "Conversation",
    "Endpoint",
    "Exchange",
    "Trace",
    "TraceError",
    "TraceSource",
    "TraceUsage",
    "TraceWriter",
    "load_trace",
    "loads_trace",
    "trace_of",
    "wire_parts",
]
