"""The options every command that can act on an SSH inventory's hosts shares (``--hosts
hosts.yaml``, ``--accept-new-host-keys``); clusters/handles.py opens the cluster they name."""

from __future__ import annotations

from pathlib import Path

import click

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
