"""Docker's cluster handle under the name bench/ and the integration tests import it by: the
handle is ``docker_lifecycle.DockerCluster``, and new code opens any kind's handle with
clusters/handles.py. Nothing in clusters/ or harness/ imports this module.
"""

from __future__ import annotations

from clusters.cluster import READY_TIMEOUT_S, ClusterInfo, UpOptions
from clusters.docker_labels import LABEL, container_name, list_clusters, network_name
from clusters.docker_lifecycle import DockerCluster

__all__ = [
    "LABEL",
    "READY_TIMEOUT_S",
    "ClusterInfo",
    "DockerCluster",
    "UpOptions",
    "container_name",
    "list_clusters",
    "network_name",
]
