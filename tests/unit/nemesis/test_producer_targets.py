"""The producer-state selectors: busiest-leader from the lanes' in-flight counts, txn-coordinator
from Kafka's own mapping of a transactional id to a __transaction_state partition."""

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clusters.topology import build_topology
from nemesis import targets as t
from nemesis.api import NAMED_ONLY_TARGETS, FaultContext
from nemesis.errors import NemesisError
from nemesis.menu import Menu
from nemesis.process import KILL_MENU, PAUSE_MENU

COMBINED = build_topology("kraft-combined", cluster="x")

# (id, String.hashCode, Utils.abs(hashCode) % 50, % 5) printed by the JDK on this machine
# (java H.java: s.hashCode(); n == Integer.MIN_VALUE ? 0 : Math.abs(n)).
JAVA = [
    ("", 0, 0, 0),
    ("a", 97, 47, 2),
    ("kchaos-r1-slot0", -925089412, 12, 2),
    ("kchaos-20261124-160000-slot7", -1711920446, 46, 1),
    ("polygenelubricants", -2147483648, 0, 0),  # Integer.MIN_VALUE: Utils.abs gives 0
    ("Aa", 2112, 12, 2),
    ("BB", 2112, 12, 2),
    ("caf\u00e9-\U0001f600", 548535439, 39, 4),  # a surrogate pair counts as two code units
    ("kchaos-x-ready", 394802230, 30, 0),
]


@pytest.mark.parametrize(("txn_id", "hash_code", "of50", "of5"), JAVA)
def test_the_java_hash_and_partition_match_the_jdk(txn_id, hash_code, of50, of5):
    assert t.java_string_hash(txn_id) == hash_code
    assert t.txn_partition(txn_id, 50) == of50
    assert t.txn_partition(txn_id, 5) == of5


@given(st.text(max_size=40), st.integers(1, 200))
def test_the_partition_is_always_one_of_the_topic(txn_id, partitions):
    h = t.java_string_hash(txn_id)
    assert -(2**31) <= h < 2**31
    assert 0 <= t.txn_partition(txn_id, partitions) < partitions


def test_busiest_leader_names_the_leader_of_the_partition_with_most_in_flight():
    hints = {"partition_leaders": {0: "n1", 1: "n2", 2: "n3"}, "in_flight": {0: 3, 1: 9, 2: 4}}
    found = t.busiest_leader(COMBINED, hints, {}, random.Random(0))
    assert found.targets == ["n2"]
    assert found.record() == {
        "target": "busiest-leader",
        "targets": ["n2"],
        "resolved_by": {"partition": 1, "in_flight": 9, "leader": "n2"},
    }


def test_busiest_leader_skips_partitions_without_a_leader_and_breaks_ties_by_seed():
    hints = {"partition_leaders": {0: None, 1: "n2", 2: "n3"}, "in_flight": {0: 50, 1: 4, 2: 4}}
    picks = {t.busiest_leader(COMBINED, hints, {}, random.Random(s)).targets[0] for s in range(40)}
    assert picks == {"n2", "n3"}
    again = [t.busiest_leader(COMBINED, hints, {}, random.Random(7)).record() for _ in range(2)]
    assert again[0] == again[1]


def test_busiest_leader_with_sync_sends_is_the_partition_leader_rule_with_a_note():
    hints = {"partition_leaders": {0: "n1", 1: "n2"}}
    found = t.busiest_leader(COMBINED, hints, {}, random.Random(3))
    rule = t.partition_leader(COMBINED, hints, {}, random.Random(3))
    assert found.targets == rule.targets
    assert found.evidence["partition"] == rule.evidence["partition"]
    assert "sync sends" in found.evidence["fallback"]
    idle = t.busiest_leader(COMBINED, {**hints, "in_flight": {}}, {}, random.Random(3))
    assert idle.targets == rule.targets and "no send in flight" in idle.evidence["fallback"]


def test_txn_coordinator_is_the_leader_of_the_ids_partition_read_at_fault_time():
    ids = [f"kchaos-r1-slot{i}" for i in range(4)]
    leaders = {p: 1 + p % 3 for p in range(5)}
    seen = {}
    for seed in range(30):
        found = t.txn_coordinator(
            COMBINED, {"transactional_ids": ids}, random.Random(seed), lambda _: leaders
        )
        ev = found.evidence
        assert ev["partition"] == t.txn_partition(ev["transactional_id"], 5)
        assert found.targets == [f"n{leaders[ev['partition']]}"] == [ev["leader"]]
        seen[ev["transactional_id"]] = ev["partition"]
    assert set(seen) == set(ids)  # the seed picks among every slot's id
    assert seen["kchaos-r1-slot0"] == 2


def test_txn_coordinator_refuses_without_ids_or_without_a_leader():
    with pytest.raises(NemesisError, match=r"needs a run with transactions \(--txn\)"):
        t.txn_coordinator(COMBINED, {}, random.Random(0), lambda _: {0: 1})
    with pytest.raises(NemesisError, match=r"__transaction_state-2 .* has no leader"):
        t.txn_coordinator(
            COMBINED,
            {"transactional_ids": ["kchaos-r1-slot0"]},
            random.Random(0),
            lambda _: {p: (-1 if p == 2 else 1) for p in range(5)},
        )


def test_resolve_dispatches_the_new_selectors():
    ctx = FaultContext(
        topology=COMBINED,
        nodes={},
        hints={"partition_leaders": {0: 3}, "in_flight": {0: 2}},
    )
    assert t.resolve(ctx, "busiest-leader", random.Random(0)).targets == ["n3"]
    with pytest.raises(NemesisError, match="needs a run with transactions"):
        t.resolve(ctx, "txn-coordinator", random.Random(0))


@pytest.mark.parametrize("menu", [KILL_MENU, PAUSE_MENU])
def test_a_bare_kill_or_pause_draws_exactly_as_before_the_new_selectors(menu):
    before = Menu(
        menu.fault,
        tuple(k for k in menu.kinds if k.name not in NAMED_ONLY_TARGETS),
        menu.meaning,
        kind_is_target=True,
    )
    for seed in range(200):
        for topology in ("kraft-combined", "zk", "migration"):
            a = menu.draw(random.Random(seed), topology, 10.0, 5.0, 15.0)
            b = before.draw(random.Random(seed), topology, 10.0, 5.0, 15.0)
            assert a == b
    named = menu.draw(random.Random(0), "kraft-combined", 10, 5, 15, kinds=("busiest-leader",))
    assert named[0].kind == named[0].target == "busiest-leader"
