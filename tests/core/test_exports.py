"""Names of ``dsh_core`` that users were promised (the surface as a whole: tests/test_public_surface.py)."""

from __future__ import annotations

import dsh_core


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
