"""Lossless JSON (docs/design.md §2.3): what is accepted, what is refused and where, immutability,
canonical text, and deep nesting without the recursion limit."""

from __future__ import annotations

import copy
import enum
import json
import math
import pickle
import sys
from typing import Any

import pytest
from hypothesis import given

from dsh_core import (
    FrozenDict,
    FrozenList,
    InvalidEventError,
    JsonValueError,
    Session,
    freeze_json,
    thaw_json,
)
from dsh_core._json import is_frozen_json
from dsh_core._json_text import _dumps_iterative, _loads_iterative, dumps_canonical, loads_json
from dsh_testkit.strategies import json_values

DEPTH = 20_000


def _deep_list(depth: int = DEPTH) -> list[Any]:
    root: list[Any] = []
    node = root
    for _ in range(depth):
        child: list[Any] = []
        node.append(child)
        node = child
    return root


def _deep_dict(depth: int = DEPTH) -> dict[str, Any]:
    root: dict[str, Any] = {}
    node = root
    for _ in range(depth):
        child: dict[str, Any] = {}
        node["k"] = child
        node = child
    node["leaf"] = 1
    return root


def _depth(value: Any) -> int:
    n = 0
    while isinstance(value, (list, dict)) and value:
        value = value[0] if isinstance(value, list) else next(iter(value.values()))
        n += 1
    return n


# ------------------------------------------------------------------------------------- accept


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        False,
        0,
        -7,
        2**53 - 1,
        2**80,  # Python reads big integers back exactly
        0.0,
        1.5,
        -2.25,
        1e308,
        "",
        "grüße 🙂",
        [],
        {},
        [1, "a", None, [True]],
        {"a": {"b": [1, 2, {"c": None}]}, "": 0, "__proto__": "kept as data"},
    ],
)
def test_accepts_lossless_json_and_copies_it(value: Any) -> None:
    frozen = freeze_json(value)
    assert frozen == value
    assert json.loads(dumps_canonical(frozen)) == value
    if isinstance(value, (list, dict)):
        assert frozen is not value
        assert type(frozen) in (FrozenDict, FrozenList)


def test_the_copy_is_detached_from_the_caller() -> None:
    source: dict[str, Any] = {"a": [1, {"b": 2}]}
    frozen = freeze_json(source)
    source["a"][1]["b"] = 3
    source["c"] = 4
    assert frozen == {"a": [1, {"b": 2}]}


def test_already_frozen_values_are_shared_not_copied() -> None:
    inner = freeze_json({"x": [1]})
    assert freeze_json(inner) is inner
    outer = freeze_json({"inner": inner})
    assert outer["inner"] is inner


class _Color(enum.Enum):
    RED = "red"


class _Level(enum.IntEnum):
    HIGH = 3


class _Mode(enum.StrEnum):
    FAST = "fast"


class _Ratio(float):
    pass


def test_scalar_subclasses_are_stored_as_the_plain_values_json_reads_back() -> None:
    frozen = freeze_json({"level": _Level.HIGH, "mode": _Mode.FAST, "ratio": _Ratio(0.5)})
    assert frozen == {"level": 3, "mode": "fast", "ratio": 0.5}
    assert [type(v) for v in frozen.values()] == [int, str, float]
    keyed = freeze_json({_Mode.FAST: 1})
    assert [type(k) for k in keyed] == [str]
    assert type(freeze_json(_Mode.FAST)) is str


# ------------------------------------------------------------------------------------- reject


def _cycle_list() -> list[Any]:
    items: list[Any] = [1]
    items.append({"back": items})
    return items


def _cycle_dict() -> dict[str, Any]:
    obj: dict[str, Any] = {}
    obj["self"] = obj
    return obj


class _Custom:
    pass


class _MyDict(dict):  # type: ignore[type-arg]
    pass


class _MyList(list):  # type: ignore[type-arg]
    pass


@pytest.mark.parametrize(
    ("value", "path", "fragment"),
    [
        (math.nan, "data", "not representable"),
        (math.inf, "data", "not representable"),
        (-math.inf, "data", "not representable"),
        (-0.0, "data", "-0.0"),
        ({"content": [0, 1, {"text": math.nan}]}, "data.content[2].text", "not representable"),
        ({"a": [-0.0]}, "data.a[0]", "-0.0"),
        ({1: "x"}, "data", "not a str"),
        ({"a": {(1, 2): "x"}}, "data.a", "not a str"),
        ((1, 2), "data", "tuple"),
        ({"a": (1,)}, "data.a", "tuple"),
        ({1, 2}, "data", "set"),
        ({"s": frozenset()}, "data.s", "frozenset"),
        (b"bytes", "data", "bytes"),
        ({"when": _Custom()}, "data.when", "_Custom"),
        ({"color": _Color.RED}, "data.color", "_Color"),
        ({"weird key": [1j]}, 'data["weird key"][0]', "complex"),
        (_cycle_list(), "data[1].back", "cycle"),
        (_cycle_dict(), "data.self", "cycle"),
        ({"d": _MyDict()}, "data.d", "dict subclass"),
        ([_MyList()], "data[0]", "list subclass"),
        ({"big": 10**5000}, "data.big", "digits"),
        ([json], "data[0]", "module"),
    ],
)
def test_rejects_with_the_path_of_the_offending_value(value: Any, path: str, fragment: str) -> None:
    with pytest.raises(JsonValueError) as info:
        freeze_json(value)
    assert info.value.path == path
    assert str(info.value).startswith(f"{path}: ")
    assert fragment in str(info.value)


