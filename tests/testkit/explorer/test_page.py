"""The Cache Explorer page without a browser: self-contained, the report embedded once and
intact, hostile text inert, byte-stable, and written by ``cache-report --html``."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dsh_testkit.cli import main
from dsh_testkit.doctor import TERMS, DoctorReport, compact_report, diagnose, expand_report
from dsh_testkit.doctor._codes import CODES
from dsh_testkit.doctor._report import DOCTOR_FORMAT_VERSION
from dsh_testkit.explorer import render_html
from dsh_testkit.explorer._page import _SCRIPTS, _asset, embed_json, page_config
from tests.testkit.explorer._scenes import three_killers

HOSTILE = (
    "</script><script>window.pwned=1</script><!-- <img src=x onerror=window.pwned=2>"
    " & \u2028\u2029 </SCRIPT > ]]> \"quoted\" 'single'"
)


def block(page: str, name: str) -> Any:
    """The JSON block ``name`` of a page, parsed strictly (no NaN)."""
    found = re.search(f"<script type='application/json' id='{name}'>(.*?)</script>", page, re.S)
    assert found is not None, name

    def no_constants(text: str) -> Any:
        raise AssertionError(f"non-standard JSON constant {text}")

    return json.loads(found.group(1), parse_constant=no_constants)


@pytest.fixture(scope="module")
def report() -> DoctorReport:
    return diagnose(three_killers())


def hostile_bodies() -> list[dict[str, Any]]:
    system = f"You are careful.\n{HOSTILE}\nTime: 12:00:0"
    tools = [
        {
            "type": "function",
            "function": {"name": "read_file", "description": HOSTILE, "parameters": {}},
        }
    ]
    history: list[dict[str, Any]] = [{"role": "user", "content": f"hello {HOSTILE}"}]
    bodies = []
    for second in range(3):
        bodies.append(
            {
                "model": "deepseek-v4-flash",
                "messages": [{"role": "system", "content": f"{system}{second}"}, *history],
                "tools": tools,
            }
        )
        history += [
            {"role": "assistant", "content": f"answer {second} {HOSTILE}"},
            {"role": "user", "content": "more"},
        ]
    return bodies


def test_the_page_needs_nothing_from_anywhere(report: DoctorReport) -> None:
    page = render_html(report)
    assert page.startswith("<!DOCTYPE html>")
    assert not re.search(r"<(?:link|img|iframe|object|embed)\b", page, re.I)
    assert not re.search(r"<script[^>]*\bsrc=", page, re.I)
    assert not re.search(r"\b(?:src|href)=['\"]?(?:https?:)?//", page, re.I)
    assert "@import" not in page and "url(" not in page
    assert "default-src 'none'" in page  # the browser refuses any load the page might attempt


def test_the_report_is_embedded_once_and_reads_back_equal(report: DoctorReport) -> None:
    page = render_html(report)
    embedded = block(page, "dsh-report")
    assert embedded == json.loads(json.dumps(compact_report(report)))
    assert expand_report(embedded) == json.loads(json.dumps(report.to_json()))
    assert page.count("id='dsh-report'") == 1
    # embedded once, and compact: a finding's detail appears once, however many requests and
    # groups carry it
    detail = embed_json(report.conversations[0].requests[1].findings[0].detail)[1:-1]
    assert page.count(detail) == 1 < embed_json(report.to_json()).count(detail)


def test_the_config_carries_every_code_and_term_and_no_live_url(report: DoctorReport) -> None:
    config = block(render_html(report), "dsh-config")
    assert config == page_config()
    assert config["live"] is None
    assert set(config["codes"]) == set(CODES)
    assert config["codes"]["tools-changed"]["advice"] == CODES["tools-changed"].advice
    assert [tuple(t) for t in config["terms"]] == list(TERMS)
    assert config["docs"] == "docs/guides/cache-doctor.md"


def test_the_report_json_has_what_the_page_reads(report: DoctorReport) -> None:
    document = report.to_json()
    assert document["formatVersion"] == DOCTOR_FORMAT_VERSION == 3
    assert document["priceList"] == [
        {"hit": 0.0028, "miss": 0.14, "output": 0.28, "label": "deepseek-v4-flash since 2026-04-24"}
    ]
    conversation = document["conversations"][0]
    risk, group = (g for g in conversation["findingGroups"] if g["code"] == "volatile-system-text")
    assert (risk["requests"], risk["severity"]) == ([0], "note")  # the clock, named before it ticks
    assert group["requests"] == [1, 2]
    # each finding's signature ties it to its group: the same change said once
    signatures = {
        f["signature"]
        for r in conversation["requests"]
        for f in r["findings"]
        if f["code"] == "volatile-system-text"
    }
    assert signatures == {group["finding"]["signature"], risk["finding"]["signature"]}


def test_hostile_text_in_a_trace_stays_text() -> None:
    report = diagnose(hostile_bodies())
    page = render_html(report)
    page.encode("utf-8")  # a lone surrogate in the trace does not make the page unwritable
    assert page.lower().count("</script") == 3  # the two JSON blocks and the script: ours
    assert "<!--" not in page
    assert "\u2028" not in page and "\u2029" not in page
    assert "window.pwned" in page  # present, as escaped data only
    assert "<script>window.pwned" not in page and "<img" not in page
    assert expand_report(block(page, "dsh-report")) == json.loads(json.dumps(report.to_json()))
    texts = json.dumps(block(page, "dsh-report"), ensure_ascii=False)
    assert "</script><script>window.pwned=1</script>" in texts


def test_embed_json_escapes_what_could_end_a_script_block() -> None:
    value = {"a": "</script><!--<b>&\u2028\u2029\udfff", "n": float("nan"), "i": [float("inf")]}
    text = embed_json(value)
    assert not re.search("[<>&\u2028\u2029\ud800-\udfff]", text)
    assert json.loads(text) == {"a": value["a"], "n": None, "i": [None]}
    assert embed_json({"x": 1.5}) == '{"x":1.5}'


def test_nan_figures_and_lone_surrogates_still_give_a_page_json_parse_reads() -> None:
    report = diagnose(hostile_bodies())
    conversation = report.conversations[0]
    request = conversation.requests[1]
    finding = replace(request.findings[0], detail="a lone surrogate: \ud800 here")
    broken = replace(
        report,
        path="<b>evil</b> \udc80.trace",
        conversations=(
            replace(
                conversation,
                requests=(replace(request, started=float("nan"), findings=(finding,)),),
                groups=(),
            ),
        ),
    )
    page = render_html(broken)
    page.encode("utf-8")  # writable as UTF-8
    data = expand_report(block(page, "dsh-report"))
    assert data["conversations"][0]["requests"][0]["started"] is None
    assert data["conversations"][0]["requests"][0]["findings"][0]["detail"] == finding.detail
    assert "<title>Cache Explorer: &lt;b&gt;evil&lt;/b&gt; \ufffd.trace</title>" in page


def test_the_page_is_byte_stable(report: DoctorReport) -> None:
    assert render_html(report) == render_html(report)
    assert render_html(diagnose(hostile_bodies())) == render_html(diagnose(hostile_bodies()))


def test_the_inlined_assets_cannot_end_the_page_early() -> None:
    for name in (*(f"js/{n}" for n in _SCRIPTS), "explorer.css"):
        text = _asset(name)
        assert "</script" not in text.lower() and "</style" not in text.lower(), name
        assert "<!--" not in text, name
        assert "innerHTML" not in text and "insertAdjacentHTML" not in text, name
        assert "http://" not in text.replace("http://www.w3.org/2000/svg", ""), name
        assert "https://" not in text, name


def test_a_live_page_says_what_to_poll(report: DoctorReport) -> None:
    page = render_html(report, live="/_dsh/report?format=json", version='"abc-1"')
    config = block(page, "dsh-config")
    assert config["live"] == "/_dsh/report?format=json"
    assert config["version"] == '"abc-1"'


def test_the_page_grows_linearly_with_the_trace() -> None:
    from benchmarks.bench_explorer import trace_of_size

    small = len(render_html(diagnose(trace_of_size(200))).encode("utf-8"))
    large = len(render_html(diagnose(trace_of_size(400))).encode("utf-8"))
    fixed = len(render_html(diagnose([])).encode("utf-8"))
    assert 1.9 <= (large - fixed) / (small - fixed) <= 2.1


def test_cache_report_writes_the_explorer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    mock = three_killers()
    log = tmp_path / "requests.json"
    log.write_text(json.dumps({"requests": [r.to_json() for r in mock.requests]}), encoding="utf-8")
    out = tmp_path / "explorer.html"
    assert main(["cache-report", str(log), "--html", str(out)]) == 0
    assert f"wrote the HTML report to {out}" in capsys.readouterr().err
    page = out.read_text(encoding="utf-8")
    data = block(page, "dsh-report")
    assert data["source"] == "mock-requests"
    assert data["causeCounts"] == {
        "history-rewritten": 2,
        "tools-changed": 1,
        "volatile-system-text": 3,  # the first request's clock is a risk note
    }
    assert "<title>Cache Explorer: " in page
