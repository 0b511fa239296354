"""Lossless JSON: validation, deep immutability and canonical text.

Everything the log stores passes through :func:`freeze_json` once: it checks that the value is
lossless JSON (what is written reads back equal), copies it, and returns a deeply immutable copy
built from :class:`FrozenDict` and :class:`FrozenList`. Those are ``dict`` / ``list`` subclasses
whose mutators raise ``TypeError``, so the standard ``json`` encoder writes them natively and
fast, and readers index them like plain JSON. Already-frozen values are trusted and shared, so
re-freezing logged data costs nothing.

All walks are iterative with memory linear in the value's size: a value nested 20,000 levels
deep validates, freezes, dumps and loads without touching the recursion limit (the C encoder and
decoder are tried first; a ``RecursionError`` falls back to an iterative twin). Nesting is capped
at :data:`MAX_JSON_DEPTH` levels, so a hostile document is refused after reading at most that
many brackets instead of exhausting memory.

Strings are stored exactly: a lone surrogate code point (``"\\ud83d"`` alone) is kept and written
as its ``\\u`` escape, which reads back as the same code point. A high surrogate immediately
followed by a low surrogate, held as two separate code points, has no JSON spelling of its own
(``"\\ud83d\\ude00"`` reads back as the one character U+1F600), so :func:`freeze_json` refuses it
rather than store a string that would read back different.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterable, Iterator
from typing import Any, Final, NoReturn, Self, TypeAlias

from ._errors import JsonValueError
from ._json_text import MAX_JSON_DEPTH, dumps_canonical

__all__ = [
    "FrozenDict",
    "FrozenList",
    "JsonValue",
    "freeze_json",
    "is_frozen_json",
    "json_kind",
    "thaw_json",
]

JsonValue: TypeAlias = "bool | int | float | str | list[JsonValue] | dict[str, JsonValue] | None"


_SURROGATE_PAIR: Final = re.compile("[\ud800-\udbff][\udc00-\udfff]")


def json_kind(value: object) -> str:
    """What a value is, in JSON's words, for an error message (``an object``, ``an array``,
    ``a string``, ``a number``, ``a boolean``, ``null``): a frozen log value is not named by its
    Python class."""
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, (list, tuple)):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return type(value).__name__


def _immutable(self: object, *args: object, **kwargs: object) -> NoReturn:
    raise TypeError(f"{type(self).__name__} is immutable: logged data cannot be changed")


def _item_hash(value: object) -> int:
    # A shallow hash consistent with ``==``: equal containers have equal lengths, and equal
    # scalars hash alike across int/float/bool (hash(1) == hash(1.0) == hash(True)).
    if type(value) is FrozenDict:
        return hash(("{}", len(value)))
    if type(value) is FrozenList:
        return hash(("[]", len(value)))
    return hash(value)


def _deep_equal(a: object, b: object) -> bool:
    """``a == b`` for JSON values of any depth (the iterative twin of ``dict``/``list`` equality)."""
    stack: list[tuple[object, object]] = [(a, b)]
    while stack:
        x, y = stack.pop()
        if x is y:
            continue
        if isinstance(x, dict) and isinstance(y, dict):
            if x.keys() != y.keys():
                return False
            stack.extend((x[k], y[k]) for k in x)
        elif isinstance(x, list) and isinstance(y, list):
            if len(x) != len(y):
                return False
            stack.extend(zip(x, y, strict=True))
        elif isinstance(x, (dict, list)) or isinstance(y, (dict, list)) or x != y:
            return False
    return True


def _deep_repr(value: object) -> str:
    return f"{type(value).__name__}({dumps_canonical(value)})"


class _FrozenJson:
    """What both frozen containers share: depth-safe equality and repr, copies are the same object.

    ``==`` and ``repr`` use the C implementations, which recurse; a value deeper than they go
    falls back to iterative twins, so 20,000-deep values compare and print.
    """

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        container: Any = dict if isinstance(self, dict) else list
        try:
            return container.__eq__(self, other)  # type: ignore[no-any-return]
        except RecursionError:  # deeper than the C comparison goes
            return isinstance(other, container) and _deep_equal(self, other)

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    def __repr__(self) -> str:
        container: Any = dict if isinstance(self, dict) else list
        try:
            return container.__repr__(self)  # type: ignore[no-any-return]
        except RecursionError:
            return _deep_repr(self)

    def __copy__(self) -> Self:
        return self

    def __deepcopy__(self, memo: object) -> Self:
        return self


class FrozenDict(_FrozenJson, dict[str, Any]):
    """A JSON object that cannot be mutated (every mutator raises ``TypeError``).

    Constructing one validates and deep-freezes its contents like :func:`freeze_json` (a
    :class:`JsonValueError` names the offending path), so a ``FrozenDict`` is always lossless,
    immutable JSON all the way down.
    """

    __slots__ = ("_depth",)
    _depth: int  # how deep it nests (1 + the deepest child's), set once when built
    __setitem__ = _immutable
    __delitem__ = _immutable
    __ior__ = _immutable
    clear = _immutable
    pop = _immutable
    popitem = _immutable
    setdefault = _immutable
    update = _immutable

    def __new__(cls, *args: Any, **kwargs: Any) -> FrozenDict:
        frozen: FrozenDict = freeze_json(dict(*args, **kwargs), path="FrozenDict")
        return frozen

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """Contents are set by ``__new__``; calling ``__init__`` again changes nothing."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset((key, _item_hash(value)) for key, value in self.items()))

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (dict(self),))


