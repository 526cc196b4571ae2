"""The ZooKeeper-to-KRaft migration topology (KIP-866): which configuration each node has in
each phase, and the one thing the cluster needs before its brokers first start.

A migration changes nodes' configurations, not the set of nodes: ZooKeeper, dedicated KRaft
controllers (migration enabled from the start) and brokers that begin in ZooKeeper mode. Each
phase below is what Kafka's "ZooKeeper to KRaft Migration" guide says a node runs with; the
harness (steps/migration.py) moves nodes from one phase to the next by rewriting
server.properties and restarting the node, so a node the kill nemesis restarts comes back with
whatever phase it was last given.
"""

from __future__ import annotations

import json
import logging

from clusters.errors import ClusterError
from clusters.topology import BROKER_PORT, CONTROLLER_PORT, NodeSpec, Topology
from history import strict_json

# Broker phases, in order: ZooKeeper mode; ZooKeeper mode with migration enabled (it registers
# with the KRaft controllers too); KRaft broker.
BROKER_ZK, BROKER_MIGRATING, BROKER_KRAFT = "zk", "migrating", "kraft"
# Controller phases: migration enabled with zookeeper.connect; without both (finalized).
CONTROLLER_MIGRATING, CONTROLLER_FINALIZED = "migrating", "finalized"
BROKER_PHASES = (BROKER_ZK, BROKER_MIGRATING, BROKER_KRAFT)
CONTROLLER_PHASES = (CONTROLLER_MIGRATING, CONTROLLER_FINALIZED)
# Every line that has a migration also has these IBP names ("3.9" = 3.9-IV0, the MV the
# controllers are formatted with by default).
MIGRATION_ENABLE = "zookeeper.metadata.migration.enable"


def initial_phase(node: NodeSpec) -> str:
    return CONTROLLER_MIGRATING if node.is_controller else BROKER_ZK


def check_phase(node: NodeSpec, phase: str) -> None:
    phases = CONTROLLER_PHASES if node.is_controller else BROKER_PHASES
    if phase not in phases:
        raise ClusterError(f"{node.name}: no migration phase '{phase}': one of {phases}")


def ibp(version: str) -> str:
    """inter.broker.protocol.version for a release: its major.minor (the guide's "3.9")."""
    return ".".join(version.split(".")[:2])


def migration_properties(
    topo: Topology, node: NodeSpec, phase: str, version: str
) -> dict[str, str]:
    """The properties that differ by phase; the caller adds listeners' data dirs and defaults."""
    check_phase(node, phase)
    props: dict[str, str] = {}
    protocol_map = "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT"
    kraft_client = {
        "controller.quorum.voters": topo.quorum_voters(),
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": protocol_map,
    }
    if node.is_controller:
        props["process.roles"] = "controller"
        props["node.id"] = str(node.node_id)
        props.update(kraft_client)
        props["listeners"] = f"CONTROLLER://{node.ip}:{CONTROLLER_PORT}"
        # The controllers send UpdateMetadata/LeaderAndIsr to ZooKeeper-mode brokers over the
        # brokers' listener while the migration lasts.
        props["inter.broker.listener.name"] = "PLAINTEXT"
        if phase == CONTROLLER_MIGRATING:
            props[MIGRATION_ENABLE] = "true"
            props["zookeeper.connect"] = topo.zookeeper_connect()
        return props
    props["listeners"] = f"PLAINTEXT://{node.ip}:{BROKER_PORT}"
    props["advertised.listeners"] = f"PLAINTEXT://{node.ip}:{BROKER_PORT}"
    props["inter.broker.listener.name"] = "PLAINTEXT"
    if phase == BROKER_KRAFT:
        props["process.roles"] = "broker"
        props["node.id"] = str(node.node_id)
        props.update(kraft_client)
        return props
    props["broker.id"] = str(node.node_id)
    props["zookeeper.connect"] = topo.zookeeper_connect()
    # Set from the first start: the guide requires it before migration is enabled, and setting
    # it then would cost another rolling restart.
    props["inter.broker.protocol.version"] = ibp(version)
    if phase == BROKER_MIGRATING:
        props[MIGRATION_ENABLE] = "true"
        props.update(kraft_client)
    else:
        props["listener.security.protocol.map"] = protocol_map
    return props


def cluster_id_znode(cluster_id: str) -> bytes:
    """/cluster/id as ZooKeeper-mode brokers write it (ClusterIdZNode: version 1)."""
    return strict_json.dumps({"version": "1", "id": cluster_id}).encode()


def seed_cluster_id(topo: Topology, cluster_id: str, timeout: float = 30.0) -> None:
    """Writes /cluster/id before any broker starts, so that ZooKeeper-mode brokers adopt the id
    the KRaft controllers were formatted with (the guide reads it from ZooKeeper afterwards;
    fixing it first keeps every node's start independent of the others)."""
    from kazoo.exceptions import NodeExistsError

    from clusters.zk_client import zk_client

    # Until ZooKeeper listens kazoo logs every refused connection; the timeout is the story.
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)
    zk = zk_client(topo.zookeeper_connect(), timeout)
    try:
        zk.start(timeout=timeout)
    except Exception as exc:  # kazoo's own timeout type; any failure means ZooKeeper is not up
        raise ClusterError(
            f"ZooKeeper did not answer within {timeout:.0f} s to receive /cluster/id: "
            f"{type(exc).__name__}"
        ) from None
    try:
        zk.ensure_path("/cluster")
        try:
            zk.create("/cluster/id", cluster_id_znode(cluster_id))
        except NodeExistsError:
            data, _ = zk.get("/cluster/id")
            if json.loads(data.decode()).get("id") != cluster_id:
                found = data.decode(errors="replace")
                raise ClusterError(f"ZooKeeper already holds another cluster id: {found}") from None
    finally:
        zk.stop()
        zk.close()
