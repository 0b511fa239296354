"""SseParser: WHATWG framing, split invariance, comments, truncation; SseEvent.encode."""

from __future__ import annotations

import contextlib
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_core.providers import SseTruncatedError
from dsh_core.providers._sse import SSE_DONE, SseEvent, SseParser, parse_events, split_events

from ._helpers import split_at


def parse(data: bytes, cuts: list[int] | None = None) -> tuple[list[SseEvent], list[str]]:
    comments: list[str] = []
    parser = SseParser(on_comment=comments.append)
    events: list[SseEvent] = []
    for piece in split_at(data, cuts or []):
        events.extend(parser.feed(piece))
    events.extend(parser.close())
    return events, comments


def test_data_events_and_done() -> None:
    events, _ = parse(b'data: {"a":1}\n\ndata: [DONE]\n\n')
    assert events == [SseEvent(data='{"a":1}'), SseEvent(data="[DONE]")]


def test_keep_alive_comments_go_to_the_callback_not_the_events() -> None:
    events, comments = parse(b": keep-alive\n\n: keep-alive\ndata: x\n\n:no-space\n")
    assert events == [SseEvent(data="x")]
    assert comments == ["keep-alive", "keep-alive", "no-space"]


def test_comments_without_a_callback_are_dropped() -> None:
    parser = SseParser()
    assert parser.feed(b": ping\ndata: y\n\n") == [SseEvent(data="y")]


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_every_line_ending(newline: bytes) -> None:
    body = newline.join([b"event: message_start", b"data: one", b"data: two", b"", b""])
    events, _ = parse(body)
    assert events == [SseEvent(event="message_start", data="one\ntwo")]


def test_multi_line_data_joins_with_newline_and_keeps_inner_spaces() -> None:
    events, _ = parse(b"data:  lead\ndata:\ndata:x\n\n")
    assert events == [SseEvent(data=" lead\n\nx")]


def test_field_without_colon_and_unknown_fields() -> None:
    events, _ = parse(b"data\nfoo: bar\n\ndata: z\n\n")
    assert events == [SseEvent(data=""), SseEvent(data="z")]


def test_event_without_data_is_not_dispatched_and_type_resets() -> None:
    events, _ = parse(b"event: ping\n\ndata: after\n\n")
    assert events == [SseEvent(data="after")]


def test_id_persists_and_retry_attaches_to_one_event() -> None:
    events, _ = parse(
        b"id: 7\nretry: 1500\ndata: a\n\ndata: b\n\nid: bad\0id\nretry: x1\ndata: c\n\n"
    )
    assert events == [
        SseEvent(data="a", id="7", retry=1500),
        SseEvent(data="b", id="7"),
        SseEvent(data="c", id="7"),
    ]


def test_leading_bom_is_dropped_once() -> None:
    events, _ = parse(b"\xef\xbb\xbfdata: a\n\n")
    assert events == [SseEvent(data="a")]
    events, _ = parse(b"data: \xef\xbb\xbfa\n\n")
    assert events == [SseEvent(data="\ufeffa")]


def test_utf8_split_inside_a_code_point() -> None:
    body = "data: 你好\n\n".encode()
    events, _ = parse(body, [7, 8])
    assert events == [SseEvent(data="你好")]


def test_crlf_split_between_cr_and_lf_is_one_line_end() -> None:
    body = b"data: a\r\n\r\ndata: b\r\n\r\n"
    events, _ = parse(body, [8, 10])
    assert events == [SseEvent(data="a"), SseEvent(data="b")]


def test_done_without_its_blank_line_is_truncation() -> None:
    parser = SseParser()
    assert parser.feed(b'data: {"a":1}\n\ndata: [DONE]\n') == [SseEvent(data='{"a":1}')]
    with pytest.raises(SseTruncatedError) as caught:
        parser.close()
    assert caught.value.pending == "data: [DONE]"
    assert "ended inside an event" in str(caught.value)


