"""Compare two runs: what a harness change did to the prompt cache and the bill.

A golden shows that a change altered the requests; the cache report explains one run; this
puts two runs side by side — before the change (BASE) and after it (NEW) — per scenario and in
total, with a verdict a build gates on::

    result = compare_runs("baseline/", "run/")
    print(result.verdict)          # identical | benign | regression | improvement
    result.check()                 # raises CacheRegression on a regression

The command is ``dsh-testkit compare BASE NEW``; the pytest plugin's ``--dsh-cache-baseline``
keeps each test's traffic and compares the next run's with it. Built on the cache doctor
(``dsh_testkit.doctor``): every request of both runs is diagnosed, then matched.
"""

from ._render import comparison_markdown, comparison_text
from ._result import CacheRegression, NothingCompared, RunComparison
from ._runs import compare_runs
from ._values import (
    CauseChange,
    RequestChange,
    RequestPair,
    Rounding,
    RunSummary,
    ScenarioComparison,
    Thresholds,
    UnmatchedScenario,
    Verdict,
)

__all__ = [
    "CacheRegression",
    "CauseChange",
    "NothingCompared",
    "RequestChange",
    "RequestPair",
    "Rounding",
    "RunComparison",
    "RunSummary",
    "ScenarioComparison",
    "Thresholds",
    "UnmatchedScenario",
    "Verdict",
    "compare_runs",
    "comparison_markdown",
    "comparison_text",
]
