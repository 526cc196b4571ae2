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
from nemesis.shutdown import CLEAN_STOP, ELR_LAST_REPLICA, ELR_POWER_LOSS, roles
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


SEGMENT = "data/kchaos-queue-0/00000000000000000000.log"


def _on_layer(ctx: FaultContext) -> FaultContext:
    for node in ctx.nodes.values():
        node.disk = {"powered": True, "pending": {SEGMENT: 700}}
    ctx.nodes["b2"].disk["batches"] = {
        SEGMENT: {"size": 700, "batches": 9, "lost": 9, "first": 0, "last": 40}
    }
    return ctx


def test_elr_power_loss_stops_the_followers_cleanly_then_the_leader_loses_power(monkeypatch):
    from nemesis.disk import BY

    ctx = _on_layer(context())
    nem = build(["shutdown"])["shutdown"]
    got = nem.start(ctx, step("start", ELR_POWER_LOSS))
    assert (got["partition"], got["leader"], got["followers"]) == (
        "kchaos-queue-0",
        "b2",
        ["b1", "b3"],
    )
    assert not any(ctx.nodes[n].running for n in ("b1", "b2", "b3"))
    # The followers were stopped, not powered off: their layers never dropped.
    assert ctx.nodes["b1"].disk["powered"] and ctx.nodes["b3"].disk["powered"]
    assert not ctx.nodes["b2"].disk["powered"]
    # A power loss's record (docs/history.md): what the drop took, with the offsets.
    assert got["dropped"]["b2"]["lost_offsets"] == {"kchaos-queue-0": [0, 40]}
    assert got["dropped"]["b2"]["files"] == {SEGMENT: 700}
    assert set(got["exited_after_s"]) == {"b2"}
    effects = op_effects("start-shutdown", got, list(ctx.nodes))
    assert [(e.effect, e.by, sorted(e.nodes)) for e in effects] == [
        (DOWN, "SIGTERM", ["b1", "b3"]),
        (DOWN, BY, ["b2"]),
    ]
    monkeypatch.setattr(shutdown, "describe_partitions", lambda ip, port, t: [])
    monkeypatch.setattr(shutdown, "LEAD_TIMEOUT_S", 0.01)
    done = nem.stop(ctx, step("stop", ELR_POWER_LOSS))
    assert done["elected"] is None and done["restarted"] == ["b1", "b2", "b3"]
    assert ctx.nodes["b2"].disk["powered"]  # mounted again on what its disk kept


def test_elr_power_loss_refuses_a_leader_off_the_layer_before_touching_anything():
    from nemesis.errors import NotApplied

    ctx = context()  # no node on the layer
    with pytest.raises(NotApplied, match="b2 is not on the disk layer"):
        build(["shutdown"])["shutdown"].start(ctx, step("start", ELR_POWER_LOSS))
    assert all(n.running and not n.stopped for n in ctx.nodes.values())
    combined = build_topology("kraft-combined", cluster="x")
    with pytest.raises(NemesisError, match="shutdown elr-power-loss needs three brokers"):
        import random

        roles(combined, HINTS, random.Random(1), ELR_POWER_LOSS)


def test_a_run_naming_elr_power_loss_runs_on_the_layer_and_a_bare_shutdown_never_draws_it():
    import random

    from harness.spec import OPTIONS
    from history.options import with_fresh
    from nemesis.shutdown import MENU

    for items in (["shutdown:elr-power-loss"], ["kill", "shutdown:elr-power-loss"]):
        assert with_fresh(OPTIONS, {"nemesis": items})["disk_layer"] == "journal"
    for items in (["shutdown"], ["shutdown:elr-last-replica"], ["shutdown@one"]):
        assert with_fresh(OPTIONS, {"nemesis": items}).get("disk_layer") is None
    rng = random.Random(3)
    drawn = {MENU.draw(rng, "kraft", 10.0, 0.0, None)[0].kind for _ in range(200)}
    assert drawn == {CLEAN_STOP, ELR_LAST_REPLICA}
