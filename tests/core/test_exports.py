"""The public surface is exactly ``__all__`` (httpx's test_exported_members)."""

from __future__ import annotations

import inspect
import types

import pytest

import dsh_core


@pytest.mark.parametrize("package", [dsh_core])
def test_all_is_sorted_and_exact(package: types.ModuleType) -> None:
    exported = package.__all__
    assert len(exported) == len(set(exported))  # order is checked by ruff (RUF022)
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
        if isinstance(value, type) or inspect.isfunction(value):
            assert value.__module__.startswith(package.__name__), name
