"""Rotation with quiet periods (harness/plan.py fault_windows, ``--nemesis-quiet``): the
--nemesis items take turns, one fault window at a time, each item once before any twice, in an
order drawn with the seed; a quiet period of its own length comes before the first window and
after each. Without the option every plan is the one it always was."""

from __future__ import annotations

import json
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.plan import build_plan, fault_windows
from harness.spec import RunSpec, SpecError, spec_from_dict, validate
from nemesis.items import parse_items

ITEMS = ["pause", "kill", "partition", "disk", "choreo:last-replica-pause", "choreo"]


def _spec(items: list[str], interval: float, quiet: float | None, limit: float) -> RunSpec:
    return validate(
        RunSpec.of(nemesis=items, nemesis_interval=interval, nemesis_quiet=quiet, time_limit=limit)
    )


@settings(max_examples=60, deadline=None)
@given(
    items=st.lists(st.sampled_from(ITEMS), min_size=1, max_size=4, unique=True),
    interval=st.floats(2.0, 30.0).map(lambda x: round(x, 2)),
    quiet=st.floats(0.0, 60.0).map(lambda x: round(x, 2)),
    limit=st.floats(20.0, 300.0).map(lambda x: round(x, 1)),
    seed=st.integers(0, 2**40),
)
def test_each_window_holds_one_items_faults_and_a_quiet_period_follows_it(
    items, interval, quiet, limit, seed
):
    spec = _spec(items, interval, quiet, limit)
    plan = build_plan(spec, seed)
    windows = fault_windows(spec)
    if windows:
        assert windows[0][0] == pytest.approx(quiet, abs=1e-3)
    for (_, stop), (start, _) in pairwise(windows):
        assert stop is not None and start - stop == pytest.approx(quiet, abs=2e-3)
    # The steps in plan order, window by window: one item's faults in each, all inside it,
    # so that no two items' faults overlap.
    steps = list(plan.faults)
    for start, stop in windows:
        first = steps[0]
        assert (first.at_s, first.action) == (start, "start")
        choreographed = first.target == "nodes"
        count = 6 if choreographed else 2 if stop is not None else 1
        inside, steps = steps[:count], steps[count:]
        end = stop if stop is not None else limit
        assert all(start <= s.at_s <= end for s in inside)
        if choreographed:
            assert all(s.target == "nodes" for s in inside)
        else:
            assert len({(s.fault, s.kind, s.seed) for s in inside}) == 1
    assert steps == []


@settings(max_examples=40, deadline=None)
@given(
    items=st.lists(st.sampled_from(ITEMS), min_size=1, max_size=4, unique=True),
    seed=st.integers(0, 2**40),
)
def test_every_item_has_a_turn_before_any_has_a_second(items, seed):
    spec = _spec(items, 5.0, 12.5, 600.0)
    plan = build_plan(spec, seed)
    assert not plan.notes
    parsed = sorted(parse_items(items, spec.topology), key=lambda i: i.text)
    n = len(parsed)
    # Each window's first step says whose turn it was: a choreography's steps name nodes.
    firsts = []
    for start, _ in fault_windows(spec):
        first = next(s for s in plan.faults if s.at_s == start and s.action == "start")
        firsts.append("choreo" if first.target == "nodes" else first.fault)
    for k in range(0, len(firsts) - n + 1, n):
        assert sorted(firsts[k : k + n]) == sorted(i.package for i in parsed)


def test_without_the_option_the_quiet_period_is_the_interval_and_the_plan_as_before():
    given = build_plan(_spec(["kill", "pause"], 7.0, 7.0, 120.0), 9)
    bare = build_plan(_spec(["kill", "pause"], 7.0, None, 120.0), 9)
    assert given.faults == bare.faults
    assert "nemesis_quiet" not in json.loads(bare.to_json())["spec"]
    assert json.loads(given.to_json())["spec"]["nemesis_quiet"] == 7.0


def test_no_quiet_period_puts_the_windows_back_to_back():
    plan = build_plan(_spec(["kill", "pause"], 10.0, 0.0, 45.0), 2)
    said = [(s.at_s, s.action) for s in plan.faults]
    assert said == [
        (0.0, "start"),
        (10.0, "stop"),
        (10.0, "start"),
        (20.0, "stop"),
        (20.0, "start"),
        (30.0, "stop"),
        (30.0, "start"),
        (40.0, "stop"),
        (40.0, "start"),
    ]


def test_a_short_run_says_which_items_got_no_window_and_what_fits_them():
    plan = build_plan(_spec(["kill", "pause", "partition"], 10.0, 30.0, 60.0), 2)
    (note,) = plan.notes
    assert "--nemesis-interval 10 s and --nemesis-quiet 30 s has 1 fault window for 3" in note
    assert note.endswith("--time-limit 120 fits them all")


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"nemesis_quiet": -1}, "--nemesis-quiet: must be a number between 0 and 604800"),
        (
            {"nemesis": ["kill"], "nemesis_interval": 0.1, "nemesis_quiet": 0, "time_limit": 600},
            "--time-limit: 600 with --nemesis-interval 0.1 and --nemesis-quiet 0 makes 6,000 "
            "fault windows: at most 5,000",
        ),
    ],
)
def test_what_cannot_be_planned_is_one_sentence(options, said):
    with pytest.raises(SpecError) as err:
        spec_from_dict(options)
    assert said in str(err.value) and "\n" not in str(err.value)
