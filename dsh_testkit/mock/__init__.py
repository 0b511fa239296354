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

from ._errors import MockError, MockServerError, ScriptError
from ._inprocess import MockHandler, mock_transport, respx_route
from ._model import MockDeepSeek, Responder
from ._request import MockRequest, ReceivedRequest
from ._responder import call_each_tool_once
from ._routes import Route, RouteMatch
from ._script import ErrorReply, Reply, Script, ScriptEntry, ToolCall, behaviour
from ._server import MockServer, serve

__all__ = [
    "ErrorReply",
    "MockDeepSeek",
    "MockError",
    "MockHandler",
    "MockRequest",
    "MockServer",
    "MockServerError",
    "ReceivedRequest",
    "Reply",
    "Responder",
    "Route",
    "RouteMatch",
    "Script",
    "ScriptEntry",
    "ScriptError",
    "ToolCall",
    "behaviour",
    "call_each_tool_once",
    "mock_transport",
    "respx_route",
    "serve",
]
