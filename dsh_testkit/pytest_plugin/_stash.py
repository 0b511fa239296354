"""Where the plugin keeps a run's and a test's objects (pytest stash keys), shared by the hooks
and the cache baseline, which reads the traffic a test's fixtures saw."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import pytest

if TYPE_CHECKING:
    from ..mock import MockServer
    from ._cassette import CassetteFixture
    from ._support import MockFixture

__all__ = ["CASSETTE_USE", "MOCK", "SERVER"]

SERVER: Final[pytest.StashKey[MockServer]] = pytest.StashKey()
"""The run's loopback mock server (``dsh_mock_server``), on the config's stash."""
CASSETTE_USE: Final[pytest.StashKey[CassetteFixture]] = pytest.StashKey()
"""A test's cassette use, on the item's stash."""
MOCK: Final[pytest.StashKey[MockFixture]] = pytest.StashKey()
"""A test's in-process mock (``dsh_mock``), on the item's stash."""
