from pathlib import Path

import pytest

from clusters.config import new_cluster_id, render_node, server_properties, zoo_cfg
from clusters.errors import ClusterError
from clusters.kafka_dist import KafkaDist
from clusters.topology import build_topology

CLASSES = {
    "kafka": "kafka.Kafka",
    "storage": "kafka.tools.StorageTool",
    "zookeeper": "org.apache.zookeeper.server.quorum.QuorumPeerMain",
}


def dist(version: str) -> KafkaDist:
    return KafkaDist(version=version, home=Path("/cache") / version, classes=CLASSES)


def test_combined_nodes_are_brokers_and_voters_with_fixed_addresses():
    topo = build_topology("kraft-combined", subnet="10.99.0.0/24")
    assert topo.names() == ["n1", "n2", "n3"]
    assert [n.ip for n in topo.nodes] == ["10.99.0.11", "10.99.0.12", "10.99.0.13"]
    props = server_properties(topo, topo.nodes[0], "default")
    assert props["process.roles"] == "broker,controller"
    assert (
        props["controller.quorum.voters"] == "1@10.99.0.11:9093,2@10.99.0.12:9093,3@10.99.0.13:9093"
    )
    assert props["listeners"] == "PLAINTEXT://10.99.0.11:9092,CONTROLLER://10.99.0.11:9093"
    assert props["min.insync.replicas"] == "2"


def test_dedicated_controllers_do_not_listen_for_clients():
    topo = build_topology("kraft", brokers=2)
    assert topo.names() == ["c1", "c2", "c3", "b1", "b2"]
    c1 = server_properties(topo, topo.node("c1"), "default")
    b1 = server_properties(topo, topo.node("b1"), "default")
    assert c1["process.roles"] == "controller" and "9092" not in c1["listeners"]
    assert "advertised.listeners" not in c1
    assert b1["process.roles"] == "broker" and b1["node.id"] == "4"
    assert b1["offsets.topic.replication.factor"] == "2"


def test_zk_brokers_point_at_the_ensemble():
    topo = build_topology("zk", zookeepers=3)
    b1 = server_properties(topo, topo.node("b1"), "fast")
    assert b1["zookeeper.connect"].count(":2181") == 3
    assert "process.roles" not in b1 and b1["broker.id"] == "1"
    assert b1["zookeeper.session.timeout.ms"] == "4000"
    cfg = zoo_cfg(topo, "fast")
    assert cfg["server.2"].endswith(":2888:3888") and cfg["tickTime"] == "500"


def test_fast_timing_shortens_kraft_leases_but_keeps_lease_above_heartbeat():
    topo = build_topology("kraft-combined")
    fast = server_properties(topo, topo.nodes[0], "fast")
    default = server_properties(topo, topo.nodes[0], "default")
    assert "broker.session.timeout.ms" not in default
    assert int(fast["broker.session.timeout.ms"]) > int(fast["broker.heartbeat.interval.ms"])


def test_unknown_topology_and_timing_are_refused():
    with pytest.raises(ClusterError, match="unknown topology 'raft'"):
        build_topology("raft")
    topo = build_topology("kraft-combined")
    with pytest.raises(ClusterError, match="unknown timing profile 'slow'"):
        server_properties(topo, topo.nodes[0], "slow")


def test_kraft_nodes_format_once_then_exec_the_jvm_as_pid_1():
    topo = build_topology("kraft-combined")
    cfg = render_node(topo, topo.nodes[0], dist("3.9.2"), "default", new_cluster_id())
    entry = cfg.files["/etc/kafka/entrypoint.sh"]
    assert "if [ ! -f /var/lib/kafka/data/meta.properties ]" in entry
    assert entry.strip().splitlines()[-1].startswith("exec java ")
    assert "/etc/kafka/log4j.properties" in cfg.files
    assert "-javaagent:/opt/kchaos/agents/" in entry


def test_kafka_4_logs_through_log4j2_and_has_no_zookeeper():
    topo = build_topology("zk")
    kraft = build_topology("kraft-combined")
    cfg = render_node(kraft, kraft.nodes[0], dist("4.1.0"), "default", new_cluster_id())
    assert "/etc/kafka/log4j2.properties" in cfg.files
    with pytest.raises(ClusterError, match="no ZooKeeper mode"):
        render_node(topo, topo.node("z1"), dist("4.1.0"), "default", new_cluster_id())


def test_cluster_ids_look_like_kafka_storage_ids():
    ids = {new_cluster_id() for _ in range(50)}
    assert len(ids) == 50 and all(len(i) == 22 and "=" not in i for i in ids)


def test_cluster_ids_never_start_with_a_dash(monkeypatch):
    """kafka-storage would read `--cluster-id -…` as an option: a node that never starts."""
    import uuid

    # The first UUID's base64 starts with "-" (0xfb...), the second's does not.
    draws = iter([uuid.UUID(bytes=b"\xfb" + bytes(15)), uuid.UUID(bytes=bytes(16))])
    monkeypatch.setattr(uuid, "uuid4", lambda: next(draws))
    cid = new_cluster_id()
    assert not cid.startswith("-") and len(cid) == 22
