"""Choreographies (nemesis/choreo.py): plans that draw them are byte-identical for a seed and
replay as stored; every sub-fault they start is stopped within its window, on roles that stay
the same; carried out by the real packages on in-memory nodes (fake_node.py) each phase leaves
the cluster as the sequence says and the last leaves nothing to heal; what cannot run is one
sentence."""

from __future__ import annotations

from collections import defaultdict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clusters.topology import build_topology
from harness.plan import build_plan, fault_windows, load_plan
from harness.spec import RunSpec, SpecError, spec_from_dict, validate
from nemesis import choreo
from nemesis.api import NAMED, NAMED_PARAM, FaultContext, FaultStep
from nemesis.choreo import CHOREOGRAPHIES
from nemesis.errors import NemesisError
from nemesis.heal import heal_cluster
from nemesis.items import on_disk_layer, packages
from nemesis.registry import build
from tests.unit.nemesis.fake_node import FakeNode

NAMES = sorted(CHOREOGRAPHIES)
SHAPES = [
    {"topology": "kraft-combined"},
    {"topology": "kraft-combined", "controllers": 5},
    {"topology": "kraft"},
    {"topology": "zk"},
]


def spec(name: str, **options) -> RunSpec:
    return validate(
        RunSpec.of(
            nemesis=[f"choreo:{name}"],
            time_limit=options.pop("time_limit", 200.0),
            nemesis_interval=options.pop("nemesis_interval", 20.0),
            **options,
        )
    )


def by_subfault(steps: list[FaultStep]) -> dict[tuple, list[FaultStep]]:
    """Steps grouped as their sub-fault: a start and its stop share all of these."""
    out: dict[tuple, list[FaultStep]] = defaultdict(list)
    for s in steps:
        out[(s.fault, s.kind, s.target, s.seed, tuple(s.params[NAMED_PARAM]))].append(s)
    return out


@settings(max_examples=25, deadline=None)
@given(
    name=st.sampled_from(NAMES),
    shape=st.sampled_from(SHAPES),
    seed=st.integers(0, 2**40),
    time_limit=st.floats(25.0, 400.0),
    interval=st.floats(3.0, 40.0),
)
def test_a_choreographed_plan_is_the_same_bytes_for_its_seed_and_replays_as_stored(
    name, shape, seed, time_limit, interval, tmp_path_factory
):
    s = spec(name, time_limit=round(time_limit, 1), nemesis_interval=round(interval, 1), **shape)
    plan = build_plan(s, seed)
    assert build_plan(s, seed).to_json() == plan.to_json()
    path = tmp_path_factory.mktemp("plan") / "plan.json"
    path.write_text(plan.to_json())
    assert load_plan(path).to_json() == plan.to_json()


@settings(max_examples=40, deadline=None)
@given(
    name=st.sampled_from(NAMES),
    shape=st.sampled_from(SHAPES),
    seed=st.integers(0, 2**40),
    time_limit=st.floats(25.0, 400.0),
    interval=st.floats(3.0, 40.0),
)
def test_every_subfault_ends_with_its_stop_in_the_window_on_the_same_roles(
    name, shape, seed, time_limit, interval
):
    s = spec(name, time_limit=round(time_limit, 1), nemesis_interval=round(interval, 1), **shape)
    steps = build_plan(s, seed).faults
    per_window = len(CHOREOGRAPHIES[name].moves)
    # Every window is the choreography's, the last too when the time limit cuts it.
    assert len(steps) == per_window * len(fault_windows(s))
    assert [x.at_s for x in steps] == sorted(x.at_s for x in steps)
    assert all(x.target == NAMED and x.at_s < s.time_limit for x in steps)
    brokers = {n.name for n in build_topology(s.topology, controllers=s.controllers).brokers}
    for i in range(0, len(steps), per_window):
        window = steps[i : i + per_window]
        groups = by_subfault(window)
        # Three sub-faults: the minority's, the rest's, the crashed node's; each started once
        # and stopped last, so the sequence ends with nothing on.
        assert len(groups) == 3
        for group in groups.values():
            assert [x.action for x in group] == ["start", "stop"]
        cast = [set(k[4]) for k in groups]
        assert set().union(*cast) == brokers and sum(map(len, cast)) == len(brokers)
        (crashed,) = [set(k[4]) for k in groups if k[0] == "disk"]
        assert len(crashed) == 1
        minority = set(window[0].params[NAMED_PARAM])
        assert len(minority) == (len(brokers) - 1) // 2 and not minority & crashed


def test_a_window_that_reaches_the_time_limit_still_ends_the_sequence_before_it():
    s = spec("last-replica-pause", time_limit=50.0, nemesis_interval=20.0)
    steps = build_plan(s, 3).faults
    # Windows at 20 s (to 40 s) and, cut by the limit, 60 s: only the first fits.
    assert [x.at_s for x in steps] == [20.0, 30.0, 30.0, 30.0, 30.0, 40.0]
    cut = choreo.phase_times(40.0, None, 55.0)
    assert cut == {"start": 40.0, "turn": 45.0, "end": 50.0}


