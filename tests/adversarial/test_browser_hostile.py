"""A hostile web page in a real Chromium against both servers: it must read nothing and change
nothing (the rules of ``dsh_testkit._loopback.guard``; RELIABILITY.md, "Browsers and other local
programs").

The servers run in process (``MockServer`` with its live pages, ``ProxyServer`` in front of it);
Chromium is the system's (``/usr/bin/chromium``, via Playwright). ``evil.test`` resolves to
127.0.0.1 through ``--host-resolver-rules``: the end state of a DNS rebinding, where a page the
attacker served from a public name now talks to this machine under that name. The attacker's
script gets into the origin ``http://evil.test:PORT`` two ways:

- ``attacker``: the document is the attacker's own (Playwright's router serves it, as the
  attacker's public server did before the rebind), in a Chromium started with its local-network
  checks off. Chromium blocks this case by itself ("the resource is in more-private address
  space loopback"), but other browsers do not, and a policy can turn the check off: the server
  must not rely on it.
- ``rebound``: the document is one of the server's own pages fetched through the rebound name,
  and the script runs in it (default Chromium: no local-network check applies, the page and the
  server share the address space).

And a page served from another port of loopback (another local tool; to a browser, the same
site) tries no-cors writes, images and a reset. Each test fails on a server without the rules:
the reads return the recorded prompt, the writes queue, route, reset and log.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest

from dsh_testkit.explorer import live_pages
from dsh_testkit.mock import MockServer, Reply
from dsh_testkit.proxy import ProxyServer
from tools.explorer_screenshots import CHROMIUM, CHROMIUM_ARGS

pytestmark = pytest.mark.slow

REBINDING = "--host-resolver-rules=MAP evil.test 127.0.0.1"
NO_LOCAL_NETWORK_CHECKS = (
    "--disable-features=BlockInsecurePrivateNetworkRequests,PrivateNetworkAccessSendPreflights,"
    "PrivateNetworkAccessRespectPreflightResults,LocalNetworkAccessChecks"
)
PROMPT = "SECRET-PROMPT-browser-5Hq"
KEY = "sk-FAKE-browser-hostile-not-a-key"
READS = ("/_dsh/requests", "/_dsh/report?format=json", "/_dsh/report", "/_dsh/explorer")
FETCH = """async ([path, init]) => {
  try { const r = await fetch(path, init); return {status: r.status, body: await r.text()}; }
  catch (e) { return {status: 0, body: String(e)}; }
}"""


@pytest.fixture(scope="module")
def browsers() -> Iterator[dict[str, Any]]:
    """Chromium twice: as installed, and with its local-network checks off."""
    if shutil.which(CHROMIUM) is None:
        pytest.skip(
            "Chromium is not installed at /usr/bin/chromium: install it with `apt-get install -y "
            "--no-install-recommends chromium` to run the hostile-page tests"
        )
    from playwright.sync_api import sync_playwright

    args = [*CHROMIUM_ARGS, REBINDING]
    with sync_playwright() as driver:
        default = driver.chromium.launch(executable_path=CHROMIUM, args=args)
        unchecked = driver.chromium.launch(
            executable_path=CHROMIUM, args=[*args, NO_LOCAL_NETWORK_CHECKS]
        )
        try:
            yield {"default": default, "unchecked": unchecked}
        finally:
            default.close()
            unchecked.close()


@pytest.fixture(scope="module")
def servers() -> Iterator[dict[str, Any]]:
    with tempfile.TemporaryDirectory() as scratch:
        trace = str(Path(scratch) / "browser.trace")
        with (
            MockServer(pages=live_pages) as mock,
            ProxyServer(mock.base_url, out=trace, pages=live_pages) as proxy,
        ):
            yield {"mock": mock, "proxy": proxy}


def snapshot(servers: dict[str, Any]) -> dict[str, Any]:
    mock = servers["mock"].mock
    return {
        "requests": [(r.method, r.path) for r in mock.requests],
        "pending": [e.to_json() for e in mock.pending],
        "routes": len(mock.routes),
        "recorded": len(servers["proxy"].trace()),  # waits for an exchange just ended
    }


@pytest.fixture
def state(servers: dict[str, Any]) -> dict[str, Any]:
    """The mock as a test leaves it: one request with a secret prompt (sent through the proxy,
    so both servers hold it), one queued entry, one route."""
    mock = servers["mock"].mock
    mock.reset()
    answer = httpx.post(
        servers["proxy"].base_url + "/chat/completions",
        json={"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": PROMPT}]},
        headers={"authorization": f"Bearer {KEY}"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text
    mock.push(Reply(text="the test's own entry"))
    mock.route(last_user="the test's own route").reply(text="ok")
    return snapshot(servers)


class _Pages(BaseHTTPRequestHandler):
    pages: ClassVar[dict[str, str]] = {}

    def do_GET(self) -> None:
        body = self.pages.get(self.path, "").encode()
        self.send_response(200 if body else 404)
        self.send_header("content-type", "text/html; charset=utf-8")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def other_port() -> Iterator[tuple[str, dict[str, str]]]:
    """A static page server on another loopback port: its base URL and its pages."""
    pages: dict[str, str] = {}
    server = ThreadingHTTPServer(("127.0.0.1", 0), type("Pages", (_Pages,), {"pages": pages}))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", pages
    finally:
        server.shutdown()
        server.server_close()


def port_of(server: Any) -> int:
    return int(server.base_url.rsplit(":", 1)[1])


def rebound_page(browsers: dict[str, Any], port: int, how: str) -> Any:
    """A page whose script runs in the origin ``http://evil.test:PORT``."""
    origin = f"http://evil.test:{port}"
    if how == "attacker":
        page = browsers["unchecked"].new_context().new_page()
        page.route(
            origin + "/attack.html",
            lambda route: route.fulfill(status=200, content_type="text/html", body="<p>hi</p>"),
        )
        page.goto(origin + "/attack.html")
    else:
        page = browsers["default"].new_context().new_page()
        page.goto(origin + "/_dsh/explorer")  # the server's own page, under the rebound name
    return page


