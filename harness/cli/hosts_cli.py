"""``kchaos hosts``: SSH test hosts on this machine (containers with sshd) and their hosts.yaml.

The only Docker the SSH path knows: the hosts are made and removed here; everything kchaos then
does on them (``cluster up --hosts``, ``run --hosts``, ``heal --hosts``) goes over SSH.
"""

from __future__ import annotations

import click

from clusters.handles import make_test_hosts, remove_test_hosts
from clusters.inventory import TEST_USER
from harness.cli.cluster_cli import NameType
from harness.console import console, say

HOSTS_SUBNET = "10.213.175.0/24"
HOSTS_NAME = NameType("name for SSH hosts")


@click.group()
def hosts() -> None:
    """SSH test hosts on this machine, for the SSH path (docs/ssh.md)."""


@hosts.command()
@click.option(
    "--name",
    type=HOSTS_NAME,
    required=True,
    help="Names the hosts (containers kchaos-NAME-ssh-n1, ...).",
)
@click.option(
    "--count",
    type=click.IntRange(1, 16),
    default=3,
    show_default=True,
    help="How many hosts (n1, n2, ...).",
)
@click.option(
    "--subnet",
    default=HOSTS_SUBNET,
    show_default=True,
    help="The Docker network the test hosts get their addresses in (a CIDR).",
)
@click.option(
    "--user",
    type=click.Choice(["root", TEST_USER]),
    default=TEST_USER,
    show_default=True,
    help=f"Whom hosts.yaml logs in as ({TEST_USER} has passwordless sudo).",
)
def up(name: str, count: int, subnet: str, user: str) -> None:
    """Starts SSH hosts and writes hosts.yaml (fresh keys, known_hosts from their host keys)."""
    with console.status(f"bringing up {count} SSH hosts '{name}'"):
        path = make_test_hosts(name, count=count, subnet=subnet, user=user, say=say)
    console.print(f"[green]SSH hosts '{name}' up[/green]; inventory {path}", highlight=False)
    click.echo(str(path))


@hosts.command()
@click.option("--name", type=HOSTS_NAME, required=True, help="The name given to hosts up.")
def down(name: str) -> None:
    """Removes the hosts (containers, network) and their hosts.yaml, keys and known_hosts."""
    remove_test_hosts(name, say=say)
