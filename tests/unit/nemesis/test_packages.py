"""Packages driven against in-memory nodes: what they install, what they record, how they heal."""

import json

from clusters.errors import ClusterError
from clusters.topology import build_topology
from nemesis.api import FaultContext, FaultStep
from nemesis.grudge import view
from nemesis.registry import build
from tests.unit.nemesis.fake_node import FakeNode

TOPO = build_topology("kraft", cluster="x", brokers=3)


def context():
    return FaultContext(topology=TOPO, nodes={n.name: FakeNode(n) for n in TOPO.nodes})


def step(fault, kind, target=None, seed=3, **params):
    return FaultStep(0, "start", fault, kind, target, seed, params)


def test_a_partition_installs_exactly_its_grudge_and_is_recorded_as_json():
    ctx, nemesis = context(), build(["partition"])["partition"]
    got = nemesis.start(ctx, step("partition", "majorities-ring"))
    json.dumps(got)
    ip_name = {n.ip: n.name for n in TOPO.nodes}
    for name, node in ctx.nodes.items():
        dropped = {ip_name[r.split()[3].removesuffix("/32")] for r in node.chains.get("KCHAOS", [])}
        assert dropped == set(got["grudge"][name]) and node.input_jumps == ["KCHAOS"]
    grudge = {n: frozenset(d) for n, d in got["grudge"].items()}
    assert all(len(view(grudge, n)) >= 4 for n in grudge)  # a majority of 6


def test_a_second_partition_replaces_the_first_and_stop_leaves_no_trace():
    ctx, nemesis = context(), build(["partition"])["partition"]
    nemesis.start(ctx, step("partition", "random-halves"))
    got = nemesis.start(ctx, step("partition", "controllers-brokers"))
    assert got["components"] == [["b1", "b2", "b3"], ["c1", "c2", "c3"]]
    assert all(
        len(n.chains["KCHAOS"]) == 3 and n.input_jumps == ["KCHAOS"] for n in ctx.nodes.values()
    )
    stopped = nemesis.stop(ctx, FaultStep(0, "stop", "partition", "controllers-brokers"))
    assert sum(stopped["rules_removed"].values()) == 18
    assert all(not n.chains and not n.input_jumps for n in ctx.nodes.values())
    assert nemesis.heal_all(ctx) == []


def test_kill_then_pause_of_the_same_node_records_it_as_not_running_and_heal_undoes_both():
    ctx = context()
    nem = build(["kill", "pause"])
    killed = nem["kill"].start(ctx, step("kill", "one"))
    paused = nem["pause"].start(ctx, step("pause", "one"))  # same seed, same node
    json.dumps([killed, paused])
    assert killed["targets"] == paused["targets"] and paused["not_running"] == killed["targets"]
    other = nem["pause"].start(ctx, step("pause", "all"))
    assert set(other["stopped_after_s"]) == set(ctx.nodes) - set(killed["targets"])
    assert nem["pause"].heal_all(ctx) == [
        f"{n}: sent SIGCONT to stopped JVM" for n in sorted(other["stopped_after_s"])
    ]
    assert (
        nem["kill"].stop(ctx, FaultStep(0, "stop", "kill", "one"))["restarted"] == killed["targets"]
    )
    assert all(n.running and not n.stopped for n in ctx.nodes.values())


def test_clock_restarts_a_node_only_to_load_libfaketime_and_heal_removes_it():
    ctx, clock = context(), build(["clock"])["clock"]
    assert clock.prepare(ctx) == [f"{n}: restarted under libfaketime" for n in sorted(ctx.nodes)]
    got = clock.start(ctx, step("clock", "bump", "one", delta_s=-90))
    json.dumps(got)
    node = ctx.nodes[got["targets"][0]]
    assert got["restarted"] == [] and node.files["/etc/kafka/faketime.rc"] == "-90\n"
    assert clock.stop(ctx, FaultStep(0, "stop", "clock", "bump"))["reset"] == sorted(ctx.nodes)
    assert node.files["/etc/kafka/faketime.rc"] == "+0\n"
    skewed = clock.start(ctx, step("clock", "restart-skewed", "one", delta_s=5))
    assert skewed["restarted"] == [node.name] and node.restarts == 2
    assert len(clock.heal_all(ctx)) == len(ctx.nodes)
    assert all(
        not n.environ and "/etc/kafka/faketime.env" not in n.files for n in ctx.nodes.values()
    )
    assert clock.heal_all(ctx) == []


