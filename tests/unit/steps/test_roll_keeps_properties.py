"""A roll writes each node's configuration again: it keeps what the cluster came up with (the
share workload's broker settings, every family's), as the bring-up wrote it."""

from __future__ import annotations

from pathlib import Path

from clusters.cluster import ClusterInfo
from clusters.config import CONF_DIR
from clusters.kafka_dist import KafkaDist
from clusters.topology import build_topology
from steps import rolling
from steps.family import Stage
from steps.upgrade import AWAIT_SNAPSHOT, SNAPSHOT_PROPS, UpgradeStep
from workloads.share import node_properties_of

TOPO = build_topology("kraft-combined", cluster="x", subnet="10.9.0.0/24")
MAINS = {"kafka": "kafka.Kafka", "storage": "kafka.tools.StorageTool", "zookeeper": "z"}
OLD = KafkaDist("4.2.2", Path("/nonexistent"), MAINS)
NEW = KafkaDist("4.4.0", Path("/nonexistent"), MAINS)
SHARE = node_properties_of({"lock_ms": 2000, "delivery_limit": 4})


class _Node:
    def __init__(self, spec):
        self.spec = spec
        self.name = spec.name
        self.files: dict[str, str] = {}

    def put_files(self, files):
        self.files.update(files)


def _properties(node: _Node) -> dict[str, str]:
    text = node.files[f"{CONF_DIR}/server.properties"]
    return dict(
        line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#")
    )


def _driver(extra, steps=()):
    nodes = {n.name: _Node(n) for n in TOPO.nodes}
    stage = Stage(
        ClusterInfo(TOPO, "4.2.2", "fast", "MkU3OEVBNTcwNTJENDM2Qk"),
        {"4.2.2": OLD, "4.4.0": NEW},
        recorder=None,  # type: ignore[arg-type]
        nodes=lambda: nodes,
        started_on=lambda: OLD,
        started={},
        node_properties=extra,
    )
    return rolling.drive(list(steps), stage), nodes


def test_a_roll_keeps_the_share_workloads_broker_settings():
    driver, nodes = _driver(SHARE)
    driver._reconfigure(nodes["n1"], NEW, "4.4")
    props = _properties(nodes["n1"])
    for key, value in SHARE.items():
        assert props[key] == value, key
    assert props["group.share.delivery.count.limit"] == "4"


def test_a_roll_keeps_the_families_own_settings_beside_the_workloads():
    driver, nodes = _driver(SHARE, [UpgradeStep(5.0, AWAIT_SNAPSHOT)])
    driver._reconfigure(nodes["n2"], NEW, "4.4")
    props = _properties(nodes["n2"])
    assert {k: props[k] for k in SNAPSHOT_PROPS} == SNAPSHOT_PROPS
    assert props["group.share.record.lock.duration.ms"] == "2000"


def test_a_stage_without_properties_rolls_as_before():
    driver, nodes = _driver({})
    driver._reconfigure(nodes["n3"], NEW, "4.4")
    assert not any(k.startswith("group.share.") for k in _properties(nodes["n3"]))
