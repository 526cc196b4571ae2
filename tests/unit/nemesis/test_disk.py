"""The disk package's power loss on in-memory nodes with an in-memory layer (fake_node.py): who
is stopped, dropped and killed, what the history records of it, what stop and heal start
again, and what it refuses before touching a node. The layer itself is
tests/integration/test_disk_layer.py's."""

from __future__ import annotations

import random

import pytest

from clusters.topology import build_topology
from harness.spec import RunSpec, validate
from history.effects import DOWN, RESTARTED, op_effects
from history.options import with_fresh
from nemesis.api import FaultContext, FaultStep
from nemesis.disk import BY, MENU, POWER_LOSS, DiskNemesis
from nemesis.errors import NemesisError, NotApplied
from nemesis.heal import heal_cluster
from tests.unit.nemesis.fake_node import FakeNode

TOPO = build_topology("kraft-combined", cluster="x")
NAMES = [n.name for n in TOPO.nodes]


def context(layer: bool = True) -> FaultContext:
    nodes = {n.name: FakeNode(n) for n in TOPO.nodes}
    for i, node in enumerate(nodes.values()):
        if layer:
            node.disk = {"powered": True, "pending": {f"data/t-{i}/0.log": 100 * (i + 1)}}
    return FaultContext(topology=TOPO, nodes=nodes)


def step(target: str, action: str = "start") -> FaultStep:
    return FaultStep(0, action, "disk", POWER_LOSS, target, 7, {})


def test_a_power_loss_drops_and_kills_the_targets_together_and_says_what_it_took():
    ctx = context()
    got = DiskNemesis().start(ctx, step("majority"))
    targets = got["targets"]
    assert len(targets) == 2
    for name, node in ctx.nodes.items():
        hit = name in targets
        assert node.running is not hit
        # The drop came after the stop: no target wrote once any had lost power.
        commands = [c[4:] for c in node.commands]
        # Its pending segments' offsets read in between (none here: no segment is pending).
        assert commands == ([["ping"], ["status"], ["drop"]] if hit else [])
    i = NAMES.index(targets[0])
    assert got["dropped"][targets[0]]["files"] == {f"data/t-{i}/0.log": 100 * (i + 1)}
    assert got["dropped"][targets[0]]["bytes"] == 100 * (i + 1)
    (e,) = op_effects("start-disk", got, NAMES)
    assert (e.effect, e.by) == (DOWN, BY)
    assert e.nodes == e.done == frozenset(targets)

    stopped = DiskNemesis().stop(ctx, step("majority", "stop"))
    assert stopped["restarted"] == sorted(targets)
    (r,) = op_effects("stop-disk", stopped, NAMES)
    assert r.effect == RESTARTED and r.nodes == frozenset(targets)
    assert all(n.running and n.disk["powered"] for n in ctx.nodes.values())


def test_a_node_off_the_layer_is_refused_before_any_node_is_touched():
    ctx = context(layer=False)
    with pytest.raises(NotApplied, match=r"is not on the disk layer \(run with --disk-layer\)"):
        DiskNemesis().start(ctx, step("all"))
    assert all(n.running and not n.stopped for n in ctx.nodes.values())


def test_a_drop_that_fails_still_kills_and_is_recorded_as_failed():
    ctx = context()
    ctx.nodes["n1"].disk["powered"] = False  # the layer refuses a second drop
    got = DiskNemesis().start(ctx, step("all"))
    assert not any(n.running for n in ctx.nodes.values())
    assert set(got["dropped"]) == {"n2", "n3"}
    assert "n1: disk layer: cannot drop" in got["drop_failed"]["n1"]


def test_heal_kills_a_jvm_whose_disk_lost_power_and_starts_every_exited_node():
    ctx = context()
    ctx.nodes["n1"].disk["powered"] = False  # a power loss cut short before its SIGKILL
    ctx.nodes["n2"].running = False
    ctx.nodes["n3"].disk = None  # not on the layer: left alone
    said = DiskNemesis().heal_all(ctx)
    assert said == [
        "n1: killed the JVM of a powered-off disk",
        "n1: started exited node",
        "n2: started exited node",
    ]
    assert all(n.running for n in ctx.nodes.values())
    assert ctx.nodes["n1"].disk["powered"]


def test_every_heal_of_a_cluster_off_the_layer_asks_and_leaves_it_alone():
    class Plain:
        def info(self):
            from clusters.cluster import ClusterInfo

            return ClusterInfo(TOPO, "4.4.0", "fast", "cid")

        def nodes(self, info=None):
            return nodes

    nodes = {n.name: FakeNode(n) for n in TOPO.nodes}
    assert heal_cluster(Plain()) == []  # type: ignore[arg-type]


def test_the_menu_draws_power_loss_at_a_counted_target_and_refuses_parameters():
    steps = MENU.draw(random.Random(1), "kraft", 10.0, 5.0, 15.0)
    assert [s.kind for s in steps] == [POWER_LOSS, POWER_LOSS]
    assert steps[0].target in ("one", "minority", "majority", "all")
    with pytest.raises(NemesisError, match="does not read delay_ms"):
        DiskNemesis().check(FaultStep(0, "start", "disk", POWER_LOSS, "one", 1, {"delay_ms": 5}))


def test_a_run_naming_the_package_runs_on_the_layer():
    from harness.spec import OPTIONS

    for items in (["disk"], ["kill", "disk:power-loss@one"], ["disk@all"]):
        assert with_fresh(OPTIONS, {"nemesis": items})["disk_layer"] == "journal"
    assert with_fresh(OPTIONS, {"nemesis": ["disk"], "disk_layer": "strict"})["disk_layer"] == (
        "strict"
    )
    assert with_fresh(OPTIONS, {"nemesis": ["kill"]}).get("disk_layer") is None
    # A spec made in code, which no fresh value filled in, runs on the layer all the same.
    assert validate(RunSpec.of(nemesis=["disk"])).disk_layer_mode == "journal"
    assert RunSpec.of(nemesis=["disk"], disk_layer="strict").disk_layer_mode == "strict"
    assert RunSpec.of(nemesis=["kill"]).disk_layer_mode is None