def test_the_root_path_is_configurable() -> None:
    with pytest.raises(JsonValueError) as info:
        freeze_json({"x": [math.nan]}, path="message")
    assert info.value.path == "message.x[0]"


def test_a_shared_but_acyclic_value_is_not_a_cycle() -> None:
    shared = {"k": 1}
    assert freeze_json([shared, shared, {"again": shared}]) == [
        {"k": 1},
        {"k": 1},
        {"again": {"k": 1}},
    ]


def test_json_value_error_is_a_value_error() -> None:
    with pytest.raises(ValueError):
        freeze_json(math.nan)


# ------------------------------------------------------------------------------- immutability


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d.__setitem__("a", 2),
        lambda d: d.__delitem__("a"),
        lambda d: d.update(b=1),
        lambda d: d.setdefault("b", 1),
        lambda d: d.pop("a"),
        lambda d: d.popitem(),
        lambda d: d.clear(),
        lambda d: d.__ior__({"b": 1}),
    ],
)
def test_frozen_dict_refuses_every_mutation(mutate: Any) -> None:
    frozen = freeze_json({"a": 1})
    with pytest.raises(TypeError, match="immutable"):
        mutate(frozen)
    assert frozen == {"a": 1}


@pytest.mark.parametrize(
    "mutate",
    [
        lambda v: v.__setitem__(0, 2),
        lambda v: v.__setitem__(slice(0, 1), [2]),
        lambda v: v.__delitem__(0),
        lambda v: v.append(1),
        lambda v: v.extend([1]),
        lambda v: v.insert(0, 1),
        lambda v: v.pop(),
        lambda v: v.remove(1),
        lambda v: v.clear(),
        lambda v: v.sort(),
        lambda v: v.reverse(),
        lambda v: v.__iadd__([1]),
        lambda v: v.__imul__(2),
    ],
)
def test_frozen_list_refuses_every_mutation(mutate: Any) -> None:
    frozen = freeze_json([1, 2])
    with pytest.raises(TypeError, match="immutable"):
        mutate(frozen)
    assert frozen == [1, 2]


def test_nested_containers_are_frozen_too() -> None:
    frozen = freeze_json({"a": [{"b": [1]}]})
    with pytest.raises(TypeError):
        frozen["a"][0]["b"].append(2)
    with pytest.raises(TypeError):
        frozen["a"][0]["c"] = 1


def test_reinitialising_a_frozen_container_changes_nothing() -> None:
    frozen_dict = freeze_json({"a": 1})
    frozen_dict.__init__({"b": 2})
    frozen_list = freeze_json([1])
    frozen_list.__init__([2, 3])
    assert frozen_dict == {"a": 1}
    assert frozen_list == [1]


def test_constructing_frozen_containers_validates_and_deep_freezes() -> None:
    built = FrozenDict({"a": [1, {"b": 2}]}, c=3)
    assert built == {"a": [1, {"b": 2}], "c": 3}
    assert type(built["a"]) is FrozenList
    assert type(built["a"][1]) is FrozenDict
    assert FrozenList(x for x in (1, 2)) == [1, 2]
    assert FrozenDict() == {}
    with pytest.raises(JsonValueError, match=r"FrozenDict\.a"):
        FrozenDict({"a": math.nan})
    with pytest.raises(JsonValueError, match=r"FrozenList\[0\]"):
        FrozenList([(1,)])


def test_derived_copies_are_plain_and_mutable() -> None:
    frozen = freeze_json({"a": [1]})
    assert type(frozen.copy()) is dict
    assert type(frozen["a"] + [2]) is list
    assert type(frozen["a"][:]) is list
    assert copy.copy(frozen) is frozen
    assert copy.deepcopy(frozen) is frozen


def test_pickle_round_trips_to_frozen_values() -> None:
    frozen = freeze_json({"a": [1, {"b": None}]})
    again = pickle.loads(pickle.dumps(frozen))
    assert again == frozen
    assert type(again) is FrozenDict
    assert type(again["a"][1]) is FrozenDict


