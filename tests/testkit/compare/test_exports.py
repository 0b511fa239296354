"""``compare``'s public names are exported from ``dsh_testkit.compare`` in a sorted ``__all__``."""

from __future__ import annotations

import dsh_testkit.compare as compare

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
    exported = compare.__all__
    assert exported == sorted(exported, key=lambda n: (not n.isupper(), n))
    assert set(COMPARE) <= set(exported)


def test_a_cache_regression_is_a_testkit_failure_named_where_it_is_imported_from() -> None:
    from dsh_testkit._errors import TestkitError

    assert issubclass(compare.CacheRegression, TestkitError)
    assert issubclass(compare.CacheRegression, AssertionError)
    assert compare.CacheRegression.__module__ == "dsh_testkit.compare"
