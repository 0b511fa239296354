"""The in-process transport: one handler for httpx and httpx2, sync and async clients, respx."""

from __future__ import annotations

import types

import httpx
import httpx2
import pytest
import respx

from dsh_testkit.mock import MockDeepSeek, MockHandler, Reply, mock_transport, respx_route

from ._helpers import API_KEY, chat_body

AUTH = {"authorization": f"Bearer {API_KEY}"}
URL = "https://api.deepseek.com/chat/completions"


@pytest.mark.parametrize("module", [httpx, httpx2], ids=["httpx", "httpx2"])
def test_sync_clients_of_both_libraries(mock: MockDeepSeek, module: types.ModuleType) -> None:
    mock.push(Reply(text="sync"))
    with module.Client(transport=module.MockTransport(MockHandler(mock))) as client:
        response = client.post(URL, json=chat_body(), headers=AUTH)
    assert isinstance(response, module.Response)
    assert response.json()["choices"][0]["message"]["content"] == "sync"
    assert response.headers["content-length"] == str(len(response.content))


@pytest.mark.parametrize("module", [httpx, httpx2], ids=["httpx", "httpx2"])
async def test_async_clients_stream_with_pauses(
    mock: MockDeepSeek, module: types.ModuleType
) -> None:
    mock.push(Reply(text="async answer", chunk_size=3, keep_alives=1, pace_ms=1))
    transport = module.MockTransport(MockHandler(mock))
    async with (
        module.AsyncClient(transport=transport) as client,
        client.stream("POST", URL, json=chat_body(stream=True), headers=AUTH) as response,
    ):
        lines = [line async for line in response.aiter_lines() if line]
    assert lines[0] == ": keep-alive" and lines[-1] == "data: [DONE]"
    assert "content-length" not in response.headers


@pytest.mark.parametrize("module", [httpx, httpx2], ids=["httpx", "httpx2"])
@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (Reply(text="x", fault="reset"), "RemoteProtocolError"),
        (Reply(text="x", fault="hang"), "ReadTimeout"),
        (
            Reply(text="abcdef", chunk_size=1, fault="disconnect", fault_after=2),
            "RemoteProtocolError",
        ),
        (Reply(text="abcdef", chunk_size=1, fault="stall", fault_after=2), "ReadTimeout"),
    ],
)
def test_faults_raise_the_clients_own_exceptions(
    mock: MockDeepSeek, module: types.ModuleType, reply: Reply, error: str
) -> None:
    mock.push(reply)
    transport = module.MockTransport(MockHandler(mock))
    with (
        module.Client(transport=transport) as client,
        pytest.raises(getattr(module, error)) as caught,
        client.stream("POST", URL, json=chat_body(stream=True), headers=AUTH) as response,
    ):
        for _ in response.iter_bytes():
            pass
    assert caught.value.request.url == URL


async def test_async_faults_and_a_waiting_stall(mock: MockDeepSeek) -> None:
    mock.push(
        Reply(text="abcdef", chunk_size=1, fault="stall", fault_after=1),
        Reply(text="ab", fault="disconnect"),
    )
    transport = httpx.MockTransport(MockHandler(mock, stall_seconds=0.01))
    async with httpx.AsyncClient(transport=transport) as client:
        # The stall times out the read; the disconnect cuts the body short.
        for error in (httpx.ReadTimeout, httpx.RemoteProtocolError):
            with pytest.raises(error):
                async with client.stream(
                    "POST", URL, json=chat_body(stream=True), headers=AUTH
                ) as response:
                    async for _chunk in response.aiter_bytes():
                        pass
    assert mock.pending == () and len(mock.requests) == 2


def test_a_hang_can_wait_before_timing_out(mock: MockDeepSeek) -> None:
    mock.push(Reply(text="x", fault="hang"))
    with (
        httpx.Client(transport=mock_transport(mock, stall_seconds=0.01)) as client,
        pytest.raises(httpx.ReadTimeout),
    ):
        client.post(URL, json=chat_body(), headers=AUTH)


def test_mock_transport_defaults_to_httpx_and_takes_httpx2(mock: MockDeepSeek) -> None:
    assert isinstance(mock_transport(mock), httpx.MockTransport)
    with httpx2.Client(transport=mock_transport(mock, module=httpx2)) as client:
        assert client.get("https://api.deepseek.com/v1/models", headers=AUTH).status_code == 200
    assert repr(MockHandler(mock)) == "MockHandler(stall_seconds=0.0)"


def test_respx_route_sends_everything_under_the_base_url_to_the_mock(mock: MockDeepSeek) -> None:
    mock.push(Reply(text="via respx"))
    with respx.mock(assert_all_called=True) as router:
        route = respx_route(router, mock)
        answer = httpx.post(URL, json=chat_body(), headers=AUTH)
        models = httpx.get("https://api.deepseek.com/v1/models", headers=AUTH)
    assert answer.json()["choices"][0]["message"]["content"] == "via respx"
    assert models.status_code == 200
    assert route.call_count == 2


def test_respx_route_takes_another_base_url(mock: MockDeepSeek) -> None:
    with respx.mock(assert_all_called=False) as router:
        respx_route(router, mock, base_url="http://gateway.test/deepseek/")
        response = httpx.post(
            "http://gateway.test/deepseek/chat/completions", json=chat_body(), headers=AUTH
        )
    assert response.status_code == 404  # the mock routes by its own paths
    assert "no endpoint at /deepseek/chat/completions" in response.json()["error"]["message"]
    assert (mock.requests, mock.unlogged_requests) == ((), 1)  # not a model path: not logged


def test_query_strings_are_not_part_of_the_path(mock: MockDeepSeek) -> None:
    with httpx.Client(transport=mock_transport(mock)) as client:
        assert client.post(URL + "?beta=1", json=chat_body(), headers=AUTH).status_code == 200
    assert mock.requests[0].path == "/chat/completions"


def test_sync_iteration_pauses_and_waits_out_a_stall(mock: MockDeepSeek) -> None:
    mock.push(Reply(text="abc", chunk_size=1, pace_ms=1, fault="stall", fault_after=2))
    transport = httpx.MockTransport(MockHandler(mock, stall_seconds=0.01))
    received = bytearray()
    with (
        httpx.Client(transport=transport) as client,
        pytest.raises(httpx.ReadTimeout),
        client.stream("POST", URL, json=chat_body(stream=True), headers=AUTH) as response,
    ):
        for chunk in response.iter_bytes():
            received += chunk
    assert received.count(b"data: ") == 2
