"""``CassetteConfig`` through ``use_cassette``: what is matched, JSON paths ignored, the user's
before-record hooks (and a request they leave out), playback repeats, origin rewrites and
loopback origins as one, and the errors for options that cannot work."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from dsh_testkit.cassettes import (
    CassetteConfig,
    CassetteConfigError,
    CassetteMismatch,
    use_cassette,
)
from dsh_testkit.scrub import ScrubRules

URL = "https://api.deepseek.com/chat/completions"


def body(text: str = "hi", request_id: str = "r-1") -> dict[str, Any]:
    return {
        "model": "deepseek-v4-flash",
        "metadata": {"request_id": request_id, "user": "u"},
        "messages": [{"role": "user", "content": text, "ts": request_id}],
    }


def answering(seen: list[httpx.Request]) -> httpx.Client:
    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"n": len(seen)})

    return httpx.Client(transport=httpx.MockTransport(handler))


def record(path: Path, config: CassetteConfig, *bodies: dict[str, Any], url: str = URL) -> None:
    seen: list[httpx.Request] = []
    with use_cassette(path, mode="once", config=config), answering(seen) as client:
        for item in bodies:
            client.post(url, json=item)


def test_ignored_json_paths_are_recorded_but_not_matched(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    config = CassetteConfig(ignore_json_paths=("metadata.request_id", "messages[*].ts"))
    record(path, config, body(request_id="first"))
    assert (
        '"request_id": "first"'
        in yaml.safe_load(path.read_text())["interactions"][0]["request"]["body"]["json"]
    )
    seen: list[httpx.Request] = []
    with use_cassette(path, config=config), answering(seen) as client:
        assert client.post(URL, json=body(request_id="second")).json() == {"n": 1}
    assert seen == []  # replayed
    with (
        pytest.raises(CassetteMismatch) as caught,
        use_cassette(path, config=config),
        answering(seen) as client,
    ):
        client.post(URL, json=body("other", request_id="third"))
    # what differs leaves the ignored fields out
    assert caught.value.diff == ("messages[0].content differs: recorded: 'hi', request: 'other'",)
    with pytest.raises(CassetteMismatch), use_cassette(path), answering(seen) as client:
        client.post(URL, json=body(request_id="second"))  # without the config: a mismatch


def test_a_mismatch_says_which_field_to_ignore_and_which_ignore_paths_match_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.yaml"
    record(path, CassetteConfig(), body(request_id="first"))
    seen: list[httpx.Request] = []
    misspelt = CassetteConfig(ignore_json_paths=("metadata.requestid", "messages[*].ts"))
    with (
        pytest.raises(CassetteMismatch) as caught,
        use_cassette(path, config=misspelt),
        answering(seen) as client,
    ):
        client.post(URL, json=body(request_id="second"))
    assert caught.value.diff == (
        "metadata.request_id differs: recorded: 'first', request: 'second'",
    )
    message = str(caught.value)
    assert (
        "If metadata.request_id changes on every run (a timestamp, a request id), leave it out "
        "of matching: ignore_json_paths=['metadata.request_id'] in dsh_cassette_config or the "
        "marker (it is still recorded)."
    ) in message
    assert (
        "ignore_json_paths: nothing in the recording or the request is at metadata.requestid; a "
        "path names the body's own keys"
    ) in message  # messages[*].ts is there: it is not named
    # a message difference is not offered as one to ignore
    with (
        pytest.raises(CassetteMismatch) as caught,
        use_cassette(path),
        answering(seen) as client,
    ):
        client.post(URL, json=body("other", request_id="first"))
    assert "ignore_json_paths" not in str(caught.value)


def test_match_on_names_and_callables(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    record(path, CassetteConfig(), body("one"))
    seen: list[httpx.Request] = []
    by_path = CassetteConfig(match_on=("method", "path"))
    with use_cassette(path, config=by_path), answering(seen) as client:
        assert client.post(URL, json=body("another")).json() == {"n": 1}

    def same_model(r1: Any, r2: Any) -> None:
        assert json.loads(r1.body)["model"] == json.loads(r2.body)["model"]

    by_model = CassetteConfig(match_on=("method", same_model))
    with use_cassette(path, config=by_model), answering(seen) as client:
        assert client.post(URL, json=body("yet another")).json() == {"n": 1}
    assert seen == []


def test_playback_repeats_only_when_allowed(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    record(path, CassetteConfig(), body())
    seen: list[httpx.Request] = []
    repeats = CassetteConfig(allow_playback_repeats=True)
    with use_cassette(path, config=repeats), answering(seen) as client:
        assert [client.post(URL, json=body()).json() for _ in range(3)] == [{"n": 1}] * 3
    with (
        pytest.raises(CassetteMismatch, match="each was already played"),
        use_cassette(path),
        answering(seen) as client,
    ):
        client.post(URL, json=body())
        client.post(URL, json=body())


def test_user_hooks_run_before_the_scrubbing_and_may_leave_a_request_out(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"

    def before_request(request: Any) -> Any:
        if request.path == "/models":
            return None  # not recorded: it reaches its target every time
        request.headers["x-leaked"] = "sk-" + "a" * 40  # scrubbing still runs after the hook
        return request

    def before_response(response: dict[str, Any]) -> dict[str, Any]:
        response["headers"]["x-added"] = ["by the hook"]
        return response

    config = CassetteConfig(
        before_record_request=before_request, before_record_response=before_response
    )
    seen: list[httpx.Request] = []
    with use_cassette(path, mode="once", config=config) as cassette, answering(seen) as client:
        client.post(URL, json=body())
        client.get("https://api.deepseek.com/models")
    assert cassette.passed_through == 1 and cassette.recorded == 1
    text = path.read_text(encoding="utf-8")
    assert "sk-aaaa" not in text and "x-leaked: <REDACTED>" in text
    assert "x-added: by the hook" in text
    with use_cassette(path, config=config), answering(seen) as client:
        client.post(URL, json=body())
        client.get("https://api.deepseek.com/models")
    assert [r.url.path for r in seen] == ["/chat/completions", "/models", "/models"]


def test_loopback_origins_are_one_and_rewrites_apply_first(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    record(path, CassetteConfig(), body(), url="http://127.0.0.1:41919/chat/completions")
    stored = yaml.safe_load(path.read_text())["interactions"][0]["request"]["uri"]
    assert stored == "http://127.0.0.1/chat/completions"
    seen: list[httpx.Request] = []
    for origin in ("http://127.0.0.1:46719", "http://localhost:8000", "http://[::1]:9"):
        with use_cassette(path), answering(seen) as client:
            assert client.post(f"{origin}/chat/completions", json=body()).json() == {"n": 1}
    kept = CassetteConfig(loopback_as_one=False)
    with (
        pytest.raises(CassetteMismatch, match="url differs"),
        use_cassette(path, config=kept),
        answering(seen) as client,
    ):
        client.post("http://127.0.0.1:46719/chat/completions", json=body())
    rewritten = tmp_path / "r.yaml"
    gateway = CassetteConfig(
        rewrite_origin=(("http://localhost:8080", "https://api.deepseek.com"),)
    )
    record(rewritten, gateway, body(), url="http://127.0.0.1:9999/chat/completions")
    stored = yaml.safe_load(rewritten.read_text())["interactions"][0]["request"]["uri"]
    assert stored == URL  # a loopback origin in a rewrite stands for every loopback origin


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"match_on": ("method", "url")}, "match_on: unknown matcher 'url'"),
        ({"match_on": ()}, "match_on: name at least one matcher"),
        ({"ignore_json_paths": ("a..b",)}, "ignore_json_paths: JSON path 'a..b': cannot read it"),
        ({"before_record_request": "drop"}, "before_record_request: 'drop' is not callable"),
        ({"rewrite_origin": {"api": "https://x"}}, "rewrite_origin: 'api' is not an origin"),
        ({"rewrite_origin": [("https://a",)]}, "rewrite_origin: ('https://a',) is not a"),
        ({"loopback_as_one": "yes"}, "loopback_as_one: must be True or False"),
        ({"scrub": {"headers": "x"}}, "scrub"),
        # wrong types (a hostile sweep found each a raw AttributeError or TypeError)
        ({"ignore_json_paths": [5]}, "ignore_json_paths: 5 is not a JSON path"),
        ({"ignore_json_paths": 5}, "ignore_json_paths: 5 is not a JSON path"),
        ({"rewrite_origin": {"http://a.test": 5}}, "rewrite_origin: 5 is not an origin"),
        ({"rewrite_origin": {5: "http://a.test"}}, "rewrite_origin: 5 is not an origin"),
        ({"filter_headers": 5}, "'filter_headers': 5 is not a list of names"),
        ({"filter_headers": None}, "None is not a list of names"),
    ],
)
def test_bad_options_name_the_key(options: dict[str, Any], message: str) -> None:
    with pytest.raises(CassetteConfigError) as caught:
        if ("scrub" in options and isinstance(options["scrub"], dict)) or (
            "filter_headers" in options
        ):
            CassetteConfig.from_mapping(options, where="here")
        else:
            CassetteConfig(**options)
    assert message in str(caught.value)
    # vcrpy's filter lists are read as scrub rules: their errors are the scrub key's
    assert caught.value.key == ("scrub" if "filter_headers" in options else next(iter(options)))


def test_from_mapping_takes_vcrpy_filter_names_as_scrub_rules() -> None:
    config = CassetteConfig.from_mapping(
        {
            "filter_headers": ["X-Team", ("x-other", "replacement")],
            "filter_query_parameters": "sig",
            "scrub": {"json_keys": ["owner"]},
        },
        where="the fixture",
    )
    assert config.scrub == ScrubRules(
        headers=frozenset({"x-team", "x-other"}),
        query=frozenset({"sig"}),
        json_keys=frozenset({"owner"}),
    )
    with pytest.raises(CassetteConfigError, match="the fixture: unknown option"):
        CassetteConfig.from_mapping({"record_mode": "once"}, where="the fixture")


def test_a_re_recorded_cassette_keeps_its_permissions_and_is_written_through_its_link(
    tmp_path: Path,
) -> None:
    """The file that replaces a cassette is as the old one was (not mkstemp's private 0600),
    and a cassette that is a symbolic link (shared from elsewhere) has its target replaced."""
    target = tmp_path / "shared" / "c.yaml"
    record(target, CassetteConfig(), body("first"))
    target.chmod(0o644)
    link = tmp_path / "here" / "c.yaml"
    link.parent.mkdir()
    link.symlink_to(target)
    with use_cassette(link, mode="rewrite"), answering([]) as client:
        client.post(URL, json=body("second"))
    assert link.is_symlink()
    assert "second" in target.read_text(encoding="utf-8")
    assert oct(target.stat().st_mode & 0o777) == oct(0o644)
    fresh = tmp_path / "new" / "c.yaml"
    record(fresh, CassetteConfig(), body("x"))
    umask = os.umask(0o022)
    os.umask(umask)
    assert oct(fresh.stat().st_mode & 0o777) == oct(0o666 & ~umask)
