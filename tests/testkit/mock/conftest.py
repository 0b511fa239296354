"""Fixtures for the mock DeepSeek's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from dsh_testkit.mock import MockDeepSeek, MockServer


@pytest.fixture
def mock() -> MockDeepSeek:
    return MockDeepSeek()


@pytest.fixture
def server(mock: MockDeepSeek) -> Iterator[MockServer]:
    with MockServer(mock) as running:
        yield running
