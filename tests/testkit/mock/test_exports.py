"""The public surface of ``dsh_testkit.mock`` is exactly its sorted ``__all__``."""

from __future__ import annotations

import inspect
import types

import dsh_testkit.mock as package
from dsh_core import providers


def test_all_is_sorted_unique_and_exact() -> None:
    exported = package.__all__
    assert len(exported) == len(set(exported))
    assert exported == sorted(exported, key=lambda n: (not n.isupper(), n))  # RUF022 order
    public = {
        name
        for name, value in vars(package).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert set(exported) == public, {
        "missing from __all__": sorted(public - set(exported)),
        "not defined": sorted(set(exported) - public),
    }
    for name in exported:
        value = getattr(package, name)
        if name in FROM_THE_MODEL_TABLE:
            assert value is getattr(providers, name), name  # the core's class, re-exported
        elif isinstance(value, type) or inspect.isfunction(value):
            assert value.__module__.startswith(package.__name__), name


FROM_THE_MODEL_TABLE = {"UnitVisibility"}
"""A model-table fact type (``dsh_core.providers``) the mock's simulator takes, re-exported."""


def test_tokenizers_module_surface_is_its_all() -> None:
    from dsh_testkit import tokenizers

    public = {
        name
        for name, value in vars(tokenizers).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and getattr(value, "__module__", tokenizers.__name__) == tokenizers.__name__
        and name not in {"annotations", "Callable", "Final", "Protocol", "runtime_checkable"}
    }
    assert sorted(tokenizers.__all__, key=lambda n: (not n.isupper(), n)) == tokenizers.__all__
    assert set(tokenizers.__all__) == public