def test_hash_agrees_with_equality() -> None:
    # Equal values must hash equal: key order, int/float and bool/int equalities included.
    pairs = [
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}),
        ({"a": 1}, {"a": 1.0}),
        ([1, True], [1.0, 1]),
        ({"x": {"p": 1, "q": 2}}, {"x": {"q": 2, "p": 1}}),
    ]
    for left, right in pairs:
        a, b = freeze_json(left), freeze_json(right)
        assert a == b
        assert hash(a) == hash(b)
    assert len({freeze_json({"a": 1}), freeze_json({"a": 1.0}), freeze_json({"a": 2})}) == 2


@given(json_values(), json_values())
def test_hash_is_consistent_with_equality_for_any_values(left: Any, right: Any) -> None:
    a, b = freeze_json(left), freeze_json(right)
    if a == b and isinstance(a, (dict, list)):
        assert hash(a) == hash(b)


def test_is_frozen_json() -> None:
    assert is_frozen_json(None)
    assert is_frozen_json(freeze_json({"a": [1]}))
    assert not is_frozen_json({"a": 1})
    assert not is_frozen_json([1])


def test_thaw_json_gives_a_plain_mutable_deep_copy() -> None:
    frozen = freeze_json({"a": [1, {"b": [2, 3]}], "c": "x"})
    thawed = thaw_json(frozen)
    assert thawed == frozen
    assert type(thawed) is dict
    assert type(thawed["a"]) is list
    assert type(thawed["a"][1]) is dict
    assert list(thawed) == ["a", "c"]
    thawed["a"][1]["b"].append(4)
    assert frozen["a"][1]["b"] == [2, 3]
    assert thaw_json(5) == 5


# ------------------------------------------------------------------------------ canonical text


def test_dumps_canonical_is_compact_utf8_and_keeps_key_order() -> None:
    value = freeze_json({"b": 1, "a": ["é", None, 1.5, True]})
    assert dumps_canonical(value) == '{"b":1,"a":["é",null,1.5,true]}'
    assert dumps_canonical(value, sort_keys=True) == '{"a":["é",null,1.5,true],"b":1}'


def test_dumps_canonical_refuses_non_finite_numbers() -> None:
    with pytest.raises(ValueError):
        dumps_canonical([math.nan])


def test_loads_json_parses_and_refuses_non_json_constants() -> None:
    assert loads_json('{"a": [1, 2.5, "x", null, true]}') == {"a": [1, 2.5, "x", None, True]}
    for text in ("NaN", "[Infinity]", '{"a": -Infinity}'):
        with pytest.raises(ValueError, match="not a JSON value"):
            loads_json(text)
    with pytest.raises(ValueError):
        loads_json("{bad")


@given(json_values())
def test_freeze_dumps_loads_round_trip(value: Any) -> None:
    frozen = freeze_json(value)
    text = dumps_canonical(frozen)
    assert loads_json(text) == value
    assert dumps_canonical(freeze_json(loads_json(text))) == text
    assert _dumps_iterative(frozen, False) == text
    assert _loads_iterative(text) == value


@given(json_values())
def test_iterative_twins_match_the_c_codec_with_sorted_keys(value: Any) -> None:
    assert _dumps_iterative(value, True) == dumps_canonical(value, sort_keys=True)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "[1,]",
        "[1 2]",
        '{"a" 1}',
        '{"a":1,}',
        '{"a":1 "b":2}',
        "{1:2}",
        "[1] x",
        "nul",
        "-",
        "NaN",
    ],
)
def test_the_iterative_decoder_rejects_what_json_rejects(text: str) -> None:
    with pytest.raises(json.JSONDecodeError):
        loads_json(text)
    with pytest.raises(json.JSONDecodeError):
        _loads_iterative(text)


def test_the_iterative_encoder_refuses_what_json_refuses() -> None:
    with pytest.raises(ValueError):
        _dumps_iterative([math.inf], False)
    with pytest.raises(TypeError, match="not JSON serializable"):
        _dumps_iterative([object()], False)
    assert _dumps_iterative((1, " \u2028"), False) == json.dumps(
        [1, " \u2028"], ensure_ascii=False, separators=(",", ":")
    )


# ----------------------------------------------------------------------------- deep nesting


@pytest.mark.slow
def test_deep_nesting_freezes_dumps_and_loads_past_the_recursion_limit() -> None:
    assert sys.getrecursionlimit() < DEPTH
    for deep in (_deep_list(), _deep_dict()):
        frozen = freeze_json(deep)
        text = dumps_canonical(frozen)
        assert text == _dumps_iterative(frozen, False)
        assert len(text) > 2 * DEPTH
        again = loads_json(text)
        assert _depth(again) >= DEPTH
        assert dumps_canonical(freeze_json(again)) == text
        assert thaw_json(frozen) is not frozen
        assert _depth(thaw_json(frozen)) >= DEPTH
        assert dumps_canonical(frozen, sort_keys=True) == text


