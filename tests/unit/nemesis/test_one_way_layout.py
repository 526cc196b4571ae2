"""KIP-996's five-voter one-way layout (partition one-way-layout): the rules per direction each
node gets, its effects, its refusal on another quorum size, and that stop removes it."""

from __future__ import annotations

import pytest

from clusters.topology import build_topology
from history.effects import DEGRADED, op_effects
from nemesis.api import FaultContext, FaultStep
from nemesis.errors import NemesisError
from nemesis.partition import CHAIN, MENU, ONE_WAY, one_way, one_way_rules
from nemesis.registry import build
from tests.unit.nemesis.fake_node import FakeNode

FIVE = build_topology("kraft-combined", cluster="x", controllers=5)


def test_the_layout_is_kafkas_by_node_id():
    assert one_way(FIVE) == {
        "n1": ["n2", "n4", "n5"],
        "n2": ["n1", "n3", "n5"],
        "n3": ["n2"],
        "n4": ["n1"],
        "n5": ["n1", "n2"],
    }


def test_each_node_drops_only_requests_to_its_controller_listener_from_who_sends_none():
    rules = one_way_rules(FIVE, one_way(FIVE))
    ip = {n.name: n.ip for n in FIVE.nodes}
    # n1 receives no request from n2 (n2 drops 0) n4 (3 drops 0) and n5 (4 drops 0, 1).
    assert rules["n1"] == sorted(
        f"-A {CHAIN} -s {ip[a]}/32 -p tcp --dport 9093 -j DROP" for a in ("n2", "n4", "n5")
    )
    # n3 hears from everyone but n2 (1 drops 2); n4 from everyone but n1 (0 drops 3).
    assert [r.split()[3] for r in rules["n3"]] == [f"{ip['n2']}/32"]
    assert [r.split()[3] for r in rules["n4"]] == [f"{ip['n1']}/32"]
    assert sum(len(r) for r in rules.values()) == 3 + 3 + 1 + 1 + 2


def test_a_quorum_of_another_size_is_refused_before_any_node_is_touched():
    three = build_topology("kraft", cluster="x")
    with pytest.raises(NemesisError, match="needs five controllers"):
        one_way(three)
    assert not next(k for k in MENU.kinds if k.name == ONE_WAY).drawn


def test_start_installs_the_rules_writes_degraded_and_stop_removes_them():
    nodes = {n.name: FakeNode(n) for n in FIVE.nodes}
    ctx = FaultContext(topology=FIVE, nodes=nodes)
    nem = build(["partition"])["partition"]
    got = nem.start(ctx, FaultStep(0, "start", "partition", ONE_WAY, None, 3, {}))
    assert got["one_way"]["n3"] == ["n2"] and set(got["rules"]) == set(nodes)
    (e,) = op_effects("start-partition", got, list(nodes))
    assert e.effect == DEGRADED and e.nodes == frozenset(nodes)
    stopped = nem.stop(ctx, FaultStep(0, "stop", "partition", ONE_WAY, None, 3, {}))
    assert sum(stopped["rules_removed"].values()) == 10
