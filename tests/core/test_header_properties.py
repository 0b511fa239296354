"""Laws of the header codec over deliberately hard generated headers (see
``dsh_testkit.strategies``): round trips, no fallback for any expressible change, fold
composition, canonical idempotence, and delta size proportional to the change."""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

import pytest
from hypothesis import Phase, assume, given, settings
from hypothesis import strategies as st

from dsh_core import (
    EpochHeader,
    Event,
    HeaderDelta,
    LlmCallConfig,
    Session,
    SystemDelta,
    ToolSchema,
    apply_header_delta,
    canonical_header,
    diff_header,
    fold_request_header,
    header_equals,
    plan_header_event,
)
from dsh_core._json_text import dumps_canonical, loads_json
from dsh_testkit.strategies import (
    epoch_headers,
    header_deltas,
    header_pairs,
    header_sequences,
    system_lines,
    tool_names,
)


def same(a: EpochHeader | None, b: EpochHeader) -> bool:
    """Equal as the model sees them (canonical, order-sensitive) and as Python values."""
    return a is not None and header_equals(a, b) and a == canonical_header(b)


def as_event(seq: int, plan: tuple[str, dict[str, Any]]) -> Event:
    kind, data = plan
    # Through JSON text, as a reader of a stored log sees it.
    return Event(type=kind, seq=seq, time=0, data=loads_json(dumps_canonical(data)))


def log_of(headers: list[EpochHeader]) -> list[Event]:
    """The header events a writer owes for successive requests: one snapshot, then deltas."""
    events = [as_event(0, plan_header_event(None, headers[0], first_of_instance=True))]  # type: ignore[arg-type]
    for previous, current in itertools.pairwise(headers):
        plan = plan_header_event(previous, current, first_of_instance=False)
        if plan is not None:
            events.append(as_event(len(events), plan))
    return events


# ------------------------------------------------------------------------------ (a) round trip


@given(header_pairs())
def test_apply_of_diff_reproduces_the_target(pair: tuple[EpochHeader, EpochHeader]) -> None:
    before, after = pair
    delta = diff_header(before, after)
    if delta is None:
        assert header_equals(before, after)
    else:
        assert not header_equals(before, after)
        assert same(apply_header_delta(before, delta), after)


@given(epoch_headers())
def test_diff_of_a_header_with_itself_is_none(header: EpochHeader) -> None:
    assert diff_header(header, header) is None
    assert diff_header(header, canonical_header(header)) is None
    assert diff_header(header, EpochHeader.from_json(header.to_json())) is None


# ------------------------------------------------------------------------- (b) never fallback


@given(header_pairs())
def test_the_writer_never_falls_back_for_generated_pairs(
    pair: tuple[EpochHeader, EpochHeader],
) -> None:
    before, after = pair
    plan = plan_header_event(before, after, first_of_instance=False)
    if header_equals(before, after):
        assert plan is None
    else:
        assert plan is not None
        assert plan[0] == "request/header-delta", plan


def _drops_tool_changes(a: EpochHeader, b: EpochHeader) -> HeaderDelta | None:
    delta = diff_header(a, b)
    return None if delta is None else HeaderDelta(system=delta.system, config=delta.config)


def _garbles_system(a: EpochHeader, b: EpochHeader) -> HeaderDelta | None:
    delta = diff_header(a, b)
    if delta is None:
        return None
    return HeaderDelta(
        system=SystemDelta(keep_start=0, keep_end=0, insert=("garbled",)), tools=delta.tools
    )


def _crashes(a: EpochHeader, b: EpochHeader) -> HeaderDelta | None:
    raise RuntimeError("encoder bug")


@given(header_pairs(), st.sampled_from([_drops_tool_changes, _garbles_system, _crashes]))
def test_a_broken_encoder_trips_the_valve_and_the_log_still_folds(
    pair: tuple[EpochHeader, EpochHeader], encoder: Any
) -> None:
    before, after = pair
    # The one pair the garbling encoder gets right by accident: its output IS the new header.
    assume(encoder is not _garbles_system or canonical_header(after).system != "garbled")
    session = Session.create("s")
    first = plan_header_event(None, before, first_of_instance=True)
    assert first is not None
    session.append(*first)
    plan = plan_header_event(
        session.request_header(), after, first_of_instance=False, encoder=encoder
    )
    if header_equals(before, after):
        assert plan is None
        return
    assert plan is not None
    kind, data = plan
    fallback = ("request/header", "fallback")
    if encoder is _drops_tool_changes:
        # It loses exactly the tool changes: the valve fires iff there were some.
        delta = diff_header(before, after)
        assert delta is not None
        lost = delta.tools is not None
        assert (kind, data.get("reason")) == fallback if lost else kind == "request/header-delta"
    else:
        # A crashing or garbling encoder never gets a delta through: the valve fires every time.
        assert (kind, data.get("reason")) == fallback
        assert data["header"] == canonical_header(after).to_json()
    session.append(kind, data)
    assert same(session.request_header(), after)
    assert same(fold_request_header(Session.create("r", session.events).events), after)


