"""Hypothesis strategies for :mod:`dsh_core`'s values and for the wire.

- The core's values: JSON, system prompts, tools, headers and header deltas (``_values``);
  messages, events and session logs (``_logs``). They generate the hard cases on purpose instead
  of hoping to hit them: header edits insert a tool mid-list, reorder tools, change a tool's schema *and* move
  it, duplicate system-prompt lines, use CRLF line ends and non-ASCII text, and flip the system
  prompt and the tool list between empty, absent and populated (:func:`system_prompts` yields
  ``None`` and ``""`` unless told ``empty=False``). Session logs mix surface appends with replaces
  (compaction-style ranges and single tool-result rewrites) and with log-only noise, and are valid
  seeds by construction.
- The wire (``_wire``): Chat Completions (OpenAI-format) :func:`chat_tools`,
  :func:`chat_messages` and whole :func:`chat_requests` bodies as plain JSON, and
  :func:`anthropic_requests` for the Anthropic-format endpoint, which the codecs parse and the
  mock DeepSeek accepts; :func:`generate_options`, what the agent loop hands a
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

For a client that needs a real socket, use the plugin's session-scoped ``dsh_mock_server``
fixture (hypothesis accepts fixtures that are not function-scoped) and reset the mock at the start
of each example, so one example's requests and cache never leak into the next (unscripted
requests get the mock's default reply, so mark the test lenient)::

    @pytest.mark.dsh_lenient
    @given(chat_requests(stream=False))
    def test_over_loopback(dsh_mock_server, body):
        dsh_mock_server.mock.reset()
        answer = httpx.post(dsh_mock_server.base_url + "/chat/completions", json=body,
                            headers={"authorization": "Bearer sk-test"})
        assert answer.status_code == 200
        assert len(dsh_mock_server.mock.requests) == 1

Only ``hypothesis`` and ``dsh_core`` are imported, so importing this package is cheap.
"""

from ._logs import (
    EventDraft,
    content_blocks,
    message_events,
    messages,
    noise_events,
    session_logs,
)
from ._values import (
    call_configs,
    edited_headers,
    epoch_headers,
    header_deltas,
    header_pairs,
    header_sequences,
    json_values,
    system_lines,
    system_prompts,
    tool_lists,
    tool_names,
    tool_schemas,
)
from ._wire import (
    anthropic_requests,
    chat_messages,
    chat_requests,
    chat_tool_names,
    chat_tools,
    generate_options,
)

__all__ = [
    "EventDraft",
    "anthropic_requests",
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
