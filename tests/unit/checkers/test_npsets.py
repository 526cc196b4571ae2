"""The greedy cut that sizes a streamed check's buckets and its cycle search's window groups."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from checkers.scan.npsets import runs_within


def test_runs_are_cut_before_the_budget_is_passed() -> None:
    assert runs_within(np.array([3, 3, 3, 1]), 6) == [(0, 2), (2, 4)]


def test_a_position_over_the_budget_is_a_run_alone() -> None:
    assert runs_within(np.array([1, 9, 1]), 5) == [(0, 1), (1, 2), (2, 3)]


def test_no_counts_no_runs() -> None:
    assert runs_within(np.zeros(0, dtype=np.int64), 5) == []


@given(st.lists(st.integers(0, 20), max_size=40), st.integers(1, 30))
def test_runs_tile_the_positions_and_keep_the_budget(counts: list[int], budget: int) -> None:
    runs = runs_within(np.array(counts, dtype=np.int64), budget)
    assert [i for a, b in runs for i in range(a, b)] == list(range(len(counts)))
    for a, b in runs:
        assert b - a == 1 or sum(counts[a:b]) <= budget
    # Greedy: the next run's first count would have passed the budget.
    for a, b in runs[:-1]:
        assert sum(counts[a : b + 1]) > budget