def test_partial_line_at_end_is_truncation() -> None:
    parser = SseParser()
    parser.feed(b'data: {"a"')
    with pytest.raises(SseTruncatedError, match="discarded"):
        parser.close()


def test_long_pending_text_is_shortened_in_the_message() -> None:
    parser = SseParser()
    parser.feed(b"data: " + b"x" * 200)
    with pytest.raises(SseTruncatedError) as caught:
        parser.close()
    assert len(caught.value.pending) == 206
    assert "..." in str(caught.value)


def test_clean_end_and_trailing_comment_are_not_truncation() -> None:
    parser = SseParser()
    parser.feed(b"data: a\n\n: keep-alive\n")
    assert parser.close() == []
    assert parser.close() == []  # closing twice is harmless


def test_feed_after_close_is_refused() -> None:
    parser = SseParser()
    parser.close()
    with pytest.raises(ValueError, match="after close"):
        parser.feed(b"data: a\n\n")


def test_last_event_id_property() -> None:
    parser = SseParser()
    parser.feed(b"id: 42\ndata: a\n\n")
    assert parser.last_event_id == "42"


# A stream of random well-formed and ill-formed lines, every line ending, comments, UTF-8.
_line = st.one_of(
    st.text(max_size=12).map(lambda t: "data: " + t.replace("\r", "").replace("\n", "")),
    st.sampled_from(
        [
            "",
            ": keep-alive",
            "event: ping",
            "id: 1",
            "retry: 30",
            "data",
            "data:[DONE]",
            "x: y",
            "data: 你好🙂",
        ]
    ),
)
_stream = st.tuples(
    st.lists(_line, max_size=25), st.sampled_from(["\n", "\r\n", "\r"]), st.booleans()
).map(lambda t: (t[1].join(t[0]) + (t[1] if t[2] else "")).encode())


def _outcome(data: bytes, cuts: list[int]) -> tuple[list[SseEvent], list[str], bool]:
    comments: list[str] = []
    parser = SseParser(on_comment=comments.append)
    events: list[SseEvent] = []
    for piece in split_at(data, cuts):
        events.extend(parser.feed(piece))
    try:
        parser.close()
        truncated = False
    except SseTruncatedError:
        truncated = True
    return events, comments, truncated


@given(_stream, st.lists(st.integers(min_value=0, max_value=400), max_size=30))
def test_result_does_not_depend_on_how_bytes_are_split(data: bytes, cuts: list[int]) -> None:
    assert _outcome(data, cuts) == _outcome(data, [])


@given(st.data())
def test_one_byte_reads_equal_one_read(data: st.DataObject) -> None:
    body = data.draw(_stream)
    assert _outcome(body, list(range(len(body)))) == _outcome(body, [])


_event = st.builds(
    SseEvent,
    event=st.sampled_from(["message", "message_start", "content_block_delta", "error"]),
    data=st.text().map(lambda t: t.replace("\r", "")),
    id=st.none() | st.text(alphabet="abc123", max_size=5),
    retry=st.none() | st.integers(min_value=0, max_value=10_000),
)


@given(st.lists(_event, max_size=8), st.lists(st.integers(0, 200), max_size=10))
def test_encode_then_parse_round_trips(events: list[SseEvent], cuts: list[int]) -> None:
    body = b"".join(e.encode() for e in events)
    parsed, _, truncated = _outcome(body, cuts)
    assert not truncated
    # ids persist across events on a stream, so compare with the id each event will carry.
    expected: list[SseEvent] = []
    last_id: str | None = None
    for e in events:
        last_id = e.id if e.id is not None else last_id
        expected.append(SseEvent(event=e.event, data=e.data, id=last_id, retry=e.retry))
    assert parsed == expected


def test_encode_refuses_carriage_return() -> None:
    with pytest.raises(ValueError, match="carriage return"):
        SseEvent(data="a\rb").encode()


