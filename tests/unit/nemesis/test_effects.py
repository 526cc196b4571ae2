"""What each package writes as its ops' effects (history/effects.py): only effects its menu
declares, with the nodes and links it acted on, and exactly what the one derivation for
histories without effects (`legacy_effects`) reads from the rest of the same value, so old and
new histories are judged alike."""

from __future__ import annotations

import json

import pytest

from clusters.topology import build_topology
from history.effects import (
    CUT,
    DOWN,
    EFFECTS,
    KNOWN,
    RESTARTED,
    SKEWED,
    STOPPED,
    legacy_effects,
    op_effects,
)
from nemesis.api import FaultContext, FaultStep
from nemesis.registry import MENUS, build
from tests.unit.nemesis.fake_node import FakeNode

TOPO = build_topology("kraft", cluster="x", brokers=3)
NAMES = [n.name for n in TOPO.nodes]


def context() -> FaultContext:
    return FaultContext(topology=TOPO, nodes={n.name: FakeNode(n) for n in TOPO.nodes})


def declared(fault: str, action: str, kind: str) -> tuple[str, ...]:
    menu = MENUS[fault]
    return menu.effects_of(kind) if action == "start" else menu.stop_effects


def agrees(fault: str, action: str, kind: str, value: dict) -> tuple:
    """The written effects: JSON, declared, known, and what the legacy derivation reads."""
    json.dumps(value)
    f = f"{action}-{fault}"
    written = op_effects(f, value, NAMES)
    assert {e.effect for e in written} <= set(declared(fault, action, kind)) <= set(KNOWN)
    rest = {k: v for k, v in value.items() if k != EFFECTS}
    assert legacy_effects(f, rest, NAMES) == written
    return written


# Selectors resolved from what live nodes report (or the workload's hints): not in memory.
REPORTED = (
    "active-controller",
    "quorum-leader",
    "partition-leader",
    "zk-leader",
    "busiest-leader",
    "txn-coordinator",
    "share-leader",
    "share-coordinator",
    "isolate-active-controller",
    "strobe",  # a shell loop the in-memory node does not run
    # Five controllers, and no history before effects has it: test_one_way_layout.py.
    "one-way-layout",
)


def _cases() -> list[tuple[str, str, str | None]]:
    out: list[tuple[str, str, str | None]] = []
    for fault in ("kill", "pause", "partition", "packet", "clock"):
        for kind in MENUS[fault].kinds_for("kraft"):
            if kind.name in REPORTED:
                continue
            target = None if MENUS[fault].kind_is_target else "minority"
            if fault == "partition" or kind.name == "reset":
                target = None
            out.append((fault, kind.name, target))
    return out


@pytest.mark.parametrize(("fault", "kind", "target"), _cases())
def test_every_start_and_stop_writes_declared_effects_the_legacy_reading_agrees_with(
    fault, kind, target
):
    ctx = context()
    nem = build([fault])[fault]
    if fault == "clock" and kind != "reset":
        nem.prepare(ctx)
    if kind == "reset":
        nem.start(ctx, FaultStep(0, "start", "clock", "bump", "all", 3, {"delta_s": 5}))
    got = nem.start(ctx, FaultStep(0, "start", fault, kind, target, 3, {}))
    written = agrees(fault, "start", kind, got)
    assert written, "a start says what it did"
    stopped = nem.stop(ctx, FaultStep(0, "stop", fault, kind, target, 3, {}))
    agrees(fault, "stop", kind, stopped)


def test_a_kill_says_down_where_it_acted_and_aimed_at_a_node_already_down():
    ctx = context()
    nem = build(["kill"])["kill"]
    ctx.nodes["b1"].running = False
    got = nem.start(ctx, FaultStep(0, "start", "kill", "all", None, 3, {}))
    (e,) = agrees("kill", "start", "all", got)
    assert (e.effect, e.by) == (DOWN, "SIGKILL")
    assert e.nodes == frozenset(NAMES) and e.done == frozenset(NAMES) - {"b1"}
    stopped = nem.stop(ctx, FaultStep(0, "stop", "kill", "all", None, 3, {}))
    (r,) = agrees("kill", "stop", "all", stopped)
    assert r.effect == RESTARTED and r.nodes == frozenset(NAMES)


def test_a_pause_says_stopped_and_a_partition_the_links_it_cut():
    ctx = context()
    paused = build(["pause"])["pause"].start(ctx, FaultStep(0, "start", "pause", "one", None, 3))
    (e,) = agrees("pause", "start", "one", paused)
    assert e.effect == STOPPED and e.done == frozenset(paused["targets"])
    cut = build(["partition"])["partition"].start(
        ctx, FaultStep(0, "start", "partition", "controllers-brokers", None, 3)
    )
    (c,) = agrees("partition", "start", "controllers-brokers", cut)
    assert c.effect == CUT and len(c.links) == 9  # every controller against every broker
    assert frozenset(("c1", "b1")) in c.links and frozenset(("b1", "b2")) not in c.links


def test_a_clock_bump_says_skewed_and_restarted_where_it_first_loaded_libfaketime():
    ctx = context()
    got = build(["clock"])["clock"].start(
        ctx, FaultStep(0, "start", "clock", "bump", "one", 3, {"delta_s": 5})
    )
    effects = agrees("clock", "start", "bump", got)
    assert [e.effect for e in effects] == [SKEWED, RESTARTED]
    assert effects[0].nodes == effects[1].nodes == frozenset(got["targets"])
