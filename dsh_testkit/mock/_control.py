"""The control API under ``/_dsh/``: script the mock and read what it received, from any language.

=====================  ===========  ==========================================================
path                   methods      what it does
=====================  ===========  ==========================================================
``/_dsh/``             GET          this index (endpoints and their methods)
``/_dsh/script``       GET, POST    the queued entries; queue more (an entry, a list, or a
                                    script document whose ``onExhausted`` also applies)
``/_dsh/routes``       GET, POST    the routes and the requests each answered; add one
                                    (``{"match": {...}, "reply": ... | "replies": [...]}``)
``/_dsh/requests``     GET          the request log: ``{"requests": [...], "dropped": n,
                                    "limit": n, "notLogged": n, "resets": n, "resetAt": t}``
                                    (fields: :class:`ReceivedRequest`; only POSTs to a model
                                    path are logged, the rest counted in ``notLogged``;
                                    ``resets``: how many times the mock was reset, the log and
                                    cache starting cold at the last one, ``resetAt``)
``/_dsh/reset``        POST         back to the initial state: the initial script (``serve
                                    --script FILE`` re-reads FILE), its ``onExhausted``, no
                                    routes, an empty request log and cache, the PRNG re-seeded
``/_dsh/schema``       GET          the JSON Schema of a script document
``/_dsh/report``       GET          the cache doctor's report of the request log (text;
                                    ``?format=json`` the JSON document, with an ETag)
``/_dsh/explorer``     GET          the Cache Explorer page of the request log, live
=====================  ===========  ==========================================================

Errors answer in the chat-completions error shape. A POST needs ``Content-Type:
application/json`` (else 415: a web page on another origin cannot send that without a CORS
preflight, which the server never grants); no GET changes anything. The last two are the server's live pages,
handed to it where it is built (``MockServer(pages=...)``, see
:mod:`dsh_testkit._loopback.pages`): a server without them answers those two 404, and so does
the in-process transport.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from typing import Any, Final, Protocol

from .._loopback.guard import is_json_content_type
from .._loopback.http import OWN_ANSWER_HEADERS
from .._loopback.pages import no_pages_message
from ._api_errors import ApiError
from ._errors import ScriptError
from ._plan import HttpRequest, ResponsePlan, json_plan
from ._request import ReceivedRequest
from ._routes import Route
from ._schema import script_schema
from ._script import OnExhausted, Script, ScriptEntry, entry_from_json


class ControlledMock(Protocol):
    """What the control API reads and changes of the mock (:class:`~dsh_testkit.mock.MockDeepSeek`
    is one; the model hands itself to :func:`control_plan`, which never imports it)."""

    on_exhausted: OnExhausted

    @property
    def pending(self) -> tuple[ScriptEntry, ...]: ...
    @property
    def routes(self) -> tuple[Route, ...]: ...
    @property
    def requests(self) -> tuple[ReceivedRequest, ...]: ...
    @property
    def unscripted_requests(self) -> tuple[ReceivedRequest, ...]: ...
    @property
    def dropped_requests(self) -> int: ...
    @property
    def unlogged_requests(self) -> int: ...
    @property
    def request_log_limit(self) -> int: ...
    @property
    def request_log_bytes(self) -> tuple[int, int]: ...
    @property
    def resets(self) -> tuple[int, float | None]: ...
    def push(self, *entries: ScriptEntry) -> None: ...
    def add_route_json(self, document: object, *, where: str = "route") -> Route: ...
    def reset(self) -> None: ...


__all__ = ["CONTROL_ENDPOINTS", "control_plan"]

CONTROL_ENDPOINTS: Final[Mapping[str, tuple[str, str]]] = {
    "/_dsh": ("GET", "this index of the control endpoints"),
    "/_dsh/script": ("GET, POST", "read the queued entries; POST queues more"),
    "/_dsh/routes": (
        "GET, POST",
        "read the routes and the requests each answered; POST adds one "
        '({"match": {...}, "reply": entry} or "replies": [entries])',
    ),
    "/_dsh/requests": ("GET", "the request log (capped; 'dropped' counts what it dropped)"),
    "/_dsh/reset": (
        "POST",
        "restore the initial script and onExhausted (serve --script re-reads its file), "
        "drop the routes, empty the request log and the cache, re-seed",
    ),
    "/_dsh/schema": ("GET", "the JSON Schema of a script document"),
    "/_dsh/report": ("GET", "the cache doctor's report of the request log (?format=json)"),
    "/_dsh/explorer": ("GET", "the Cache Explorer page of the request log, updated live"),
}
"""Path → (methods, what it does): the index ``GET /_dsh/`` answers."""


def _parse_pushed(raw: bytes) -> tuple[tuple[ScriptEntry, ...], Script | None]:
    try:
        obj = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ScriptError(f"not valid JSON: {exc}", path="body") from None
    if isinstance(obj, list):
        return tuple(entry_from_json(e, path=f"body[{i}]") for i, e in enumerate(obj)), None
    if isinstance(obj, Mapping) and "entries" in obj:
        script = Script.from_json(obj, path="body")
        return script.entries, script
    return (entry_from_json(obj, path="body"),), None


def _requests_json(mock: ControlledMock) -> dict[str, Any]:
    resets, reset_at = mock.resets
    return {
        "resets": resets,
        "resetAt": reset_at,
        "requests": [r.to_json() for r in mock.requests],
        "dropped": mock.dropped_requests,
        "limit": mock.request_log_limit,
        "bodyBytes": mock.request_log_bytes[0],
        "bodyBytesLimit": mock.request_log_bytes[1],
        "pending": len(mock.pending),
        "unscripted": [r.seq for r in mock.unscripted_requests],
        "notLogged": mock.unlogged_requests,
    }


_POSTS: Final = frozenset(p for p, (methods, _) in CONTROL_ENDPOINTS.items() if "POST" in methods)
"""The control paths that change the mock (``POST`` only: no ``GET`` changes anything)."""


def control_plan(mock: ControlledMock, request: HttpRequest, path: str) -> ResponsePlan:
    """Answer one control request (``path`` without a trailing slash)."""
    plan = _control_plan(mock, request, path)
    return dataclasses.replace(plan, headers=(*plan.headers, *OWN_ANSWER_HEADERS))


def _control_plan(mock: ControlledMock, request: HttpRequest, path: str) -> ResponsePlan:
    route = (request.method, path)
    if request.method == "POST" and path in _POSTS:
        content_types = [v for k, v in request.headers if k.lower() == "content-type"]
        if not is_json_content_type(content_types, utf8_only=True):
            error = ApiError(
                status=415,
                message=(
                    f"POST {path} needs Content-Type: application/json (a web page cannot send "
                    "that to another origin without a CORS preflight, which this server never "
                    "grants)"
                ),
                code="unsupported_media_type",
            )
            return json_plan(415, error.deepseek_body())
    if route == ("GET", "/_dsh"):
        return json_plan(
            200,
            {
                "endpoints": [
                    {"path": p, "methods": m, "description": d}
                    for p, (m, d) in CONTROL_ENDPOINTS.items()
                ]
            },
        )
    if route == ("POST", "/_dsh/script"):
        try:
            pushed, script = _parse_pushed(request.body)
        except ScriptError as exc:
            error = ApiError(status=400, message=str(exc), code="invalid_script")
            return json_plan(400, error.deepseek_body())
        if script is not None:
            mock.on_exhausted = script.on_exhausted
        mock.push(*pushed)
        return json_plan(200, {"queued": len(mock.pending), "added": len(pushed)})
    if route == ("GET", "/_dsh/script"):
        return json_plan(
            200,
            {"onExhausted": mock.on_exhausted, "entries": [e.to_json() for e in mock.pending]},
        )
    if route == ("POST", "/_dsh/routes"):
        try:
            document = json.loads(request.body.decode("utf-8"))
            added = mock.add_route_json(document, where="body")
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            if not isinstance(exc, ScriptError):
                exc = ScriptError(f"not valid JSON: {exc}", path="body")
            error = ApiError(status=400, message=str(exc), code="invalid_route")
            return json_plan(400, error.deepseek_body())
        return json_plan(200, {"route": added.to_json(), "routes": len(mock.routes)})
    if route == ("GET", "/_dsh/routes"):
        return json_plan(200, {"routes": [r.to_json() for r in mock.routes]})
    if route == ("GET", "/_dsh/requests"):
        return json_plan(200, _requests_json(mock))
    if route == ("POST", "/_dsh/reset"):
        try:
            mock.reset()
        except ScriptError as exc:
            error = ApiError(
                status=400,
                message=f"the script file no longer parses: {exc}",
                code="invalid_script",
            )
            return json_plan(400, error.deepseek_body())
        return json_plan(200, {"reset": True})
    if route == ("GET", "/_dsh/schema"):
        return json_plan(200, script_schema())
    if route in (("GET", "/_dsh/report"), ("GET", "/_dsh/explorer")):
        # Answered by the server's live pages when it has them (handed in where it is built).
        attach = "MockServer(pages=dsh_testkit.explorer.live_pages)"
        message = f"Not Found: {no_pages_message('mock server', attach)}"
        return json_plan(404, ApiError(status=404, message=message).deepseek_body())
    if path in CONTROL_ENDPOINTS:
        error = ApiError(status=405, message="Method Not Allowed")
        return json_plan(405, error.deepseek_body(), (("allow", CONTROL_ENDPOINTS[path][0]),))
    error = ApiError(status=404, message=f"Not Found: no control endpoint at {path}")
    return json_plan(404, error.deepseek_body())
