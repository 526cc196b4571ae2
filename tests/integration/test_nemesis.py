"""Every fault package for real on one combined KRaft cluster, each healed before the next."""

import random
import time

import pytest
import requests

from clusters.config import FAKETIME_ENV
from clusters.status import cluster_status
from nemesis.api import FaultContext, FaultStep
from nemesis.errors import NemesisError
from nemesis.heal import heal_cluster
from nemesis.iptables import dropped
from nemesis.registry import build
from nemesis.targets import resolve
from tests.integration.conftest import bring_up
from tests.integration.kafka_io import wait_until

NAME = "nem-it"


@pytest.fixture(scope="module")
def cluster(docker_client, tmp_path_factory):
    yield from bring_up(docker_client, NAME, "kraft-combined", "10.213.50.0/24", tmp_path_factory)


@pytest.fixture
def ctx(cluster):
    dc, info = cluster
    return FaultContext(topology=info.topology, nodes=dc.nodes(info))


def step(action, fault, kind, target=None, **params):
    return FaultStep(
        at_s=0, action=action, fault=fault, kind=kind, target=target, seed=7, params=params
    )


def views(cluster, among):
    dc, info = cluster
    seen = cluster_status(dc, info, check_paused=False)["quorum"]["views"]
    return {n: v for n, v in seen.items() if n in among}


def new_leader_among(cluster, survivors, old_id):
    """The leader every survivor names, once they agree on one that is not ``old_id``."""

    def probe():
        seen = views(cluster, survivors)
        pairs = {(v["leader"], v["epoch"]) for v in seen.values() if v}
        if len(pairs) == 1 and all(seen.values()) and len(seen) == len(survivors):
            leader, epoch = next(iter(pairs))
            return (leader, epoch) if leader not in (None, -1, old_id) else None
        return None

    return wait_until("survivors to elect a new leader", probe, timeout=60)


def healthy(cluster):
    dc, info = cluster

    def probe():
        st = cluster_status(dc, info, check_paused=False)
        brokers_ok = all(n.get("registered") and n.get("fenced") is False for n in st["nodes"])
        return st["quorum"] if st["quorum"]["agreed"] and brokers_ok else None

    return wait_until(
        "every node to agree on one leader and be unfenced",
        probe,
        timeout=120,
        explain=lambda: node_states(dc, info),
    )


def node_states(dc, info) -> str:
    """Each node's container state, and the log tail of any that is not running."""
    out = []
    for name, node in dc.nodes(info).items():
        st = node.state()
        exit_code, oom = st.get("ExitCode"), st.get("OOMKilled")
        out.append(f"{name}: {st.get('Status')} exit={exit_code} oom={oom}")
        if not st.get("Running"):
            out.append(node.logs(tail=40))
    return "\n".join(out)


def leader_node(cluster, ctx):
    leader = healthy(cluster)["leader"]
    return next(n.name for n in ctx.topology.nodes if n.node_id == leader), leader


def kchaos_rules(ctx):
    return {n: h.exec(["iptables", "-S"]).stdout for n, h in ctx.nodes.items()}


def test_isolating_the_active_controller_elects_a_new_leader_and_heal_reconnects(cluster, ctx):
    nemesis = build(["partition"])["partition"]
    victim, old_id = leader_node(cluster, ctx)
    got = nemesis.start(ctx, step("start", "partition", "isolate-active-controller"))
    assert got["targets"] == [victim]
    assert got["components"] == [[victim], sorted(set(ctx.nodes) - {victim})]
    survivors = set(ctx.nodes) - {victim}
    new_leader_among(cluster, survivors, old_id)
    # The host was not cut off: the isolated node still answers JMX on its own.
    assert views(cluster, {victim})[victim] is not None

    healed = nemesis.stop(ctx, step("stop", "partition", "isolate-active-controller"))
    assert sum(healed["rules_removed"].values()) == 4
    assert not any("KCHAOS" in rules for rules in kchaos_rules(ctx).values())
    healthy(cluster)


def test_killing_the_active_controller_fails_over_and_restart_rejoins(cluster, ctx):
    nemesis = build(["kill"])["kill"]
    victim, old_id = leader_node(cluster, ctx)
    got = nemesis.start(ctx, step("start", "kill", "active-controller"))
    assert got["targets"] == [victim] and got["signal"] == "SIGKILL"
    assert not ctx.nodes[victim].is_running()
    new_leader_among(cluster, set(ctx.nodes) - {victim}, old_id)
    assert nemesis.stop(ctx, step("stop", "kill", "active-controller"))["restarted"] == [victim]
    healthy(cluster)


def test_pausing_the_quorum_leader_fails_over_and_sigcont_rejoins(cluster, ctx):
    nemesis = build(["pause"])["pause"]
    victim, old_id = leader_node(cluster, ctx)
    got = nemesis.start(ctx, step("start", "pause", "quorum-leader"))
    assert got["targets"] == [victim] and ctx.nodes[victim].is_paused_by_signal()
    new_leader_among(cluster, set(ctx.nodes) - {victim}, old_id)
    assert nemesis.stop(ctx, step("stop", "pause", "quorum-leader"))["resumed"] == [victim]
    healthy(cluster)


def test_packet_loss_drops_a_share_of_the_traffic_from_other_nodes(cluster, ctx):
    nemesis = build(["packet"])["packet"]
    got = nemesis.start(ctx, step("start", "packet", "loss", "one", percent=30))
    node = ctx.nodes[got["targets"][0]]
    # Raft fetches and broker heartbeats flow all the time; some of them must now be dropped.
    wait_until("packets to be dropped", lambda: dropped(node, "KCHAOS-PKT") > 5, timeout=30)
    assert nemesis.stop(ctx, step("stop", "packet", "loss"))["cleared"] == [node.name]
    assert "KCHAOS" not in node.exec(["iptables", "-S"]).stdout


