"""Opening a cluster from where it lives: a name on this machine's Docker engine, or the hosts
of an SSH inventory (``hosts.yaml``). The one place that chooses a node kind: everything else
holds the ``ClusterHandle`` (clusters/cluster.py) this returns and asks it what it can do.

Also the other things the harness asks of a kind by name rather than of one cluster: the Docker
clusters kchaos made here (``kchaos cluster list``) and the project's SSH test hosts (``kchaos
hosts``). Each kind's modules are imported when that kind is asked for: a run on SSH hosts
never loads Docker's client library, nor a run on Docker paramiko.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from clusters.cluster import ClusterHandle

DEFAULT_NAME = "kchaos"


def open_cluster(
    name: str = DEFAULT_NAME,
    hosts: str | Path | None = None,
    *,
    accept_new_host_keys: bool = False,
    say: Callable[[str], None] = print,
) -> ClusterHandle:
    """The cluster named ``name`` on Docker, or (``hosts``) the one on the inventory's hosts,
    which names it. Docker's engine must answer (one clear ``ClusterError`` if not); hosts are
    not connected to until the handle is asked something. ``accept_new_host_keys``: a host
    missing from known_hosts is added to it instead of refused, as if the inventory said so."""
    if hosts is not None:
        from clusters.inventory import load_inventory
        from clusters.ssh_cluster import SshCluster

        inventory = load_inventory(hosts)
        if accept_new_host_keys and not inventory.accept_new_host_keys:
            inventory = dataclasses.replace(inventory, accept_new_host_keys=True)
        return SshCluster(inventory, say=say)
    from clusters import engine
    from clusters.docker_lifecycle import DockerCluster

    return DockerCluster(engine.client(), name)


def list_clusters() -> list[str]:
    """The names of the clusters kchaos made on this machine's Docker engine."""
    from clusters import docker_labels, engine

    return docker_labels.list_clusters(engine.client())


def make_test_hosts(
    name: str, count: int, subnet: str, user: str, say: Callable[[str], None] = print
) -> Path:
    """Starts ``count`` SSH test hosts on this machine's Docker and writes their hosts.yaml;
    returns its path (clusters/ssh_hosts.py)."""
    from clusters import engine, ssh_hosts

    return ssh_hosts.hosts_up(engine.client(), name, count=count, subnet=subnet, user=user, say=say)


def remove_test_hosts(name: str, say: Callable[[str], None] = print) -> int:
    """Removes the test hosts ``name`` and their hosts.yaml, keys and known_hosts."""
    from clusters import engine, ssh_hosts

    return ssh_hosts.hosts_down(engine.client(), name, say=say)
