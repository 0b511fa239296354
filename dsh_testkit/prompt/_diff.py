"""Structured request diffs in this project's vocabulary, for wire bodies of any chat API.

A cassette mismatch and a prefix-stability failure both have to say *what* changed between two
chat requests, the way :func:`dsh_core.diff_requests` does for logged requests: which header
part (``model``, ``temperature``, ``system line 3``, tool ``'grep'`` added or changed)
or which message index and field. Message indexes are the wire body's own (``messages[2]`` is
the third entry of the body's ``messages`` list, system messages counted), so an index points at
what a user sees in a cassette's YAML or a captured body. Both sides are first brought to one comparable form,
:class:`ChatView`: a DeepSeek body through the provider's own ``parse_request`` when that codec
reads it, any other OpenAI- or Anthropic-shaped body directly from its JSON.
:func:`chat_view_of_options` brings a :class:`~dsh_core.GenerateOptions` to the same form.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from typing import Any

from dsh_core import GenerateOptions
from dsh_core._differences import (
    config_differences,
    count_difference,
    first_json_difference,
    system_difference,
    tools_differences,
)
from dsh_core.providers.deepseek import parse_request

from ._wire_view import WireView, common_prefix, tool_name, wire_view, wire_view_of_options

__all__ = [
    "ChatView",
    "chat_view",
    "chat_view_of_options",
    "common_message_prefix",
    "diff_chat",
]


ChatView = WireView
"""A request in comparable form: the one wire view (``_wire_view.py``)."""


def chat_view_of_options(options: GenerateOptions) -> WireView:
    """A :class:`~dsh_core.GenerateOptions` in comparable form (see
    :func:`~dsh_testkit.prompt._wire_view.wire_view_of_options`)."""
    return wire_view_of_options(options)


def chat_view(body: Any, *, use_provider_codec: bool = True) -> WireView | None:
    """A wire body (bytes, text or parsed JSON) as a :class:`ChatView`; ``None`` if not a chat.

    A DeepSeek Chat Completions body is first read back through the provider codec's
    ``parse_request`` (absent and ``null`` fields alike, messages in the codec's shape), so two
    bodies that mean the same request compare equal; a body the codec refuses (another API, a
    malformed request) is compared as the JSON it is.
    """
    parsed = body
    if isinstance(body, (bytes, str)):
        try:
            parsed = json.loads(body)
        except ValueError:
            return None
    if not isinstance(parsed, Mapping) or not isinstance(parsed.get("messages"), list):
        return None
    if use_provider_codec and "system" not in parsed:
        with contextlib.suppress(Exception):
            parsed = parse_request(parsed).to_json()
    return wire_view(parsed)


def _tool_pairs(tools: Any) -> list[tuple[str, Any]] | str | None:
    if isinstance(tools, str):
        return tools
    return [(tool_name(t), t) for t in tools or ()]


def diff_chat(
    expected: ChatView,
    actual: ChatView,
    *,
    names: tuple[str, str] = ("recorded", "request"),
    prefix: bool = False,
) -> tuple[str, ...]:
    """Where ``actual`` differs from ``expected``, header parts first; ``()`` if equal.

    ``names`` label the two sides in the text. With ``prefix=True`` only what a prefix cache
    sees is compared: ``model``, system, tools, and the expected messages, which the actual
    request may extend but not change.
    """
    out = config_differences(
        dict(expected.params),
        dict(actual.params),
        names,
        label=str,  # the body's own key: a path ignore_json_paths and the API docs both use
        keys=("model",) if prefix else None,
    )
    system = system_difference(
        expected.system_text if expected.system else None,
        actual.system_text if actual.system else None,
        names,
    )
    if system is not None:
        out.append(system)
    if (expected.tools or None) != (actual.tools or None):
        out.extend(tools_differences(_tool_pairs(expected.tools), _tool_pairs(actual.tools), names))
    out.extend(_messages_diff(expected, actual, names, prefix=prefix))
    return tuple(out)


def _messages_diff(
    expected: ChatView, actual: ChatView, names: tuple[str, str], *, prefix: bool
) -> list[str]:
    """The first message difference, indexed as in each wire body (system messages counted).

    When both bodies put the same number of system messages first (the usual case) one index
    names the message in both; otherwise the right side's own index follows in parentheses.
    """
    right = names[1]
    a_msgs, b_msgs = list(expected.messages), list(actual.messages)
    a_at, b_at = expected.message_offset, actual.message_offset

    def where(i: int) -> str:
        return f"messages[{i + a_at}]"

    def also(i: int) -> str:
        return "" if a_at == b_at else f" (in {right}: messages[{i + b_at}])"

    same = common_prefix(a_msgs, b_msgs)
    if same < min(len(a_msgs), len(b_msgs)):
        found = first_json_difference(where(same), a_msgs[same], b_msgs[same], names)
        return [(found or f"{where(same)} differs") + also(same)]
    if len(b_msgs) < len(a_msgs) or (len(b_msgs) > len(a_msgs) and not prefix):
        shorter = min(len(a_msgs), len(b_msgs))
        extra = len(b_msgs) > len(a_msgs)
        return [
            count_difference(
                "messages",
                len(a_msgs) + a_at,
                len(b_msgs) + b_at,
                names,
                at=f"messages[{shorter + (b_at if extra else a_at)}]",
                item=(b_msgs if extra else a_msgs)[shorter],
            )
        ]
    return []


def common_message_prefix(expected: ChatView, actual: ChatView) -> int:
    """How many leading messages two views share (a closeness measure)."""
    return common_prefix(expected.messages, actual.messages)
