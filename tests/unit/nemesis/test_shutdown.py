"""The shutdown package on in-memory nodes: clean stops, and KIP-966's last-replica-standing
choreography (two followers stopped cleanly, the leader killed; the two back and watched until
one leads, then the leader)."""

from __future__ import annotations

import pytest

import nemesis.shutdown as shutdown
from clusters.topology import build_topology
from history.effects import DOWN, RESTARTED, op_effects
from nemesis.api import FaultContext, FaultStep
from nemesis.errors import NemesisError
from nemesis.registry import build
from nemesis.shutdown import CLEAN_STOP, ELR_LAST_REPLICA, roles
from tests.unit.nemesis.fake_node import FakeNode

TOPO = build_topology("kraft", cluster="x")  # c1-c3 (ids 1-3), b1-b3 (ids 4-6)
HINTS = {"partition_leaders": {"kchaos-queue-0": 5}}  # b2 leads partition 0


def context() -> FaultContext:
    nodes = {n.name: FakeNode(n) for n in TOPO.nodes}
    return FaultContext(topology=TOPO, nodes=nodes, hints=dict(HINTS))


def step(action: str, kind: str = ELR_LAST_REPLICA, target: str | None = None) -> FaultStep:
    return FaultStep(0, action, "shutdown", kind, target, 7, {})


def test_the_partitions_leader_and_its_two_followers_on_three_dedicated_brokers():
    import random

    assert roles(TOPO, HINTS, random.Random(1)) == ("kchaos-queue-0", "b2", ["b1", "b3"])
    combined = build_topology("kraft-combined", cluster="x")
    with pytest.raises(NemesisError, match="three brokers beside dedicated controllers"):
        roles(combined, HINTS, random.Random(1))


def test_start_stops_the_followers_cleanly_then_kills_the_leader(monkeypatch):
    ctx = context()
    nem = build(["shutdown"])["shutdown"]
    got = nem.start(ctx, step("start"))
    assert not any(ctx.nodes[n].running for n in ("b1", "b2", "b3"))
    effects = op_effects("start-shutdown", got, list(ctx.nodes))
    assert [(e.effect, e.by, sorted(e.nodes)) for e in effects] == [
        (DOWN, "SIGTERM", ["b1", "b3"]),
        (DOWN, "SIGKILL", ["b2"]),
    ]
    # Stop: the followers come back and one of them says it leads (b3, id 6); then the leader.
    asked = []

    def answer(ip, port, timeout):
        asked.append(ip)
        return [{"topic": "kchaos-queue", "partition": 0, "leader": 6, "isr": [6], "elr": [4]}]

    monkeypatch.setattr(shutdown, "describe_partitions", answer)
    done = nem.stop(ctx, step("stop"))
    assert done["elected"] == "b3" and done["after_restart"]["elr"] == [4]
    assert done["restarted"] == ["b1", "b2", "b3"] and all(n.running for n in ctx.nodes.values())
    (r,) = op_effects("stop-shutdown", done, list(ctx.nodes))
    assert r.effect == RESTARTED


def test_a_partition_named_by_its_number_alone_is_watched_in_the_queues_topic(monkeypatch):
    # The queue workload's hints say "6", not "kchaos-queue-6" (seen on a real run).
    ctx = context()
    ctx.hints = {"partition_leaders": {"6": 4}}  # b1 leads partition 6
    nem = build(["shutdown"])["shutdown"]
    got = nem.start(ctx, step("start"))
    assert (got["partition"], got["leader"], got["followers"]) == ("6", "b1", ["b2", "b3"])
    views = [
        {"topic": "kchaos-queue", "partition": 5, "leader": 5, "isr": [5], "elr": []},
        {"topic": "kchaos-queue", "partition": 6, "leader": 6, "isr": [6], "elr": [4]},
    ]
    monkeypatch.setattr(shutdown, "describe_partitions", lambda ip, port, t: views)
    assert nem.stop(ctx, step("stop"))["elected"] == "b3"


def test_without_an_elr_no_follower_leads_and_the_leader_is_started_anyway(monkeypatch):
    ctx = context()
    nem = build(["shutdown"])["shutdown"]
    nem.start(ctx, step("start"))
    monkeypatch.setattr(shutdown, "LEAD_TIMEOUT_S", 0.3)
    monkeypatch.setattr(shutdown, "POLL_S", 0.05)
    leaderless = [{"topic": "kchaos-queue", "partition": 0, "leader": -1, "isr": [5], "elr": None}]
    monkeypatch.setattr(shutdown, "describe_partitions", lambda ip, port, t: leaderless)
    done = nem.stop(ctx, step("stop"))
    assert done["elected"] is None and done["after_restart"]["leader"] == -1
    assert ctx.nodes["b2"].running


def test_a_clean_stop_of_one_node_and_its_restart():
    ctx = context()
    nem = build(["shutdown"])["shutdown"]
    got = nem.start(ctx, step("start", CLEAN_STOP, "one"))
    (e,) = op_effects("start-shutdown", got, list(ctx.nodes))
    assert e.effect == DOWN and e.by == "SIGTERM" and len(e.nodes) == 1
    (name,) = e.nodes
    assert not ctx.nodes[name].running
    done = nem.stop(ctx, step("stop", CLEAN_STOP, "one"))
    assert done["restarted"] == [name] and ctx.nodes[name].running