def test_the_moves_are_jepsens_order_with_the_roles_kept():
    s = spec("last-replica-partition", time_limit=50.0, nemesis_interval=20.0)
    steps = build_plan(s, 11).faults
    said = [(x.at_s, f"{x.action}-{x.fault}", tuple(x.params[NAMED_PARAM])) for x in steps]
    minority, crashed = said[0][2], said[1][2]
    rest = said[3][2]
    assert said == [
        (20.0, "start-partition", minority),
        (30.0, "start-disk", crashed),
        (30.0, "stop-partition", minority),
        (30.0, "start-partition", rest),
        (30.0, "stop-disk", crashed),
        (40.0, "stop-partition", rest),
    ]
    assert len({minority, crashed, rest}) == 3


# -- carried out on in-memory nodes ---------------------------------------------------------


def _context(topo) -> FaultContext:
    nodes = {n.name: FakeNode(n) for n in topo.nodes}
    for node in nodes.values():
        node.disk = {"powered": True, "pending": {"data/t-0/0.log": 100}}
    return FaultContext(topology=topo, nodes=nodes)


def _cut_off(node: FakeNode, topo) -> bool:
    """Whether the node's rules drop every other node (those of the others drop only it)."""
    dropped = {r.split()[3].removesuffix("/32") for r in node.chains.get("KCHAOS", [])}
    return dropped == {n.ip for n in topo.nodes if n.name != node.name}


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "-".join(map(str, s.values())))
def test_carried_out_each_phase_leaves_what_the_sequence_says_and_the_end_nothing(name, shape):
    s = spec(name, time_limit=50.0, nemesis_interval=20.0, **shape)
    steps = build_plan(s, 17).faults
    topo = build_topology(s.topology, controllers=s.controllers)
    ctx = _context(topo)
    nemeses = build(packages(s.nemesis))
    minority = steps[0].params[NAMED_PARAM]
    crashed = next(x for x in steps if x.fault == "disk").params[NAMED_PARAM]
    rest = [b.name for b in topo.brokers if b.name not in minority + crashed]
    held = "pause" if name.endswith("pause") else "partition"

    def on(names: list[str]) -> bool:
        if held == "pause":
            return all(ctx.nodes[n].is_paused_by_signal() for n in names)
        return all(_cut_off(ctx.nodes[n], topo) for n in names)

    def off(names: list[str]) -> bool:
        if held == "pause":
            return not any(ctx.nodes[n].stopped for n in names)
        return not any(_cut_off(ctx.nodes[n], topo) for n in names)

    recorded = []
    for step in steps:
        nem = nemeses[step.fault]
        recorded.append(nem.start(ctx, step) if step.action == "start" else nem.stop(ctx, step))
        if step is steps[0]:
            # The minority is held off; the others take the writes.
            assert on(minority) and off(crashed + rest)
        if step.fault == "disk" and step.action == "start":
            (node,) = crashed
            assert not ctx.nodes[node].running and recorded[-1]["dropped"][node]["bytes"] == 100
        if step is steps[-2]:
            # The turn: the rest held off, the minority back, the crashed node up again on
            # what its disk kept, none of it held.
            assert on(rest) and off(minority + crashed)
            assert ctx.nodes[crashed[0]].running and ctx.nodes[crashed[0]].restarts == 1
    # After the last step: nothing held, the crashed node restarted once on a powered disk.
    assert off(topo.names()) and all(n.running for n in ctx.nodes.values())
    assert not any(n.chains or n.stopped for n in ctx.nodes.values())
    assert all(n.disk["powered"] for n in ctx.nodes.values())
    assert ctx.nodes[crashed[0]].restarts == 1
    assert heal_cluster(_Cluster(ctx)) == []


def test_the_turn_holds_the_rest_and_frees_the_minority_while_the_crashed_node_restarts():
    s = spec("last-replica-pause", time_limit=50.0, nemesis_interval=20.0)
    steps = build_plan(s, 17).faults
    ctx = _context(build_topology("kraft-combined"))
    nemeses = build(packages(s.nemesis))
    for step in steps[:-1]:
        nem = nemeses[step.fault]
        nem.start(ctx, step) if step.action == "start" else nem.stop(ctx, step)
    minority, rest = steps[0].params[NAMED_PARAM], steps[-1].params[NAMED_PARAM]
    crashed = steps[1].params[NAMED_PARAM]
    assert not any(ctx.nodes[n].stopped for n in minority + crashed)
    assert all(ctx.nodes[n].is_paused_by_signal() for n in rest)
    # The minority's stop named it alone: the record says so, for the checks that pair them.
    resumed = nemeses["pause"].stop(ctx, steps[-1])
    assert resumed["resumed"] == rest and resumed["ends_only"] == rest


