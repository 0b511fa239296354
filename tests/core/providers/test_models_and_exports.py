"""The model table, the thinking rule and the package's public surface."""

from __future__ import annotations

import dataclasses
import types
from typing import Any

import pytest

import dsh_core.providers
from dsh_core.providers import MODELS, ModelInfo, resolve_model, thinking_enabled
from dsh_core.providers import anthropic as anthropic_module
from dsh_core.providers import deepseek as deepseek_module
from dsh_core.providers._models import Endpoint


def test_models_table() -> None:
    assert set(MODELS) == {
        "deepseek-flash",
        "deepseek-v4-flash",
        "deepseek-v4-flash-vision-exp",
        "deepseek-v4-pro",
        "deepseek-chat",
        "deepseek-reasoner",
    }
    for model_id, info in MODELS.items():
        assert isinstance(info, ModelInfo) and info.id == model_id
        assert info.alias_of is None or info.alias_of in MODELS
        assert info.default_output_tokens <= info.default_output_tokens_thinking
        assert (
            info.default_output_tokens_max_effort <= info.max_output_tokens <= info.context_window
        )
    assert MODELS["deepseek-v4-pro"].concurrency_limit == 500
    assert MODELS["deepseek-flash"].context_window == 1_048_576
    assert MODELS["deepseek-flash"].max_output_tokens == 393_216
    assert MODELS["deepseek-chat"].thinking_default is False
    assert MODELS["deepseek-chat"].retired_at == "2026-07-24T15:59:00Z"
    assert "image" in MODELS["deepseek-flash"].input_modalities
    with pytest.raises(TypeError):
        MODELS["x"] = MODELS["deepseek-flash"]  # type: ignore[index]


@pytest.mark.parametrize("package", [dsh_core.providers, deepseek_module, anthropic_module])
def test_all_is_sorted_and_exact(package: types.ModuleType) -> None:
    exported = package.__all__
    assert exported == sorted(exported, key=lambda n: (not n.isupper(), n)) or exported == sorted(
        exported
    )
    assert len(exported) == len(set(exported))
    if package is dsh_core.providers:
        public = {
            name
            for name, value in vars(package).items()
            if not name.startswith("_") and not isinstance(value, types.ModuleType)
        }
        assert set(exported) == public
    for name in exported:
        assert hasattr(package, name), name


# -- resolving a model id --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "endpoint", "expected"),
    [
        ("deepseek-flash", "chat", "deepseek-flash"),
        ("deepseek-chat", "anthropic", "deepseek-chat"),
        ("claude-opus-4-1", "anthropic", "deepseek-v4-pro"),
        ("claude-sonnet-4-6", "anthropic", "deepseek-flash"),
        ("claude-haiku-4-5", "anthropic", "deepseek-flash"),
        ("claude-sonnet-4-6", "chat", None),
        ("gpt-4o", "anthropic", None),
        ("gpt-4o", "chat", None),
    ],
)
def test_resolve_model_maps_claude_names_on_the_anthropic_endpoint_only(
    model: str, endpoint: Endpoint, expected: str | None
) -> None:
    info = resolve_model(model, endpoint=endpoint)
    assert (None if info is None else info.id) == expected


def test_aliases_report_the_v4_model_in_responses() -> None:
    assert MODELS["deepseek-chat"].response_model == "deepseek-v4-flash"
    assert MODELS["deepseek-reasoner"].response_model == "deepseek-v4-flash"
    assert MODELS["deepseek-flash"].response_model == "deepseek-flash"
    assert MODELS["deepseek-v4-pro"].response_model == "deepseek-v4-pro"


# -- the thinking rule -----------------------------------------------------------------------

_NO_REASONING = dataclasses.replace(MODELS["deepseek-flash"], reasoning=False)


@pytest.mark.parametrize(
    ("model", "thinking_type", "effort", "expected"),
    [
        # the model's default when the request does not say
        ("deepseek-flash", None, None, True),
        ("deepseek-v4-pro", None, None, True),
        ("deepseek-reasoner", None, None, True),
        ("deepseek-chat", None, None, False),
        (None, None, None, True),
        # an explicit thinking.type decides, whatever the default
        ("deepseek-chat", "enabled", None, True),
        ("deepseek-chat", "adaptive", None, True),
        ("deepseek-flash", "disabled", None, False),
        ("deepseek-flash", "disabled", "high", False),
        ("deepseek-chat", "enabled", "none", True),
        # effort none turns thinking off; another effort sets strength, not the switch
        ("deepseek-flash", None, "none", False),
        ("deepseek-flash", None, "max", True),
        ("deepseek-chat", None, "high", False),
        # values the chat codec refuses count as unset
        ("deepseek-chat", "auto", None, False),
        ("deepseek-flash", "auto", None, True),
    ],
)
def test_thinking_rule(
    model: str | None, thinking_type: str | None, effort: str | None, expected: bool
) -> None:
    info = None if model is None else MODELS[model]
    assert thinking_enabled(info, thinking_type=thinking_type, effort=effort) is expected


@pytest.mark.parametrize("thinking_type", [None, "enabled", "adaptive"])
def test_a_model_that_cannot_reason_never_thinks(thinking_type: str | None) -> None:
    assert thinking_enabled(_NO_REASONING, thinking_type=thinking_type) is False


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"model": "deepseek-v4-flash"}, True),
        ({"model": "deepseek-chat"}, False),
        ({"model": "deepseek-chat", "thinking": {"type": "enabled"}}, True),
        ({"model": "deepseek-v4-pro", "thinking": {"type": "disabled"}}, False),
        ({"model": "deepseek-flash", "reasoning_effort": "none"}, False),
        ({"model": "deepseek-flash", "reasoning_effort": "high"}, True),
        ({"model": "deepseek-reasoner", "reasoning_effort": "minimal"}, True),
        ({"model": "no-such-model"}, True),
    ],
)
def test_chat_request_thinking_on_follows_the_rule(body: dict[str, Any], expected: bool) -> None:
    request = deepseek_module.parse_request(
        {**body, "messages": [{"role": "user", "content": "x"}]}
    )
    assert request.thinking_on is expected


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"model": "deepseek-chat"}, False),
        # adaptive asks for thinking: on even where the model's default is off
        ({"model": "deepseek-chat", "thinking": {"type": "adaptive"}}, True),
        ({"model": "deepseek-flash", "thinking": {"type": "disabled"}}, False),
        ({"model": "deepseek-flash", "reasoning": {"effort": "none"}}, False),
        ({"model": "deepseek-flash", "output_config": {"effort": "low"}}, True),
        ({"model": "claude-sonnet-4-6"}, True),
        ({"model": "claude-opus-4-1", "thinking": {"type": "disabled"}}, False),
    ],
)
def test_anthropic_request_thinking_on_follows_the_rule(
    body: dict[str, Any], expected: bool
) -> None:
    request = anthropic_module.parse_request(
        {**body, "max_tokens": 64, "messages": [{"role": "user", "content": "x"}]}
    )
    assert request.thinking_on is expected