@settings(max_examples=25)
@given(header_pairs())
def test_the_broken_encoder_falls_back_whenever_it_loses_a_change(
    pair: tuple[EpochHeader, EpochHeader],
) -> None:
    before, after = pair
    delta = diff_header(before, after)
    plan = plan_header_event(before, after, first_of_instance=False, encoder=_drops_tool_changes)
    if delta is not None and delta.tools is not None:
        assert plan is not None and plan[0] == "request/header"
        assert plan[1]["reason"] == "fallback"


# --------------------------------------------------------------------------------- (c) fold


@pytest.mark.slow
@settings(max_examples=50)  # each example is a whole conversation of headers
@given(header_sequences(min_size=2, max_size=6))
def test_folding_snapshot_and_deltas_gives_the_last_header(headers: list[EpochHeader]) -> None:
    events = log_of(headers)
    assert [e.type for e in events[1:]] == ["request/header-delta"] * (len(events) - 1)
    assert same(fold_request_header(events), headers[-1])


@pytest.mark.slow
@settings(max_examples=50)  # each example is a whole conversation of headers
@given(header_sequences(min_size=2, max_size=6), st.data())
def test_folding_a_prefix_then_the_rest_equals_folding_the_whole(
    headers: list[EpochHeader], data: st.DataObject
) -> None:
    events = log_of(headers)
    cut = data.draw(st.integers(0, len(events)))
    prefix = fold_request_header(events[:cut])
    whole = fold_request_header(events)
    assert whole is not None
    assert fold_request_header(events[cut:], prefix) == whole
    assert header_equals(fold_request_header(events[cut:], prefix), whole)  # type: ignore[arg-type]


@pytest.mark.slow
@settings(max_examples=50)  # each example is a whole conversation of headers
@given(header_deltas())
def test_a_delta_applies_identically_after_a_json_round_trip(
    item: tuple[EpochHeader, HeaderDelta],
) -> None:
    base, delta = item
    text = dumps_canonical(delta.to_json())
    decoded = HeaderDelta.from_json(loads_json(text))
    assert decoded.to_json() == delta.to_json()
    direct = apply_header_delta(base, delta)
    again = apply_header_delta(base, decoded)
    assert direct == again
    assert direct.canonical_text() == again.canonical_text()


@settings(max_examples=25)
@given(header_sequences(min_size=2, max_size=5))
def test_a_session_folds_what_the_writer_planned(headers: list[EpochHeader]) -> None:
    session = Session.create("s")
    for index, current in enumerate(headers):
        plan = plan_header_event(session.request_header(), current, first_of_instance=index == 0)
        if plan is not None:
            session.append(*plan)
        assert same(session.request_header(), current)
    assert same(Session.create("r", session.events).request_header(), headers[-1])


# --------------------------------------------------------------------- (e) canonicalization


@given(epoch_headers())
def test_canonicalization_is_idempotent(header: EpochHeader) -> None:
    once = canonical_header(header)
    assert canonical_header(once) is once
    assert once.canonical_text() == header.canonical_text()
    assert header_equals(once, header)
    assert once.system != "" and once.tools != ()
    assert canonical_header(EpochHeader.from_json(once.to_json())) == once


# ------------------------------------------------------------------ (f) size ∝ the change

_PROMPT = [f"Rule {i}: keep line {i % 97} of the handbook in mind." for i in range(2000)]
_PROMPT[700:705] = _PROMPT[100:105]  # repeated passages, as real prompts have


def _size(value: Any) -> int:
    """Bytes of the record's JSON as the log stores it (a lone surrogate as its 6-byte escape)."""
    return len(dumps_canonical(value).encode("utf-8", "backslashreplace"))