def test_without_netem_a_packet_delay_is_not_applied_anywhere_and_loss_still_works():
    import pytest

    from nemesis.errors import NotApplied

    ctx, packet = context(), build(["packet"])["packet"]
    for node in ctx.nodes.values():
        node.netem = False
    with pytest.raises(NotApplied, match="no netem qdisc"):
        packet.start(ctx, step("packet", "delay", "all", delay_ms=50))
    tried = [n for n in ctx.nodes.values() if any(c[:2] == ["tc", "qdisc"] for c in n.commands)]
    assert len(tried) == 1, "only one node may be tried before the kernel's answer is known"
    assert all(not n.qdisc for n in ctx.nodes.values())
    lost = packet.start(ctx, step("packet", "loss", "one", percent=20))
    assert lost["percent"] == 20 and len(lost["rules"]) == 1
    healed = packet.heal_all(ctx)
    assert healed == [f"{lost['targets'][0]}: removed netem qdisc and KCHAOS-PKT chain"]


def test_with_netem_a_delay_reaches_every_target():
    ctx, packet = context(), build(["packet"])["packet"]
    got = packet.start(ctx, step("packet", "delay", "all", delay_ms=50, jitter_ms=5))
    assert got["netem"] == "delay 50ms 5ms"
    assert all(n.qdisc == ["netem", "delay", "50ms", "5ms"] for n in ctx.nodes.values())
    assert len(packet.heal_all(ctx)) == len(ctx.nodes)


class StopsUnderTheNemesis(FakeNode):
    """A node whose container stops (or stops and starts again) just as the nemesis execs in it,
    as when a migration step restarts it: Docker then refuses the exec."""

    def __init__(self, spec, comes_back: bool):
        super().__init__(spec)
        self.comes_back = comes_back
        self.raced = False

    def exec(self, cmd, timeout=None):
        if not self.raced:
            self.raced = True
            self.running = False
            if self.comes_back:
                self.start()
            raise ClusterError(f"node {self.name}: cannot run {cmd[0]}: container is not running")
        return super().exec(cmd, timeout)


def test_a_node_restarted_while_the_partition_is_installed_is_recorded_or_covered():
    nemesis = build(["partition"])["partition"]
    for comes_back in (False, True):
        ctx = context()
        ctx.nodes["b1"] = StopsUnderTheNemesis(TOPO.node("b1"), comes_back)
        got = nemesis.start(ctx, step("partition", "controllers-brokers"))
        b1 = ctx.nodes["b1"]
        if comes_back:  # its new namespace got the rules
            assert "not_running" not in got and len(b1.chains["KCHAOS"]) == 3
        else:  # down: recorded; the controllers' rules still cut it off
            assert got["not_running"] == ["b1"] and not b1.chains
        assert all(len(ctx.nodes[c].chains["KCHAOS"]) == 3 for c in ("c1", "c2", "c3"))
        # A stop racing a restart the same way leaves no trace either.
        b1.raced = False
        assert nemesis.stop(ctx, FaultStep(0, "stop", "partition", "controllers-brokers"))
        assert all(not n.chains for n in ctx.nodes.values() if n.is_running())


class StopsBeforeTheSignal(FakeNode):
    """A node whose container stops between the nemesis's look and its signal."""

    def kill(self):
        self.running = False
        raise ClusterError(f"node {self.name}: cannot send SIGKILL: container is not running")


def test_a_node_that_stopped_before_the_kill_landed_is_recorded_as_not_running():
    ctx = context()
    ctx.nodes["c1"] = StopsBeforeTheSignal(TOPO.node("c1"))
    got = build(["kill"])["kill"].start(ctx, step("kill", "all"))
    assert got["not_running"] == ["c1"] and "c1" not in got["exited_after_s"]
    assert sorted(got["exited_after_s"]) == ["b1", "b2", "b3", "c2", "c3"]
