"""The nemesis interface the harness drives, and the vocabulary plans are written in.

A plan step names a fault package, a kind and a target *selector*; the nemesis resolves the
selector against the live cluster at fault time (who is the active controller now?) with the
step's own seed, and returns exactly what it did, which the harness records as the operation's
value. Deciding (the plan) and doing (the nemesis) stay apart, as in Jepsen's generators.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from clusters.capabilities import Controllable
from clusters.topology import Topology

# Who a fault hits, and how each selector is resolved (nemesis/targets.py). Role selectors are
# resolved from what the nodes report at fault time. The order is the kill and pause menus' order.
TARGET_MEANINGS: dict[str, str] = {
    "one": "one node, drawn with the step's seed",
    "minority": "floor((n-1)/2) nodes, drawn with the step's seed",
    "majority": "floor(n/2)+1 nodes, drawn with the step's seed",
    "all": "every node",
    "active-controller": (
        "KRaft: the node whose ActiveControllerCount is 1; ZooKeeper mode: the broker "
        "/controller names"
    ),
    "quorum-leader": (
        "KRaft: the controller whose own raft state is leader; ZooKeeper mode: the ZooKeeper leader"
    ),
    "partition-leader": (
        "the broker leading a partition, from the workload's hints; a seeded broker without them"
    ),
    "zk-leader": "the ZooKeeper whose srvr mode is leader (or standalone)",
    "busiest-leader": (
        "the broker leading the partition with the most sends in flight now (pipelined sends); "
        "sync sends: as partition-leader"
    ),
    "txn-coordinator": (
        "the broker leading the __transaction_state partition of one of the run's "
        "transactional ids (--txn), drawn with the step's seed"
    ),
    "share-leader": (
        "the broker leading a partition of the share topic (--workload share): the "
        "share-partition leader, which holds its records' acquisition locks; the partition "
        "drawn with the step's seed"
    ),
    "share-coordinator": (
        "the broker leading the __share_group_state partition that holds the state of one of "
        "the share group's share-partitions (Kafka's group:topicId:partition key), drawn with "
        "the step's seed (--workload share)"
    ),
}
TARGETS = tuple(TARGET_MEANINGS)
# Selectors a plan aims only where a spec names them: they read facts only some workloads give
# (nemesis/targets.py), and plans drawn before they existed must stay the same.
NAMED_ONLY_TARGETS = ("busiest-leader", "txn-coordinator", "share-leader", "share-coordinator")
# A target only a plan writes: the nodes the step's ``params["nodes"]`` names, chosen when the
# plan was drawn. A choreography (nemesis/choreo.py) keeps its roles (which minority is paused,
# which node loses power) the same across its steps with it. Not in TARGETS: no spec names it
# and no menu draws it.
NAMED = "nodes"
NAMED_PARAM = "nodes"


@dataclass(frozen=True)
class FaultStep:
    """One step of a plan: start or stop one fault. Plain data, written to plan.json."""

    at_s: float  # seconds after the workload starts
    action: str  # "start" or "stop"
    fault: str  # a package's name (nemesis/registry.py)
    kind: str  # a kind of that package's menu
    target: str | None = None  # a TARGETS selector where the kind takes one
    seed: int = 0  # resolves random choices at fault time, reproducibly
    # Keys the kind reads (its package's menu), e.g. {"delta_s": 30}.
    params: dict[str, Any] = field(default_factory=dict)
    # The steps of one choreographed sequence share a group name (None: an ordinary fault,
    # paired with its stop by fault, kind, target, seed and params): `kchaos shrink` keeps or
    # drops a group whole (docs/shrink.md). Written into plan.json only when set.
    group: str | None = None


@dataclass
class FaultContext:
    """What a nemesis may act on: the topology and a handle per node."""

    topology: Topology
    nodes: Mapping[str, Controllable]
    # Partition leaders and other client-side facts, filled by the harness when it knows them.
    hints: dict[str, Any] = field(default_factory=dict)


class Nemesis(Protocol):
    """One fault package. ``start``/``stop`` return the exact detail recorded in the history."""

    fault: str

    def check(self, step: FaultStep) -> dict[str, Any]:
        """The step's parameters as ``start`` will use them (defaults filled in); raises
        NemesisError, touching no node, for a kind or parameter the package cannot carry out."""
        ...

    def start(self, ctx: FaultContext, step: FaultStep) -> dict[str, Any]: ...

    def stop(self, ctx: FaultContext, step: FaultStep) -> dict[str, Any]: ...

    def heal_all(self, ctx: FaultContext) -> list[str]:
        """Undoes whatever this package could have left on any node; idempotent; says what."""
        ...


@runtime_checkable
class Preparable(Protocol):
    """A package that needs the nodes set up before a run (clock: the JVMs under libfaketime).

    Optional, as Jepsen's small capability protocols are: the harness calls ``prepare`` once,
    before the workload, where a package has it, and waits until the cluster is ready again.
    """

    def prepare(self, ctx: FaultContext) -> list[str]:
        """Sets every running node up; says what it did (empty: nothing was needed)."""
        ...
