"""The live routes over real loopback HTTP: the proxy's and the mock's ``/_dsh/report`` JSON
with its ETag (304 while nothing changed, a new ETag for each new exchange) and their
``/_dsh/explorer`` pages."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from dsh_testkit.doctor import compact_report, diagnose, expand_report, report_text
from dsh_testkit.explorer import live_pages
from dsh_testkit.explorer._live import LiveReport, live_report_of
from dsh_testkit.mock import MockDeepSeek, MockServer
from dsh_testkit.proxy import ProxyServer
from dsh_testkit.traces import Trace
from tests.testkit.explorer._scenes import three_killers
from tests.testkit.explorer.test_page import block

KEY = {"authorization": "Bearer sk-live-test"}


def ask(client: httpx.Client, history: list[dict[str, Any]], text: str) -> None:
    history.append({"role": "user", "content": text})
    answer = client.post(
        "/chat/completions", headers=KEY, json={"model": "deepseek-v4-flash", "messages": history}
    )
    assert answer.status_code == 200
    history.append(answer.json()["choices"][0]["message"])


def report_of(client: httpx.Client, etag: str | None = None) -> httpx.Response:
    headers = {"if-none-match": etag} if etag else {}
    return client.get("/_dsh/report?format=json", headers=headers)


@pytest.mark.parametrize("server", ["proxy", "mock"])
def test_the_report_json_answers_304_until_an_exchange_arrives(server: str) -> None:
    with (
        MockServer(MockDeepSeek(), pages=live_pages) as upstream,
        ProxyServer(upstream.base_url, pages=live_pages) as proxy,
    ):
        base = proxy.base_url if server == "proxy" else upstream.base_url
        with httpx.Client(base_url=base, timeout=30) as client:
            empty = report_of(client)
            assert empty.status_code == 200
            assert empty.json()["totals"]["requests"] == 0
            etag = empty.headers["etag"]
            assert empty.headers["cache-control"] == "no-store"
            unchanged = report_of(client, etag)
            assert (unchanged.status_code, unchanged.content) == (304, b"")
            assert unchanged.headers["etag"] == etag
            history: list[dict[str, Any]] = []
            ask(client, history, "hello")
            one = report_of(client, etag)
            assert one.status_code == 200
            assert one.json()["totals"]["requests"] == 1
            assert one.headers["etag"] != etag
            assert report_of(client, one.headers["etag"]).status_code == 304
            ask(client, history, "and again")
            two = report_of(client, f'W/{one.headers["etag"]}, "other"')
            assert two.status_code == 200
            assert [r["relation"] for r in two.json()["conversations"][0]["requests"]] == [
                "first",
                "extends",
            ]
            text = client.get("/_dsh/report")
            assert text.headers["content-type"].startswith("text/plain")
            assert "conversation" in text.text


def test_the_explorer_pages_embed_the_report_so_far_and_poll_it() -> None:
    with (
        MockServer(MockDeepSeek(), pages=live_pages) as upstream,
        ProxyServer(upstream.base_url, pages=live_pages) as proxy,
    ):
        for base in (proxy.base_url, upstream.base_url):
            with httpx.Client(base_url=base, timeout=30) as client:
                ask(client, [], "hello")
                page = client.get("/_dsh/explorer")
                assert page.status_code == 200
                assert page.headers["content-type"] == "text/html; charset=utf-8"
                config = block(page.text, "dsh-config")
                assert config["live"] == "/_dsh/report?format=json"
                data = block(page.text, "dsh-report")
                assert data["totals"]["requests"] >= 1
                # the page's version is the endpoint's current ETag: its first poll costs nothing
                assert report_of(client, config["version"]).status_code == 304


def test_a_reset_mock_with_as_many_requests_is_a_new_version() -> None:
    mock = MockDeepSeek()
    with (
        MockServer(mock, pages=live_pages) as server,
        httpx.Client(base_url=server.base_url, timeout=30) as client,
    ):
        ask(client, [], "one")
        etag = report_of(client).headers["etag"]
        client.post("/_dsh/reset", json={})
        ask(client, [], "two")
        again = report_of(client, etag)
        assert again.status_code == 200
        assert again.json()["totals"]["requests"] == 1


def test_servers_built_without_pages_say_how_to_attach_them() -> None:
    """The servers import nothing of the doctor or the Explorer: their pages are handed in."""
    with MockServer(MockDeepSeek()) as upstream, ProxyServer(upstream.base_url) as proxy:
        for base, name in ((upstream.base_url, "MockServer"), (proxy.base_url, "ProxyServer")):
            for path in ("/_dsh/report", "/_dsh/report?format=json", "/_dsh/explorer"):
                answer = httpx.get(base + path, timeout=30)
                assert answer.status_code == 404
                assert f"{name}(pages=dsh_testkit.explorer.live_pages)" in answer.text
        assert len(upstream.mock.requests) == 0  # the proxy did not relay them


def test_the_text_report_is_the_doctors_text_of_the_live_report() -> None:
    mock = three_killers()
    pages = live_pages(mock)
    answer = pages("/_dsh/report", "", None)
    assert answer.status == 200 and answer.content_type == "text/plain; charset=utf-8"
    assert answer.body.decode() == report_text(diagnose(mock)) == pages.text()
    assert pages.live is live_report_of(mock)  # every pages of one mock share its report
    report = diagnose(mock)
    for query, full in (
        ("all=1", True),
        ("all=0", False),
        ("all=no", False),
        ("all=off", False),
        ("x=1", None),
    ):
        asked = pages("/_dsh/report", query, None).body.decode()
        assert asked == report_text(report, full=full), query
    assert pages("/_dsh/report", "all=1", None).body != pages("/_dsh/report", "all=0", None).body


def test_the_mock_report_is_diagnose_of_the_mock() -> None:
    mock = three_killers()
    live = live_report_of(mock)
    assert live is live_report_of(mock)
    assert live.current().document == compact_report(diagnose(mock))
    assert expand_report(live.current().document) == diagnose(mock).to_json()


def test_live_report_diagnoses_again_only_when_the_records_change() -> None:
    records: list[object] = []
    calls: list[int] = []

    def source() -> Trace:
        calls.append(len(records))
        return Trace(exchanges=(), source="proxy")

    live = LiveReport(source, lambda: records)
    first = live.current()
    assert live.current() is first and calls == [0]
    records.append(object())
    second = live.current()
    assert second is not first and calls == [0, 1]
    records[0] = object()  # as many records, a different one: changed
    assert live.current() is not second and calls == [0, 1, 1]
    assert re.fullmatch(r'"[0-9a-f]{8}-3"', live.current().etag)