class FrozenList(_FrozenJson, list[Any]):
    """A JSON array that cannot be mutated (every mutator raises ``TypeError``).

    Constructing one validates and deep-freezes its items like :func:`freeze_json`.
    """

    __slots__ = ("_depth",)
    _depth: int  # how deep it nests (1 + the deepest child's), set once when built
    __setitem__ = _immutable
    __delitem__ = _immutable
    __iadd__ = _immutable
    __imul__ = _immutable
    append = _immutable
    extend = _immutable
    insert = _immutable
    pop = _immutable
    remove = _immutable
    clear = _immutable
    sort = _immutable
    reverse = _immutable

    def __new__(cls, iterable: Iterable[Any] = (), /) -> FrozenList:
        frozen: FrozenList = freeze_json(list(iterable), path="FrozenList")
        return frozen

    def __init__(self, iterable: Iterable[Any] = (), /) -> None:
        """Items are set by ``__new__``; calling ``__init__`` again changes nothing."""

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(_item_hash(value) for value in self))

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenList, (list(self),))


def _new_frozen_dict(pairs: Iterable[tuple[str, Any]], depth: int) -> FrozenDict:
    # Bypasses the validating constructor: the caller has validated and frozen every value.
    # ``depth`` (1 + the deepest child's) lets a frozen value be nested in a new one without a
    # walk, and still be held to MAX_JSON_DEPTH.
    frozen = dict.__new__(FrozenDict)
    dict.__init__(frozen, pairs)
    frozen._depth = depth
    return frozen


def _new_frozen_list(items: Iterable[Any], depth: int) -> FrozenList:
    frozen = list.__new__(FrozenList)
    list.__init__(frozen, items)
    frozen._depth = depth
    return frozen


def _frozen_depth(value: FrozenDict | FrozenList) -> int:
    return value._depth


def is_frozen_json(value: object) -> bool:
    """True for a scalar or a container produced by :func:`freeze_json`."""
    return value is None or isinstance(value, (bool, int, float, str, FrozenDict, FrozenList))


def _describe(value: object) -> str:
    return type(value).__name__


_BIG_INT_BITS = 13_000
"""Below this many bits an int always has fewer digits than Python's str-conversion limit."""


def _check_float(value: float, path: str) -> None:
    if math.isnan(value) or math.isinf(value):
        raise JsonValueError(f"{value!r} is not representable in JSON", path=path)
    if value == 0.0 and math.copysign(1.0, value) < 0:
        raise JsonValueError("-0.0 does not survive a JSON round trip", path=path)


def _check_big_int(value: int, path: str) -> None:
    limit = sys.get_int_max_str_digits()
    if limit and abs(value) >= 10**limit:
        raise JsonValueError(
            f"an integer of more than {limit} digits cannot be written as JSON text", path=path
        )


