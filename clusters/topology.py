"""Cluster shapes: which nodes exist, their roles, ids and fixed addresses.

Pure data, so the same topology can be rebuilt from Docker labels, rendered into configs, and
reasoned about by nemeses ("the controllers", "a minority") without touching Docker.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field

from clusters.errors import ClusterError

TOPOLOGIES = ("kraft-combined", "kraft", "zk", "migration")
# ZooKeeper-mode topologies: they need a Kafka line that still has ZooKeeper (3.x).
ZK_TOPOLOGIES = ("zk", "migration")
# KRaft controller ids of a migration: apart from broker ids, which must survive the migration.
MIGRATION_CONTROLLER_IDS = 3000
DEFAULT_SUBNET = "10.213.0.0/24"
BROKER_PORT = 9092
CONTROLLER_PORT = 9093
ZK_CLIENT_PORT = 2181
JOLOKIA_PORT = 8778
# Host addresses start here so that .1 (the bridge) and low addresses stay free.
FIRST_HOST = 11
# Where a cluster's network may be (clusters, test hosts, campaign slots): IPv4's private
# ranges (RFC 1918), not Docker's own default bridge, and at most a /16 (a cluster uses a few
# addresses; a larger one only risks overlapping the machine's networks).
PRIVATE_RANGES = tuple(
    ipaddress.IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")
)
DOCKER_BRIDGE = ipaddress.IPv4Network("172.17.0.0/16")
LARGEST_PREFIX = 16


@dataclass(frozen=True)
class NodeSpec:
    name: str
    roles: frozenset[str]  # subset of {"broker", "controller", "zookeeper"}
    node_id: int  # Kafka node.id / broker.id, or ZooKeeper myid
    ip: str

    @property
    def is_broker(self) -> bool:
        return "broker" in self.roles

    @property
    def is_controller(self) -> bool:
        return "controller" in self.roles

    @property
    def is_zookeeper(self) -> bool:
        return "zookeeper" in self.roles

    @property
    def bootstrap(self) -> str:
        return f"{self.ip}:{BROKER_PORT}"


@dataclass(frozen=True)
class Topology:
    kind: str
    cluster: str
    subnet: str
    nodes: tuple[NodeSpec, ...] = field(default_factory=tuple)
    # How the controllers know each other (clusters/quorum.py): "static" (controller.quorum.voters),
    # "dynamic" (KIP-853), or "static-to-dynamic" (static, until a run's steps change it).
    quorum: str = "static"

    @property
    def brokers(self) -> list[NodeSpec]:
        return [n for n in self.nodes if n.is_broker]

    @property
    def controllers(self) -> list[NodeSpec]:
        return [n for n in self.nodes if n.is_controller]

    @property
    def zookeepers(self) -> list[NodeSpec]:
        return [n for n in self.nodes if n.is_zookeeper]

    @property
    def kraft(self) -> bool:
        """Has KRaft controllers (a migration has them from the start, beside ZooKeeper)."""
        return self.kind != "zk"

    @property
    def migration(self) -> bool:
        return self.kind == "migration"

    def node(self, name: str) -> NodeSpec:
        for n in self.nodes:
            if n.name == name:
                return n
        raise ClusterError(f"no node '{name}' in cluster {self.cluster}: nodes are {self.names()}")

    def names(self) -> list[str]:
        return [n.name for n in self.nodes]

    def bootstrap_servers(self) -> str:
        return ",".join(n.bootstrap for n in self.brokers)

    def quorum_voters(self) -> str:
        return ",".join(f"{n.node_id}@{n.ip}:{CONTROLLER_PORT}" for n in self.controllers)

    def controller_endpoints(self) -> str:
        """host:port of every controller: controller.quorum.bootstrap.servers (KIP-853) and the
        tools' --bootstrap-controller."""
        return ",".join(f"{n.ip}:{CONTROLLER_PORT}" for n in self.controllers)

    def zookeeper_connect(self) -> str:
        return ",".join(f"{n.ip}:{ZK_CLIENT_PORT}" for n in self.zookeepers)


