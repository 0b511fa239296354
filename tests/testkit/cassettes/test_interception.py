"""The one interception of httpx / httpx2 transports: layers compose behind one patch per method,
the latest installed first, and the classes get their own methods back when the last one leaves."""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import httpx2
import pytest

from dsh_testkit.cassettes import use_cassette
from dsh_testkit.cassettes._transport import AsyncSend, Send, intercepting
from dsh_testkit.mock import MockDeepSeek, MockHandler, Reply
from dsh_testkit.pytest_plugin._cassette import route_network_to_mock

METHODS = [
    (cls, name)
    for mod in (httpx, httpx2)
    for cls, name in (
        (mod.HTTPTransport, "handle_request"),
        (mod.AsyncHTTPTransport, "handle_async_request"),
        (mod.MockTransport, "handle_request"),
        (mod.MockTransport, "handle_async_request"),
        (mod.WSGITransport, "handle_request"),
        (mod.ASGITransport, "handle_async_request"),
    )
]
ORIGINALS = {(cls, name): vars(cls)[name] for cls, name in METHODS}


def assert_wrapped_once() -> None:
    for cls, name in METHODS:
        patched = vars(cls)[name]
        assert patched is not ORIGINALS[cls, name], (cls, name)
        assert patched.__wrapped__ is ORIGINALS[cls, name], (cls, name)


def assert_unpatched() -> None:
    assert {key: vars(key[0])[key[1]] for key in ORIGINALS} == ORIGINALS


class Tag:
    """A layer that notes its name on the way in and hands every request on."""

    def __init__(self, name: str, seen: list[str]) -> None:
        self.name, self.seen = name, seen

    def handle(self, mod: ModuleType, transport: Any, request: Any, send: Send) -> Any:
        self.seen.append(self.name)
        return send(request)

    async def handle_async(
        self, mod: ModuleType, transport: Any, request: Any, send: AsyncSend
    ) -> Any:
        self.seen.append(self.name)
        return await send(request)


def test_layers_share_one_patch_the_latest_runs_first_and_leaving_restores() -> None:
    seen: list[str] = []
    mock = MockDeepSeek()
    with intercepting(Tag("outer-first", seen)):
        assert_wrapped_once()
        with intercepting(Tag("second", seen)):
            assert_wrapped_once()
            with httpx.Client(transport=httpx.MockTransport(MockHandler(mock))) as client:
                assert client.get("https://api.deepseek.com/models").status_code == 401
        assert seen == ["second", "outer-first"]
        assert_wrapped_once()
    assert_unpatched()


def test_layers_may_leave_in_any_order() -> None:
    first, second = intercepting(Tag("a", [])), intercepting(Tag("b", []))
    first.__enter__()
    second.__enter__()
    first.__exit__(None, None, None)
    assert_wrapped_once()
    second.__exit__(None, None, None)
    assert_unpatched()


async def test_a_cassette_over_the_plugins_routing_is_one_patch_and_records_from_the_mock(
    tmp_path: Path,
) -> None:
    """The pytest plugin's recording set-up without --dsh-live: the live-call routing to the mock,
    then the cassette: both layers behind one patch, and the cassette records what the mock
    answered for a request that would have gone to the API."""
    mock = MockDeepSeek()
    mock.push(Reply(text="sync"), Reply(text="async"))
    path = tmp_path / "routed.yaml"
    body = {"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": "hi"}]}
    headers = {"authorization": "Bearer sk-anything-at-all"}
    url = "https://api.deepseek.com/chat/completions"
    with route_network_to_mock(MockHandler(mock)), use_cassette(path, mode="once"):
        assert_wrapped_once()
        sync = httpx.post(url, json=body, headers=headers)
        async with httpx2.AsyncClient() as client:
            answered = await client.post(url, json={**body, "user": "b"}, headers=headers)
    assert_unpatched()
    assert [r.json()["choices"][0]["message"]["content"] for r in (sync, answered)] == [
        "sync",
        "async",
    ]
    assert len(mock.requests) == 2
    # replay: the mock is not asked again
    with use_cassette(path, assert_all_played=False) as cassette:
        replayed = httpx.post(url, json=body, headers=headers)
        assert replayed.json()["choices"][0]["message"]["content"] == "sync"
        assert cassette.requests_seen == 1
    assert len(mock.requests) == 2
    assert json.dumps(mock.requests[0].body) == json.dumps(body)


def test_a_layer_that_raises_leaves_the_transports_as_they_were() -> None:
    class Refuse:
        def handle(self, mod: ModuleType, transport: Any, request: Any, send: Send) -> Any:
            raise RuntimeError("refused")

        async def handle_async(
            self, mod: ModuleType, transport: Any, request: Any, send: AsyncSend
        ) -> Any:
            raise RuntimeError("refused")

    with (
        pytest.raises(RuntimeError, match="refused"),
        intercepting(Refuse()),
        httpx.Client(transport=httpx.MockTransport(lambda r: httpx.Response(204))) as client,
    ):
        client.get("http://127.0.0.1/")
    assert_unpatched()
