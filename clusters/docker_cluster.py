"""Kafka clusters as labelled Docker containers on an internal network of their own: the one
handle the harness, the CLI and tests hold.

``DockerCluster`` finds a cluster from its labels (clusters/docker_labels.py) and brings it up
and down (clusters/docker_lifecycle.py). Nothing in clusters/ imports this module: status,
readiness and collection take any ``Cluster`` (clusters/cluster.py), which keeps them from
importing back the orchestration that calls them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from clusters import docker_lifecycle
from clusters.cluster import ClusterInfo
from clusters.docker_labels import (
    LABEL,
    LabelledCluster,
    container_name,
    list_clusters,
    network_name,
)
from clusters.docker_lifecycle import READY_TIMEOUT_S
from clusters.topology import Topology

__all__ = [
    "LABEL",
    "READY_TIMEOUT_S",
    "ClusterInfo",
    "DockerCluster",
    "container_name",
    "list_clusters",
    "network_name",
]


class DockerCluster(LabelledCluster):
    def up(
        self,
        topo: Topology,
        version: str,
        timing: str = "default",
        heap_mb: int = 256,
        say: Callable[[str], None] = print,
        wait: bool = True,
        ready_timeout: float = READY_TIMEOUT_S,
        extra_props: dict[str, str] | None = None,
        features: dict[str, int] | None = None,
        logs_on_failure: Path | None = None,
    ) -> ClusterInfo:
        """Creates network and nodes, starts them, and waits until the cluster is ready;
        ``features``: feature levels the KRaft nodes are formatted with; ``logs_on_failure``:
        where each node's log goes if it fails, before the half-made cluster is removed."""
        return docker_lifecycle.up(
            self, topo, version, timing, heap_mb, say, wait, ready_timeout, extra_props,
            features, logs_on_failure,
        )  # fmt: skip

    def down(self, collect: Path | None = None, say: Callable[[str], None] = print) -> int:
        """Collects into ``collect`` (if given and anything is left), then removes everything."""
        return docker_lifecycle.down(self, collect, say)
