"""The turn's time budget: a call's timeout is its own or what is left of the turn, whichever is less,
never negative, and no call's deadline passes the turn's."""

from __future__ import annotations

import time

from hypothesis import given
from hypothesis import strategies as st
from switchboard.llm.budget import TurnBudget

seconds = st.floats(min_value=-1_000.0, max_value=1_000.0, allow_nan=False)
own = st.floats(min_value=0.0, max_value=1_000.0, allow_nan=False)


@given(left=seconds, own_s=own)
def test_a_calls_timeout_is_the_lesser_of_its_own_and_what_is_left(left: float, own_s: float) -> None:
    budget = TurnBudget(time.monotonic() + left)
    timeout = budget.timeout_s(own_s)
    assert 0.0 <= timeout <= own_s
    assert timeout <= max(0.0, left) + 1e-3  # the clock moved a little since the budget was made
    assert budget.deadline_for(own_s) <= budget.deadline


def test_a_spent_budget_leaves_nothing() -> None:
    spent = TurnBudget(time.monotonic() - 5)
    assert (spent.left_s(), spent.timeout_s(20.0)) == (0.0, 0.0)
    fresh = TurnBudget.starting_now(15.0)
    assert 14.0 < fresh.left_s() <= 15.0 and fresh.timeout_s(5.0) == 5.0
