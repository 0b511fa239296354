"""Shared test configuration: the hypothesis profiles (helpers live in tests/_support.py)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

# "ci" is derandomized so a CI run is reproducible; "dev" explores more. CI=true selects "ci".
settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    max_examples=100,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, max_examples=200)
# "fast" is the edit-test loop's (make check): every property still runs, on fewer examples.
settings.register_profile(
    "fast",
    derandomize=True,
    deadline=None,
    max_examples=12,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))