@pytest.mark.parametrize("how", ["attacker", "rebound"])
@pytest.mark.parametrize("server", ["mock", "proxy"])
def test_a_rebound_page_reads_nothing(
    browsers: dict[str, Any], servers: dict[str, Any], state: dict[str, Any], server: str, how: str
) -> None:
    page = rebound_page(browsers, port_of(servers[server]), how)
    try:
        for path in READS:
            got = page.evaluate(FETCH, [path, {}])
            assert PROMPT not in got["body"], f"{server} {path}: the prompt is readable"
            assert got["status"] == 421, f"{server} {path}: {got['status']} {got['body'][:120]}"
    finally:
        page.context.close()


@pytest.mark.parametrize("how", ["attacker", "rebound"])
@pytest.mark.parametrize("server", ["mock", "proxy"])
def test_a_rebound_page_changes_nothing(
    browsers: dict[str, Any], servers: dict[str, Any], state: dict[str, Any], server: str, how: str
) -> None:
    page = rebound_page(browsers, port_of(servers[server]), how)
    json_post = {"method": "POST", "headers": {"content-type": "application/json"}}
    writes: tuple[tuple[str, dict[str, Any]], ...] = (
        ("/_dsh/script", {"text": "PWNED"}),
        ("/_dsh/routes", {"match": {}, "reply": {"text": "PWNED"}}),
        ("/_dsh/reset", {}),
        (
            "/chat/completions",
            {"model": "deepseek-v4-flash", "messages": [{"role": "user", "content": "INJECTED"}]},
        ),
    )
    try:
        for path, body in writes:
            got = page.evaluate(FETCH, [path, {**json_post, "body": json.dumps(body)}])
            assert got["status"] == 421, f"{server} POST {path}: {got['status']}"
    finally:
        page.context.close()
    assert snapshot(servers) == state


ATTACK = """<!doctype html><meta charset="utf-8"><body><script>
const T = "{target}";
window.done = (async () => {
  const nc = (path, body, type) => fetch(T + path, {method: "POST", mode: "no-cors",
      headers: type ? {"content-type": type} : {}, body}).catch(() => null);
  await nc("/_dsh/script", JSON.stringify({text: "PWNED"}), "text/plain");
  await nc("/_dsh/routes", JSON.stringify({match: {}, reply: {text: "PWNED"}}), "text/plain");
  await nc("/_dsh/script", "text=PWNED", "application/x-www-form-urlencoded");
  await nc("/chat/completions", JSON.stringify({model: "deepseek-v4-flash",
      messages: [{role: "user", content: "INJECTED"}]}), "text/plain");
  // a JSON POST needs a CORS preflight, which must fail (no Access-Control-Allow-* ever)
  window.jsonPost = await fetch(T + "/_dsh/script", {method: "POST",
      headers: {"content-type": "application/json"},
      body: JSON.stringify({text: "PWNED"})}).then(r => r.status, e => "blocked");
  window.corsRead = await fetch(T + "/_dsh/requests").then(r => r.status, e => "blocked");
  await Promise.all(Array.from({length: 10}, (_, i) => new Promise(ok => {
      const img = new Image(); img.onload = img.onerror = ok;
      img.src = T + "/chat/completions?i=" + i; })));
  await Promise.all(Array.from({length: 3}, (_, i) => new Promise(ok => {
      const img = new Image(); img.onload = img.onerror = ok; img.src = T + "/models?i=" + i; })));
  await nc("/_dsh/reset", "", null);
  return true;
})();
</script>"""


@pytest.mark.parametrize("server", ["mock", "proxy"])
def test_a_page_on_another_loopback_port_changes_nothing(
    browsers: dict[str, Any],
    servers: dict[str, Any],
    state: dict[str, Any],
    other_port: tuple[str, dict[str, str]],
    server: str,
) -> None:
    base, pages = other_port
    pages["/attack.html"] = ATTACK.replace("{target}", servers[server].base_url)
    page = browsers["default"].new_context().new_page()
    try:
        page.goto(base + "/attack.html")
        page.wait_for_function("window.done", timeout=30_000)
        assert page.evaluate("window.jsonPost") == "blocked"
        assert page.evaluate("window.corsRead") == "blocked"
    finally:
        page.context.close()
    # nothing queued, routed, reset or logged; the proxy recorded nothing either
    assert snapshot(servers) == state


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
@pytest.mark.parametrize("server", ["mock", "proxy"])
def test_the_explorer_still_works_on_its_own_origin(
    browsers: dict[str, Any], servers: dict[str, Any], state: dict[str, Any], server: str, host: str
) -> None:
    port = port_of(servers[server])
    page = browsers["default"].new_context().new_page()
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        response = page.goto(f"http://{host}:{port}/_dsh/explorer")
        assert response is not None and response.status == 200
        page.wait_for_selector("#app[data-state=ready]", timeout=60_000)
        assert page.evaluate(FETCH, ["/_dsh/report?format=json", {}])["status"] == 200
        if server == "mock":
            # the server's own origin may write (same origin, JSON): a dashboard button would
            init = {
                "method": "POST",
                "headers": {"content-type": "application/json"},
                "body": json.dumps({"text": "from the page"}),
            }
            assert page.evaluate(FETCH, ["/_dsh/script", init])["status"] == 200
    finally:
        page.context.close()
    assert not errors, errors
