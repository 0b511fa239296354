"""The public surface is exactly ``__all__`` (httpx's test_exported_members)."""

from __future__ import annotations

import inspect
import types

import pytest

import dsh_core


@pytest.mark.parametrize("package", [dsh_core])
def test_all_is_sorted_and_exact(package: types.ModuleType) -> None:
    exported = package.__all__
    assert len(exported) == len(set(exported))  # order is checked by ruff (RUF022)
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


def test_the_names_the_issues_promise_exist() -> None:
    """Renaming one of these in both places at once would still break users: pin them."""
    for name in (
        "Session",
        "Agent",
        "AgentOptions",
        "fork",
        "plan_header_event",
        "fold_request_header",
        "diff_header",
        "apply_header_delta",
        "canonical_header",
        "header_equals",
        "reconstruct_request",
        "reconstruct_requests",
        "derive_event_message",
        "SystemDelta",
        "ToolsDelta",
        "HeaderDelta",
        "LlmCallConfig",
        "ToolSchema",
        "EpochHeader",
        "Event",
        "Message",
        "DeepSeekProvider",
        "AnthropicProvider",
        "InvariantViolation",
        "CorruptLogError",
    ):
        assert name in dsh_core.__all__, name
    for method in ("create", "append", "derive_messages", "request_header", "events", "fork"):
        assert hasattr(dsh_core.Session, method), method
    for method in ("run", "inject", "cancel"):
        assert callable(getattr(dsh_core.Agent, method)), method
