"""Network partitions: a grudge installed as DROP rules in each node's own network namespace.

Rules live in one chain, KCHAOS, jumped to from INPUT, and match only the source addresses of
other nodes: the host (the bridge gateway, where clients and JMX reads come from) is never
dropped, so observers keep seeing every side. See nemesis/iptables.py for how the chain is
replaced atomically and removed without touching the node's other rules.

Where the rules live decides who gets them. A container's network namespace is new at every
start, so a node that is down when a partition starts gets none (its next start would drop
them) and holds none to remove. A host's network is the host's: its rules outlive a killed JVM
(``Layout.lasting_network``), so a host whose JVM is down gets its rules like the rest (it
rejoins the partition as it restarts) and every host's chain is removed when the partition
ends. Left on a killed host, the chain would cut it off after the history says the partition
was healed, and every check that reads fault windows would judge a fault that was not recorded.
"""

from __future__ import annotations

import random
from typing import Any

from clusters.capabilities import Controllable, Exec, Shell, layout_of
from clusters.topology import CONTROLLER_PORT, Topology
from history.effects import CUT, DEGRADED, EFFECTS, effect, grudge_pairs
from nemesis import grudge as g
from nemesis.api import FaultContext, FaultStep
from nemesis.errors import NemesisError, before_touching
from nemesis.iptables import install_chain, remove_chain
from nemesis.menu import Kind, Menu
from nemesis.nodes import on_each, on_live, split_running
from nemesis.targets import resolve

CHAIN = "KCHAOS"
# Kinds whose nodes see overlapping sets, so "the sides" are not a partition of the nodes.
OVERLAPPING = ("majorities-ring", "bridge")
# KIP-996's pre-vote: Kafka's RaftEventSimulationTest partitions five voters one way, each
# dropping its outbound requests to some others (voters by index: 0 to 1, 3 and 4; 1 to 0, 2
# and 4; 2 to 1; 3 to 0; 4 to 0 and 1). Voters 2, 3 and 4 are each reachable from a majority;
# voters 0 and 1 are not, and cannot win an election either.
ONE_WAY = "one-way-layout"
ONE_WAY_LAYOUT = {0: (1, 3, 4), 1: (0, 2, 4), 2: (1,), 3: (0,), 4: (0, 1)}

# What a shrink may put in place of a cut of many links: one node cut off (docs/shrink.md).
ONE_NODE = ("isolate-one",)

MENU = Menu(
    "partition",
    kinds=(
        Kind(
            "random-halves",
            "floor(n/2) nodes against the rest, drawn with the step's seed",
            simpler=ONE_NODE,
        ),
        Kind("isolate-one", "the step's target (default one) cut off from every other node"),
        Kind(
            "majority-minority",
            "a majority against a minority, drawn with the step's seed",
            simpler=ONE_NODE,
        ),
        Kind(
            "majorities-ring",
            "every node sees a majority; from four nodes on, no two the same",
            simpler=ONE_NODE,
        ),
        Kind("bridge", "two halves, and one node that sees both", simpler=ONE_NODE),
        # Combined nodes are both roles, and in ZooKeeper mode there are no KRaft controllers.
        Kind(
            "controllers-brokers",
            "dedicated controllers and ZooKeepers against the brokers",
            only_on=("kraft", "migration"),
            simpler=ONE_NODE,
        ),
        Kind("isolate-active-controller", "the active controller cut off from every other node"),
        Kind(
            ONE_WAY,
            "KIP-996's five-voter one-way layout: the controllers by node id, voter 0 drops its "
            "requests to 1, 3, 4; 1 to 0, 2, 4; 2 to 1; 3 to 0; 4 to 0, 1 (needs five "
            "controllers: --controllers 5)",
            drawn=False,
            effects=(DEGRADED,),
        ),
    ),
    meaning="DROP rules in each node's own namespace; stop removes them all",
    effects=(CUT,),
    targets_note="none: the kind says who (isolate-one reads the step's target, default one)",
    target_kinds=("isolate-one",),
)


def chain_rules(drop_ips: list[str]) -> list[str]:
    return [f"-A {CHAIN} -s {ip}/32 -j DROP" for ip in sorted(drop_ips)]


def install(node: Shell, drop_ips: list[str]) -> list[str]:
    return install_chain(node, CHAIN, chain_rules(drop_ips))


def remove(node: Exec) -> int:
    return remove_chain(node, CHAIN)


def one_way(topo: Topology) -> dict[str, list[str]]:
    """The one-way layout by node name: each controller and the controllers it sends no
    request to. NemesisError unless the topology has exactly five controllers."""
    voters = sorted(topo.controllers, key=lambda n: n.node_id)
    if len(voters) != len(ONE_WAY_LAYOUT):
        raise NemesisError(
            f"partition {ONE_WAY} needs five controllers (--controllers 5), not {len(voters)}"
        )
    return {voters[i].name: [voters[j].name for j in drops] for i, drops in ONE_WAY_LAYOUT.items()}


def one_way_rules(topo: Topology, layout: dict[str, list[str]]) -> dict[str, list[str]]:
    """Each node's rules: on B, drop what A sends to B's controller listener for every A that
    sends B no request. Only the requester's packets to the listener's port are dropped, so B's
    own requests to A, and A's answers to them, still pass: one direction of requests each."""
    ips = {n.name: n.ip for n in topo.nodes}
    rules: dict[str, list[str]] = {n.name: [] for n in topo.nodes}
    for a, targets in sorted(layout.items()):
        for b in targets:
            rules[b].append(f"-A {CHAIN} -s {ips[a]}/32 -p tcp --dport {CONTROLLER_PORT} -j DROP")
    return {n: sorted(r) for n, r in rules.items()}


