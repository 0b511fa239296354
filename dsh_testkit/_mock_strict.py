"""The mock fixtures' strict check: what a passing test left unused or sent unscripted.

respx and pytest-httpx fail a test whose mocked routes were not all called, or that sent a
request no route expected; the ``dsh_mock`` fixtures do the same for the mock DeepSeek's
script. The check reads the mock's queue (``pending``) and its list of requests no queued
entry answered (``unscripted_requests``).
"""

from __future__ import annotations

import json

from ._errors import MockNotSatisfied
from .mock import MockDeepSeek, ReceivedRequest

__all__ = ["unmet_expectations"]


def _cut(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else f"{text[: limit - 1]}…"


def _has_responder(mock: MockDeepSeek) -> bool:
    # MockDeepSeek keeps its responder private; a set responder means requests are scripted.
    return getattr(mock, "_responder", None) is not None


def _describe_received(request: ReceivedRequest) -> str:
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
    extra = f" ({'; '.join(details)})" if details else ""
    return f"request {request.seq}: {request.method} {request.path}{extra}"


def unmet_expectations(mock: MockDeepSeek) -> MockNotSatisfied | None:
    """The strict check of a mock after a passing test: entries left in its queue, and model
    requests answered with the default reply (no entry, no responder, ``on_exhausted`` left at
    ``default``)."""
    unused = mock.pending
    unscripted: list[ReceivedRequest] = []
    if not _has_responder(mock) and mock.on_exhausted == "default":
        # the mock's own list (bounded like its request log); a responder or another
        # on_exhausted policy is the test's own script, so only the default reply counts here
        unscripted = list(mock.unscripted_requests)
    if not unused and not unscripted:
        return None
    lines = ["the mock DeepSeek was not used as scripted (the dsh_mock fixtures are strict):"]
    if unused:
        lines.append(
            f"  {len(unused)} scripted entr{'y was' if len(unused) == 1 else 'ies were'} never "
            "used:"
        )
        lines += [f"    {i}. {_cut(json.dumps(e.to_json()))}" for i, e in enumerate(unused, 1)]
    if unscripted:
        lines.append(
            f"  {len(unscripted)} request{' was' if len(unscripted) == 1 else 's were'} not "
            "scripted (answered with the default reply):"
        )
        lines += [f"    {_describe_received(r)}" for r in unscripted]
    lines.append(
        "Script each request with dsh_mock.push(...) (or dsh_mock.respond_with(...)), or opt "
        "this test out with dsh_mock.lenient() or @pytest.mark.dsh_lenient."
    )
    return MockNotSatisfied(
        "\n".join(lines),
        unused=tuple(e.to_json() for e in unused),
        unscripted=tuple(r.seq for r in unscripted),
    )
