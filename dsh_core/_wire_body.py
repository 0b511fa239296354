"""A rebuilt request as the exact wire body this project's providers would send.

The log-to-wire step in one public call: :func:`request_wire_body` takes a
:class:`ReconstructedRequest` (or any :class:`GenerateOptions`) and returns the JSON body the
DeepSeek provider (Chat Completions) or the Anthropic-format provider (Messages API) serializes
for it, through the providers' own codecs, so the body is byte for byte what they send
(``dumps_canonical(body)``). A request that still holds a normalized log's placeholder is
refused with :class:`UnfilledPlaceholderError` naming the placeholder and its field; fill them
first (``load_session(path, fill=Sidecars.from_dir(dir))``).
"""

from __future__ import annotations

from typing import Any, Literal, TypeAlias

from ._errors import UnfilledPlaceholderError
from ._header import ToolsPlaceholder, is_placeholder
from ._reconstruct import ReconstructedRequest
from ._request import GenerateOptions

__all__ = ["WireApi", "check_sendable", "request_wire_body"]

WireApi: TypeAlias = Literal["deepseek", "anthropic"]
"""Which provider's wire format: ``deepseek`` (Chat Completions) or ``anthropic`` (Messages)."""

_HOW: str = "fill it from the log's sidecars: load_session(path, fill=Sidecars.from_dir(dir))"


def check_sendable(request: GenerateOptions) -> None:
    """Raise :class:`UnfilledPlaceholderError` if any part of ``request`` is a placeholder.

    Checked: the system prompt (exactly a ``{{name}}`` token), the tools (a token or a
    tool-name list), each message-prefix entry.
    """
    if request.system is not None and is_placeholder(request.system):
        raise UnfilledPlaceholderError(
            f"the request's system prompt is the placeholder {request.system!r}, not a prompt: "
            f"{_HOW}",
            placeholder=request.system,
            field="system",
        )
    if isinstance(request.tools, ToolsPlaceholder):
        token = request.tools.token or repr(list(request.tools.names or ()))
        raise UnfilledPlaceholderError(
            f"the request's tools are {request.tools.describe()}; the wire needs the schemas: "
            f"{_HOW}",
            placeholder=token,
            field="tools",
        )
    for i, entry in enumerate(request.message_prefix):
        if isinstance(entry, str):
            raise UnfilledPlaceholderError(
                f"the request's message prefix entry {i} is the placeholder {entry!r}: {_HOW}",
                placeholder=entry,
                field=f"messagePrefix[{i}]",
            )


def request_wire_body(
    request: ReconstructedRequest | GenerateOptions,
    *,
    api: WireApi = "deepseek",
    stream: bool = True,
) -> dict[str, Any]:
    """The JSON body this project's ``api`` provider sends for ``request``.

    ``stream`` as the provider sends it (the loop streams). Raises
    :class:`UnfilledPlaceholderError` for a placeholder, and the provider's own
    :class:`ProviderError` for a request its wire cannot carry (an unsupported reasoning
    effort, …).
    """
    options = request.request if isinstance(request, ReconstructedRequest) else request
    check_sendable(options)
    if api == "deepseek":
        from .providers.deepseek import serialize_request
    elif api == "anthropic":
        from .providers.anthropic import serialize_request
    else:
        raise ValueError(f"api must be 'deepseek' or 'anthropic', got {api!r}")
    return serialize_request(options, stream=stream)
