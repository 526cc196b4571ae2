"""Docker's clusters found again from their labels: what a cluster is, its node handles, its
removal, and what is gone of it when it was removed under a run.

Docker labels are the only state: a cluster is found, described and torn down from them, so a
crashed kchaos leaves nothing that ``kchaos cluster down`` cannot find. ``LabelledCluster``
implements the ``Cluster`` protocol (clusters/cluster.py) that status, readiness and collection
are typed against; bringing a cluster up is clusters/docker_lifecycle.py's.
"""

from __future__ import annotations

import time

import docker
import docker.errors

from clusters.cluster import ClusterInfo
from clusters.disk_layer import DOCKER_LABEL
from clusters.docker_node import DockerNode
from clusters.errors import ClusterError
from clusters.kafka_dist import KafkaDist, ensure_dist, load_dist
from clusters.topology import NodeSpec, Topology

LABEL = "kchaos"
# What a client network's container (clusters/docker_client_net.py) carries instead of the node
# labels: the cluster it serves. Nothing reading the nodes sees it; removal takes it too.
CLIENT_OF = f"{LABEL}.client-of"
# How long a removal begun by another process (a run's teardown, `kchaos cluster down`) may take.
OTHERS_REMOVAL_S = 60.0


def container_name(cluster: str, node: str) -> str:
    return f"kchaos-{cluster}-{node}"


def network_name(cluster: str) -> str:
    return f"kchaos-{cluster}"


def node_order(spec: NodeSpec) -> tuple[int, str, int]:
    """ZooKeepers, then controllers, then brokers: the order topologies list their nodes in."""
    kind = 0 if spec.is_zookeeper else 1 if spec.is_controller else 2
    return (kind, spec.name[0], spec.node_id)


class LabelledCluster:
    """The containers and network labelled with one cluster name."""

    def __init__(self, client: docker.DockerClient, cluster: str = "kchaos"):
        self.client = client
        self.cluster = cluster
        # The release whose tools read the cluster's files, when not the one it was created
        # with: after a rolling upgrade, the newest release its nodes ran.
        self.tools: KafkaDist | None = None

    def containers(self, all: bool = True) -> list:
        return self.client.containers.list(
            all=all, filters={"label": [f"{LABEL}.cluster={self.cluster}"]}
        )

    def client_containers(self) -> list:
        """The containers of the cluster's client networks (not nodes)."""
        return self.client.containers.list(
            all=True, filters={"label": [f"{CLIENT_OF}={self.cluster}"]}
        )

    def networks(self) -> list:
        return self.client.networks.list(filters={"label": [f"{LABEL}.cluster={self.cluster}"]})

    def exists(self) -> bool:
        return bool(self.containers() or self.networks())

    def info(self) -> ClusterInfo:
        containers = self.containers()
        if not containers:
            raise ClusterError(
                f"no cluster '{self.cluster}' is up: start one with "
                f"'kchaos cluster up --name {self.cluster}'"
            )
        labels = [c.labels for c in containers]
        first = labels[0]
        nodes = tuple(
            sorted(
                (
                    NodeSpec(
                        name=lb[f"{LABEL}.node"],
                        roles=frozenset(lb[f"{LABEL}.roles"].split(",")),
                        node_id=int(lb[f"{LABEL}.node-id"]),
                        ip=lb[f"{LABEL}.ip"],
                    )
                    for lb in labels
                ),
                key=node_order,
            )
        )
        topo = Topology(
            kind=first[f"{LABEL}.topology"],
            cluster=self.cluster,
            subnet=first[f"{LABEL}.subnet"],
            nodes=nodes,
        )
        return ClusterInfo(
            topology=topo,
            version=first[f"{LABEL}.version"],
            timing=first[f"{LABEL}.timing"],
            cluster_id=first[f"{LABEL}.cluster-id"],
            disk_layer=first.get(DOCKER_LABEL),
        )

    def node(self, spec: NodeSpec) -> DockerNode:
        return DockerNode(self.client, container_name(self.cluster, spec.name), spec)

    def nodes(self, info: ClusterInfo | None = None) -> dict[str, DockerNode]:
        info = info or self.info()
        return {n.name: self.node(n) for n in info.topology.nodes}

    def dist(self, info: ClusterInfo) -> KafkaDist:
        if self.tools is not None:
            return self.tools
        dist = load_dist(info.version)
        if dist is None:
            dist = ensure_dist(info.version)
        return dist

    def missing(self, info: ClusterInfo) -> str | None:
        """Which of the cluster's containers, and whether its network, are gone (None: all of
        it is there, or the engine itself is away, which proves no removal)."""
        try:
            present = {c.labels.get(f"{LABEL}.node") for c in self.containers()}
            network = bool(self.networks())
        except docker.errors.DockerException:
            return None
        gone = [n.name for n in info.topology.nodes if n.name not in present]
        what = [f"containers of {', '.join(gone)} gone"] if gone else []
        if not network:
            what.append("its network gone")
        return ", ".join(what) or None

    def says_removed(self, error: BaseException | None) -> str | None:
        """Docker's answers for a container that is gone (404) or being removed (409; a 409 for
        a name already in use is no removal), in words."""
        if not isinstance(error, docker.errors.APIError):
            return None
        if error.status_code == 404 or (
            error.status_code == 409 and "remov" in str(error.explanation or "")
        ):
            return f"Docker: {error.explanation or error}"
        return None

    def remove(self) -> int:
        """Removes every container and network labelled with this cluster; returns how many."""
        removed = 0
        # Client networks first: the cluster's network goes only once nothing is attached.
        for c in [*self.client_containers(), *self.containers()]:
            try:
                c.remove(force=True)
                removed += 1
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as exc:
                # 409 "removal of container … is already in progress": another process is
                # removing it. Its network can go only once it has, so wait for that.
                if exc.status_code != 409:
                    raise
                self._wait_removed(c)
        for net in self.networks():
            try:
                net.remove()
                removed += 1
            except docker.errors.NotFound:
                pass
        return removed

    def _wait_removed(self, container) -> None:
        deadline = time.monotonic() + OTHERS_REMOVAL_S
        while time.monotonic() < deadline:
            try:
                container.reload()
            except docker.errors.NotFound:
                return
            time.sleep(0.2)
        raise ClusterError(
            f"container {container.name} is still being removed after {OTHERS_REMOVAL_S:.0f} s"
        )


def list_clusters(client: docker.DockerClient) -> list[str]:
    names = {
        c.labels.get(f"{LABEL}.cluster")
        for c in client.containers.list(all=True, filters={"label": LABEL})
    }
    names |= {
        n.attrs["Labels"].get(f"{LABEL}.cluster")
        for n in client.networks.list(filters={"label": LABEL})
    }
    return sorted(n for n in names if n)
