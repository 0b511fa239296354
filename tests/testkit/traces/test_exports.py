"""The public surfaces of ``dsh_testkit.traces`` and ``dsh_testkit.proxy`` are their sorted ``__all__``."""

from __future__ import annotations

import inspect
import types

import pytest

import dsh_testkit.proxy
import dsh_testkit.traces


@pytest.mark.parametrize("package", [dsh_testkit.traces, dsh_testkit.proxy])
def test_all_is_sorted_unique_and_exact(package: types.ModuleType) -> None:
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


def test_the_doctor_is_exported_from_reports() -> None:
    from dsh_testkit import reports

    for name in ("CAUSE_CODES", "diagnose", "run_trace_cache_report", "Finding"):
        assert name in reports.__all__
