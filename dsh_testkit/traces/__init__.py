"""Traces: any agent's traffic, from any recording, in one typed model.

The cache doctor (``dsh_testkit.doctor``, ``dsh-testkit cache-report``), the prefix assertions
and the wire-request goldens read a :class:`Trace`. :func:`load_trace` reads a file of any kind
it knows (one reader per format, the kind detected from the content): a ``dsh_core`` session
log, a dsh cassette, the mock's request log, a saved ``RequestCapture``, a HAR 1.2 file,
OpenTelemetry spans and log records under every common instrumentation's convention (OTLP JSON
or protobuf, the collector's file exporter), or the trace file ``dsh-testkit proxy`` writes,
plain or compressed (zstd, gzip);
:func:`trace_of` takes the objects that hold an agent's requests::

    trace = load_trace("session.har")
    for exchange in trace:
        print(exchange.index, exchange.usage)
"""

from ._compression import CompressedDataError
from ._errors import TraceError
from ._model import Exchange, LogEvent, Trace, TraceUsage
from ._readers import load_trace, loads_trace, trace_of

__all__ = [
    "CompressedDataError",
    "Exchange",
    "LogEvent",
    "Trace",
    "TraceError",
    "TraceUsage",
    "load_trace",
    "loads_trace",
    "trace_of",
]
