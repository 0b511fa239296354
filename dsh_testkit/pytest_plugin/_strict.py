"""The mock fixtures' strict check, and what the plugin tells about a mock after a test.

respx fails a test whose routes were not all called (``assert_all_called``) and refuses a
request no route matches (``assert_all_mocked``); the ``dsh_mock`` fixtures do the same for the
mock DeepSeek: a request nothing scripted is refused at the call (a 410 the client sees, naming
the request) and, should the client swallow it, the passing test fails naming it here, with the
queued entries and routes left unused.

The check reads the mock's request log (what answered each request, which were refused), its
queue (``pending``) and its routes (``unused_routes``). :func:`refusals` words the requests the
mock refused, with what the log knows beyond the API's body (which message lost its reasoning),
for a failing test's report; :func:`warnings_of` the warnings the log holds (a reply with empty
reasoning in thinking mode).
"""

from __future__ import annotations

import json
from typing import Any

from .._errors import MockNotSatisfied
from ..mock import MockDeepSeek, ReceivedRequest

__all__ = ["describe_received", "notes_of", "refusals", "unmet_expectations", "warnings_of"]

_EXHAUSTED = "MOCK_SCRIPT_EXHAUSTED"


def _cut(text: str, limit: int = 120) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else f"{text[: limit - 1]}…"


def describe_received(request: ReceivedRequest) -> str:
    """``request 2: POST /chat/completions (model …; last message (user): …)``."""
    body = request.body if isinstance(request.body, dict) else {}
    details = []
    if isinstance(body.get("model"), str):
        details.append(f"model {body['model']}")
    messages = body.get("messages")
    if isinstance(messages, list) and messages and isinstance(messages[-1], dict):
        last = messages[-1]
        content = last.get("content")
        if isinstance(content, str):
            details.append(f"last message ({last.get('role')}): {_cut(content)}")
    conversation = next((v for k, v in request.headers if k.lower() == "x-dsh-conversation"), None)
    if conversation:
        details.append(f"conversation {conversation!r}")
    extra = f" ({'; '.join(details)})" if details else ""
    return f"request {request.seq}: {request.method} {request.path}{extra}"


def _error(request: ReceivedRequest) -> dict[str, Any]:
    return request.error if isinstance(request.error, dict) else {}


def unmet_expectations(
    mock: MockDeepSeek, *, all_called: bool = True, all_mocked: bool = True
) -> MockNotSatisfied | None:
    """The strict check of a mock after a passing test: with ``all_called`` (respx's
    ``assert_all_called``), queued entries and routes left unused, optional ones aside; with
    ``all_mocked`` (``assert_all_mocked``), model requests nothing scripted (refused, or
    answered with the default reply because the test set ``on_exhausted`` back to
    ``default``)."""
    unused = tuple(e for e in mock.pending if not e.optional) if all_called else ()
    routes = mock.unused_routes() if all_called else ()
    unanswered = [
        r
        for r in mock.requests
        if all_mocked and (r.answered_by == "default" or _error(r).get("code") == _EXHAUSTED)
    ]
    if not unused and not routes and not unanswered:
        return None
    lines = ["the mock DeepSeek was not used as scripted (the dsh_mock fixtures are strict):"]
    if unused:
        lines.append(
            f"  {len(unused)} scripted entr{'y was' if len(unused) == 1 else 'ies were'} never "
            "used:"
        )
        lines += [f"    {i}. {_cut(json.dumps(e.to_json()))}" for i, e in enumerate(unused, 1)]
    if routes:
        lines.append(f"  {len(routes)} route{'' if len(routes) == 1 else 's'} not used up:")
        lines += [f"    {line}" for line in routes]
    if unanswered:
        lines.append(
            f"  {len(unanswered)} request{' was' if len(unanswered) == 1 else 's were'} not "
            "scripted (nothing answered; the client got a 410 MOCK_SCRIPT_EXHAUSTED, or the "
            "default reply):"
        )
        for r in unanswered:
            lines.append(f"    {describe_received(r)}")
            detail = _error(r).get("detail")
            if detail:
                lines.append(f"      why nothing answered: {detail}")
    lines.append(
        "Script each request: dsh_mock.route(...).reply(...) answers requests by what they hold, "
        "dsh_mock.push(...) in order (on the server: dsh_mock_server.mock.route(...), "
        ".push(...)); mark what may go unused optional (route(..., optional=True), "
        "Reply(..., optional=True)); or relax this test with "
        "@pytest.mark.dsh_mock(assert_all_called=False) / (assert_all_mocked=False), or "
        "@pytest.mark.dsh_lenient for both (dsh_mock.lenient() for the in-process mock)."
    )
    return MockNotSatisfied(
        "\n".join(lines),
        unused=tuple(e.to_json() for e in unused),
        unscripted=tuple(r.seq for r in unanswered),
    )


def refusals(mock: MockDeepSeek) -> list[str]:
    """The model requests the mock refused, with the API's message and what the log knows
    beyond it (for a failing test's report)."""
    out: list[str] = []
    for r in mock.requests:
        error = _error(r)
        if not error or r.endpoint not in ("chat", "anthropic"):
            continue
        line = f"{describe_received(r)} → {r.status} {_cut(str(error.get('message', '')), 200)}"
        detail = error.get("detail")
        if detail:
            line += f"\n    {detail}"
        out.append(line)
    return out


def warnings_of(mock: MockDeepSeek) -> list[str]:
    """The warnings the mock's log holds, one line each (``request 2: …``)."""
    out: list[str] = []
    for r in mock.requests:
        warnings = r.extras.get("warnings")
        if isinstance(warnings, list):
            out += [f"request {r.seq}: {w}" for w in warnings]
    return out


def notes_of(mocks: list[tuple[str, MockDeepSeek]]) -> tuple[list[str], str]:
    """For the plugin, about the mocks a test used (``(fixture name, mock)``): their warnings,
    one line each, and the requests they refused, as one text (``""`` when none)."""
    warnings = [f"({name}) {line}" for name, mock in mocks for line in warnings_of(mock)]
    refused = [f"{name}: {line}" for name, mock in mocks for line in refusals(mock)]
    return warnings, "\n".join(refused)
