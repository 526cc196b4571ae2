"""A running cluster as its callers see it: what it is (``ClusterInfo``) and the three things
status, readiness, collection and healing ask of it (``Cluster``).

Docker's clusters implement it from container labels (clusters/docker_labels.py); callers are
typed against the protocol, so they never import the Docker modules that bring clusters up.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, TypeVar

from clusters.capabilities import Node
from clusters.kafka_dist import KafkaDist
from clusters.topology import Topology

N_co = TypeVar("N_co", bound=Node, covariant=True)


@dataclass
class ClusterInfo:
    """What kchaos needs to act on a running cluster; Docker's is rebuilt from its labels."""

    topology: Topology
    version: str
    timing: str
    cluster_id: str


class Cluster(Protocol[N_co]):
    """A running cluster whose node handles have (at least) the capabilities ``N_co``."""

    def info(self) -> ClusterInfo: ...
    def nodes(self, info: ClusterInfo | None = None) -> Mapping[str, N_co]: ...
    def dist(self, info: ClusterInfo) -> KafkaDist:
        """The cluster's Kafka jars on this host: collection decodes logs with them."""
        ...
