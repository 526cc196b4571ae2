"""Byteman's agent: fetched once like Jolokia's, and started with every Kafka JVM, its listener
bound to the node's own cluster address; ZooKeeper JVMs start without it."""

from __future__ import annotations

import shlex
from pathlib import Path

from clusters import kafka_dist
from clusters.byteman import BYTEMAN_PORT
from clusters.config import CONF_DIR, new_cluster_id, render_node, running_version
from clusters.kafka_dist import BYTEMAN, BYTEMAN_JAR, KafkaDist
from clusters.topology import build_topology

CLASSES = {
    "kafka": "kafka.Kafka",
    "storage": "kafka.tools.StorageTool",
    "zookeeper": "org.apache.zookeeper.server.quorum.QuorumPeerMain",
}


def dist(version: str) -> KafkaDist:
    return KafkaDist(version=version, home=Path("/cache") / version, classes=CLASSES)


def java_command(topo, name: str, version: str = "3.9.2") -> list[str]:
    entry = render_node(topo, topo.node(name), dist(version), "fast", new_cluster_id()).files[
        f"{CONF_DIR}/entrypoint.sh"
    ]
    return shlex.split(entry.strip().splitlines()[-1])[1:]


def test_every_kafka_jvm_starts_with_the_listener_on_its_own_address_only():
    topo = build_topology("zk", subnet="10.99.7.0/24")
    for node in topo.nodes:
        agents = [a for a in java_command(topo, node.name) if a.startswith("-javaagent:")]
        byteman = [a for a in agents if BYTEMAN_JAR in a]
        if node.is_zookeeper:
            assert byteman == [], "ZooKeeper needs no Byteman: no kind hooks it"
            continue
        assert byteman == [
            f"-javaagent:/opt/kchaos/agents/{BYTEMAN_JAR}=listener:true,"
            f"address:{node.ip},port:{BYTEMAN_PORT}"
        ]
        assert "0.0.0.0" not in byteman[0]


def test_the_agent_comes_before_the_main_class():
    topo = build_topology("kraft", subnet="10.99.8.0/24")
    cmd = java_command(topo, "c1", "4.1.2")
    agent = next(i for i, a in enumerate(cmd) if BYTEMAN_JAR in a)
    assert agent < cmd.index("kafka.Kafka")


def test_the_running_version_is_read_from_the_jvm_classpath():
    topo = build_topology("kraft-combined")
    cmdline = "\0".join(java_command(topo, "n2", "4.3.1")) + "\0"
    assert running_version(cmdline) == "4.3.1"
    assert running_version("java\0-cp\0/opt/kafka/dists/3.9.2/libs/*\0kafka.Kafka\0") == "3.9.2"
    assert running_version("sleep\0infinity\0") is None


def test_ensure_byteman_fetches_the_jar_once(monkeypatch, tmp_path):
    monkeypatch.setenv("KCHAOS_CACHE", str(tmp_path))
    fetched: list[list[str]] = []

    def mvn(args: list[str], cwd: Path, what: str) -> None:
        fetched.append(args)
        out = next(a.split("=", 1)[1] for a in args if a.startswith("-DoutputDirectory="))
        jar = "-".join(next(a for a in args if a.startswith("-Dartifact=")).split(":")[1:3])
        (Path(out) / f"{jar}.jar").write_bytes(b"PK")

    monkeypatch.setattr(kafka_dist, "_mvn", mvn)
    first = kafka_dist.ensure_byteman()
    again = kafka_dist.ensure_byteman()
    assert first == again == tmp_path / "agents" / BYTEMAN_JAR and first.exists()
    assert fetched == [
        ["dependency:copy", f"-Dartifact={BYTEMAN}", f"-DoutputDirectory={tmp_path / 'agents'}"]
    ]


def test_setup_and_every_cluster_up_fetch_both_agents(monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(kafka_dist, "ensure_jolokia", lambda: calls.append("jolokia"))
    monkeypatch.setattr(kafka_dist, "ensure_byteman", lambda: calls.append("byteman"))
    monkeypatch.setattr(kafka_dist, "resolve_offline_first", lambda v: v)
    monkeypatch.setattr(kafka_dist, "assemble", lambda v: dist(v))
    kafka_dist.ensure_dist("3.9.2")
    assert calls == ["jolokia", "byteman"]
