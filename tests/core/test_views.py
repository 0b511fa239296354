"""``MessageView``: an immutable prefix of an append-only list that behaves like a sequence."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_core import MessageView, user_message
from dsh_core._messages import Message


def msgs(n: int, prefix: str = "m") -> list[Message]:
    return [user_message(f"{prefix}{i}", id=f"{prefix}{i}") for i in range(n)]


def test_a_view_reads_only_its_prefix_even_after_the_list_grows() -> None:
    backing = msgs(3)
    view = MessageView(backing, 2)
    backing.append(user_message("later", id="later"))
    assert len(view) == 2
    assert [m.text for m in view] == ["m0", "m1"]
    assert view.backing is backing
    assert len(MessageView(backing)) == 4  # without n: the whole list as it is now


def test_indexing_positive_and_negative() -> None:
    backing = msgs(4)
    view = MessageView(backing, 3)
    assert view[0] is backing[0]
    assert view[2] is backing[2]
    assert view[-1] is backing[2]  # the view's last, not the backing list's
    assert view[-3] is backing[0]


@pytest.mark.parametrize(
    ("index", "message"),
    [
        (3, "message index 3 out of range (3 messages)"),
        (10, "message index 10 out of range (3 messages)"),
        (-4, "message index -4 out of range (3 messages)"),
        (-9, "message index -9 out of range (3 messages)"),
    ],
)
def test_an_index_outside_the_view_names_the_given_index(index: int, message: str) -> None:
    view = MessageView(msgs(5), 3)  # the backing list has items 3 and 4: still out of the view
    with pytest.raises(IndexError) as info:
        view[index]
    assert str(info.value) == message


def test_a_non_integer_index_is_a_type_error() -> None:
    view = MessageView(msgs(2))
    with pytest.raises(TypeError):
        view["0"]  # type: ignore[call-overload]


def test_slicing_returns_a_tuple_of_the_view_only() -> None:
    backing = msgs(5)
    view = MessageView(backing, 3)
    assert view[1:] == (backing[1], backing[2])
    assert isinstance(view[:], tuple) and len(view[:]) == 3
    assert view[::-1] == (backing[2], backing[1], backing[0])
    assert view[3:10] == ()


def test_iteration_and_the_sequence_mixins() -> None:
    backing = msgs(4)
    view = MessageView(backing, 3)
    assert list(view) == backing[:3]
    assert list(reversed(view)) == backing[2::-1]
    assert backing[1] in view and backing[3] not in view
    assert view.index(backing[2]) == 2
    assert view.count(backing[0]) == 1


def test_equality_with_sequences_of_equal_messages() -> None:
    backing = msgs(3)
    view = MessageView(backing, 2)
    copies = msgs(2)  # equal values, other objects
    assert view == copies
    assert view == tuple(copies)
    assert view == MessageView(copies)
    assert view != backing  # length differs
    assert view != msgs(2, prefix="x")  # same length, other messages
    assert MessageView([], 0) == []


def test_equality_with_non_sequences_and_strings_is_not_implemented() -> None:
    view = MessageView(msgs(1))
    assert view.__eq__(42) is NotImplemented
    assert view.__eq__("m0") is NotImplemented
    assert view.__eq__(b"m0") is NotImplemented
    assert view != 42
    assert view != "m0"
    assert MessageView([]) != ""  # even an empty view is not an empty string


def test_a_view_is_unhashable() -> None:
    with pytest.raises(TypeError, match="unhashable"):
        hash(MessageView(msgs(1)))


def test_repr_counts_messages_without_their_text() -> None:
    view = MessageView(msgs(3, prefix="secret"), 2)
    assert repr(view) == "MessageView(<2 messages>)"


def test_to_json_is_the_list_of_message_json() -> None:
    backing = msgs(3)
    assert MessageView(backing, 2).to_json() == [backing[0].to_json(), backing[1].to_json()]
    assert MessageView(backing, 0).to_json() == []


def test_extends_on_the_same_backing_compares_lengths_only() -> None:
    backing = msgs(3)
    longer, shorter = MessageView(backing, 3), MessageView(backing, 1)
    assert longer.extends(shorter)
    assert longer.extends(longer)
    assert not shorter.extends(longer)
    # O(1): the same backing list is trusted, its items are not compared (an item that would
    # compare unequal is never looked at).
    backing[0] = user_message("replaced", id="replaced")
    assert longer.extends(MessageView(backing, 2))


def test_extends_on_another_backing_compares_values() -> None:
    view = MessageView(msgs(3), 3)
    assert view.extends(msgs(2))  # equal values
    assert view.extends(())
    assert view.extends(MessageView(msgs(3)))
    assert not view.extends(msgs(4))  # longer than the view
    assert not view.extends(msgs(2, prefix="x"))
    assert not view.extends([*msgs(1), user_message("other", id="m1")])


@given(st.integers(0, 6), st.integers(0, 6), st.integers(0, 6))
def test_extends_is_the_prefix_relation(total: int, a: int, b: int) -> None:
    backing = msgs(total)
    a, b = min(a, total), min(b, total)
    x, y = MessageView(backing, a), MessageView(backing, b)
    copy_of_y: Sequence[Message] = list(backing[:b])
    assert x.extends(y) == (b <= a) == x.extends(copy_of_y)
    assert x.extends(y) == (list(x)[:b] == list(y))


def test_views_of_one_history_know_their_shared_prefix_without_comparing() -> None:
    history = [user_message(str(i), id=f"m{i}") for i in range(5)]
    short, long = MessageView(history, 2), MessageView(history, 4)
    assert short.shared_prefix(long) == long.shared_prefix(short) == 2
    assert long.backing is history
    # Another list (a rewrite) or a plain sequence: unknown without comparing messages.
    assert long.shared_prefix(MessageView(list(history), 4)) is None
    assert long.shared_prefix(tuple(history)) is None
    assert long.extends(short) and not short.extends(long)
