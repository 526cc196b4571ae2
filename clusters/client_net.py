"""Worker slots' clients each in a network of their own, so that one client can be cut from the
brokers alone (nemesis/client.py ``isolate``).

Every client of a run talks to the brokers from the client host, through the same address: a
rule on a node cannot tell one client's packets from another's, and brokers advertise their own
addresses, so a proxy in the harness would be bypassed after the first metadata answer. So each
slot's client process runs inside a network namespace of its own, attached to the cluster's
network like a node, and a cut is a rule in that namespace alone. The host's own network is never
touched: the namespace belongs to the cluster, and goes with it.

A node kind that can give client networks says so by implementing ``ClientNetworks`` (Docker:
clusters/docker_client_net.py, one sleeping container per slot on the cluster's network, whose
namespace the client process enters with ``nsenter``). SSH hosts cannot: the client host is not
on their network.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from clusters.cluster import ClusterInfo


class ClientNet(Protocol):
    """One worker slot's network namespace on the cluster's network."""

    slot: int

    def prefix(self) -> list[str]:
        """The command a client process is started behind to run inside this network (its
        argv goes after it; the process keeps its pid, files and pipes)."""
        ...

    def cut(self) -> str:
        """Drops every packet between this network and anything outside it (loopback stays);
        says how, in words. Idempotent."""
        ...

    def mend(self) -> bool:
        """Undoes a cut; True when one was in place."""
        ...


@runtime_checkable
class ClientNetworks(Protocol):
    """A cluster that can give its clients networks of their own (clusters/cluster.py's
    ``ClusterHandle`` implements it where the node kind can)."""

    def client_nets(self, info: ClusterInfo, slots: Sequence[int]) -> dict[int, ClientNet]:
        """A fresh network for each of `slots` (one left by an earlier run is replaced)."""
        ...

    def mend_client_nets(self) -> list[str]:
        """Undoes every cut on any of the cluster's client networks; says what. Idempotent."""
        ...

    def remove_client_nets(self) -> int:
        """Removes every client network of the cluster; returns how many."""
        ...


def refusal(cluster: object) -> str | None:
    """Why `cluster` cannot give client networks, in one line; None when it can."""
    if isinstance(cluster, ClientNetworks):
        return None
    return (
        "client isolate needs each client in a network of its own on the cluster's network, "
        "which only a Docker cluster gives (the client host is not on SSH hosts' network)"
    )