def test_encode_exact_bytes() -> None:
    assert SseEvent(data="[DONE]").encode() == b"data: [DONE]\n\n"
    assert (
        SseEvent(event="ping", data='{"type":"ping"}').encode()
        == b'event: ping\ndata: {"type":"ping"}\n\n'
    )


def test_of_json_is_compact_utf8_and_keeps_key_order() -> None:
    event = SseEvent.of_json({"z": 1, "a": "é\nx"}, event="message_start")
    assert event.data == '{"z":1,"a":"é\\nx"}'
    assert event.encode() == 'event: message_start\ndata: {"z":1,"a":"é\\nx"}\n\n'.encode()
    assert SseEvent.of_json([1]).encode() == b"data: [1]\n\n"
    assert SseParser().feed(event.encode()) == [event]


def test_comment_is_skipped_by_the_parser_and_reported() -> None:
    seen: list[str] = []
    parser = SseParser(on_comment=seen.append)
    assert SseEvent.comment("keep-alive") == b": keep-alive\n\n"
    assert parser.feed(SseEvent.comment("keep-alive") + SseEvent.comment() + SSE_DONE.encode()) == [
        SseEvent(data="[DONE]")
    ]
    assert seen == ["keep-alive", ""]
    with pytest.raises(ValueError, match="one line"):
        SseEvent.comment("a\nb")


# ---------------------------------------------------------------- a whole body held as text

_SSE_TEXT = st.lists(
    st.sampled_from(["a", "\n", "\r", ":", " ", "data", "event"]), max_size=30
).map("".join)


def _parse_pieces(pieces: list[str]) -> list[SseEvent]:
    parser = SseParser()
    events: list[SseEvent] = []
    for piece in pieces:
        events.extend(parser.feed(piece.encode()))
    with contextlib.suppress(SseTruncatedError):
        events.extend(parser.close())
    return events


@given(_SSE_TEXT)
def test_split_events_loses_nothing_and_cuts_only_where_an_event_ends(text: str) -> None:
    pieces = split_events(text)
    assert "".join(pieces) == text
    assert all(pieces)
    # every cut is right after a blank line: the parser dispatches there, never mid-event
    for piece in pieces[:-1]:
        assert piece.endswith(("\n", "\r"))
        parser = SseParser()
        parser.feed(piece.encode())
        assert not parser._pending()  # the piece ended between events
    # a CRLF is never cut in two
    for before, after in itertools.pairwise(pieces):
        assert not (before.endswith("\r") and after.startswith("\n"))
    assert _parse_pieces(pieces) == _parse_pieces([text])


def test_split_events_keeps_each_event_as_sent() -> None:
    text = 'data: {"a":1}\r\n\r\n: keep-alive\n\nevent: ping\rdata: x\r\rdata: [DONE]\n\n'
    assert split_events(text) == [
        'data: {"a":1}\r\n\r\n',
        ": keep-alive\n\n",
        "event: ping\rdata: x\r\r",
        "data: [DONE]\n\n",
    ]
    # line ends mixed within one body (a proxy that rewrites some): LF then a CRLF blank line
    assert split_events("data: a\n\r\ndata: b\r\n\n") == ["data: a\n\r\n", "data: b\r\n\n"]
    assert split_events("data: cut") == ["data: cut"]
    assert split_events("") == []


def test_parse_events_reads_a_whole_body_and_says_when_it_was_cut() -> None:
    text = 'data: {"a":1}\r\n\r\n: keep-alive\n\nevent: ping\ndata: x\n\n'
    assert parse_events(text) == [SseEvent(data='{"a":1}'), SseEvent(event="ping", data="x")]
    with pytest.raises(SseTruncatedError):
        parse_events(text + "data: [DONE]")
    # a recording trimmed of its last blank line: the last event kept when asked
    for tail in ("data: [DONE]", "data: [DONE]\n", "data: [DONE]\r"):
        assert parse_events(text + tail, strict=False)[-1] == SseEvent(data="[DONE]")
    assert parse_events(text, strict=False) == parse_events(text)
