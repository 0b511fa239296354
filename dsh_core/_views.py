"""Immutable O(1) views of append-only lists: :class:`MessageView` (and the session's ``EventLog``).

The session log and the derived-message cache only ever grow (a surface rewrite starts a new
message list), so a view of a list's first ``n`` items never changes. Requests carry such a view
instead of copying history, which keeps the loop's per-step cost flat as the log grows.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar, Generic, TypeVar, overload

from ._messages import Message

__all__ = ["MessageView", "PrefixView"]

T = TypeVar("T")


class PrefixView(Sequence[T], Generic[T]):
    """The first ``len`` items of an append-only list; immutable, compares like a sequence."""

    __slots__ = ("_items", "_n")
    _noun: ClassVar[str] = "item"

    def __init__(self, items: list[T] | tuple[T, ...], n: int | None = None) -> None:
        self._items = items
        self._n = len(items) if n is None else n

    def __len__(self) -> int:
        return self._n

    @property
    def backing(self) -> list[T] | tuple[T, ...]:
        """The shared append-only list this view reads (its identity says "same history")."""
        return self._items

    def shared_prefix(self, other: Sequence[T]) -> int | None:
        """How many leading items this view shares with ``other``, when known in O(1).

        Two views of the same append-only list hold the same items up to the shorter one's
        length (the list only grows; a rewrite starts a new list). ``None`` when that cannot be
        told without comparing items: ``other`` reads another list or is a plain sequence.
        """
        if isinstance(other, PrefixView) and other._items is self._items:
            return min(self._n, other._n)
        return None

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[T, ...]: ...
    def __getitem__(self, index: int | slice) -> T | tuple[T, ...]:
        if isinstance(index, slice):
            return tuple(self._items[: self._n][index])
        given = operator.index(index)
        position = given + self._n if given < 0 else given
        if not 0 <= position < self._n:
            # The caller's index, not the shifted one: ``view[-5]`` of 3 says -5.
            raise IndexError(f"{self._noun} index {given} out of range ({self._n} {self._noun}s)")
        return self._items[position]

    def __iter__(self) -> Iterator[T]:
        items = self._items
        for i in range(self._n):
            yield items[i]

    def __eq__(self, other: object) -> bool:
        """Equal to any sequence (list, tuple, another view) of equal items, in order."""
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        if len(other) != self._n:
            return False
        return all(a is b or a == b for a, b in zip(self, other, strict=True))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(<{self._n} {self._noun}s>)"


class MessageView(PrefixView[Message]):
    """A view of derived messages: what a request carries."""

    __slots__ = ()
    _noun = "message"

    def extends(self, other: Sequence[Message]) -> bool:
        """Whether ``other`` is a prefix of this view: O(1) when both read the same list."""
        if self.shared_prefix(other) is not None:
            return len(other) <= self._n
        if len(other) > self._n:
            return False
        return all(a is b or a == b for a, b in zip(other, self, strict=False))

    def to_json(self) -> list[dict[str, Any]]:
        return [m.to_json() for m in self]
