"""The model table and the package's public surface."""

from __future__ import annotations

import types

import pytest

import dsh_core.providers
from dsh_core.providers import MODELS, ModelInfo
from dsh_core.providers import anthropic as anthropic_module
from dsh_core.providers import deepseek as deepseek_module


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
