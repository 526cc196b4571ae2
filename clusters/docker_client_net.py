"""Docker's client networks (clusters/client_net.py): one sleeping container per worker slot on
the cluster's network, whose network namespace the slot's client process enters with nsenter.

Only the namespace is the container's: the client process stays a child of the client host (its
pid, files and pipes), so pausing, killing and holding it work as for any other slot's client.
A cut is an iptables policy inside that namespace alone; the container (and any cut) goes with
the run's end, ``kchaos heal`` mends it, and the cluster's removal takes it with the network.

The containers carry ``kchaos.client-of`` and not the node labels, so nothing that reads a
cluster's nodes from its labels (clusters/docker_labels.py) ever sees them.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence

import docker
import docker.errors

from clusters.client_net import ClientNet
from clusters.cluster import ClusterInfo
from clusters.docker_labels import CLIENT_OF, LABEL, LabelledCluster, network_name
from clusters.errors import ClusterError

SLOT = f"{LABEL}.slot"
# Every packet in or out but loopback's dropped, as one atomic iptables-restore (a namespace
# of its own holds no other rule to keep); mending restores the open policies.
_CUT = "\n".join(
    (
        "*filter",
        ":INPUT DROP [0:0]",
        ":OUTPUT DROP [0:0]",
        "-A INPUT -i lo -j ACCEPT",
        "-A OUTPUT -o lo -j ACCEPT",
        "COMMIT",
        "",
    )
)
_OPEN = "*filter\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n"


def client_container_name(cluster: str, slot: int) -> str:
    return f"kchaos-{cluster}-client{slot}"


def client_addresses(info: ClusterInfo, count: int) -> list[str]:
    """Addresses for `count` client networks: from the top of the cluster's subnet down, above
    every node's (nodes take theirs from the bottom); one ClusterError when they do not fit."""
    net = ipaddress.ip_network(info.topology.subnet)
    highest_node = max(int(ipaddress.ip_address(n.ip)) for n in info.topology.nodes)
    top = int(net.broadcast_address) - 1
    out = [str(ipaddress.ip_address(top - i)) for i in range(count)]
    if count and int(ipaddress.ip_address(out[-1])) <= highest_node:
        raise ClusterError(
            f"subnet {net} has no room for {count} client networks above its nodes: use a "
            "larger --subnet"
        )
    return out


class DockerClientNet:
    """One slot's client container: its namespace, and the cut inside it."""

    def __init__(self, container, slot: int) -> None:
        self._container = container
        self.slot = slot

    def prefix(self) -> list[str]:
        self._container.reload()
        pid = self._container.attrs["State"]["Pid"]
        if not pid:
            raise ClusterError(f"client network of slot {self.slot} is not running")
        return ["nsenter", f"--net=/proc/{pid}/ns/net", "--"]

    def _restore(self, rules: str) -> None:
        try:
            result = self._container.exec_run(
                ["sh", "-c", f"printf '%s' '{rules}' | iptables-restore"]
            )
        except docker.errors.APIError as exc:
            raise ClusterError(
                f"client network of slot {self.slot}: cannot run iptables: {exc.explanation}"
            ) from None
        if result.exit_code != 0:
            said = (result.output or b"").decode(errors="replace").strip()
            raise ClusterError(f"client network of slot {self.slot}: iptables-restore: {said}")

    def is_cut(self) -> bool:
        try:
            result = self._container.exec_run(["iptables", "-S", "INPUT"])
        except docker.errors.APIError:
            return False
        return b"-P INPUT DROP" in (result.output or b"")

    def cut(self) -> str:
        self._restore(_CUT)
        return f"iptables DROP policies in slot {self.slot}'s client network"

    def mend(self) -> bool:
        was = self.is_cut()
        self._restore(_OPEN)
        return was


class DockerClientNets:
    """The client networks of one Docker cluster (``ClientNetworks``), found by its labels."""

    def __init__(self, cluster: LabelledCluster) -> None:
        self.labelled = cluster
        self.client = cluster.client
        self.cluster = cluster.cluster

    def client_nets(self, info: ClusterInfo, slots: Sequence[int]) -> dict[int, ClientNet]:
        self.remove_client_nets()
        addresses = client_addresses(info, len(slots))
        image = self._node_image()
        api = self.client.api
        net = network_name(self.cluster)
        nets: dict[int, ClientNet] = {}
        try:
            for slot, address in zip(slots, addresses, strict=True):
                created = api.create_container(
                    image,
                    command=["sleep", "infinity"],
                    name=client_container_name(self.cluster, slot),
                    labels={CLIENT_OF: self.cluster, SLOT: str(slot)},
                    host_config=api.create_host_config(network_mode=net, cap_add=["NET_ADMIN"]),
                    networking_config=api.create_networking_config(
                        {net: api.create_endpoint_config(ipv4_address=address)}
                    ),
                )
                api.start(created["Id"])
                nets[slot] = DockerClientNet(self.client.containers.get(created["Id"]), slot)
        except docker.errors.APIError as exc:
            self.remove_client_nets()
            raise ClusterError(f"cannot start the client networks: {exc.explanation}") from None
        return nets

    def _node_image(self) -> str:
        nodes = self.labelled.containers()
        if not nodes:
            raise ClusterError(f"no cluster '{self.cluster}' is up to give client networks")
        return nodes[0].attrs["Image"]

    def mend_client_nets(self) -> list[str]:
        done = []
        for c in self.labelled.client_containers():
            if c.status != "running":
                continue
            net = DockerClientNet(c, int(c.labels.get(SLOT, "-1")))
            try:
                if net.mend():
                    done.append(f"mended the cut of slot {net.slot}'s client network")
            except ClusterError:
                continue  # a container going away holds no cut that matters
        return done

    def remove_client_nets(self) -> int:
        removed = 0
        for c in self.labelled.client_containers():
            try:
                c.remove(force=True)
                removed += 1
            except docker.errors.NotFound:
                pass
        return removed
