"""Rebuilding a log's requests as wire bodies: reply and usage on each rebuilt request, the
sidecars that fill a normalized log's placeholders, and ``request_wire_body``.

Fixtures: this project's hand-written ``tests/fixtures/reference-forms/`` (always present) and
the reference harness's pin log in ``../shared/fixtures/reference-logs`` (skipped when absent).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from dsh_core import (
    EpochHeader,
    FrozenDict,
    GenerateOptions,
    LlmCallConfig,
    ProviderError,
    SidecarError,
    Sidecars,
    TokenUsage,
    ToolsPlaceholder,
    UnfilledPlaceholderError,
    load_session,
    reconstruct_requests,
    request_wire_body,
    user_message,
)
from dsh_core._json_text import dumps_canonical
from dsh_core.providers.anthropic import encode_request as anthropic_bytes
from dsh_core.providers.deepseek import encode_request as deepseek_bytes
from tests._support import REFERENCE_LOGS

FORMS = Path(__file__).parent.parent / "fixtures" / "reference-forms"
PREFIX_LOG = FORMS / "message-prefix" / "session.jsonl"


def test_rebuilt_requests_expose_the_reply_and_the_recorded_usage() -> None:
    rebuilt = list(reconstruct_requests(load_session(PREFIX_LOG, audit=True).events))
    assert [r.reply.text if r.reply else None for r in rebuilt] == ["No jobs.", "Nothing is stale."]
    assert [r.reply_seq for r in rebuilt] == [9, 20]
    assert [r.usage for r in rebuilt] == [
        TokenUsage(input_tokens=812, output_tokens=3, cache_read_tokens=0),
        TokenUsage(input_tokens=40, output_tokens=4, cache_read_tokens=768),
    ]


def test_a_failed_attempt_has_its_chunk_usage_but_no_reply() -> None:
    path = REFERENCE_LOGS / "empty-response-retry" / "session.jsonl"
    if not path.exists():
        pytest.skip(f"reference logs not found at {REFERENCE_LOGS}")
    first, second = list(reconstruct_requests(load_session(path, audit=True).events))
    assert first.reply is None and second.reply is not None
    assert second.usage is not None and second.usage.output_tokens > 0


def test_without_sidecars_the_wire_body_names_the_unfilled_placeholder() -> None:
    request = next(reconstruct_requests(load_session(PREFIX_LOG, audit=True).events))
    with pytest.raises(UnfilledPlaceholderError) as caught:
        request_wire_body(request)
    assert (caught.value.placeholder, caught.value.field) == ("{{system}}", "system")
    assert "Sidecars.from_dir" in str(caught.value)
    no_system = GenerateOptions.from_header(
        EpochHeader(config=LlmCallConfig(provider="p", model="deepseek-chat")),
        request.request.messages,
    )
    for options, placeholder, field in [
        (
            GenerateOptions(
                provider="p",
                model="deepseek-chat",
                messages=(),
                tools=ToolsPlaceholder(names=("a",)),
            ),
            "['a']",
            "tools",
        ),
        (
            GenerateOptions(provider="p", model="deepseek-chat", messages=(), tools="{{tools}}"),  # type: ignore[arg-type]
            "{{tools}}",
            "tools",
        ),
        (
            GenerateOptions(
                provider="p",
                model="deepseek-chat",
                messages=(),
                message_prefix=("{{messagePrefix}}",),
            ),
            "{{messagePrefix}}",
            "messagePrefix[0]",
        ),
    ]:
        with pytest.raises(UnfilledPlaceholderError) as caught:
            request_wire_body(options, api="anthropic")
        assert (caught.value.placeholder, caught.value.field) == (placeholder, field)
    assert request_wire_body(no_system)["messages"][0]["role"] == "user"


def test_sidecars_fill_every_placeholder_per_header_epoch() -> None:
    sidecars = Sidecars.from_dir(PREFIX_LOG.parent, values={"{{cwd}}": "/home/me"})
    loaded = load_session(PREFIX_LOG, audit=True, fill=sidecars)
    assert loaded.info.cwd == "/home/me/workspace"
    first, second = list(reconstruct_requests(loaded.events))
    body = request_wire_body(first)
    assert body["messages"][0] == {"role": "system", "content": "You are a job runner.\nBe brief."}
    assert body["messages"][1]["content"] == "<skills>job_list, cordis_run</skills>"
    assert body["messages"][2]["content"] == "List the jobs in /home/me/workspace."
    assert [t["function"]["name"] for t in body["tools"]] == ["job_list", "cordis_run"]
    body = request_wire_body(second)
    assert body["messages"][0]["content"].endswith("You may kill jobs.")
    assert [t["function"]["name"] for t in body["tools"]] == ["cordis_run", "job_list", "job_kill"]
    # The body is exactly what the providers encode.
    assert dumps_canonical(body).encode() == deepseek_bytes(second.request)
    assert dumps_canonical(request_wire_body(second, api="anthropic")).encode() == (
        anthropic_bytes(second.request)
    )
    assert request_wire_body(second, stream=False)["stream"] is False


def test_sidecars_are_picked_up_beside_the_log_with_fill_auto() -> None:
    auto = list(reconstruct_requests(load_session(PREFIX_LOG, audit=True, fill="auto").events))
    assert auto[0].request.system == "You are a job runner.\nBe brief."
    assert isinstance(auto[0].request.tools, tuple)
    assert "{{cwd}}" in auto[0].request.messages[0].text  # inline values need an explicit value


def test_a_subagent_log_uses_its_numbered_sidecars(tmp_path: Path) -> None:
    shutil.copy(PREFIX_LOG, tmp_path / "session.1.jsonl")
    shutil.copy(
        PREFIX_LOG.parent / "system-prompt.expected.md", tmp_path / "system-prompt.1.expected.md"
    )
    loaded = load_session(tmp_path / "session.1.jsonl", audit=True, fill="auto")
    request = next(reconstruct_requests(loaded.events)).request
    assert request.system == "You are a job runner.\nBe brief."
    assert request.tools == ToolsPlaceholder(names=("job_list", "cordis_run"))


@pytest.mark.parametrize(
    ("name", "text", "fragment"),
    [
        ("tool-schemas.expected.json", "{", "tool-schemas.expected.json is not valid JSON"),
        ("tool-schemas.expected.json", "[]", '{"initial": [...], "changes": [[...], ...]}'),
        (
            "tool-schemas.expected.json",
            '{"initial": [{"name": "x"}], "changes": []}',
            "parameters must be a JSON Schema object",
        ),
        (
            "system-prompt.expected.md",
            "a\n\n<!-- request/header change 2 -->\n\nb\n",
            "change marker 2 where change 1 was expected",
        ),
        ("message-prefix.expected.json", '{"initial": [{}], "changes": []}', "message"),
    ],
)
def test_a_bad_sidecar_is_a_sidecar_error_naming_its_file(
    tmp_path: Path, name: str, text: str, fragment: str
) -> None:
    (tmp_path / name).write_text(text, encoding="utf-8")
    with pytest.raises(SidecarError) as caught:
        Sidecars.from_dir(tmp_path)
    assert fragment in str(caught.value)


@pytest.mark.parametrize(
    "name",
    ["system-prompt.expected.md", "tool-schemas.expected.json", "message-prefix.expected.json"],
)
def test_a_sidecar_that_is_not_utf8_is_a_sidecar_error(tmp_path: Path, name: str) -> None:
    (tmp_path / name).write_bytes(b"\xff\xfe not text")
    with pytest.raises(SidecarError) as caught:
        Sidecars.from_dir(tmp_path)
    assert str(caught.value) == (
        f"sidecar {tmp_path / name} is not UTF-8 text (byte 0: invalid start byte)"
    )


def test_a_sidecar_that_does_not_fit_the_log_is_refused(tmp_path: Path) -> None:
    shutil.copy(PREFIX_LOG, tmp_path / "session.jsonl")
    (tmp_path / "system-prompt.expected.md").write_text("only one\n", encoding="utf-8")
    with pytest.raises(SidecarError, match=r"holds 1 header epoch\(s\) .* seq 15 opens epoch 2"):
        load_session(tmp_path / "session.jsonl", audit=True, fill="auto")
    schemas = json.loads((PREFIX_LOG.parent / "tool-schemas.expected.json").read_text("utf-8"))
    schemas["initial"].reverse()
    (tmp_path / "system-prompt.expected.md").unlink()
    (tmp_path / "tool-schemas.expected.json").write_text(json.dumps(schemas), encoding="utf-8")
    with pytest.raises(SidecarError, match=r"names the tools \['job_list', 'cordis_run'\]"):
        load_session(tmp_path / "session.jsonl", audit=True, fill="auto")
    with pytest.raises(SidecarError, match="map placeholders"):
        Sidecars(values=FrozenDict({"cwd": "/x"}))


def test_the_reference_pin_log_rebuilds_to_wire_bodies_with_its_sidecars() -> None:
    folder = REFERENCE_LOGS / "code-mode-turn"
    if not folder.is_dir():
        pytest.skip(f"reference logs not found at {REFERENCE_LOGS}")
    loaded = load_session(folder / "session.jsonl", audit=True, fill=Sidecars.from_dir(folder))
    schemas = json.loads((folder / "tool-schemas.expected.json").read_text(encoding="utf-8"))
    for rebuilt in reconstruct_requests(loaded.events):
        body = request_wire_body(rebuilt)
        assert body["messages"][0]["role"] == "system"
        assert "{{system}}" not in body["messages"][0]["content"]
        assert [t["function"] for t in body["tools"]] == schemas["initial"]


def test_provider_errors_pass_through_unchanged() -> None:
    options = GenerateOptions(
        provider="p",
        model="deepseek-chat",
        messages=(user_message("hi", id="u"),),
        reasoning_effort="extreme",
    )
    with pytest.raises(ProviderError):
        request_wire_body(options)
    with pytest.raises(ValueError, match="api must be"):
        request_wire_body(options, api="openai")  # type: ignore[arg-type]


async def test_replay_with_sidecars_checks_the_real_prompt() -> None:
    from dataclasses import replace

    from dsh_testkit._errors import ReplayMismatch
    from dsh_testkit.replay import ReplayProvider

    loaded = load_session(PREFIX_LOG, audit=True, fill="auto")
    live = [replace(r.request, session_id="live") for r in reconstruct_requests(loaded.events)]
    replay = ReplayProvider(PREFIX_LOG, sidecars="auto")
    for request in live:
        async for _ in replay.stream(request):
            pass
    replay.assert_consumed()
    strict = ReplayProvider(PREFIX_LOG, sidecars=Sidecars.from_dir(PREFIX_LOG.parent))
    with pytest.raises(ReplayMismatch) as caught:
        async for _ in strict.stream(replace(live[0], system="You are a job runner.")):
            pass
    assert "system" in caught.value.diff[0]
    # Without sidecars the placeholders stay opaque: any system prompt passes.
    opaque = ReplayProvider(PREFIX_LOG)
    async for _ in opaque.stream(replace(live[0], system="anything", tools=())):
        pass
