"""Fault packages on hosts (nodes reached over SSH): the same packages, on nodes whose network
and files outlive their JVM, whose JVM is not PID 1 and whose files are elsewhere.

A killed container takes its iptables rules with it; a killed JVM on a host does not. The
partition and packet packages must therefore clean a host whose JVM is down, or a partition the
history calls healed would go on cutting that host off once it restarts."""

from __future__ import annotations

from clusters.capabilities import ExecResult, layout_of, proc_dir
from clusters.layout import host_layout
from clusters.topology import build_topology
from nemesis.api import FaultContext, FaultStep
from nemesis.heal import heal_cluster
from nemesis.registry import build
from tests.unit.nemesis.fake_node import FakeNode

TOPO = build_topology("kraft-combined", cluster="x")
PID = 4242


class FakeHost(FakeNode):
    """A FakeNode whose host answers while its JVM is down and keeps its network across a
    restart; its JVM's pid is PID, and its files live under /opt/k and /var/k."""

    layout = host_layout("/opt/k", "/var/k", "ens3")

    def exec(self, cmd: list[str], timeout: float | None = None) -> ExecResult:
        if cmd == ["cat", f"/proc/{PID}/environ"]:
            return ExecResult(0, "\0".join(self.environ), "")
        assert cmd != ["cat", "/proc/1/environ"], "PID 1 of a host is init"
        running = self.running
        self.running = True  # the host answers whatever its JVM does
        try:
            return super().exec(cmd, timeout)
        finally:
            self.running = running

    def main_pid(self) -> int | None:
        return PID if self.running else None

    def start(self) -> None:
        chains, jumps = self.chains, self.input_jumps
        self.running, self.stopped = True, False
        self.chains, self.input_jumps = chains, jumps  # the host's network is still there
        env = self.files.get(self.layout.faketime_env, "")
        self.environ = [line.removeprefix("export ") for line in env.splitlines()]
        self.restarts += 1


def context() -> FaultContext:
    return FaultContext(topology=TOPO, nodes={n.name: FakeHost(n) for n in TOPO.nodes})


class Cluster:
    def __init__(self, ctx: FaultContext):
        self.ctx = ctx

    def info(self):
        class Info:
            topology = TOPO

        return Info()

    def nodes(self, info=None):
        return self.ctx.nodes


def step(fault, kind, target=None, seed=3, action="start", **params):
    return FaultStep(0, action, fault, kind, target, seed, params)


def test_a_partition_ending_while_a_host_is_killed_leaves_that_host_no_rules():
    ctx = context()
    nem = build(["partition", "kill"])
    got = nem["partition"].start(ctx, step("partition", "isolate-one", "one"))
    isolated = got["targets"][0]
    nem["kill"].start(ctx, step("kill", "one", "one"))  # the same seed: the isolated node
    assert not ctx.nodes[isolated].running and ctx.nodes[isolated].chains["KCHAOS"]
    stopped = nem["partition"].stop(ctx, step("partition", "isolate-one", action="stop"))
    assert stopped["healed"] == ["n1", "n2", "n3"]
    assert all(not n.chains and not n.input_jumps for n in ctx.nodes.values())
    nem["kill"].stop(ctx, step("kill", "one", action="stop"))
    assert ctx.nodes[isolated].running and not ctx.nodes[isolated].chains


def test_a_partition_starting_while_a_host_is_killed_reaches_it_too():
    ctx = context()
    ctx.nodes["n2"].kill()
    got = build(["partition"])["partition"].start(ctx, step("partition", "isolate-one", "one"))
    assert got["not_running"] == ["n2"]
    assert set(got["rules"]) == {"n1", "n2", "n3"}  # its restart comes back into the partition
    assert ctx.nodes["n2"].chains["KCHAOS"]


def test_heal_after_a_crash_clears_a_killed_hosts_rules_and_restarts_it():
    ctx = context()
    build(["partition"])["partition"].start(ctx, step("partition", "random-halves"))
    build(["packet"])["packet"].start(ctx, step("packet", "delay", "all"))
    ctx.nodes["n1"].kill()
    done = heal_cluster(Cluster(ctx))  # type: ignore[arg-type]
    assert "n1: started exited node" in done
    assert any(d.startswith("n1: removed iptables chain KCHAOS") for d in done)
    assert any(d.startswith("n1: removed netem qdisc") for d in done)
    assert all(n.running and not n.chains and not n.qdisc for n in ctx.nodes.values())


def test_packet_faults_shape_the_hosts_own_interface():
    ctx = context()
    got = build(["packet"])["packet"].start(ctx, step("packet", "delay", "all", delay_ms=20))
    assert got["dev"] == "ens3"
    assert ["tc", "qdisc", "replace", "dev", "ens3", "root", "netem", "delay", "20ms"] in ctx.nodes[
        "n1"
    ].commands


def test_clock_faults_use_the_hosts_files_and_its_jvms_environment():
    ctx = context()
    clock = build(["clock"])["clock"]
    node = ctx.nodes["n1"]
    assert proc_dir(node) == f"/proc/{PID}"
    got = clock.start(ctx, step("clock", "bump", "all", delta_s=30))
    assert got["restarted"] == ["n1", "n2", "n3"]
    layout = layout_of(node)
    assert layout.faketime_env == "/opt/k/etc/kafka/faketime.env"
    assert f"FAKETIME_TIMESTAMP_FILE={layout.faketime_offset}" in node.files[layout.faketime_env]
    assert node.files[layout.faketime_offset] == "+30\n"
    # Loaded now: the next bump changes the offset without a restart.
    again = clock.start(ctx, step("clock", "bump", "all", delta_s=-5))
    assert again["restarted"] == [] and node.files[layout.faketime_offset] == "-5\n"
    assert clock.heal_all(ctx) == [
        f"{n}: removed libfaketime and restarted" for n in ("n1", "n2", "n3")
    ]
    assert layout.faketime_env not in node.files
