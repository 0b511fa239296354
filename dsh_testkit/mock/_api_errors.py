"""The API's error answers: status, message, type and code, rendered per endpoint.

DeepSeek's Chat Completions endpoint answers ``{"error": {"message", "type", "param", "code"}}``
(docs/wire.md §1.9); its Anthropic-compatible endpoint answers Anthropic's shape
``{"type": "error", "error": {"type", "message"}, "request_id"}`` (docs/wire.md §4.4). Messages are the
observed ones where docs/wire.md or public issues quote them; the others are marked as ours.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "ApiError",
    "anthropic_error_type",
    "default_error",
]

_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    413: "request_too_large",
    422: "invalid_request_error",
    429: "rate_limit_error",
    500: "api_error",
    503: "overloaded_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def anthropic_error_type(status: int) -> str:
    """Anthropic's ``error.type`` for an HTTP status (``api_error`` when it has none)."""
    return _ANTHROPIC_TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")


@dataclass(frozen=True, slots=True, kw_only=True)
class ApiError:
    """One error answer of the API, independent of the endpoint that renders it."""

    status: int
    """The HTTP status."""
    message: str
    """``error.message``. Never contains the caller's API key."""
    type: str = "invalid_request_error"
    """DeepSeek's ``error.type`` (the Anthropic endpoint maps the status instead)."""
    code: str | None = "invalid_request_error"
    """DeepSeek's ``error.code``; DeepSeek repeats ``invalid_request_error`` here on most errors."""
    param: str | None = None
    """DeepSeek's ``error.param``; ``null`` on every observed body."""
    detail: str | None = None
    """What the mock knows beyond the API's words (which message broke a rule): kept in the
    request log and shown by the pytest plugin, never in the body, which stays the API's."""

    def deepseek_body(self) -> dict[str, Any]:
        """The Chat Completions error body."""
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }

    def anthropic_body(self, *, request_id: str) -> dict[str, Any]:
        """The Anthropic-format error body."""
        return {
            "type": "error",
            "error": {"type": anthropic_error_type(self.status), "message": self.message},
            "request_id": request_id,
        }

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status, "message": self.message, "type": self.type}
        if self.code is not None:
            out["code"] = self.code
        if self.param is not None:
            out["param"] = self.param
        if self.detail is not None:
            out["detail"] = self.detail
        return out


_DEFAULTS: dict[int, tuple[str, str, str | None]] = {
    400: ("Invalid Format", "invalid_request_error", "invalid_request_error"),
    401: (
        "Authentication Fails, Your api key is invalid",
        "authentication_error",
        "invalid_request_error",
    ),
    402: ("Insufficient Balance", "unknown_error", "invalid_request_error"),
    403: ("Permission Denied", "permission_error", "invalid_request_error"),
    404: ("Not Found", "invalid_request_error", "invalid_request_error"),
    422: ("Invalid Parameters", "invalid_request_error", "invalid_request_error"),
    429: ("Rate Limit Reached", "rate_limit_error", "rate_limit_reached"),
    500: ("Server Error", "server_error", "server_error"),
    503: ("Server Overloaded", "server_error", "server_overloaded"),
}


def default_error(status: int) -> ApiError:
    """The error the API gives for ``status`` when nothing more specific is known.

    Messages follow DeepSeek's error-code table (docs/wire.md §1.9); the 401 and 402 texts are the
    observed ones (the 401 without the masked key suffix, which the mock never echoes).
    """
    message, kind, code = _DEFAULTS.get(
        status,
        (
            f"HTTP {status}",
            "invalid_request_error" if status < 500 else "server_error",
            "invalid_request_error" if status < 500 else "server_error",
        ),
    )
    return ApiError(status=status, message=message, type=kind, code=code)
