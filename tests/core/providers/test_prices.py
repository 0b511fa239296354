"""The dated price table: ``prices_for`` reads it once per model and period (a trace asks once
per request), and answers what reading it every time answers."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from dsh_core.providers import PRICE_TABLE, prices_for
from dsh_core.providers._prices import _DATES, _prices_for, _since

MODELS = st.sampled_from(
    [None, "deepseek-chat", "deepseek-reasoner", "deepseek-v4-pro", "deepseek-v4-flash", "x-pro"]
)
NEAR_A_DATE = st.builds(
    lambda date, offset: date + offset,
    st.sampled_from(_DATES),
    st.sampled_from([-86400.0, -1.0, -1e-6, 0.0, 1e-6, 1.0, 86400.0]),
)
WHEN = st.one_of(st.none(), st.floats(), NEAR_A_DATE)


@given(st.lists(st.tuples(MODELS, WHEN), min_size=1, max_size=20))
def test_memoized_answers_equal_the_table_read_each_time(
    asks: list[tuple[str | None, float | None]],
) -> None:
    for model, when in asks:  # in any order: an earlier answer never stands for a later one
        assert prices_for(model, when) == _prices_for(model, when)


def test_the_periods_start_at_every_date_the_table_names() -> None:
    assert {_since(since) for _, since, _ in PRICE_TABLE} <= set(_DATES)
    switch = _DATES[-1]  # V4 replaced V3: the family rule's date
    assert prices_for("deepseek-chat", switch - 1e-6).label.startswith("deepseek-chat (V3)")
    assert prices_for("deepseek-chat", switch).label.startswith("deepseek-v4-flash")
