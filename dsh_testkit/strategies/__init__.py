"""Hypothesis strategies for :mod:`dsh_core`'s values and for the wire.

- The core's values (``_values``): JSON, system prompts, tools, headers and header deltas,
  messages, events and session logs. They generate the hard cases on purpose instead of hoping to
  hit them: header edits insert a tool mid-list, reorder tools, change a tool's schema *and* move
  it, duplicate system-prompt lines, use CRLF line ends and non-ASCII text, and flip the system
  prompt and the tool list between empty, absent and populated (:func:`system_prompts` yields
  ``None`` and ``""`` unless told ``empty=False``). Session logs mix surface appends with replaces
  (compaction-style ranges and single tool-result rewrites) and with log-only noise, and are valid
  seeds by construction.
- The wire (``_wire``): Chat Completions (OpenAI-format) :func:`chat_tools`,
  :func:`chat_messages` and whole :func:`chat_requests` bodies as plain JSON, which the codec
  parses and the mock DeepSeek accepts; :func:`generate_options`, what the agent loop hands a
  provider.

Use them in your own property tests::

    from hypothesis import given
    from dsh_core import apply_header_delta, diff_header, header_equals
    from dsh_testkit.strategies import header_pairs

    @given(header_pairs())
    def test_codec_round_trips(pair):
        before, after = pair
        delta = diff_header(before, after)
        assert delta is None or header_equals(apply_header_delta(before, delta), after)

**The mock inside** ``@given``: hypothesis runs every example inside one call of the test, so a
function-scoped fixture (``dsh_mock``) is created once and shared by all examples, and hypothesis
refuses it (``FailedHealthCheck``). Build the in-process mock inside the test body instead — it
is cheap, no socket or thread — and send each example through it::

    import httpx
    from hypothesis import given
    from dsh_testkit.mock import MockDeepSeek, mock_transport
    from dsh_testkit.strategies import chat_requests

    @given(chat_requests(stream=False))
    def test_every_generated_request_is_answered(body):
        mock = MockDeepSeek()
        with httpx.Client(transport=mock_transport(mock)) as client:
            answer = client.post(
                "https://api.deepseek.com/chat/completions",
                json=body,
                headers={"authorization": "Bearer sk-test"},
            )
        assert answer.status_code == 200

For a loopback server (a client that needs a real socket), start one ``MockServer`` per module
(a module-scoped fixture) and call its mock's ``reset()`` at the start of each example.

Only ``hypothesis`` and ``dsh_core`` are imported, so importing this package is cheap.
"""

from ._values import (
    EventDraft,
    call_configs,
    content_blocks,
    edited_headers,
    epoch_headers,
    header_deltas,
    header_pairs,
    header_sequences,
    json_values,
    message_events,
    messages,
    noise_events,
    session_logs,
    system_lines,
    system_prompts,
    tool_lists,
    tool_names,
    tool_schemas,
)
from ._wire import chat_messages, chat_requests, chat_tool_names, chat_tools, generate_options

__all__ = [
    "EventDraft",
    "call_configs",
    "chat_messages",
    "chat_requests",
    "chat_tool_names",
    "chat_tools",
    "content_blocks",
    "edited_headers",
    "epoch_headers",
    "generate_options",
    "header_deltas",
    "header_pairs",
    "header_sequences",
    "json_values",
    "message_events",
    "messages",
    "noise_events",
    "session_logs",
    "system_lines",
    "system_prompts",
    "tool_lists",
    "tool_names",
    "tool_schemas",
]
