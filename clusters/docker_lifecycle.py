"""Bringing a Docker cluster up and taking it down: network, containers, configuration files,
start order, readiness, and collection before removal; and ``DockerCluster``, Docker's
``ClusterHandle`` (clusters/cluster.py), which clusters/handles.py opens by a cluster's name.

Up is all or nothing: a cluster that fails to start is removed. The labels written here are what
clusters/docker_labels.py finds the cluster again by.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors

from clusters import config as node_config
from clusters.client_net import ClientNet
from clusters.cluster import ClusterInfo, UpOptions
from clusters.collect import collect_cluster, keep_node_logs
from clusters.disk_layer import DOCKER_LABEL, ensure_layer, mount_script
from clusters.docker_client_net import DockerClientNets
from clusters.docker_labels import LABEL, LabelledCluster, container_name, network_name
from clusters.errors import ClusterError
from clusters.image import ensure_image
from clusters.kafka_dist import KafkaDist, agents_dir, ensure_dist
from clusters.layout import IMAGE_LAYOUT
from clusters.migration import seed_cluster_id
from clusters.readiness import log_tails, wait_ready
from clusters.topology import NodeSpec, Topology, check_zookeeper_version


class DockerCluster(LabelledCluster):
    """The cluster of labelled containers with one name on this machine's Docker engine."""

    def cli_option(self) -> str:
        return f"--name {self.cluster}"

    def fixed_topology(self, quorum: str = "static") -> Topology | None:
        return None  # any topology fits on Docker: the caller builds it

    def up(
        self, topo: Topology | None, options: UpOptions, say: Callable[[str], None] = print
    ) -> ClusterInfo:
        """Creates network and nodes, starts them, and waits until the cluster is ready."""
        if topo is None:
            raise ClusterError("a Docker cluster is brought up with a topology of its caller's")
        return up(self, topo, options, say)

    def install_releases(self, dists: list[KafkaDist], say: Callable[[str], None] = print) -> None:
        """Nothing to do: every assembled release is mounted into every node (DISTS_DIR)."""

    def down(self, collect: Path | None = None, say: Callable[[str], None] = print) -> int:
        """Collects into ``collect`` (if given and anything is left), then removes everything."""
        return down(self, collect, say)

    def close(self) -> None:
        """Nothing to let go: the engine's client is shared by every handle of this process."""

    # Client networks (clusters/client_net.py ``ClientNetworks``)
    def client_nets(self, info: ClusterInfo, slots: Sequence[int]) -> dict[int, ClientNet]:
        return DockerClientNets(self).client_nets(info, slots)

    def mend_client_nets(self) -> list[str]:
        return DockerClientNets(self).mend_client_nets()

    def remove_client_nets(self) -> int:
        return DockerClientNets(self).remove_client_nets()


