"""Target selection: counts from the seed, roles from what the nodes themselves report."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusters.topology import build_topology
from nemesis import targets as t
from nemesis.api import FaultContext
from nemesis.errors import NemesisError
from nemesis.registry import NEMESES, build

COMBINED = build_topology("kraft-combined", cluster="x")
DEDICATED = build_topology("kraft", cluster="x")


def status(name, raft_state=None, active=0):
    raft = {"state": raft_state, "leader": 1, "epoch": 3} if raft_state else None
    return {"name": name, "jmx": {"raft": raft, "active_controller_count": active}}


# 7 sizes x 4 selectors: a thousand seeds cover them; CI's 10,000 took half a minute.
@settings(max_examples=1_000)
@given(
    st.integers(3, 9),
    st.integers(0, 2**32),
    st.sampled_from(["one", "minority", "majority", "all"]),
)
def test_counting_selectors_pick_the_right_number_of_distinct_nodes(n, seed, selector):
    names = [f"n{i}" for i in range(n)]
    got = t.pick_count(names, selector, random.Random(seed))
    want = {"one": 1, "minority": (n - 1) // 2, "majority": n // 2 + 1, "all": n}[selector]
    assert len(got) == len(set(got)) == want and set(got) <= set(names)
    assert got == t.pick_count(list(reversed(names)), selector, random.Random(seed))


def test_minority_of_two_nodes_is_refused():
    with pytest.raises(NemesisError, match="minority"):
        t.pick_count(["a", "b"], "minority", random.Random(0))


def test_active_controller_and_quorum_leader_come_from_each_nodes_own_report():
    seen = [status("n1", "follower"), status("n2", "leader", active=1), status("n3", "follower")]
    assert t.active_controller(COMBINED, seen).targets == ["n2"]
    assert t.quorum_leader(COMBINED, seen).targets == ["n2"]


def test_two_claimed_leaders_are_an_error_not_a_guess():
    seen = [status("n1", "leader", active=1), status("n2", "leader", active=1)]
    with pytest.raises(NemesisError, match="active controller"):
        t.active_controller(COMBINED, seen)
    with pytest.raises(NemesisError, match="quorum leader"):
        t.quorum_leader(COMBINED, seen)


def test_role_selectors_resolve_through_the_injected_statuses():
    ctx = FaultContext(topology=DEDICATED, nodes={})
    seen = [status("c1", "follower"), status("c2", "leader", active=1), status("b1")]
    got = t.resolve(ctx, "quorum-leader", random.Random(0), statuses=lambda _: seen)
    assert got.record() == {
        "target": "quorum-leader",
        "targets": ["c2"],
        "resolved_by": {"raft_state=leader": ["c2"]},
    }


def test_zk_leader_from_srvr_modes():
    assert t.zk_leader({"z1": "follower", "z2": "leader", "z3": "follower"}).targets == ["z2"]
    assert t.zk_leader({"z1": "standalone"}).targets == ["z1"]
    with pytest.raises(NemesisError, match="zk topology"):
        t.zk_leader({})


def test_partition_leader_from_hints_or_a_recorded_fallback():
    rng = random.Random(1)
    hinted = t.partition_leader(COMBINED, {"partition_leaders": {"q-0": 2}}, {}, rng)
    assert hinted.targets == ["n2"] and hinted.evidence == {"partition": "q-0"}
    assert t.partition_leader(COMBINED, {"partition_leader": "n3"}, {}, rng).targets == ["n3"]
    fallback = t.partition_leader(COMBINED, {}, {}, rng)
    assert fallback.targets[0] in {"n1", "n2", "n3"} and "fallback" in fallback.evidence
    with pytest.raises(NemesisError, match="no leader hint for partition q-9"):
        t.partition_leader(COMBINED, {"partition_leaders": {"q-0": 2}}, {"partition": "q-9"}, rng)


def test_unknown_selector_lists_the_valid_ones():
    ctx = FaultContext(topology=COMBINED, nodes={})
    with pytest.raises(NemesisError, match=r"unknown target 'leader'.*active-controller"):
        t.resolve(ctx, "leader", random.Random(0))


def test_registry_builds_each_package_and_names_the_valid_ones_for_a_typo():
    built = build(["partition", "kill"])
    assert set(built) == {"partition", "kill"} and all(n.fault in NEMESES for n in built.values())
    with pytest.raises(NemesisError, match=r"unknown nemesis 'partitoin'.*partition, kill"):
        build(["partitoin"])
