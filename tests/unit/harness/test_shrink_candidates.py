"""The shrink's candidate generator (harness/shrink/candidates.py) on generated plans: every
candidate is a plan the replay's validation accepts, pairs and sequences stay whole, each is
strictly smaller by ``size``, and every chain of candidates shrinks monotonically and ends."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from itertools import pairwise

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.plan import Plan, build_plan, plan_from_dict
from harness.shrink.candidates import (
    DROP,
    KEEP,
    NARROW,
    all_candidates,
    ddmin_candidates,
    fault_units,
    pass_candidates,
    size,
)
from harness.shrink.candidates import STEPS as STEPS_MOVE
from harness.spec import RunSpec, validate
from nemesis.registry import MENUS
from steps.registry import FAMILIES

PACKAGES = ("partition", "kill", "pause", "clock", "packet")
# Step families' steps: an upgrade (a roll, then a finalization), controller membership, and
# feature steps of the user's.
STEPS = (
    {},
    {"version": "3.9", "upgrade_to": "4.0"},
    {"version": "4.0", "quorum": "dynamic"},
    {"version": "4.0", "features": "transaction.version=0,group.version=0"},
)


def _grouped(plan: Plan, first: int, count: int) -> Plan:
    """The plan with ``count`` fault units from ``first`` made one sequence (FaultStep.group),
    as a choreography's steps are."""
    units = fault_units(plan.faults)[first : first + count]
    marked = {i for u in units for i in u}
    faults = [replace(s, group="g1") if i in marked else s for i, s in enumerate(plan.faults)]
    return replace(plan, faults=faults)


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    topology = draw(st.sampled_from(("kraft-combined", "kraft", "zk", "migration")))
    # The migration's steps are its family's, kept whole; upgrades and the rest on KRaft.
    steps = draw(st.sampled_from(STEPS)) if topology in ("kraft-combined", "kraft") else {}
    nemesis = draw(st.lists(st.sampled_from(PACKAGES), unique=True, max_size=3))
    spec = RunSpec.of(
        topology=topology,
        nemesis=nemesis,
        time_limit=draw(st.sampled_from((10.0, 30.0, 60.0))),
        nemesis_interval=draw(st.sampled_from((2.0, 5.0, 7.5))),
        concurrency=draw(st.integers(1, 6)),
        rate=draw(st.sampled_from((0.0, 1.0, 10.0, 50.0))),
        **steps,
    )
    plan = build_plan(validate(spec), draw(st.integers(0, 2**32)))
    units = len(fault_units(plan.faults))
    if units >= 2 and draw(st.booleans()):
        first = draw(st.integers(0, units - 2))
        plan = _grouped(plan, first, draw(st.integers(2, min(3, units - first))))
    return plan


def _unit_keys(plan: Plan) -> Counter:
    """Each unit as what it is made of: its steps' actions and seeds (a group: its name)."""
    out: Counter = Counter()
    for unit in fault_units(plan.faults):
        steps = [plan.faults[i] for i in unit]
        out[(steps[0].group, tuple((s.action, s.seed) for s in steps))] += 1
    return out


def _paired(parent: Plan, child: Plan) -> None:
    """A start keeps its stop and a sequence all its steps: the child's units, by action and
    seed, are among the parent's."""
    parent_units = {k[1] for k in _unit_keys(parent)}
    for group, actions in _unit_keys(child):
        assert actions in parent_units, (group, actions)
    groups = Counter(s.group for s in parent.faults if s.group)
    kept = Counter(s.group for s in child.faults if s.group)
    assert all(kept[g] in (0, groups[g]) for g in groups), (groups, kept)


def _in_order(parent: Plan, child: Plan) -> None:
    """Each family's steps a subsequence of the parent's: dropped, never reordered."""
    for key, steps in child.steps.items():
        it = iter(parent.steps[key])
        assert all(any(s == p for p in it) for s in steps)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans())
def test_every_candidate_is_a_valid_smaller_plan_with_its_pairs_whole(plan):
    base = size(plan)
    for c in all_candidates(plan):
        plan_from_dict(c.plan.to_dict())  # the replay's own validation: raises if refused
        assert size(c.plan) < base, (c.what, size(c.plan), base)
        _paired(plan, c.plan)
        _in_order(plan, c.plan)
        if c.move in (KEEP, DROP):
            # ddmin only drops: the faults left are the parent's, in the parent's order.
            it = iter(plan.faults)
            assert all(any(s == p for p in it) for s in c.plan.faults)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(plans(), st.data())
def test_any_chain_of_candidates_shrinks_monotonically_and_ends(plan, data):
    current, sizes = plan, [size(plan)]
    for _ in range(400):
        cands = all_candidates(current)
        if not cands:
            break
        current = data.draw(st.sampled_from(cands)).plan
        sizes.append(size(current))
    else:
        raise AssertionError("400 candidates in a row and still shrinking")
    assert all(b < a for a, b in pairwise(sizes))
    # At the end nothing is left to drop or narrow: no fault unit survives a drop-everything.
    assert ddmin_candidates(current, 1) == []
    assert pass_candidates(current, NARROW) == []


def test_a_sequence_is_dropped_and_kept_whole():
    plan = build_plan(
        validate(RunSpec.of(nemesis=["kill", "pause"], time_limit=60.0, nemesis_interval=5.0)), 4
    )
    grouped = _grouped(plan, 1, 3)
    units = fault_units(grouped.faults)
    assert len(units) == len(fault_units(plan.faults)) - 2
    assert len(units[1]) == 6  # three pairs in one unit
    for c in ddmin_candidates(grouped, len(units)):
        marked = [s for s in c.plan.faults if s.group == "g1"]
        assert len(marked) in (0, 6)


def test_a_random_halves_partition_narrows_to_isolating_one_node():
    plan = build_plan(validate(RunSpec.of(nemesis=["partition:random-halves"])), 1)
    (c,) = pass_candidates(plan, NARROW)
    assert {(s.kind, s.target) for s in c.plan.faults} == {("isolate-one", None)}


def test_a_plan_without_faults_steps_or_slack_has_no_candidates():
    spec = RunSpec.of(time_limit=1.0, concurrency=1, rate=1.0)
    assert all_candidates(build_plan(validate(spec), 1)) == []


def test_every_simpler_kind_is_of_its_menu_and_reads_nothing_more():
    for menu in MENUS.values():
        for kind in menu.kinds:
            for simpler in kind.simpler:
                assert simpler in menu.kind_names() and simpler != kind.name, (menu.fault, simpler)
                assert set(menu.kind(simpler).reads) <= set(kind.reads), (menu.fault, simpler)


@pytest.mark.parametrize("options", STEPS[1:])
def test_each_family_drops_disjoint_units_of_its_own_steps(options):
    plan = build_plan(validate(RunSpec.of(**options, time_limit=60.0)), 5)
    for family in FAMILIES:
        steps = plan.steps_of(family.key)
        units = family.drop_units(steps)
        flat = [i for u in units for i in u]
        assert len(flat) == len(set(flat)) and all(0 <= i < len(steps) for i in flat)
    assert plan.steps and pass_candidates(plan, STEPS_MOVE)
