"""The public surfaces of ``dsh_testkit.traces``, ``dsh_testkit.proxy``, ``dsh_testkit.doctor``
and ``dsh_testkit.reports`` are their sorted ``__all__``."""

from __future__ import annotations

import inspect
import types

import pytest

import dsh_testkit.doctor
import dsh_testkit.proxy
import dsh_testkit.reports
import dsh_testkit.traces


@pytest.mark.parametrize(
    "package", [dsh_testkit.traces, dsh_testkit.proxy, dsh_testkit.doctor, dsh_testkit.reports]
)
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


def test_the_doctor_has_its_own_package_and_reports_keeps_the_log_audit() -> None:
    for name in ("CAUSE_CODES", "diagnose", "assert_cache_friendly", "Finding"):
        assert name in dsh_testkit.doctor.__all__
        assert name not in dsh_testkit.reports.__all__
    assert {"audit_file", "audit_log", "render_audit"} <= set(dsh_testkit.reports.__all__)