@settings(max_examples=30)
@given(
    st.integers(0, len(_PROMPT) - 1),
    system_lines(),
    st.sampled_from(["replace", "insert", "delete"]),
)
def test_a_one_line_edit_of_a_long_prompt_is_a_tiny_delta(index: int, line: str, op: str) -> None:
    config = LlmCallConfig(provider="deepseek", model="deepseek-v4-flash")
    before = EpochHeader(config=config, system="\n".join(_PROMPT))
    lines = list(_PROMPT)
    if op == "replace":
        lines[index] = line
    elif op == "insert":
        lines.insert(index, line)
    else:
        del lines[index]
    after = EpochHeader(config=config, system="\n".join(lines))
    plan = plan_header_event(before, after, first_of_instance=False)
    snapshot = plan_header_event(None, after, first_of_instance=True)
    assert snapshot is not None
    if plan is None:  # the edit rewrote a line with itself
        assert header_equals(before, after)
        return
    assert plan[0] == "request/header-delta"
    assert _size(plan[1]) < 0.01 * _size(snapshot[1])


def _realistic_tool(name: str, description: str) -> ToolSchema:
    parameters: Any = {  # a plain dict: ToolSchema freezes it
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "A path relative to the workspace."},
            "limit": {"type": "integer", "description": "At most this many results."},
        },
        "required": ["path"],
    }
    return ToolSchema(
        name=name,
        description=f"{description} Use it when the task needs it; it never changes files.",
        parameters=parameters,
    )


_TOOLS = tuple(_realistic_tool(f"tool_{i:02d}", f"Tool number {i}.") for i in range(50))


@settings(max_examples=30)
@given(
    st.integers(0, len(_TOOLS)),
    tool_names().filter(lambda n: not n.startswith("tool_")),
    st.text(max_size=30),
)
def test_adding_one_tool_to_fifty_costs_about_one_tool(index: int, name: str, text: str) -> None:
    config = LlmCallConfig(provider="deepseek", model="deepseek-v4-flash")
    new = _realistic_tool(name, text)
    before = EpochHeader(config=config, tools=_TOOLS)
    after = EpochHeader(config=config, tools=(*_TOOLS[:index], new, *_TOOLS[index:]))
    plan = plan_header_event(before, after, first_of_instance=False)
    assert plan is not None and plan[0] == "request/header-delta"
    assert _size(plan[1]) < 1.5 * _size(new.to_json())


def test_a_header_sequence_has_at_least_one_header() -> None:
    with pytest.raises(ValueError, match="at least one header"):
        header_sequences(min_size=0)


# ------------------------------------------------------- the generators aim at the hard cases


def _names(h: EpochHeader) -> list[str]:
    return [t.name for t in h.tool_list]


def _inserted_mid_list(a: EpochHeader, b: EpochHeader) -> bool:
    new = [i for i, n in enumerate(_names(b)) if n not in _names(a)]
    return bool(_names(a)) and any(0 < i < len(_names(b)) - 1 for i in new)


def _reordered(a: EpochHeader, b: EpochHeader) -> bool:
    return len(_names(a)) > 1 and sorted(_names(a)) == sorted(_names(b)) and _names(a) != _names(b)


def _changed_and_moved(a: EpochHeader, b: EpochHeader) -> bool:
    before = {t.name: (i, t) for i, t in enumerate(a.tool_list)}
    return any(
        t.name in before and before[t.name][1] != t and before[t.name][0] != i
        for i, t in enumerate(b.tool_list)
    )


def _duplicated_line(a: EpochHeader, b: EpochHeader) -> bool:
    lines = [line for line in (b.system or "").split("\n") if line]
    return len(lines) != len(set(lines))


def _empty_to_absent(a: EpochHeader, b: EpochHeader) -> bool:
    return (a.system == "" and b.system is None) or (a.tools == () and b.tools is None)


def _absent_to_empty(a: EpochHeader, b: EpochHeader) -> bool:
    return (a.system is None and b.system == "") or (a.tools is None and b.tools == ())


HARD_CASES = {
    "a tool inserted mid-list": _inserted_mid_list,
    "tools reordered": _reordered,
    "a tool's schema changed and moved": _changed_and_moved,
    "a duplicated system line": _duplicated_line,
    "CRLF lines": lambda a, b: "\r\n" in (b.system or ""),
    "non-ASCII text": lambda a, b: any(ord(c) > 127 for c in b.system or ""),
    "empty → absent": _empty_to_absent,
    "absent → empty": _absent_to_empty,
}


@pytest.mark.slow
def test_header_pairs_produce_each_hard_case_on_purpose() -> None:
    seen: Counter[str] = Counter()

    @settings(max_examples=300, database=None, phases=[Phase.generate], derandomize=True)
    @given(header_pairs())
    def sample(pair: tuple[EpochHeader, EpochHeader]) -> None:
        seen.update(name for name, wanted in HARD_CASES.items() if wanted(*pair))

    sample()
    assert set(seen) == set(HARD_CASES), seen
    # Frequent, not lucky: each case in at least 2% of the pairs.
    assert min(seen.values()) >= 6, seen