def up(
    cluster: LabelledCluster,
    topo: Topology,
    options: UpOptions,
    say: Callable[[str], None] = print,
) -> ClusterInfo:
    """Creates network and nodes, starts them, and waits until the cluster is ready;
    ``options.extra_props`` go into every Kafka node's server.properties, ``features`` (name:
    level) into every KRaft node's storage format (``config.feature_options``). If it fails,
    each node's log goes to ``logs_on_failure`` (collect.keep_node_logs) before the removal."""
    version, timing, ready_timeout = options.version, options.timing, options.ready_timeout
    extra_props = dict(options.extra_props) if options.extra_props is not None else None
    features = dict(options.features) if options.features is not None else None
    logs_on_failure = options.logs_on_failure
    node_config.check_timing(timing)
    if cluster.exists():
        raise ClusterError(
            f"a cluster named '{cluster.cluster}' already exists: 'kchaos cluster down "
            f"--name {cluster.cluster}' removes it, or choose another --name"
        )
    check_zookeeper_version(topo.kind, version)
    dist = ensure_dist(version)
    if topo.zookeepers and not dist.line.zookeeper:
        raise ClusterError(
            f"Kafka {dist.version} has no ZooKeeper mode: topology {topo.kind} needs a 3.x version"
        )
    image = ensure_image(cluster.client, say=say)
    disk = None
    if options.disk_layer is not None:
        disk = DiskOn(options.disk_layer, options.disk_writeback_s, ensure_layer(say=say))
    info = ClusterInfo(
        topo, dist.version, timing, node_config.new_cluster_id(), disk_layer=options.disk_layer
    )
    _check_names_free(cluster, topo)
    try:
        _create_network(cluster, topo)
        configs = {
            n.name: node_config.render_node(
                topo,
                n,
                dist,
                timing,
                info.cluster_id,
                options.heap_mb,
                extra=extra_props,
                features=features,
            )
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
                try:
                    seed_cluster_id(topo, info.cluster_id, timeout=ready_timeout / 2)
                except ClusterError as exc:
                    # The cluster is removed next: what ZooKeeper said is kept in the error.
                    zks = [n.name for n in topo.zookeepers]
                    raise ClusterError(f"{exc}{log_tails(cluster, info, zks)}") from None
            with ThreadPoolExecutor(max_workers=len(wave)) as pool:
                list(
                    pool.map(
                        lambda n: _create_node(
                            cluster, n, info, dist, image, configs[n.name], disk
                        ),
                        wave,
                    )
                )
        say(f"started {len(topo.nodes)} nodes of Kafka {dist.version} ({topo.kind})")
        if options.wait:
            wait_ready(cluster, info, timeout=ready_timeout)
    except BaseException:
        # A half-made cluster is worse than none: nobody would know which parts are real. Its
        # logs say why it failed, so they are kept first.
        if logs_on_failure is not None:
            keep_node_logs(cluster, info, logs_on_failure, say)
        cluster.remove()
        raise
    return info


def down(
    cluster: LabelledCluster, collect: Path | None = None, say: Callable[[str], None] = print
) -> int:
    """Collects into ``collect`` (if given and anything is left), then removes everything."""
    if collect is not None and cluster.containers():
        collect_cluster(cluster, collect, say=say)
    return cluster.remove()


def _check_names_free(cluster: LabelledCluster, topo: Topology) -> None:
    for n in topo.nodes:
        name = container_name(cluster.cluster, n.name)
        try:
            cluster.client.containers.get(name)
        except docker.errors.NotFound:
            continue
        raise ClusterError(f"a container named {name} exists and was not made by kchaos")


def _create_network(cluster: LabelledCluster, topo: Topology) -> None:
    ipam = docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(subnet=topo.subnet)])
    try:
        cluster.client.networks.create(
            network_name(cluster.cluster),
            driver="bridge",
            internal=True,  # no egress: nodes talk to each other and to this host only
            ipam=ipam,
            labels={LABEL: "1", f"{LABEL}.cluster": cluster.cluster},
        )
    except docker.errors.APIError as exc:
        text = str(exc.explanation or exc)
        if "overlap" in text or "Pool" in text:
            raise ClusterError(
                f"subnet {topo.subnet} clashes with an existing network ({text}): choose "
                "another with --subnet"
            ) from None
        raise ClusterError(
            f"cannot create network {network_name(cluster.cluster)}: {text}"
        ) from None


def _create_node(
    cluster: LabelledCluster,
    n: NodeSpec,
    info: ClusterInfo,
    dist: KafkaDist,
    image: str,
    cfg: node_config.NodeConfig,
    disk: DiskOn | None = None,
) -> None:
    api = cluster.client.api
    net = network_name(cluster.cluster)
    labels = {
        LABEL: "1",
        f"{LABEL}.cluster": cluster.cluster,
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
    binds = {
        str(dist.home.parent): {"bind": node_config.DISTS_DIR, "mode": "ro"},
        str(agents_dir()): {"bind": node_config.AGENTS_DIR, "mode": "ro"},
    }
    # Nemeses install iptables and tc rules inside the node's own network namespace.
    caps = ["NET_ADMIN"]
    extra: dict = {}
    files = dict(cfg.files)
    if disk is not None:
        # The layer mounts FUSE inside the node's own mount namespace: nothing on this host
        # is mounted, and the mount ends with the container.
        labels[DOCKER_LABEL] = disk.names
        binds[str(disk.program_dir)] = {"bind": IMAGE_LAYOUT.disk_dir, "mode": "ro"}
        caps.append("SYS_ADMIN")
        extra["devices"] = ["/dev/fuse:/dev/fuse:rwm"]
        if _apparmor():
            extra["security_opt"] = ["apparmor=unconfined"]  # its default profile denies mount
        files[IMAGE_LAYOUT.disk_layer_script] = mount_script(n, disk.names, disk.writeback_s)
    host_config = api.create_host_config(
        network_mode=net, binds=binds, cap_add=caps, init=False, **extra
    )
    networking = api.create_networking_config(
        {net: api.create_endpoint_config(ipv4_address=n.ip, aliases=[n.name])}
    )
    created = api.create_container(
        image,
        command=cfg.command,
        name=container_name(cluster.cluster, n.name),
        hostname=n.name,
        labels=labels,
        host_config=host_config,
        networking_config=networking,
        stop_signal="SIGTERM",
    )
    cluster.node(n).put_files(files)
    api.start(created["Id"])


@dataclass(frozen=True)
class DiskOn:
    """The disk layer for every node of a cluster: its name mode, its writeback and the
    program's directory."""

    names: str
    writeback_s: float | None
    program_dir: Path


def _apparmor() -> bool:
    try:
        return Path("/sys/module/apparmor/parameters/enabled").read_text().strip() == "Y"
    except OSError:
        return False
