"""A cluster as its callers see it: what it is (``ClusterInfo``), the three things status,
readiness, collection and healing ask of it (``Cluster``), and the whole handle a run, the CLI
and a crashed run's recovery hold (``ClusterHandle``), brought up with one ``UpOptions``.

Each node kind implements ``ClusterHandle`` (Docker: clusters/docker_lifecycle.py, SSH hosts:
clusters/ssh_cluster.py) and clusters/handles.py opens one from where the cluster lives. As in
Jepsen's db.clj, callers ask the handle what it can do and what it saw ("is anything of the
cluster gone?", "does this error say it was removed?"), never which kind it is; they never
import a kind's modules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar, runtime_checkable

from clusters.capabilities import Controllable, Node
from clusters.kafka_dist import KafkaDist
from clusters.topology import Topology

N_co = TypeVar("N_co", bound=Node, covariant=True)
# How long a cluster may take to be ready after its nodes start, on either kind.
READY_TIMEOUT_S = 240.0


@dataclass
class ClusterInfo:
    """What kchaos needs to act on a running cluster; Docker's is rebuilt from its labels."""

    topology: Topology
    version: str
    timing: str
    cluster_id: str
    # The disk layer's name mode when the nodes run on it (clusters/disk_layer.py), else None.
    disk_layer: str | None = None


class Cluster(Protocol[N_co]):
    """A running cluster whose node handles have (at least) the capabilities ``N_co``."""

    def info(self) -> ClusterInfo: ...
    def nodes(self, info: ClusterInfo | None = None) -> Mapping[str, N_co]: ...
    def dist(self, info: ClusterInfo) -> KafkaDist:
        """The cluster's Kafka jars on this host: collection decodes logs with them."""
        ...


@dataclass(frozen=True)
class UpOptions:
    """How a cluster is brought up, whatever its kind: written once, so that a new option
    reaches every kind (a merge once taught Docker's ``up`` ``features`` and not the hosts')."""

    version: str
    timing: str = "default"
    heap_mb: int = 256
    # False: return once the nodes start, without waiting for readiness.
    wait: bool = True
    ready_timeout: float = READY_TIMEOUT_S
    # Into every Kafka node's server.properties.
    extra_props: Mapping[str, str] | None = None
    # Feature levels (name: level) every KRaft node's storage is formatted with.
    features: Mapping[str, int] | None = None
    # Where each node's log goes if bring-up fails, before the half-made cluster is removed.
    logs_on_failure: Path | None = None
    # The nodes' data directories on the disk layer, with this name mode (clusters/disk_layer.py
    # NAME_MODES); None: plain directories.
    disk_layer: str | None = None
    # With the layer: what has been pending this many seconds becomes durable, as a kernel's
    # writeback would make it (None: only an fsync does).
    disk_writeback_s: float | None = None


@runtime_checkable
class ClusterHandle(Cluster[Controllable], Protocol):
    """One cluster where it lives, from bring-up to removal: what the harness holds."""

    # The cluster's name (what holds, run names and messages say).
    cluster: str
    # The release whose tools read the cluster's files, when not the one it was created with:
    # after a rolling upgrade, the newest release its nodes ran.
    tools: KafkaDist | None

    def cli_option(self) -> str:
        """How a kchaos command names this cluster (``--name c1``, ``--hosts hosts.yaml``)."""
        ...

    def fixed_topology(self, quorum: str = "static") -> Topology | None:
        """The topology the place dictates (an inventory's hosts and roles), None where the
        caller chooses one."""
        ...

    def exists(self) -> bool:
        """Whether anything of a cluster of this name is there (someone's, up or half made)."""
        ...

    def up(
        self, topo: Topology | None, options: UpOptions, say: Callable[[str], None] = print
    ) -> ClusterInfo:
        """Brings the cluster up and (``options.wait``) waits until it is ready; all or nothing.
        ``topo`` None: the place's own (``fixed_topology``)."""
        ...

    def install_releases(self, dists: list[KafkaDist], say: Callable[[str], None] = print) -> None:
        """Makes every release a run rolls its nodes to available to every node."""
        ...

    def down(self, collect: Path | None = None, say: Callable[[str], None] = print) -> int:
        """Collects into ``collect`` (if given and anything is left), then removes everything;
        returns how many things were removed."""
        ...

    def remove(self) -> int:
        """Removes everything of the cluster without collecting; returns how many things."""
        ...

    def missing(self, info: ClusterInfo) -> str | None:
        """What of the cluster as it came up is no longer there, in words; None when all of it
        is, or when the place cannot be asked (which proves no removal)."""
        ...

    def says_removed(self, error: BaseException | None) -> str | None:
        """What ``error`` says about the cluster having been removed under its caller, in
        words; None when it says nothing of the kind."""
        ...

    def close(self) -> None:
        """Lets go of the connections the handle opened."""
        ...
