"""The migration topology's node configs, phase by phase, as Kafka's migration guide lists them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusters.config import new_cluster_id, render_node, server_properties
from clusters.errors import ClusterError
from clusters.kafka_dist import KafkaDist
from clusters.migration import cluster_id_znode
from clusters.topology import build_topology, check_zookeeper_version

CLASSES = {
    "kafka": "kafka.Kafka",
    "storage": "kafka.tools.StorageTool",
    "zookeeper": "org.apache.zookeeper.server.quorum.QuorumPeerMain",
}
DIST = KafkaDist(version="3.9.2", home=Path("/cache/3.9.2"), classes=CLASSES)
TOPO = build_topology("migration", subnet="10.99.0.0/24", zookeepers=3)


def props(node: str, phase: str | None = None, timing: str = "default") -> dict[str, str]:
    return server_properties(TOPO, TOPO.node(node), timing, phase, "3.9.2")


def test_layout_zookeepers_then_dedicated_controllers_then_brokers_with_distinct_ids():
    assert TOPO.names() == ["z1", "z2", "z3", "c1", "c2", "c3", "b1", "b2", "b3"]
    assert [n.node_id for n in TOPO.controllers] == [3001, 3002, 3003]
    assert [n.node_id for n in TOPO.brokers] == [1, 2, 3]
    assert TOPO.kraft and TOPO.migration


def test_controllers_start_migrating_and_finalize_without_zookeeper():
    c1 = props("c1")
    assert c1["process.roles"] == "controller" and c1["node.id"] == "3001"
    assert c1["zookeeper.metadata.migration.enable"] == "true"
    assert c1["zookeeper.connect"].count(":2181") == 3
    # The controllers reach ZooKeeper-mode brokers over the brokers' own listener.
    assert c1["inter.broker.listener.name"] == "PLAINTEXT"
    assert "PLAINTEXT:PLAINTEXT" in c1["listener.security.protocol.map"]
    assert c1["listeners"] == "CONTROLLER://10.99.0.14:9093"
    final = props("c1", "finalized")
    assert "zookeeper.connect" not in final and "zookeeper.metadata.migration.enable" not in final
    assert {k: v for k, v in c1.items() if not k.startswith("zookeeper.")} == final


def test_brokers_keep_their_id_through_zk_migrating_and_kraft_phases():
    zk, migrating, kraft = props("b2"), props("b2", "migrating"), props("b2", "kraft")
    assert zk["broker.id"] == migrating["broker.id"] == kraft["node.id"] == "2"
    # Required before migration is enabled: set from the first start.
    assert zk["inter.broker.protocol.version"] == "3.9"
    assert "zookeeper.metadata.migration.enable" not in zk and "process.roles" not in zk
    assert migrating["zookeeper.metadata.migration.enable"] == "true"
    assert migrating["controller.quorum.voters"] == TOPO.quorum_voters()
    assert migrating["controller.listener.names"] == "CONTROLLER"
    assert migrating["zookeeper.connect"] == zk["zookeeper.connect"]
    assert kraft["process.roles"] == "broker"
    for gone in ("broker.id", "zookeeper.connect", "zookeeper.metadata.migration.enable"):
        assert gone not in kraft
    assert "inter.broker.protocol.version" not in kraft
    for p in (zk, migrating, kraft):
        assert p["listeners"] == p["advertised.listeners"] == "PLAINTEXT://10.99.0.18:9092"


def test_fast_timing_shortens_both_zookeeper_and_kraft_timeouts_in_every_phase():
    for node, phase in (("c1", None), ("b1", None), ("b1", "migrating"), ("b1", "kraft")):
        p = props(node, phase, "fast")
        assert p["zookeeper.session.timeout.ms"] == "4000"
        assert p["broker.session.timeout.ms"] == "3000"


def test_only_controllers_are_formatted_brokers_keep_their_zookeeper_meta_properties():
    cid = new_cluster_id()
    controller = render_node(TOPO, TOPO.node("c1"), DIST, "default", cid)
    broker = render_node(TOPO, TOPO.node("b1"), DIST, "default", cid, phase="kraft")
    assert f"format -t {cid}" in controller.files["/etc/kafka/entrypoint.sh"]
    assert "format" not in broker.files["/etc/kafka/entrypoint.sh"]
    assert "process.roles=broker\n" in broker.files["/etc/kafka/server.properties"]


def test_unknown_phase_is_one_clear_error():
    with pytest.raises(ClusterError, match="b1: no migration phase 'finalized'"):
        props("b1", "finalized")
    with pytest.raises(ClusterError, match="c1: no migration phase 'kraft'"):
        props("c1", "kraft")


def test_the_cluster_id_znode_is_what_zookeeper_mode_brokers_read():
    assert json.loads(cluster_id_znode("abc")) == {"version": "1", "id": "abc"}


@pytest.mark.parametrize("version", ["4.0", "4.1.0", "5"])
def test_kafka_4_has_no_migration_topology(version):
    with pytest.raises(ClusterError, match=r"needs ZooKeeper, which Kafka .* no longer has"):
        check_zookeeper_version("migration", version)
    check_zookeeper_version("kraft", version)
    check_zookeeper_version("migration", "3.9")
