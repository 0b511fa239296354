"""What both request serializers share: how the core's options map to the wire's thinking
switch and effort, and how an option the wire cannot carry is refused."""

from __future__ import annotations

from .._header import ToolSchema, ToolsPlaceholder
from .._messages import Message
from .._request import GenerateOptions
from .._stream import ProviderError
from ._failures import failure

__all__ = [
    "NO_OUTPUT",
    "REASONING_EFFORTS",
    "options_thinking",
    "sendable_prefix",
    "sendable_tools",
    "unsupported",
]

NO_OUTPUT = "(no output)"
"""What a tool result says when the tool's result has no text (both formats want a string)."""

REASONING_EFFORTS = ("off", "low", "high", "max")
"""Efforts a request may carry: ``off`` disables thinking; the others enable it and are sent as
``reasoning_effort`` (``output_config.effort`` in the Anthropic format)."""


def unsupported(code: str, message: str) -> ProviderError:
    """The error a serializer raises for options the wire cannot carry."""
    return ProviderError(failure(code, message))


def sendable_prefix(options: GenerateOptions) -> tuple[Message, ...]:
    """The request's message prefix (sent after the system prompt, before the history);
    refused (``INVALID_REQUEST``) while it holds a normalized log's placeholder."""
    for entry in options.message_prefix:
        if isinstance(entry, str):
            raise unsupported(
                "INVALID_REQUEST",
                f"the request's message prefix holds the placeholder {entry!r}; a provider "
                "needs the real messages",
            )
    return tuple(m for m in options.message_prefix if not isinstance(m, str))


def sendable_tools(options: GenerateOptions) -> tuple[ToolSchema, ...]:
    """The request's tool schemas; refused (``INVALID_REQUEST``) when a normalized log elided
    them (a :class:`ToolsPlaceholder`): a provider needs the schemas."""
    if isinstance(options.tools, ToolsPlaceholder):
        raise unsupported(
            "INVALID_REQUEST",
            f"the request's tools are {options.tools.describe()}; a provider needs the real schemas",
        )
    return options.tools or ()


def options_thinking(options: GenerateOptions) -> tuple[dict[str, str] | None, str | None]:
    """``(thinking, effort)`` to send for ``options``: ``None`` leaves a field out.

    A session-title request never thinks; ``off`` sends ``{"type": "disabled"}``; ``low`` /
    ``high`` / ``max`` send ``{"type": "enabled"}`` and the effort; no effort sends neither, and
    the model's default applies (``dsh_core.providers.thinking_enabled``). Raises
    ``ProviderError`` (``UNSUPPORTED_REASONING_EFFORT``) for any other effort.
    """
    if options.purpose == "session-title":
        return {"type": "disabled"}, None
    effort = options.reasoning_effort
    if effort is None:
        return None, None
    if effort == "off":
        return {"type": "disabled"}, None
    if effort in REASONING_EFFORTS:
        return {"type": "enabled"}, effort
    raise unsupported(
        "UNSUPPORTED_REASONING_EFFORT",
        f"reasoning effort {effort!r} is not one of {', '.join(REASONING_EFFORTS)}",
    )
