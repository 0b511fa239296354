"""``compare``'s public names are exported from ``dsh_testkit.doctor``, defined in the doctor."""

from __future__ import annotations

import inspect

import dsh_testkit.doctor as doctor

COMPARE = (
    "COMPARE_FORMAT_VERSION",
    "CacheRegression",
    "CauseChange",
    "RequestChange",
    "RequestPair",
    "RunComparison",
    "RunSummary",
    "ScenarioComparison",
    "Thresholds",
    "UnmatchedScenario",
    "Verdict",
    "compare_runs",
    "comparison_markdown",
    "comparison_text",
)


def test_the_compare_names_are_exported_in_a_sorted_all() -> None:
    exported = doctor.__all__
    assert exported == sorted(exported, key=lambda n: (not n.isupper(), n))
    for name in COMPARE:
        assert name in exported
        value = getattr(doctor, name)
        if isinstance(value, type) or inspect.isfunction(value):
            # CacheRegression lives in the doctor's error module, with the rest of its tree, and
            # a failing test names it where it is imported from
            assert value.__module__.startswith("dsh_testkit.doctor._compare") or (
                value.__module__ == "dsh_testkit.doctor" and name == "CacheRegression"
            ), name


def test_a_cache_regression_is_a_testkit_failure() -> None:
    from dsh_testkit._errors import TestkitError

    assert issubclass(doctor.CacheRegression, TestkitError)
    assert issubclass(doctor.CacheRegression, AssertionError)
