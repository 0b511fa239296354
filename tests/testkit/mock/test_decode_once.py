"""A request body is JSON-decoded once on the mock's path: admission, the codec, the request's view
and the request log all read the one decoded value, and each refusal and log record is what it
was when each of them decoded the bytes on its own."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from typing import Any
from unittest import mock as patching

import pytest

from dsh_testkit.mock import MockDeepSeek

from ._helpers import ANTHROPIC, CHAT, anthropic_body, call, chat_body, payload

_DECODE = json.JSONDecoder.decode


@pytest.fixture
def decodes() -> Iterator[list[str]]:
    """Every JSON text decoded while the fixture is active."""
    seen: list[str] = []

    def decode(self: json.JSONDecoder, text: str, *args: Any, **kwargs: Any) -> Any:
        seen.append(text)
        return _DECODE(self, text, *args, **kwargs)

    with patching.patch.object(json.JSONDecoder, "decode", decode):
        yield seen


_BODIES = {
    "chat": (CHAT, json.dumps(chat_body()).encode(), 200),
    "anthropic": (ANTHROPIC, json.dumps(anthropic_body()).encode(), 200),
    "streamed": (CHAT, json.dumps(chat_body(stream=True)).encode(), 200),
    "no model": (CHAT, json.dumps({"messages": [{"role": "user", "content": "x"}]}).encode(), 400),
    "an array": (CHAT, b"[1, 2]", 400),
    "a string": (CHAT, b'"hello"', 400),
    "NaN": (CHAT, json.dumps(chat_body())[:-1].encode() + b', "temperature": NaN}', 400),
    "not JSON": (ANTHROPIC, b'{"model": ', 400),
    "not UTF-8": (CHAT, b'{"model": "\xff"}', 400),
    "empty": (CHAT, b"", 400),
}


@pytest.mark.parametrize("name", list(_BODIES))
def test_each_model_request_body_is_decoded_once(
    name: str, decodes: list[str], mock: MockDeepSeek
) -> None:
    path, raw, status = _BODIES[name]
    plan = call(mock, path, raw)
    assert plan.status == status, plan.body_bytes
    assert len(decodes) == 1, decodes


def test_too_deep_a_body_is_refused_without_decoding_it(
    decodes: list[str], mock: MockDeepSeek
) -> None:
    plan = call(mock, CHAT, b"[" * 200 + b"]" * 200)
    assert plan.status == 400
    assert decodes == []
    assert mock.requests[-1].body == "[" * 200 + "]" * 200


def test_the_log_keeps_the_body_as_sent_while_the_codec_reads_it_normalized(
    mock: MockDeepSeek,
) -> None:
    seen: list[Any] = []
    mock.respond_with(lambda request: seen.append(request.body["temperature"]))
    raw = json.dumps(chat_body())[:-1].encode() + b', "temperature": -0.0}'
    assert call(mock, CHAT, raw).status == 200
    logged = mock.requests[-1].body["temperature"]
    assert logged == 0.0 and math.copysign(1.0, logged) < 0  # -0.0 as sent
    assert math.copysign(1.0, seen[0]) > 0  # the view: 0.0


def test_refused_bodies_keep_their_words_and_their_log_records(mock: MockDeepSeek) -> None:
    refusals = {}
    for name, (path, raw, _) in _BODIES.items():
        if name in ("an array", "a string", "NaN", "not JSON", "not UTF-8", "empty"):
            refusals[name] = (payload(call(mock, path, raw))["error"]["message"], mock.requests[-1])
    assert refusals["an array"][0] == (
        "Failed to deserialize the JSON body into the target type: invalid type: an array, "
        "expected an object"
    )
    assert refusals["a string"][0].endswith("invalid type: a string, expected an object")
    assert refusals["NaN"][0] == (
        "Failed to parse the request body as JSON: NaN is not a valid JSON number"
    )
    assert math.isnan(refusals["NaN"][1].body["temperature"])  # the log parses it anyway
    assert refusals["not JSON"][1].body == '{"model": '
    assert refusals["not UTF-8"][0] == (
        "Failed to parse the request body as JSON: invalid UTF-8 at byte 11"
    )
    assert refusals["not UTF-8"][1].body == {"model": "\ufffd"}
    assert refusals["empty"][0].startswith("Failed to parse the request body as JSON: Expecting")
    assert refusals["empty"][1].body is None
