"""The SSH side of the commands that take ``--hosts hosts.yaml``: the inventory opened as a
cluster, and the options every such command shares."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import click

from clusters.inventory import load_inventory
from clusters.ssh_cluster import SshCluster

hosts_option = click.option(
    "--hosts",
    "hosts",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="An SSH inventory (docs/ssh.md): the cluster runs on its hosts, not on Docker.",
)
accept_option = click.option(
    "--accept-new-host-keys",
    is_flag=True,
    help="With --hosts: add a host missing from known_hosts to it (said for each), instead of "
    "refusing it. A host whose key changed is refused whatever this says.",
)


def open_hosts(
    path: str | Path, accept_new: bool = False, say: Callable[[str], None] = print
) -> SshCluster:
    """The cluster on the inventory's hosts (nothing is connected until it is asked)."""
    inventory = load_inventory(path)
    if accept_new and not inventory.accept_new_host_keys:
        inventory = dataclasses.replace(inventory, accept_new_host_keys=True)
    return SshCluster(inventory, say=say)