def connect_ms(src, dst_ip, tries=5):
    """Fastest of a few TCP connects from inside ``src``: a SYN/SYN-ACK round trip and a fork."""
    script = (
        "a=$(date +%s%N); nc -z -w 5 " + dst_ip + " 9092; b=$(date +%s%N); echo $(((b-a)/1000))"
    )
    return min(int(src.exec(["sh", "-c", script]).stdout.strip()) for _ in range(tries)) / 1000


def test_packet_delay_adds_latency_between_two_nodes(cluster, ctx):
    nemesis = build(["packet"])["packet"]
    delay = step("start", "packet", "delay", "one", delay_ms=200)
    # The seed decides the target; measure the same pair before and after.
    target = ctx.nodes[resolve(ctx, "one", random.Random(delay.seed)).targets[0]]
    peer = next(n for n in ctx.nodes.values() if n is not target)
    before = connect_ms(peer, target.ip)
    try:
        got = nemesis.start(ctx, delay)
    except NemesisError as exc:
        if "no netem" in str(exc):
            pytest.skip(str(exc))
        raise
    try:
        assert got["targets"] == [target.name] and got["netem"] == "delay 200ms"
        after = connect_ms(peer, target.ip)
        # The SYN-ACK leaves the target 200 ms late.
        assert after - before >= 150, f"connect took {before} ms before, {after} ms after"
    finally:
        nemesis.stop(ctx, step("stop", "packet", "delay"))


def jvm_skew_s(node):
    """How far the JVM's wall clock is from the host's: Jolokia stamps answers with its time."""
    body = [{"type": "read", "mbean": "java.lang:type=Runtime", "attribute": "Uptime"}]
    try:
        answer = requests.post(f"http://{node.ip}:8778/jolokia/", json=body, timeout=2).json()
    except (requests.RequestException, ValueError):
        return None
    return answer[0]["timestamp"] - time.time()


def test_clock_bump_is_seen_by_the_running_jvm_and_reset_undoes_it(cluster, ctx):
    nemesis = build(["clock"])["clock"]
    got = nemesis.start(ctx, step("start", "clock", "bump", "one", delta_s=3600))
    node = ctx.nodes[got["targets"][0]]
    assert got["restarted"] == [node.name], "the first clock fault starts the JVM under faketime"
    wait_until("JVM clock +1 h", lambda: abs((jvm_skew_s(node) or 0) - 3600) < 3, timeout=90)
    # Now under libfaketime: a second bump changes the running JVM's clock without a restart.
    again = nemesis.start(ctx, step("start", "clock", "bump", "one", delta_s=-600))
    assert again["targets"] == [node.name] and again["restarted"] == []
    wait_until("JVM clock -10 min", lambda: abs((jvm_skew_s(node) or 0) + 600) < 3, timeout=30)
    assert nemesis.stop(ctx, step("stop", "clock", "bump"))["reset"] == [node.name]
    wait_until(
        "JVM clock back",
        lambda: abs(jvm_skew_s(node) or 99) < 3,
        timeout=30,
        explain=lambda: (
            f"skew now {jvm_skew_s(node)}; {node.name} faketime file: "
            f"{node.exec(['cat', FAKETIME_ENV]).stdout!r}\n{node_states(*cluster)}\n"
            f"{node.logs(tail=30)}"
        ),
    )
    strobe = nemesis.start(
        ctx, step("start", "clock", "strobe", "one", delta_s=3600, period_s=2, duration_s=16)
    )
    assert strobe["targets"] == [node.name] and strobe["restarted"] == []
    seen = set()

    def both_seen():
        skew = jvm_skew_s(node)
        if skew is not None:
            seen.add(round(skew / 3600))
        return seen >= {0, 1}

    wait_until("the strobe to show both +1 h and the real time", both_seen, timeout=20, every=0.2)
    nemesis.stop(ctx, step("stop", "clock", "strobe"))
    # No health check here: the heal test removes the preload and waits for health.


def test_heal_cluster_removes_every_leftover_fault_and_is_idempotent(cluster, ctx):
    dc, _ = cluster
    nem = build(["partition", "packet", "pause", "kill", "clock"])
    nem["partition"].start(ctx, step("start", "partition", "random-halves"))
    nem["packet"].start(ctx, step("start", "packet", "loss", "all", percent=20))
    nem["kill"].start(ctx, FaultStep(0, "start", "kill", "one", seed=1))
    killed = [n for n, h in ctx.nodes.items() if not h.is_running()]
    paused = nem["pause"].start(ctx, FaultStep(0, "start", "pause", "one", seed=2))["targets"]
    paused = [n for n in paused if n not in killed]

    done = heal_cluster(dc)
    text = "\n".join(done)
    assert all(f"{n}: started exited node" in text for n in killed), done
    assert all(f"{n}: sent SIGCONT" in text for n in paused), done
    assert "iptables chain KCHAOS " in text and "KCHAOS-PKT" in text, done
    # The clock test left libfaketime preloaded in one JVM: healing removes it, with a restart.
    assert "removed libfaketime" in text, done
    for name, h in ctx.nodes.items():
        assert h.is_running() and not h.is_paused_by_signal(), name
        assert "KCHAOS" not in h.exec(["iptables", "-S"]).stdout, name
        assert not h.exec(["test", "-f", FAKETIME_ENV]).ok, name
    assert heal_cluster(dc) == []
    healthy(cluster)
