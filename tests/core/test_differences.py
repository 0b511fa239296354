"""The one wording for "what differs": where two texts first differ, visibly, on both sides.

The contract every report relies on (the invariant, cassette mismatches, prefix checks, the
audit, strict replay): a text difference names its line and column and shows the differing
characters of both sides, never the same truncated prefix twice.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_core._differences import (
    TextDifference,
    config_differences,
    count_difference,
    first_json_difference,
    locate_text_difference,
    preview_value,
    system_difference,
    text_difference,
    tools_differences,
)

SIDES = ("expected", "actual")
LINE = ("Answer briefly and cite the file you read. " * 5)[:200]
STAMP = " 2026-12-02T17:00:01Z"


def test_a_timestamp_appended_to_a_long_line_is_located_and_visible() -> None:
    found = locate_text_difference(LINE, LINE + STAMP)
    assert found == TextDifference(
        offset=200,
        line=1,
        column=201,
        expected="…" + repr(LINE[-32:]) + " (the text ends here)",
        actual="…" + repr(LINE[-32:] + STAMP),
    )


def test_the_line_and_column_are_those_of_the_first_differing_character() -> None:
    a = "first line\nsecond line\nthird: alpha"
    b = "first line\nsecond line\nthird: alphX"
    found = locate_text_difference(a, b)
    assert found is not None
    assert (found.offset, found.line, found.column) == (len(a) - 1, 3, 12)
    assert (found.expected, found.actual) == ("'third: alpha'", "'third: alphX'")


def test_a_long_line_is_cut_on_both_sides_of_the_difference_only_within_the_line() -> None:
    a = "head\n" + "a" * 100 + "X" + "b" * 100 + "\ntail"
    b = "head\n" + "a" * 100 + "Y" + "b" * 100 + "\ntail"
    found = locate_text_difference(a, b)
    assert found is not None
    assert (found.line, found.column) == (2, 101)
    assert found.expected == "…'" + "a" * 32 + "X" + "b" * 31 + "'…"
    assert found.actual == "…'" + "a" * 32 + "Y" + "b" * 31 + "'…"


def test_a_line_break_on_one_side_is_shown_as_the_differing_character() -> None:
    found = locate_text_difference("ab\ncd", "a\ncd")
    assert found is not None
    assert (found.line, found.column, found.expected, found.actual) == (1, 2, "'ab'", "'a\\ncd'")


def test_a_line_added_after_the_end_shows_the_added_line_not_only_the_break() -> None:
    found = locate_text_difference("line one\nline two", "line one\nline two\nline three")
    assert found is not None
    assert (found.line, found.column) == (2, 9)
    assert found.expected == "'line two' (the text ends here)"
    assert found.actual == "'line two\\nline three'"
    longer = "a" * 100 + "\nthe next line"
    found = locate_text_difference("a" * 100, longer)
    assert found is not None
    assert found.actual == "…'" + "a" * 32 + "\\nthe next line'"


def test_equal_texts_have_no_difference() -> None:
    assert locate_text_difference("same", "same") is None
    assert text_difference("x", "same", "same", SIDES) is None


def test_a_shared_prefix_of_megabytes_is_located() -> None:
    shared = "x" * 3_000_000
    found = locate_text_difference(shared + "a" + shared, shared + "b" + shared)
    assert found is not None
    assert found.offset == 3_000_000
    assert found.expected.endswith("a" + "x" * 31 + "'…")


@given(st.text(max_size=300), st.text(min_size=1, max_size=40), st.text(max_size=40))
def test_both_sides_show_the_first_differing_character(
    prefix: str, tail_a: str, tail_b: str
) -> None:
    a, b = prefix + tail_a, prefix + tail_b
    found = locate_text_difference(a, b)
    if a == b:
        assert found is None
        return
    assert found is not None
    offset = found.offset
    assert a[:offset] == b[:offset]
    assert offset == min(len(a), len(b)) or a[offset] != b[offset]
    assert found.line == a.count("\n", 0, offset) + 1
    assert found.column == offset - (a.rfind("\n", 0, offset) + 1) + 1
    # Never the same excerpt on both sides: the differing characters are visible.
    assert found.expected != found.actual
    for text, shown in ((a, found.expected), (b, found.actual)):
        if offset < len(text):
            assert repr(text[offset])[1:-1] in shown
        else:
            assert shown.endswith("(the text ends here)")


def test_short_one_line_texts_are_shown_whole() -> None:
    assert text_difference("m", "hi", "HI", SIDES) == "m differs: expected: 'hi', actual: 'HI'"


def test_long_or_multi_line_texts_name_line_and_column() -> None:
    assert text_difference("m", LINE, LINE + STAMP, ("request 0", "request 1")) == (
        "m differs at line 1, column 201: "
        f"request 0: …{LINE[-32:]!r} (the text ends here), request 1: …{LINE[-32:] + STAMP!r}"
    )
    assert text_difference("m", "a\nb", "a\nc", SIDES) == (
        "m differs at line 2, column 1: expected: 'b', actual: 'c'"
    )


def test_a_system_prompt_is_compared_by_line_then_by_column() -> None:
    assert system_difference("a\nb", "a\nB", SIDES) == (
        "system line 2 differs: expected: 'b', actual: 'B'"
    )
    assert system_difference("intro\n" + LINE, "intro\n" + LINE + STAMP, SIDES) == (
        "system line 2 differs at column 201: "
        f"expected: …{LINE[-32:]!r} (the text ends here), actual: …{LINE[-32:] + STAMP!r}"
    )
    assert system_difference("a", "a\nb", SIDES) == (
        "system line 2 only in actual: 'b' (expected has 1 line, actual has 2)"
    )
    assert system_difference(None, "", SIDES) is None


def test_json_differences_name_the_first_path() -> None:
    assert first_json_difference("x", {"a": [1, {"b": "c"}]}, {"a": [1, {"b": "d"}]}, SIDES) == (
        "x.a[1].b differs: expected: 'c', actual: 'd'"
    )
    assert first_json_difference("x", {"a": 1}, {"a": 1, "b": 2}, SIDES) == (
        "x.b: only in actual (2)"
    )
    assert first_json_difference("x", {"a": 1, "b": 2}, {"b": 2, "a": 1}, SIDES) == (
        "x: same keys in another order (expected: ['a', 'b'], actual: ['b', 'a'])"
    )
    # A value that differs is named before the key order: two messages whose roles and texts
    # differ are not "the same keys in another order" (issue 33).
    assert first_json_difference(
        "messages[3]",
        {"role": "user", "content": "Run the retry tests."},
        {"content": "Confirmed.", "role": "assistant"},
        SIDES,
    ) == ("messages[3].role differs: expected: 'user', actual: 'assistant'")
    assert first_json_difference(
        "m", {"a": {"p": 1, "q": 2}, "b": 1}, {"b": 1, "a": {"q": 2, "p": 1}}, SIDES
    ) == ("m.a: same keys in another order (expected: ['p', 'q'], actual: ['q', 'p'])")
    assert first_json_difference("x", [1], [1, 2], SIDES) == "x: expected has 1 item, actual has 2"
    assert first_json_difference("x", 1, 1.0, SIDES) == "x differs: expected: 1, actual: 1.0"
    assert first_json_difference("x", {"a": [1]}, {"a": [1]}, SIDES) is None


def test_a_long_text_inside_json_is_located() -> None:
    found = first_json_difference(
        "messages[0]", {"content": LINE}, {"content": LINE + STAMP}, SIDES
    )
    assert found is not None
    assert found.startswith("messages[0].content differs at line 1, column 201: ")
    assert STAMP in found


def test_values_of_different_types_differ_from_their_first_character() -> None:
    found = first_json_difference("x", {"k": "v" * 100}, ["v" * 100], SIDES)
    assert found == f'x differs: expected: {{"k":"{"v" * 53}…, actual: ["{"v" * 57}…'


def test_preview_cuts_long_values() -> None:
    assert preview_value("x" * 100) == "'" + "x" * 58 + "…"
    assert preview_value([1, 2]) == "[1,2]"
    assert preview_value({"k": "v" * 100}, 10) == '{"k":"vvv…'


def test_config_differences_per_field() -> None:
    assert config_differences({"model": "a", "t": 1}, {"model": "b", "s": 2}, SIDES) == [
        "config.model differs: expected: 'a', actual: 'b'",
        "config.t: only in expected (1)",
        "config.s: only in actual (2)",
    ]
    assert (
        config_differences(
            {"model": "a", "t": 1}, {"model": "a"}, SIDES, keys=("model",), label=str
        )
        == []
    )
    assert config_differences({"t": 1}, {}, SIDES, keys=("model",)) == []  # on neither side


@pytest.mark.parametrize(
    ("a", "b", "out"),
    [
        ([("a", {})], [("a", {}), ("b", {})], ["tool 'b' only in actual"]),
        ([("a", {})], None, ["tool 'a' only in expected"]),
        ([("a", {"d": 1})], [("a", {"d": 2})], ["tool 'a'.d differs: expected: 1, actual: 2"]),
        (
            [("a", {}), ("b", {})],
            [("b", {}), ("a", {})],
            ["tools: order differs: expected: ['a', 'b'], actual: ['b', 'a']"],
        ),
        (
            "{{tools}}",
            None,
            ["tools differ: expected: the placeholder '{{tools}}', actual: no tools"],
        ),
        ("{{tools}}", "{{tools}}", []),
    ],
)
def test_tools_differ_by_name(a: object, b: object, out: list[str]) -> None:
    assert tools_differences(a, b, SIDES) == out  # type: ignore[arg-type]


def test_count_difference_names_the_first_item_only_one_side_has() -> None:
    assert count_difference("messages", 1, 2, SIDES, at="messages[1]", item="more") == (
        "messages: expected has 1, actual has 2 (first extra: messages[1] 'more')"
    )
    assert count_difference("messages", 2, 1, SIDES, at="messages[1]", item={"r": 1}) == (
        'messages: expected has 2, actual has 1 (first missing: messages[1] {"r":1})'
    )


@given(
    st.text(alphabet=st.sampled_from([*"ab'\"\\\n\x00é\u2028 "]), max_size=30), st.integers(0, 40)
)
def test_a_text_preview_is_its_repr_cut_short(text: str, limit: int) -> None:
    whole = repr(text)
    assert preview_value(text, limit) == (
        whole if len(whole) <= limit else whole[: limit - 1] + "…"
    )


def test_a_short_differing_line_is_shown_whole_beside_a_long_one() -> None:
    found = locate_text_difference("Where is it defined?", "Earlier messages were " + "x" * 80)
    assert found is not None and (found.line, found.column) == (1, 1)
    assert found.expected == "'Where is it defined?'"
    assert found.actual == "'Earlier messages were xxxxxxxxxx'…"
