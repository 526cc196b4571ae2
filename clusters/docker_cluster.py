"""Kafka clusters as labelled Docker containers on an internal network of their own.

Docker labels are the only state: a cluster is found again, described and torn down from them,
so a crashed kchaos leaves nothing that ``kchaos cluster down`` cannot find.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors

from clusters import config as node_config
from clusters.errors import ClusterError
from clusters.image import ensure_image
from clusters.kafka_dist import KafkaDist, agents_dir, ensure_dist, load_dist
from clusters.node import DockerNode
from clusters.topology import NodeSpec, Topology, check_zookeeper_version

LABEL = "kchaos"
READY_TIMEOUT_S = 240.0


@dataclass
class ClusterInfo:
    """What kchaos needs to act on a running cluster, rebuilt from Docker labels."""

    topology: Topology
    version: str
    timing: str
    cluster_id: str


def container_name(cluster: str, node: str) -> str:
    return f"kchaos-{cluster}-{node}"


def network_name(cluster: str) -> str:
    return f"kchaos-{cluster}"


class DockerCluster:
    def __init__(self, client: docker.DockerClient, cluster: str = "kchaos"):
        self.client = client
        self.cluster = cluster

    # Discovery ---------------------------------------------------------------------------------
    def containers(self, all: bool = True) -> list:
        return self.client.containers.list(
            all=all, filters={"label": [f"{LABEL}.cluster={self.cluster}"]}
        )

    def networks(self) -> list:
        return self.client.networks.list(filters={"label": [f"{LABEL}.cluster={self.cluster}"]})

    def exists(self) -> bool:
        return bool(self.containers() or self.networks())

    def info(self) -> ClusterInfo:
        containers = self.containers()
        if not containers:
            raise ClusterError(
                f"no cluster '{self.cluster}' is up: start one with 'kchaos cluster up'"
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
                key=_node_order,
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
        )

    def nodes(self, info: ClusterInfo | None = None) -> dict[str, DockerNode]:
        info = info or self.info()
        return {
            n.name: DockerNode(self.client, container_name(self.cluster, n.name), n)
            for n in info.topology.nodes
        }

    def dist(self, info: ClusterInfo) -> KafkaDist:
        dist = load_dist(info.version)
        if dist is None:
            dist = ensure_dist(info.version)
        return dist

    # Up ----------------------------------------------------------------------------------------
    def up(
        self,
        topo: Topology,
        version: str,
        timing: str = "default",
        heap_mb: int = 256,
        say: Callable[[str], None] = print,
        wait: bool = True,
        ready_timeout: float = READY_TIMEOUT_S,
    ) -> ClusterInfo:
        """Creates network and nodes, starts them, and waits until the cluster is ready."""
        node_config.check_timing(timing)
        if self.exists():
            raise ClusterError(
                f"a cluster named '{self.cluster}' already exists: 'kchaos cluster down "
                f"--name {self.cluster}' removes it, or choose another --name"
            )
        check_zookeeper_version(topo.kind, version)
        dist = ensure_dist(version)
        if topo.zookeepers and not dist.line.zookeeper:
            raise ClusterError(
                f"Kafka {dist.version} has no ZooKeeper mode: topology {topo.kind} needs a 3.x "
                "version"
            )
        image = ensure_image(self.client, say=say)
        info = ClusterInfo(topo, dist.version, timing, node_config.new_cluster_id())
        self._check_names_free(topo)
        try:
            self._create_network(topo)
            configs = {
                n.name: node_config.render_node(topo, n, dist, timing, info.cluster_id, heap_mb)
                for n in topo.nodes
            }
            # A migration's brokers must find the controllers' cluster id in ZooKeeper at their
            # first start, so ZooKeeper comes up (and receives it) first.
            waves = (
                [topo.zookeepers, [n for n in topo.nodes if not n.is_zookeeper]]
                if topo.migration
                else [list(topo.nodes)]
            )
            for i, wave in enumerate(waves):
                if i:
                    from clusters.migration import seed_cluster_id

                    seed_cluster_id(topo, info.cluster_id, timeout=ready_timeout / 2)
                with ThreadPoolExecutor(max_workers=len(wave)) as pool:
                    list(
                        pool.map(
                            lambda n: self._create_node(n, info, dist, image, configs[n.name]),
                            wave,
                        )
                    )
            say(f"started {len(topo.nodes)} nodes of Kafka {dist.version} ({topo.kind})")
            if wait:
                from clusters.readiness import wait_ready

                wait_ready(self, info, timeout=ready_timeout)
        except BaseException:
            # A half-made cluster is worse than none: nobody would know which parts are real.
            self.remove()
            raise
        return info

    def _check_names_free(self, topo: Topology) -> None:
        for n in topo.nodes:
            name = container_name(self.cluster, n.name)
            try:
                self.client.containers.get(name)
            except docker.errors.NotFound:
                continue
            raise ClusterError(f"a container named {name} exists and was not made by kchaos")

    def _create_network(self, topo: Topology) -> None:
        ipam = docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(subnet=topo.subnet)])
        try:
            self.client.networks.create(
                network_name(self.cluster),
                driver="bridge",
                internal=True,  # no egress: nodes talk to each other and to this host only
                ipam=ipam,
                labels={LABEL: "1", f"{LABEL}.cluster": self.cluster},
            )
        except docker.errors.APIError as exc:
            text = str(exc.explanation or exc)
            if "overlap" in text or "Pool" in text:
                raise ClusterError(
                    f"subnet {topo.subnet} clashes with an existing network ({text}): choose "
                    "another with --subnet"
                ) from None
            raise ClusterError(
                f"cannot create network {network_name(self.cluster)}: {text}"
            ) from None

    def _create_node(
        self, n: NodeSpec, info: ClusterInfo, dist: KafkaDist, image: str, cfg
    ) -> None:
        api = self.client.api
        net = network_name(self.cluster)
        labels = {
            LABEL: "1",
            f"{LABEL}.cluster": self.cluster,
            f"{LABEL}.node": n.name,
            f"{LABEL}.roles": ",".join(sorted(n.roles)),
            f"{LABEL}.node-id": str(n.node_id),
            f"{LABEL}.ip": n.ip,
            f"{LABEL}.subnet": info.topology.subnet,
            f"{LABEL}.topology": info.topology.kind,
            f"{LABEL}.version": info.version,
            f"{LABEL}.timing": info.timing,
            f"{LABEL}.cluster-id": info.cluster_id,
        }
        host_config = api.create_host_config(
            network_mode=net,
            binds={
                str(dist.libs): {"bind": node_config.LIBS_DIR, "mode": "ro"},
                str(agents_dir()): {"bind": node_config.AGENTS_DIR, "mode": "ro"},
            },
            # Nemeses install iptables and tc rules inside the node's own network namespace.
            cap_add=["NET_ADMIN"],
            init=False,
        )
        networking = api.create_networking_config(
            {net: api.create_endpoint_config(ipv4_address=n.ip, aliases=[n.name])}
        )
        created = api.create_container(
            image,
            command=cfg.command,
            name=container_name(self.cluster, n.name),
            hostname=n.name,
            labels=labels,
            host_config=host_config,
            networking_config=networking,
            stop_signal="SIGTERM",
        )
        node = DockerNode(self.client, container_name(self.cluster, n.name), n)
        node.put_files(cfg.files)
        api.start(created["Id"])

    # Down --------------------------------------------------------------------------------------
    def remove(self) -> int:
        """Removes every container and network labelled with this cluster; returns how many."""
        removed = 0
        for c in self.containers():
            try:
                c.remove(force=True)
                removed += 1
            except docker.errors.NotFound:
                pass
        for net in self.networks():
            try:
                net.remove()
                removed += 1
            except docker.errors.NotFound:
                pass
        return removed

    def down(self, collect: Path | None = None, say: Callable[[str], None] = print) -> int:
        if collect is not None and self.containers():
            from clusters.collect import collect_cluster

            collect_cluster(self, collect, say=say)
        return self.remove()


def _node_order(spec: NodeSpec) -> tuple[int, str, int]:
    kind = 0 if spec.is_zookeeper else 1 if spec.is_controller else 2
    return (kind, spec.name[0], spec.node_id)


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


def dump_json(obj: object) -> str:
    return json.dumps(obj, indent=2, sort_keys=True, default=str)


def monotonic() -> float:
    return time.monotonic()
