"""Where a node keeps what kchaos puts there, and what of it outlives the node's process.

The node image's layout (``IMAGE_LAYOUT``) is Docker's: fixed paths inside a container that is
the node, whose network namespace is born and dies with its one process. A host reached over
SSH keeps kchaos's files under the inventory's install and data directories, and its network
(iptables rules, qdiscs) stays when the JVM is killed. Callers ask a node for its layout with
``clusters.capabilities.layout_of``, so the same code renders configs, collects files and
carries out faults on either kind.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Layout:
    conf_dir: str = "/etc/kafka"
    data_dir: str = "/var/lib/kafka/data"
    zk_data_dir: str = "/var/lib/zookeeper"
    # Every assembled Kafka version, one directory each: a rolling upgrade restarts a node on
    # another version's jars (same data, same id).
    dists_dir: str = "/opt/kafka/dists"
    agents_dir: str = "/opt/kchaos/agents"
    # The disk layer's program (mounted read-only, like the agents) and its state: the backing
    # directory, the trash of unlinks not yet durable, corruption's snapshots (docs/disk.md).
    disk_dir: str = "/opt/kchaos/disk"
    disk_state_dir: str = "/var/lib/kchaos-disk"
    # The device the node's cluster traffic leaves by (the packet nemesis shapes it).
    interface: str = "eth0"
    # Whether the node's network (its iptables chains and qdiscs) stays when its process exits:
    # a container's namespace is new at every start, a host's is the host's.
    lasting_network: bool = False

    @property
    def faketime_env(self) -> str:
        """When this file exists, the entrypoint starts the JVM under libfaketime with it."""
        return f"{self.conf_dir}/faketime.env"

    @property
    def faketime_offset(self) -> str:
        """The offset file libfaketime re-reads (the clock nemesis writes it)."""
        return f"{self.conf_dir}/faketime.rc"

    @property
    def disk_layer_script(self) -> str:
        """When this file exists, the entrypoint runs it before anything touches the data
        directory: it mounts the disk layer there (clusters/disk_layer.py)."""
        return f"{self.conf_dir}/disk-layer.sh"

    @property
    def wipe_marker(self) -> str:
        """When this file exists in a re-provisioned controller, its next start empties its data
        directory first (steps/quorum_steps.py): a new disk, hence a new directory id."""
        return f"{self.conf_dir}/wipe-data"


IMAGE_LAYOUT = Layout()


def host_layout(install_dir: str, data_dir: str, interface: str) -> Layout:
    """A host's layout under the inventory's directories. The last parts of the paths are the
    node image's (``.../etc/kafka``, ``.../data``), so collected directories have the same names
    in a run directory whichever kind of node they came from."""
    return Layout(
        conf_dir=f"{install_dir}/etc/kafka",
        data_dir=f"{data_dir}/data",
        zk_data_dir=f"{data_dir}/zookeeper",
        dists_dir=f"{install_dir}/dists",
        agents_dir=f"{install_dir}/agents",
        interface=interface,
        lasting_network=True,
    )
