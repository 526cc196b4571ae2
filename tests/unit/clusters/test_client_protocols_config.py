"""What a run's group and transaction protocols change in the nodes' configuration: the
transaction.version the storage is formatted with (--txn-protocol) and the brokers' KIP-848
session and heartbeat (clusters/config.py)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from clusters.config import CONSUMER_GROUP, feature_options, render_node, server_properties
from clusters.kafka_dist import KafkaDist
from clusters.topology import build_topology
from workloads.client_choice import format_features

CLASSES = {"kafka": "kafka.Kafka", "storage": "kafka.tools.StorageTool"}
CID = "AAAAAAAAAAAAAAAAAAAAAA"


def dist(version: str) -> KafkaDist:
    return KafkaDist(version=version, home=Path("/cache") / version, classes=CLASSES)


def _format_command(entry: str) -> list[str]:
    line = next(x for x in entry.splitlines() if "kafka.tools.StorageTool" in x)
    inner = line.split("then ", 1)[1].rsplit("; fi", 1)[0]
    return shlex.split(inner)


@pytest.mark.parametrize(("protocol", "level"), [("classic", 0), ("v2", 2)])
def test_the_transaction_protocol_is_the_formatted_transaction_version(protocol, level):
    features = format_features({"txn_protocol": protocol})
    assert features == {"transaction.version": level}
    for kind in ("kraft-combined", "kraft"):
        topo = build_topology(kind)
        for node in topo.nodes:
            cfg = render_node(topo, node, dist("4.4.0"), "fast", CID, features=features)
            cmd = _format_command(cfg.files["/etc/kafka/entrypoint.sh"])
            assert cmd[-2:] == ["--feature", f"transaction.version={level}"], node.name


@pytest.mark.parametrize("quorum", ["static", "dynamic"])
def test_without_a_transaction_protocol_the_format_is_as_before(quorum):
    assert format_features({}) == {} and feature_options(None) == feature_options({}) == []
    topo = build_topology("kraft", quorum=quorum)
    for node in topo.nodes:
        plain = render_node(topo, node, dist("4.4.0"), "fast", CID)
        for given in (None, {}):
            assert render_node(topo, node, dist("4.4.0"), "fast", CID, features=given) == plain
        assert "--feature" not in plain.files["/etc/kafka/entrypoint.sh"]


def test_kafka_4_brokers_run_kip848_groups_at_the_classic_subscribers_pace():
    topo = build_topology("kraft", brokers=2)
    for timing in ("default", "fast"):
        broker = server_properties(topo, topo.node("b1"), timing, version="4.4.0")
        assert {k: broker[k] for k in CONSUMER_GROUP} == CONSUMER_GROUP
        # Kafka refuses a heartbeat or session below its minimum, or a heartbeat not below the
        # session.
        session = int(broker["group.consumer.session.timeout.ms"])
        heartbeat = int(broker["group.consumer.heartbeat.interval.ms"])
        assert int(broker["group.consumer.min.session.timeout.ms"]) <= session
        assert int(broker["group.consumer.min.heartbeat.interval.ms"]) <= heartbeat < session
        controller = server_properties(topo, topo.node("c1"), timing, version="4.4.0")
        assert not any(k.startswith("group.consumer.") for k in controller)
    old = server_properties(topo, topo.node("b1"), "fast", version="3.9.2")
    assert not any(k.startswith("group.consumer.") for k in old)
