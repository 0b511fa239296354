"""The ``golden`` fixture: replay a scenario and compare its transcript and wire requests."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from syrupy.assertion import SnapshotAssertion

from dsh_core import Session
from dsh_testkit.golden import TranscriptExtension, WireRequestsExtension

from ._harness import Scenario, replay


@pytest.fixture
def golden(snapshot: SnapshotAssertion) -> Callable[[Scenario], list[Session]]:
    """``golden(SCENARIO)``: replay it, assert both goldens, return the replayed sessions."""

    def check(scenario: Scenario) -> list[Session]:
        sessions = replay(scenario)
        assert snapshot.use_extension(TranscriptExtension) == sessions
        assert snapshot.use_extension(WireRequestsExtension) == sessions
        return sessions

    return check
