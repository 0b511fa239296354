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
                                    "limit": n, "resets": n, "resetAt": t}`` (fields:
                                    :class:`ReceivedRequest`; ``resets``: how many times
                                    the mock was reset, the log and cache starting cold at
                                    the last one, ``resetAt``)
``/_dsh/reset``        POST         back to the initial state: the initial script (``serve
                                    --script FILE`` re-reads FILE), its ``onExhausted``, no
                                    routes, an empty request log and cache, the PRNG re-seeded
``/_dsh/schema``       GET          the JSON Schema of a script document
``/_dsh/report``       GET          the cache doctor's report of the request log (text;
                                    ``?format=json`` the JSON document, with an ETag)
``/_dsh/explorer``     GET          the Cache Explorer page of the request log, live
=====================  ===========  ==========================================================

Errors answer in the chat-completions error shape.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from ._api_errors import ApiError
from ._errors import ScriptError
from ._plan import Emit, HttpRequest, ResponsePlan, json_plan
from ._schema import script_schema
from ._script import Script, ScriptEntry, entry_from_json

if TYPE_CHECKING:
    from ._model import MockDeepSeek

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


def _requests_json(mock: MockDeepSeek) -> dict[str, Any]:
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
    }


def _live_plan(mock: MockDeepSeek, request: HttpRequest, path: str) -> ResponsePlan:
    """The cache doctor's report of the request log (``diagnose(mock)``), or its page."""
    from ..doctor import report_text
    from ..explorer._live import live_report_of, wants_json

    live = live_report_of(mock)
    if path == "/_dsh/report" and not wants_json(request.query):
        text = report_text(live.current().report).encode("utf-8")
        return ResponsePlan(
            status=200,
            headers=(("content-type", "text/plain; charset=utf-8"),),
            body=(Emit(data=text),),
        )
    answer = live.answer(path, request.query, request.header("if-none-match"))
    return ResponsePlan(
        status=answer.status,
        headers=(("content-type", answer.content_type), *answer.headers),
        body=(Emit(data=answer.body),) if answer.body else (),
    )


def control_plan(mock: MockDeepSeek, request: HttpRequest, path: str) -> ResponsePlan:
    """Answer one control request (``path`` without a trailing slash)."""
    route = (request.method, path)
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
        return _live_plan(mock, request, path)
    if path in CONTROL_ENDPOINTS:
        error = ApiError(status=405, message="Method Not Allowed")
        return json_plan(405, error.deepseek_body(), (("allow", CONTROL_ENDPOINTS[path][0]),))
    error = ApiError(status=404, message=f"Not Found: no control endpoint at {path}")
    return json_plan(404, error.deepseek_body())