def test_deep_nesting_rejection_names_the_deep_path() -> None:
    deep = _deep_dict(3_000)
    node = deep
    while node.get("k"):
        node = node["k"]
    node["bad"] = math.nan
    with pytest.raises(JsonValueError) as info:
        freeze_json(deep)
    assert info.value.path == "data" + ".k" * 3_000 + ".bad"


def test_a_session_appends_and_derives_deeply_nested_data() -> None:
    session = Session.create("deep")
    message = {
        "id": "m1",
        "role": "user",
        "content": [{"type": "image", "attachment": _deep_dict()}],
        "source": {"kind": "user"},
    }
    event = session.append("user/message", message, surface_op="append")
    assert _depth(event.data["content"][0]["attachment"]) >= DEPTH
    (derived,) = session.derive_messages()
    assert derived.id == "m1"
    assert len(derived.canonical_json()) > DEPTH
    reopened = Session.create("again", [e.to_json() for e in session.events])
    assert reopened.derive_messages() == [derived]


def test_a_session_refuses_non_json_data_with_the_path() -> None:
    session = Session.create("s")
    with pytest.raises(InvalidEventError, match=r"data\.content\[2\]\.text") as info:
        session.append("todo/write", {"content": [0, 1, {"text": math.nan}]})
    assert "non-JSON-serializable" in str(info.value)
    assert isinstance(info.value.__cause__, JsonValueError)
    assert len(session.events) == 0


def test_frozen_lists_copy_to_themselves() -> None:
    frozen = freeze_json([1, [2]])
    assert copy.copy(frozen) is frozen
    assert copy.deepcopy(frozen) is frozen


def test_a_huge_top_level_integer_is_refused() -> None:
    with pytest.raises(JsonValueError, match=r"^data: an integer of more than 4300 digits"):
        freeze_json(-(10**5000))


class _BigInt(int):
    pass


def test_int_subclasses_are_checked_for_size_too() -> None:
    with pytest.raises(JsonValueError, match="digits"):
        freeze_json([_BigInt(10**5000)])
    assert type(freeze_json(_BigInt(10**400))) is int


def test_big_integers_are_fine_when_python_has_no_digit_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sys, "get_int_max_str_digits", lambda: 0)
    assert freeze_json([10**5000]) == [10**5000]


def test_the_iterative_decoder_reports_a_missing_colon_after_a_later_key() -> None:
    with pytest.raises(json.JSONDecodeError, match="Expecting ':' delimiter"):
        _loads_iterative('{"a": 1, "b" 2}')
    with pytest.raises(json.JSONDecodeError, match="Expecting property name"):
        _loads_iterative('{"a": 1, 2: 3}')


@pytest.mark.slow
def test_deep_values_loaded_apart_compare_and_print_without_recursion() -> None:
    """Two independently built 20,000-deep values: ==, != and repr work (no shared objects)."""
    nested: list[object] = []
    cursor = nested
    for _ in range(20_000):
        child: list[object] = []
        cursor.append(child)
        cursor = child
    first = freeze_json(nested)
    second = freeze_json(loads_json(dumps_canonical(first)))
    assert first is not second
    assert (first == second) is True
    assert (first != second) is False
    other = freeze_json(loads_json(dumps_canonical(first).replace("[]]", "[1]]", 1)))
    assert (first != other) is True
    assert (first == other) is False
    deep_dict = freeze_json({"a": loads_json(dumps_canonical(first))})
    assert deep_dict == freeze_json({"a": loads_json(dumps_canonical(first))})
    assert "[[[[" in repr(first)[:20]  # printable, whichever path printed it


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        ({"x": [1, {"y": 2}]}, {"x": [1, {"y": 2.0}]}, True),
        ({"x": 1}, {"y": 1}, False),
        ([1, 2], [1, 2, 3], False),
        ({"x": [1]}, {"x": {"0": 1}}, False),
        ([1, "a"], [1, "b"], False),
    ],
)
def test_the_iterative_equality_agrees_with_python_equality(a: Any, b: Any, equal: bool) -> None:
    from dsh_core._json import _deep_equal

    assert _deep_equal(a, b) is equal
    assert (a == b) is equal
    shared = [a]
    assert _deep_equal(shared, shared)  # identical objects are equal without a walk


def test_the_iterative_repr_names_the_type_and_the_json() -> None:
    from dsh_core._json import _deep_repr

    assert _deep_repr(freeze_json({"a": [1]})) == 'FrozenDict({"a":[1]})'