def _coerce_scalar(value: object, path: str) -> object:
    """A JSON scalar of an exact built-in type; subclasses (``IntEnum``, ``StrEnum``, numpy's
    ``float64``) become the plain value their JSON text reads back as. Anything else raises."""
    if isinstance(value, str):
        plain = str.__str__(value)
        _check_str(plain, path)
        return plain
    if isinstance(value, int):  # bool cannot be subclassed, so this is a true int subclass
        number = int.__index__(value)
        if number.bit_length() > _BIG_INT_BITS:
            _check_big_int(number, path)
        return number
    if isinstance(value, float):
        real = float.__float__(value)
        _check_float(real, path)
        return real
    raise JsonValueError(f"{_describe(value)} is not a JSON value", path=path)


def _path_step(key: str | int) -> str:
    if isinstance(key, int):
        return f"[{key}]"
    if key.isidentifier():
        return f".{key}"
    return f"[{json.dumps(key, ensure_ascii=False)}]"


def _check_str(text: str, path: str) -> None:
    """Refuse a surrogate pair held as two code points: JSON reads its escapes back as one."""
    if not text.isascii():
        pair = _SURROGATE_PAIR.search(text)
        if pair is not None:
            high, low = (ord(c) for c in pair.group())
            joined = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00)
            raise JsonValueError(
                f"the string holds the surrogates U+{high:04X} U+{low:04X} as two code points "
                f"(at index {pair.start()}); JSON text reads them back as the one character "
                f"U+{joined:X}, so the value would not survive a round trip. Join them first "
                "(s.encode('utf-16', 'surrogatepass').decode('utf-16'))",
                path=path,
            )


def _too_deep(path: str, depth: int) -> JsonValueError:
    return JsonValueError(
        f"nested {depth} or more levels deep; JSON values may nest at most {MAX_JSON_DEPTH} "
        "levels (dsh_core.MAX_JSON_DEPTH)",
        path=path,
    )


def _abbreviated(steps: list[str], head: str) -> str:
    # A depth error's path has tens of thousands of steps: show both ends.
    if len(steps) <= 24:
        return head + "".join(steps)
    return f"{head}{''.join(steps[:8])}…({len(steps) - 16} more)…{''.join(steps[-8:])}"


