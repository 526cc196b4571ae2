"""Grudges: every node accounted for, symmetric, and the shape each partition kind promises."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nemesis import grudge as g
from nemesis.errors import NemesisError

node_sets = st.integers(min_value=3, max_value=9).map(lambda n: [f"n{i}" for i in range(1, n + 1)])
seeds = st.integers(min_value=0, max_value=2**32)
RANDOM_KINDS = [g.random_halves, g.majority_minority, g.bridge, g.majorities_ring]
# Seven node counts and a seed: a thousand examples cover the shapes; CI's 10,000 took 2 minutes.
FEW = settings(max_examples=1_000)


def well_formed(grudge, nodes):
    assert set(grudge) == set(nodes), "every node of the topology has an entry"
    for n, drops in grudge.items():
        assert n not in drops and drops <= set(nodes)
        for other in drops:
            assert n in grudge[other], f"{n} drops {other} but not the other way round"


@FEW
@given(node_sets, seeds, st.sampled_from(RANDOM_KINDS))
def test_every_grudge_is_symmetric_and_covers_the_topology(nodes, seed, kind):
    well_formed(kind(nodes, random.Random(seed)), nodes)


@FEW
@given(node_sets, seeds, st.sampled_from(RANDOM_KINDS))
def test_the_same_seed_gives_the_same_partition_whatever_the_node_order(nodes, seed, kind):
    assert kind(nodes, random.Random(seed)) == kind(list(reversed(nodes)), random.Random(seed))


@FEW
@given(node_sets, seeds)
def test_halves_split_all_nodes_into_two_sides_that_see_only_themselves(nodes, seed):
    grudge = g.random_halves(nodes, random.Random(seed))
    sides = g.components_of(grudge)
    assert sorted(len(s) for s in sides) == [len(nodes) // 2, len(nodes) - len(nodes) // 2]
    assert sorted(x for s in sides for x in s) == sorted(nodes)
    for s in sides:
        for n in s:
            assert g.view(grudge, n) == set(s)


@FEW
@given(node_sets, seeds)
def test_majority_minority_leaves_exactly_one_side_with_a_majority(nodes, seed):
    sides = g.components_of(g.majority_minority(nodes, random.Random(seed)))
    assert len(sides) == 2
    assert [len(s) >= g.majority(len(nodes)) for s in sides] == [False, True]


@FEW
@given(node_sets, seeds)
def test_majorities_ring_gives_every_node_a_majority_view_and_nobody_all(nodes, seed):
    grudge = g.majorities_ring(nodes, random.Random(seed))
    views = {n: g.view(grudge, n) for n in nodes}
    for n, seen in views.items():
        assert n in seen and len(seen) >= g.majority(len(nodes))
    assert any(len(v) < len(nodes) for v in views.values()), "some traffic is actually cut"
    if len(nodes) >= 4:
        assert len(set(views.values())) == len(nodes), "no two nodes see the same majority"


@FEW
@given(node_sets, seeds)
def test_bridge_has_exactly_one_node_that_sees_both_sides(nodes, seed):
    grudge = g.bridge(nodes, random.Random(seed))
    everyone = [n for n in nodes if g.view(grudge, n) == set(nodes)]
    assert len(everyone) == 1
    rest = [n for n in nodes if n not in everyone]
    sides = {g.view(grudge, n) - set(everyone) for n in rest}
    assert len(sides) == 2 and set().union(*sides) == set(rest)
    assert not set.intersection(*map(set, sides))


@FEW
@given(node_sets, st.data())
def test_isolate_cuts_each_victim_off_from_everyone(nodes, data):
    victims = data.draw(
        st.lists(st.sampled_from(nodes), min_size=1, max_size=len(nodes) - 1, unique=True)
    )
    grudge = g.isolate(nodes, victims)
    well_formed(grudge, nodes)
    for v in victims:
        assert g.view(grudge, v) == {v}
    rest = set(nodes) - set(victims)
    for n in rest:
        assert g.view(grudge, n) == rest


def test_controllers_brokers_needs_both_sides():
    grudge = g.controllers_brokers(["c1", "c2", "c3"], ["b1", "b2"])
    assert g.components_of(grudge) == [["b1", "b2"], ["c1", "c2", "c3"]]
    with pytest.raises(NemesisError, match="kraft-combined"):
        g.controllers_brokers([], ["n1", "n2", "n3"])


def test_too_few_nodes_is_a_clear_error():
    with pytest.raises(NemesisError, match="at least 3 nodes"):
        g.majorities_ring(["n1", "n2"], random.Random(0))