def grudge_for(ctx: FaultContext, step: FaultStep) -> tuple[g.Grudge, dict[str, Any]]:
    """The grudge a step asks for, and how its nodes were chosen (for the history)."""
    rng = random.Random(step.seed)
    topo = ctx.topology
    names = topo.names()
    kind = step.kind
    if kind == "random-halves":
        return g.random_halves(names, rng), {}
    if kind == "majority-minority":
        return g.majority_minority(names, rng), {}
    if kind == "majorities-ring":
        return g.majorities_ring(names, rng), {}
    if kind == "bridge":
        return g.bridge(names, rng), {}
    if kind == "controllers-brokers":
        coord = [
            n.name for n in topo.nodes if (n.is_controller or n.is_zookeeper) and not n.is_broker
        ]
        brokers = [n.name for n in topo.nodes if n.is_broker and not n.is_controller]
        return g.controllers_brokers(coord, brokers), {}
    if kind in ("isolate-one", "isolate-active-controller"):
        selector = (
            "active-controller" if kind == "isolate-active-controller" else step.target or "one"
        )
        found = resolve(ctx, selector, rng, step.params)
        return g.isolate(names, found.targets), found.record()
    raise NemesisError(
        f"unknown partition kind '{kind}': choose one of {', '.join(MENU.kind_names())}"
    )


class PartitionNemesis:
    fault = "partition"
    menu = MENU

    def check(self, step: FaultStep) -> dict[str, Any]:
        MENU.check_keys(step)
        return {}

    def start(self, ctx: FaultContext, step: FaultStep) -> dict[str, Any]:
        if step.kind == ONE_WAY:
            return self._one_way(ctx, step)
        with before_touching():
            self.check(step)
            grudge, chosen = grudge_for(ctx, step)
        ips = {n.name: n.ip for n in ctx.topology.nodes}
        drops = {name: sorted(ips[o] for o in grudge.get(name, ())) for name in ctx.nodes}
        # A node that is down gets no rules (its namespace is new when it starts again), but
        # grudges are symmetric and TCP needs both directions: the other side's rules still cut.
        running, down = split_running(ctx.nodes.values())
        running += [ctx.nodes[n] for n in down if layout_of(ctx.nodes[n]).lasting_network]
        installed = on_each(running, lambda n: on_live(n, lambda: install(n, drops[n.name])))
        rules = {n: r for n, r in installed.items() if r is not None}
        down = sorted([*down, *(n for n, r in installed.items() if r is None)])
        recorded = {n: sorted(d) for n, d in sorted(grudge.items())}
        # Either side's rules cut TCP; two nodes both down talk to nobody, so not a cut.
        cut = grudge_pairs(recorded, down)
        return {
            "kind": step.kind,
            **chosen,
            "grudge": recorded,
            "components": g.components_of(grudge) if step.kind not in OVERLAPPING else None,
            "rules": {n: r for n, r in sorted(rules.items()) if r},
            **({"not_running": down} if down else {}),
            EFFECTS: [effect(CUT, {n for p in cut for n in p}, links=cut, by="iptables")],
        }

    def _one_way(self, ctx: FaultContext, step: FaultStep) -> dict[str, Any]:
        """KIP-996's layout: rules per direction, in the same chain (stop and heal remove it)."""
        with before_touching():
            self.check(step)
            layout = one_way(ctx.topology)
            per_node = one_way_rules(ctx.topology, layout)
        running, down = split_running(ctx.nodes.values())
        running += [ctx.nodes[n] for n in down if layout_of(ctx.nodes[n]).lasting_network]
        installed = on_each(
            running, lambda n: on_live(n, lambda: install_chain(n, CHAIN, per_node[n.name]))
        )
        rules = {n: r for n, r in installed.items() if r}
        down = sorted([*down, *(n for n, r in installed.items() if r is None)])
        voters = sorted(layout)
        return {
            "kind": step.kind,
            # Who sends no request to whom; the answers to requests still flow.
            "one_way": layout,
            "rules": dict(sorted(rules.items())),
            **({"not_running": down} if down else {}),
            EFFECTS: [effect(DEGRADED, voters, by="iptables one-way")],
        }

    def stop(self, ctx: FaultContext, step: FaultStep) -> dict[str, Any]:
        removed = _remove_all(ctx)
        return {"kind": step.kind, "healed": sorted(removed), "rules_removed": removed}

    def heal_all(self, ctx: FaultContext) -> list[str]:
        removed = _remove_all(ctx)
        return [f"{n}: removed iptables chain {CHAIN} ({k} rules)" for n, k in removed.items() if k]


def _remove_all(ctx: FaultContext) -> dict[str, int]:
    removed = on_each(holding_rules(ctx), lambda n: on_live(n, lambda: remove(n)))
    return {n: k or 0 for n, k in removed.items()}


def holding_rules(ctx: FaultContext) -> list[Controllable]:
    """The nodes that may hold network rules: the running ones, and every host, whose network
    outlives its JVM."""
    return [n for n in ctx.nodes.values() if layout_of(n).lasting_network or n.is_running()]