def freeze_json(value: object, *, path: str = "data") -> Any:
    """Validate ``value`` as lossless JSON and return a deeply immutable copy.

    Accepted: ``None``, ``bool``, ``int``, finite ``float`` other than ``-0.0``, ``str`` (lone
    surrogates included, but not a surrogate pair held as two code points), ``list`` and
    ``dict`` with ``str`` keys, nested at most :data:`MAX_JSON_DEPTH` levels (and already-frozen
    containers, shared as they are). Subclasses of ``str``/``int``/``float`` are stored as the
    plain value. Anything else (NaN, infinities, ``-0.0``, non-str keys, tuples, sets, cycles,
    other objects, dict/list subclasses, deeper nesting) raises :class:`JsonValueError` naming
    the path, e.g. ``data.content[2].text``.

    Time and memory are linear in the size of the value, whatever its depth.
    """
    kind = type(value)
    if value is None or kind is bool or kind is FrozenDict or kind is FrozenList:
        return value
    if kind is str:
        _check_str(value, path)  # type: ignore[arg-type]
        return value
    if kind is int:
        if value.bit_length() > _BIG_INT_BITS:  # type: ignore[attr-defined]
            _check_big_int(value, path)  # type: ignore[arg-type]
        return value
    if kind is float:
        _check_float(value, path)  # type: ignore[arg-type]
        return value
    if not isinstance(value, (dict, list)):
        return _coerce_scalar(value, path)

    # Iterative post-order build. Each frame: [source, items-iterator, built children, deepest
    # child depth]. A frame holds only its own key; a path is spelled out only for an error, so
    # memory stays linear in depth.
    active: set[int] = set()
    root_out: list[Any] = []
    stack: list[tuple[object, Iterator[tuple[Any, object]], list[Any], list[int]]] = []

    def steps() -> list[str]:
        # The key each open container is building sits last in its ``built``.
        return [_path_step(frame[2][-1][0]) for frame in stack]

    def where() -> str:
        return path + "".join(steps())

    def enter(container: dict[Any, Any] | list[Any]) -> None:
        if len(stack) >= MAX_JSON_DEPTH:
            raise _too_deep(_abbreviated(steps(), path), len(stack) + 1)
        ident = id(container)
        if ident in active:
            raise JsonValueError("cycle: the value contains itself", path=where())
        if type(container) is not dict and type(container) is not list:
            if isinstance(container, dict):
                raise JsonValueError(
                    f"{_describe(container)} is a dict subclass, not a plain JSON object",
                    path=where(),
                )
            raise JsonValueError(
                f"{_describe(container)} is a list subclass, not a plain JSON array",
                path=where(),
            )
        items: Iterator[tuple[Any, object]]
        if type(container) is dict:
            plain_keys = True
            for k in container:
                if type(k) is not str:
                    if not isinstance(k, str):
                        raise JsonValueError(
                            f"object key {k!r} is a {_describe(k)}, not a str", path=where()
                        )
                    plain_keys = False
                elif not k.isascii():
                    _check_str(k, where())
            if plain_keys:
                items = iter(container.items())
            else:  # str-subclass keys (a StrEnum) become the plain strings JSON reads back
                pairs = [(str.__str__(k), v) for k, v in container.items()]
                for k, _ in pairs:
                    _check_str(k, where())
                items = iter(pairs)
        else:
            items = enumerate(container)
        active.add(ident)
        stack.append((container, items, [], [0]))

    enter(value)
    while stack:
        container, items, built, deepest = stack[-1]
        descended = False
        for key, child in items:
            kind = type(child)
            # The child is recorded before it is checked, so an error's path names its key.
            built.append((key, child))
            if child is None or kind is bool:
                pass
            elif kind is str:
                if not child.isascii():  # type: ignore[attr-defined]
                    _check_str(child, where())  # type: ignore[arg-type]
            elif kind is FrozenDict or kind is FrozenList:
                depth = _frozen_depth(child)  # type: ignore[arg-type]
                if len(stack) + depth > MAX_JSON_DEPTH:
                    raise _too_deep(_abbreviated(steps(), path), len(stack) + depth)
                deepest[0] = max(deepest[0], depth)
            elif kind is int:
                if child.bit_length() > _BIG_INT_BITS:  # type: ignore[attr-defined]
                    _check_big_int(child, where())  # type: ignore[arg-type]
            elif kind is float:
                _check_float(child, where())  # type: ignore[arg-type]
            elif kind is dict or kind is list or isinstance(child, (dict, list)):
                # A placeholder, replaced when the child finishes.
                enter(child)  # type: ignore[arg-type]
                descended = True
                break
            else:
                built[-1] = (key, _coerce_scalar(child, where()))
        if descended:
            continue
        stack.pop()
        active.discard(id(container))
        frozen: FrozenDict | FrozenList
        if type(container) is dict:
            frozen = _new_frozen_dict(built, deepest[0] + 1)
        else:
            frozen = _new_frozen_list((v for _, v in built), deepest[0] + 1)
        if stack:
            parent_built, parent_deepest = stack[-1][2], stack[-1][3]
            key, _ = parent_built[-1]
            parent_built[-1] = (key, frozen)
            parent_deepest[0] = max(parent_deepest[0], deepest[0] + 1)
        else:
            root_out.append(frozen)
    return root_out[0]


def thaw_json(value: Any) -> Any:
    """A plain, mutable deep copy of a (frozen) JSON value."""
    if not isinstance(value, (dict, list)):
        return value
    root: Any = {} if isinstance(value, dict) else []
    stack: list[tuple[Any, Any]] = [(value, root)]
    while stack:
        src, dst = stack.pop()
        pairs = src.items() if isinstance(src, dict) else enumerate(src)
        for key, child in pairs:
            if isinstance(child, (dict, list)):
                copy: Any = {} if isinstance(child, dict) else []
                stack.append((child, copy))
            else:
                copy = child
            if isinstance(dst, dict):
                dst[key] = copy
            else:
                dst.append(copy)
    return root
