"""The one interception of httpx / httpx2 transports: layers compose behind one patch per method,
the latest installed first, and the classes get their own methods back when the last one leaves."""

from __future__ import annotations

import json
import threading
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
from tests._support import patch_depth

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
    depths = {
        f"{cls.__module__}.{cls.__qualname__}.{name}": patch_depth(cls, name)
        for cls, name in METHODS
    }
    assert depths == dict.fromkeys(depths, 1)


def assert_unpatched() -> None:
    assert {key: vars(key[0])[key[1]] for key in ORIGINALS} == ORIGINALS
    assert [patch_depth(cls, name) for cls, name in METHODS] == [0] * len(METHODS)


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


def test_the_depth_count_sees_patches_stacked_the_old_way() -> None:
    """The count follows what a patch calls, not ``__wrapped__``: two plain patches stacked on
    one method (what a cassette test did before there was one interception) count as two."""
    from unittest import mock

    def patch(original: Any) -> Any:
        def handle_request(transport: Any, request: Any) -> Any:
            return original(transport, request)

        return handle_request

    cls = httpx.HTTPTransport
    with mock.patch.object(cls, "handle_request", patch(cls.handle_request)):
        with mock.patch.object(cls, "handle_request", patch(cls.handle_request)):
            assert patch_depth(cls, "handle_request") == 2
        with intercepting(Tag("one", [])):
            assert patch_depth(cls, "handle_request") == 2  # the interception's on top of one
    assert_unpatched()


class Witness:
    """A layer that notes which thread each request it sees came from."""

    def __init__(self) -> None:
        self.threads: list[int] = []

    def handle(self, mod: ModuleType, transport: Any, request: Any, send: Send) -> Any:
        self.threads.append(threading.get_ident())
        return send(request)

    async def handle_async(
        self, mod: ModuleType, transport: Any, request: Any, send: AsyncSend
    ) -> Any:
        self.threads.append(threading.get_ident())
        return await send(request)


def test_threads_entering_and_leaving_layers_at_once_leave_the_transports_as_they_were() -> None:
    """Layers of several threads come and go in any interleaving (the last in is not the first
    out): every request runs through one patch and through its own thread's layer exactly once,
    and the classes get their own methods back when the last layer leaves."""
    rounds, threads = 40, 4
    errors: list[BaseException] = []
    met: dict[int, int] = {}
    start = threading.Barrier(threads)

    def work(n: int) -> None:
        try:
            transport = httpx.MockTransport(lambda request: httpx.Response(204))
            with httpx.Client(transport=transport) as client:
                start.wait()
                for _ in range(rounds):
                    witness = Witness()
                    with intercepting(witness):
                        assert patch_depth(httpx.MockTransport, "handle_request") == 1
                        assert client.get("http://127.0.0.1/").status_code == 204
                    met[n] = met.get(n, 0) + witness.threads.count(threading.get_ident())
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    assert not errors, errors
    assert met == dict.fromkeys(range(threads), rounds)
    assert_unpatched()
