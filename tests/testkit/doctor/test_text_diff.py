"""The first difference of two texts (what a changed system prompt's evidence shows) is found by
halving and comparing slices; it is the one the definition finds a character at a time."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dsh_testkit.doctor._text import _EXCERPT, TextDiff, text_diff


def diff_by_definition(a: str, b: str, excerpt: int = _EXCERPT) -> TextDiff | None:
    """The common prefix and then the common suffix (not overlapping it), a character at a
    time, with ``excerpt`` characters around the difference."""
    if a == b:
        return None
    limit = min(len(a), len(b))
    start = 0
    while start < limit and a[start] == b[start]:
        start += 1
    end = 0
    while end < limit - start and a[len(a) - 1 - end] == b[len(b) - 1 - end]:
        end += 1
    lo = max(0, start - excerpt)
    return TextDiff(
        before=a[lo : min(len(a), len(a) - end + excerpt)],
        after=b[lo : min(len(b), len(b) - end + excerpt)],
        start=start - lo,
        before_end=len(a) - end - lo,
        after_end=len(b) - end - lo,
    )


_TEXT = st.text(alphabet="ab\n0", max_size=60)


@given(_TEXT, _TEXT, _TEXT, _TEXT, _TEXT)
def test_the_difference_is_the_definitions(
    head: str, left: str, right: str, tail: str, other: str
) -> None:
    for a, b in ((head + left + tail, head + right + tail), (head + left, other), (left, left)):
        assert text_diff(a, b) == diff_by_definition(a, b)


def test_a_long_prompt_with_a_timestamp_changed() -> None:
    rules = "".join(f"Rule {i}: answer precisely and cite the file you read.\n" for i in range(40))
    a = f"You review the repository.\n{rules}Current time: 2026-12-02T17:00:00Z\nBe brief."
    b = a.replace("17:00:00", "17:01:00")
    found = text_diff(a, b)
    assert found == diff_by_definition(a, b)
    assert found is not None
    assert found.before[found.start : found.before_end] == "0"
    assert found.after[found.start : found.after_end] == "1"
