"""The jvm package for real, on a 3.9 and a 4.3 combined KRaft cluster (fast timing), one after
the other: each kind's effect observed on the cluster, and no rule left after heal."""

from __future__ import annotations

import statistics
import time

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient

from clusters.status import cluster_status
from nemesis.api import FaultContext, FaultStep
from nemesis.heal import heal_cluster
from nemesis.registry import build
from tests.integration.conftest import bring_up
from tests.integration.kafka_io import create_topic, wait_until

CLUSTERS = {
    "3.9.2": ("jvm-it", "10.213.141.0/24"),
    "4.3.1": ("jvm4-it", "10.213.142.0/24"),
}


@pytest.fixture(scope="module", params=list(CLUSTERS))
def cluster(request, docker_client, tmp_path_factory):
    name, subnet = CLUSTERS[request.param]
    yield from bring_up(
        docker_client,
        name,
        "kraft-combined",
        subnet,
        tmp_path_factory,
        version=request.param,
    )


@pytest.fixture
def ctx(cluster):
    dc, info = cluster
    return FaultContext(topology=info.topology, nodes=dc.nodes(info))


@pytest.fixture
def jvm():
    return build(["jvm"])["jvm"]


def step(action, kind, target=None, seed=11, **params):
    return FaultStep(0, action, "jvm", kind, target, seed, params)


def status(cluster):
    dc, info = cluster
    return cluster_status(dc, info, check_paused=False)


def healthy(cluster):
    """One leader all agree on, every broker unfenced (and the controller counts none fenced)."""

    def probe():
        st = status(cluster)
        brokers_ok = all(n.get("registered") and n.get("fenced") is False for n in st["nodes"])
        fenced = [(n.get("jmx") or {}).get("fenced_broker_count") for n in st["nodes"]]
        if st["quorum"]["agreed"] and brokers_ok and 0 in fenced:
            return st
        return None

    return wait_until("one leader and every broker unfenced", probe, timeout=120)


def node_of(st, node_id):
    return next(n for n in st["nodes"] if n["node_id"] == node_id)


def raft_and_offsets(cluster):
    """Each node's (leader, epoch), the leader's high watermark, and each broker's applied
    metadata offset; None where a node did not answer."""
    st = status(cluster)
    views = {n["name"]: (n.get("jmx") or {}) for n in st["nodes"]}
    raft = {n: (v.get("raft") or {}) for n, v in views.items()}
    return {
        "leaders": {n: (r.get("leader"), r.get("epoch")) for n, r in raft.items()},
        "hw": max((r.get("high_watermark") or -1) for r in raft.values()),
        "applied": {n: v.get("metadata_offset") for n, v in views.items()},
    }


def rules_everywhere(ctx):
    return {n: [r.name for r in h.loaded_rules()] for n, h in ctx.nodes.items()}


def test_controller_stall_keeps_the_raft_leader_while_metadata_stops_advancing(cluster, ctx, jvm):
    before = healthy(cluster)["quorum"]
    leader, epoch = before["leader"], before["epoch"]
    got = jvm.start(ctx, step("start", "controller-stall", stall_s=6))
    victim = node_of(status(cluster), leader)["name"]
    assert got["targets"] == [victim], "the active controller is the Raft leader"
    assert {h["class"].rsplit("$", 1)[1] for h in got["hooks"][victim]["hooks"]} == {
        "ControllerWriteEvent",
        "ControllerReadEvent",
        "ControllerEvent",
    }
    end_s = got["until_ms"] / 1000

    # What was already appended may still commit, and the brokers apply up to it: the stall
    # shows once every broker has applied the last committed record and nothing follows.
    def caught_up():
        seen = raft_and_offsets(cluster)
        return seen if set(seen["applied"].values()) == {seen["hw"] - 1} else None

    first = wait_until("the brokers to apply what was committed", caught_up, timeout=5, every=0.2)
    samples = [first]
    while time.time() < end_s - 0.7:
        samples.append(raft_and_offsets(cluster))
        time.sleep(0.25)
    assert len(samples) >= 5, "the stall was observed for most of its length"
    for s in samples:
        assert set(s["leaders"].values()) == {(leader, epoch)}, s
        assert s["hw"] == first["hw"] and s["applied"] == first["applied"], (first, s)
    stopped = jvm.stop(ctx, step("stop", "controller-stall"))
    assert sorted(stopped["unloaded"][victim]) == sorted(got["rules"][victim])
    wait_until(
        "the metadata offsets to advance after the stall",
        lambda: raft_and_offsets(cluster)["hw"] > first["hw"] + 1,
        timeout=30,
    )
    after = healthy(cluster)["quorum"]
    assert (after["leader"], after["epoch"]) == (leader, epoch), "no election: Raft ran on"


