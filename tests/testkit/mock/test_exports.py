"""The public surface of ``dsh_testkit.mock`` is exactly its sorted ``__all__``."""

from __future__ import annotations

import inspect
import types

import dsh_testkit.mock as package


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
        if isinstance(value, type) or inspect.isfunction(value):
            assert value.__module__.startswith(package.__name__), name