def check_subnet(subnet: str, needed: int = 0, what: str = "nodes") -> ipaddress.IPv4Network:
    """The network a cluster (or test hosts) may use, or one ClusterError sentence naming it:
    a private IPv4 network (10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16) of at most a /16 that
    holds ``needed`` addresses from host FIRST_HOST on. Never lists the network's hosts."""
    accepted = (
        "a private IPv4 network in 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16, "
        f"/{LARGEST_PREFIX} or smaller, e.g. {DEFAULT_SUBNET}"
    )
    text = str(subnet)
    try:
        net = ipaddress.ip_network(text)
    except ValueError as exc:
        try:
            loose = ipaddress.ip_network(text, strict=False)
        except ValueError:
            raise ClusterError(f"bad subnet '{text}': {exc}; use {accepted}") from None
        raise ClusterError(
            f"bad subnet '{text}': it has host bits set; write {loose} for that network"
        ) from None
    if not isinstance(net, ipaddress.IPv4Network) or not any(
        net.subnet_of(r) for r in PRIVATE_RANGES
    ):
        raise ClusterError(f"subnet {text} is not {accepted}")
    if net.overlaps(DOCKER_BRIDGE):
        raise ClusterError(
            f"subnet {text} overlaps Docker's default bridge {DOCKER_BRIDGE}: use another "
            f"private network, e.g. {DEFAULT_SUBNET}"
        )
    if net.prefixlen < LARGEST_PREFIX:
        raise ClusterError(f"subnet {text} is larger than a /{LARGEST_PREFIX}: use {accepted}")
    # Hosts are the addresses between the network's and the broadcast address.
    if net.num_addresses - 2 < FIRST_HOST + needed:
        raise ClusterError(f"subnet {text} is too small for {needed} {what}")
    return net


def host_address(net: ipaddress.IPv4Network, i: int) -> str:
    """The i-th (from 0) address kchaos gives a node or host of ``net``: from FIRST_HOST on."""
    return str(net.network_address + FIRST_HOST + i)


def slot_subnets(subnet: str, count: int) -> list[str]:
    """``count`` networks side by side from ``subnet`` on (a campaign's parallel slots): each
    the size of ``subnet``, at least a /24 apart, each one checked as ``check_subnet``."""
    net = check_subnet(subnet)
    step = max(net.num_addresses, 256)
    out = []
    for i in range(count):
        address = int(net.network_address) + i * step
        if address + net.num_addresses > 2**32:
            raise ClusterError(f"subnet {subnet} has no room for {count} networks after it")
        nth = ipaddress.IPv4Network((address, net.prefixlen))
        try:
            check_subnet(str(nth))
        except ClusterError:
            raise ClusterError(
                f"subnet {subnet}: the {count} networks of a campaign's slots from it "
                f"reach {nth}, outside the private ranges"
            ) from None
        out.append(str(nth))
    return out


def check_zookeeper_version(kind: str, version: str) -> None:
    """One sentence before any download: Kafka 4 removed ZooKeeper, hence also the migration."""
    major = version.split(".", 1)[0]
    if kind in ZK_TOPOLOGIES and major.isdigit() and int(major) >= 4:
        raise ClusterError(
            f"topology {kind} needs ZooKeeper, which Kafka {version} no longer has (removed in "
            "4.0): use a 3.x version, e.g. --version 3.9"
        )


def build_topology(
    kind: str,
    cluster: str = "kchaos",
    brokers: int = 3,
    controllers: int = 3,
    zookeepers: int = 1,
    subnet: str = DEFAULT_SUBNET,
    quorum: str = "static",
) -> Topology:
    """Lays out nodes with stable names: n1.. (combined), c1../b1.. (kraft), z1../b1.. (zk),
    z1../c1../b1.. (migration: controllers 3001.., brokers keep ids 1.. across the migration)."""
    if kind not in TOPOLOGIES:
        raise ClusterError(f"unknown topology '{kind}': choose one of {', '.join(TOPOLOGIES)}")
    if kind in ZK_TOPOLOGIES and zookeepers not in (1, 3):
        raise ClusterError(f"a {kind} topology has 1 or 3 ZooKeeper nodes")
    if brokers < 1 or controllers < 1:
        raise ClusterError("a cluster needs at least one broker and one controller")
    specs: list[tuple[str, frozenset[str], int]] = []
    if kind == "kraft-combined":
        specs = [
            (f"n{i}", frozenset({"broker", "controller"}), i) for i in range(1, controllers + 1)
        ]
    elif kind == "kraft":
        specs = [(f"c{i}", frozenset({"controller"}), i) for i in range(1, controllers + 1)]
        specs += [(f"b{i}", frozenset({"broker"}), controllers + i) for i in range(1, brokers + 1)]
    else:
        specs = [(f"z{i}", frozenset({"zookeeper"}), i) for i in range(1, zookeepers + 1)]
        if kind == "migration":
            specs += [
                (f"c{i}", frozenset({"controller"}), MIGRATION_CONTROLLER_IDS + i)
                for i in range(1, controllers + 1)
            ]
        specs += [(f"b{i}", frozenset({"broker"}), i) for i in range(1, brokers + 1)]
    net = check_subnet(subnet, len(specs))
    nodes = tuple(
        NodeSpec(name=name, roles=roles, node_id=node_id, ip=host_address(net, i))
        for i, (name, roles, node_id) in enumerate(specs)
    )
    return Topology(kind=kind, cluster=cluster, subnet=str(net), nodes=nodes, quorum=quorum)
