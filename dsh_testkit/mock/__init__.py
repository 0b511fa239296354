"""A wire-faithful mock DeepSeek: one transport-independent model, served in process and on loopback.

:class:`MockDeepSeek` is the model of the API (validation, scripted answers and faults, the
prefix-cache simulator for usage). Serve it in process with :class:`MockHandler` /
:func:`mock_transport` / :func:`respx_route` (httpx and httpx2 clients, sync and async), or on a
real socket with :class:`MockServer` (tests) and ``dsh-testkit serve`` (any language). Answers
come from routes (:meth:`MockDeepSeek.route`: picked by what a request holds), the ordered
script, a responder callable, or the default reply::

    mock = MockDeepSeek([Reply(text="hi"), ErrorReply(status=429, retry_after="2")])
    client = openai.AsyncOpenAI(
        base_url="https://api.deepseek.com", api_key="sk-test",
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(MockHandler(mock))),
    )
"""

from dsh_core.providers import PassbackRule

from ._api_errors import ApiError
from ._errors import MockError, MockServerError, ScriptError
from ._inprocess import MockHandler, mock_transport, respx_route
from ._model import MockDeepSeek, Responder
from ._plan import Emit, Hangup, HttpRequest, Pause, ResponsePlan, Stall
from ._render import (
    Completion,
    CompletionToolCall,
    WireUsage,
    anthropic_events,
    anthropic_message,
    chat_chunks,
    chat_completion,
)
from ._request import MockRequest, ReceivedRequest
from ._responder import call_each_tool_once, default_reply, example_arguments
from ._routes import Route, RouteMatch
from ._schema import script_schema
from ._script import (
    BEHAVIOURS,
    SCRIPT_FORMAT_VERSION,
    ErrorReply,
    Fault,
    Reply,
    Script,
    ScriptEntry,
    ToolCall,
    behaviour,
    entry_from_json,
    random_script,
)
from ._server import MockServer, serve

__all__ = [
    "BEHAVIOURS",
    "SCRIPT_FORMAT_VERSION",
    "ApiError",
    "Completion",
    "CompletionToolCall",
    "Emit",
    "ErrorReply",
    "Fault",
    "Hangup",
    "HttpRequest",
    "MockDeepSeek",
    "MockError",
    "MockHandler",
    "MockRequest",
    "MockServer",
    "MockServerError",
    "PassbackRule",
    "Pause",
    "ReceivedRequest",
    "Reply",
    "Responder",
    "ResponsePlan",
    "Route",
    "RouteMatch",
    "Script",
    "ScriptEntry",
    "ScriptError",
    "Stall",
    "ToolCall",
    "WireUsage",
    "anthropic_events",
    "anthropic_message",
    "behaviour",
    "call_each_tool_once",
    "chat_chunks",
    "chat_completion",
    "default_reply",
    "entry_from_json",
    "example_arguments",
    "mock_transport",
    "random_script",
    "respx_route",
    "script_schema",
    "serve",
]