def test_heartbeat_delay_past_the_session_timeout_fences_the_broker_until_stop(cluster, ctx, jvm):
    st = healthy(cluster)
    leader = st["quorum"]["leader"]
    target = next(n["name"] for n in st["nodes"] if n["node_id"] != leader)
    ctx.hints["partition_leader"] = target
    # fast timing: heartbeats every 0.5 s, session timeout 3 s.
    got = jvm.start(ctx, step("start", "heartbeat-delay", delay_ms=5000, for_s=40))
    assert got["targets"] == [target]
    (hook,) = got["hooks"][target]["hooks"]
    assert hook["method"].endswith("sendBrokerHeartbeat")
    controller = ctx.nodes[node_of(st, leader)["name"]]

    def fenced():
        jmx = next(n for n in status(cluster)["nodes"] if n["name"] == controller.name)["jmx"]
        return (jmx or {}).get("fenced_broker_count")

    wait_until("the delayed broker to be fenced", lambda: (fenced() or 0) >= 1, timeout=30)
    jvm.stop(ctx, step("stop", "heartbeat-delay"))
    wait_until("no broker fenced after stop", lambda: fenced() == 0, timeout=60)
    healthy(cluster)


def leader_of(bootstrap, topic):
    """The leader of the topic's partition 0 once metadata names one, else None."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    try:
        md = admin.list_topics(topic, timeout=10)
    except KafkaException:
        return None
    part = md.topics[topic].partitions.get(0) if topic in md.topics else None
    return part.leader if part is not None and part.leader >= 0 else None


def send_ms(producer, topic, n):
    """Milliseconds each of ``n`` acknowledged sends took, one at a time."""
    took = []
    for i in range(n):
        t0 = time.monotonic()
        producer.produce(topic, value=str(i))
        assert producer.flush(30) == 0
        took.append((time.monotonic() - t0) * 1000)
    return took


def test_slow_disk_on_the_leader_slows_each_acknowledged_produce(cluster, ctx, jvm):
    _, info = cluster
    healthy(cluster)
    bootstrap = info.topology.bootstrap_servers()
    create_topic(bootstrap, "slow", partitions=1, replication=3)
    leader = wait_until("a leader for slow-0", lambda: leader_of(bootstrap, "slow"), timeout=30)
    # Quiet: a producer a failed assertion keeps alive would log on after the cluster is gone.
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0, "log_level": 0}
    )
    send_ms(producer, "slow", 3)  # connections and metadata warm
    before = statistics.median(send_ms(producer, "slow", 5))
    ctx.hints["partition_leaders"] = {"slow-0": leader}
    got = jvm.start(
        ctx,
        step("start", "slow-disk", "partition-leader", delay_ms=400, for_s=60, partition="slow-0"),
    )
    assert got["targets"] == [node_of(status(cluster), leader)["name"]]
    try:
        during = statistics.median(send_ms(producer, "slow", 5))
    finally:
        jvm.stop(ctx, step("stop", "slow-disk"))
    after = statistics.median(send_ms(producer, "slow", 5))
    print(
        f"slow-disk 400 ms: median send {before:.0f} ms before, {during:.0f} during, "
        f"{after:.0f} after"
    )
    assert during - before >= 300, (before, during)
    assert after < during - 200, (during, after)


def test_fsync_error_is_recorded_with_what_the_node_did_and_stop_restarts_it(cluster, ctx, jvm):
    st = healthy(cluster)
    target = next(n["name"] for n in st["nodes"] if n["node_id"] != st["quorum"]["leader"])
    ctx.hints["partition_leader"] = target
    got = jvm.start(ctx, step("start", "fsync-error", for_s=30))
    did = got["node_did"][target]
    print("fsync-error start:", got["hooks"][target], did)
    # A voter flushes the metadata log on every append; what Kafka then does is its own.
    assert did["exited"] or did["log"], did
    assert any("kchaos fsync-error" in line for line in did["log"]), did
    stopped = jvm.stop(ctx, step("stop", "fsync-error"))
    print("fsync-error stop:", stopped)
    assert stopped["restarted"] == ([target] if did["exited"] else [])
    assert ctx.nodes[target].is_running()
    healthy(cluster)


def test_heal_leaves_no_rule_on_any_node(cluster, ctx, jvm):
    dc, _ = cluster
    healthy(cluster)
    jvm.start(ctx, step("start", "slow-disk", "all", delay_ms=1, for_s=60))
    assert all(rules_everywhere(ctx).values())
    done = heal_cluster(dc)
    assert sum("unloaded Byteman rules" in line for line in done) == 3, done
    assert rules_everywhere(ctx) == {n: [] for n in ctx.nodes}
    assert heal_cluster(dc) == []