class _Cluster:
    """The in-memory nodes as heal_cluster takes a cluster."""

    def __init__(self, ctx: FaultContext) -> None:
        self.ctx = ctx

    def info(self):
        return type("Info", (), {"topology": self.ctx.topology})()

    def nodes(self, info):
        return self.ctx.nodes


def test_a_named_step_naming_no_node_of_the_cluster_is_refused_before_touching_any():
    ctx = _context(build_topology("kraft-combined"))
    step = FaultStep(0, "start", "pause", "minority", NAMED, 1, {NAMED_PARAM: ["b9"]})
    with pytest.raises(NemesisError, match=r"target 'nodes' names b9: this cluster's nodes are"):
        build(["pause"])["pause"].start(ctx, step)
    bad = FaultStep(0, "start", "pause", "minority", NAMED, 1, {NAMED_PARAM: "n1"})
    with pytest.raises(NemesisError, match=r"needs params nodes: a list of node names"):
        build(["pause"])["pause"].check(bad)
    assert not any(n.stopped for n in ctx.nodes.values())


# -- what a spec may name --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (
            {"nemesis": ["choreo:last-replica-pause"], "controllers": 4},
            "--nemesis: choreo:last-replica-pause: choreo:last-replica-pause needs an odd number "
            "of brokers, at least 3 (the paused minority and the crashed node must make a "
            "majority): this kraft-combined cluster has 4",
        ),
        (
            {"nemesis": ["choreo"], "controllers": 1},
            "needs an odd number of brokers, at least 3",
        ),
        (
            {"nemesis": ["choreo:last-replica-pause@one"]},
            "--nemesis: choreo:last-replica-pause@one: a choreography takes no target",
        ),
        (
            {"nemesis": ["choreo:swap"]},
            "--nemesis: choreo:swap: choreo has no choreography 'swap': its choreographies are "
            "last-replica-pause, last-replica-partition",
        ),
    ],
)
def test_what_cannot_run_is_one_sentence(options, said):
    with pytest.raises(SpecError) as err:
        spec_from_dict(options)
    assert said in str(err.value)
    assert "\n" not in str(err.value)


def test_a_choreography_that_powers_a_node_off_puts_the_run_on_the_disk_layer():
    assert on_disk_layer(["choreo:last-replica-partition"]) and on_disk_layer(["choreo"])
    assert on_disk_layer(["kill", "disk@one"])
    assert not on_disk_layer(["pause", "choreo:nonsense@", "::"])
    assert spec_from_dict({"nemesis": ["choreo:last-replica-pause"]}).disk_layer_mode == "journal"
    assert packages(["choreo:last-replica-pause", "kill"]) == ["pause", "disk", "kill"]
    assert packages(["choreo"]) == ["pause", "disk", "partition"]


def test_power_losses_on_ssh_hosts_are_refused_in_one_sentence(tmp_path):
    inventory = tmp_path / "hosts.yaml"
    inventory.write_text(
        "cluster: lab\nknown_hosts: kh\ndefaults: {user: root, key: id}\nhosts:\n"
        + "".join(
            f'  - {{name: kafka-{c}, address: 192.0.2.1{i}, role: "broker,controller"}}\n'
            for i, c in enumerate("abc")
        )
    )
    for items in (["choreo:last-replica-partition"], "pause,disk"):
        with pytest.raises(SpecError) as err:
            spec_from_dict({"hosts": str(inventory), "nemesis": items})
        said = str(err.value)
        assert said == (
            "spec: --nemesis: power losses (disk, and the choreographies that use them) need the "
            "disk layer, which runs on Docker nodes only: not on SSH hosts yet"
        )
    assert spec_from_dict({"hosts": str(inventory), "nemesis": ["pause"]}).nemesis == ["pause"]


@pytest.mark.parametrize("name", NAMES)
def test_a_run_ended_at_any_step_of_a_sequence_is_healed_whole(name):
    """Normal end, error, Ctrl-C and a dead client host all end in heal_cluster: whichever step
    a sequence got to, it leaves every node running, powered, unstopped and uncut."""
    s = spec(name, time_limit=50.0, nemesis_interval=20.0, controllers=5)
    steps = build_plan(s, 31).faults
    topo = build_topology(s.topology, controllers=5)
    for k in range(len(steps) + 1):
        ctx = _context(topo)
        nemeses = build(packages(s.nemesis))
        for step in steps[:k]:
            nem = nemeses[step.fault]
            nem.start(ctx, step) if step.action == "start" else nem.stop(ctx, step)
        heal_cluster(_Cluster(ctx))
        assert all(n.running and not n.stopped and not n.chains for n in ctx.nodes.values()), k
        assert all(n.disk["powered"] for n in ctx.nodes.values()), k
        assert heal_cluster(_Cluster(ctx)) == [], k
