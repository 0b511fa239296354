"""Traces: any agent's traffic, from any recording, in one typed model.

The cache doctor (``dsh_testkit.doctor``, ``dsh-testkit cache-report``), the prefix assertions
and the wire-request goldens read a :class:`Trace`. Readers form a registry (:data:`READERS`,
one per format; :func:`identify` names the one for a file): a ``dsh_core`` session log, a dsh
cassette, the mock's request log, a saved ``RequestCapture``, a HAR 1.2 file, OpenTelemetry
GenAI spans (OTLP JSON), or the trace file ``dsh-testkit proxy`` writes (:class:`TraceWriter`)::

    trace = load_trace("session.har")
    for exchange in trace:
        print(exchange.index, exchange.usage)
"""

from dsh_core.providers import Endpoint

from ._errors import TraceError
from ._file import TRACE_FORMAT, TRACE_FORMAT_VERSION, TraceWriter
from ._model import Exchange, LogEvent, Outcome, Trace, TraceSource, TraceUsage
from ._readers import READERS, TraceReader, identify, load_trace, loads_trace, trace_of
from ._readers._build import CONVERSATION_HEADERS
from ._readers._session_log import session_log_trace

__all__ = [
    "CONVERSATION_HEADERS",
    "READERS",
    "TRACE_FORMAT",
    "TRACE_FORMAT_VERSION",
    "Endpoint",
    "Exchange",
    "LogEvent",
    "Outcome",
    "Trace",
    "TraceError",
    "TraceReader",
    "TraceSource",
    "TraceUsage",
    "TraceWriter",
    "identify",
    "load_trace",
    "loads_trace",
    "session_log_trace",
    "trace_of",
]
