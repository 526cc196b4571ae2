"""The nemesis interface the harness drives, and the vocabulary plans are written in.

A plan step names a fault package, a kind and a target *selector*; the nemesis resolves the
selector against the live cluster at fault time (who is the active controller now?) with the
step's own seed, and returns exactly what it did, which the harness records as the operation's
value. Deciding (the plan) and doing (the nemesis) stay apart, as in Jepsen's generators.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from clusters.node import DockerNode
from clusters.topology import Topology

# Who a fault hits. Role-based selectors are resolved from what the nodes report at fault time.
TARGETS = (
    "one",
    "minority",
    "majority",
    "all",
    "active-controller",
    "quorum-leader",
    "partition-leader",
    "zk-leader",
)

# Fault packages (``--nemesis partition,kill``) and the kinds of fault each can inject.
FAULT_KINDS: dict[str, tuple[str, ...]] = {
    "partition": (
        "random-halves",
        "isolate-one",
        "majority-minority",
        "majorities-ring",
        "bridge",
        "controllers-brokers",
        "isolate-active-controller",
    ),
    "kill": TARGETS,
    "pause": TARGETS,
    "clock": ("bump", "strobe", "reset", "restart-skewed"),
    "packet": ("delay", "loss", "duplicate", "reorder"),
}


@dataclass(frozen=True)
class FaultStep:
    """One step of a plan: start or stop one fault. Plain data, written to plan.json."""

    at_s: float  # seconds after the workload starts
    action: str  # "start" or "stop"
    fault: str  # a key of FAULT_KINDS
    kind: str
    target: str | None = None  # a TARGETS selector where the kind takes one
    seed: int = 0  # resolves random choices at fault time, reproducibly
    params: dict[str, Any] = field(default_factory=dict)  # e.g. {"delta_s": 30}, {"delay_ms": 100}


@dataclass
class FaultContext:
    """What a nemesis may act on: the topology and a handle per node."""

    topology: Topology
    nodes: dict[str, DockerNode]
    # Partition leaders and other client-side facts, filled by the harness when it knows them.
    hints: dict[str, Any] = field(default_factory=dict)


class Nemesis(Protocol):
    """One fault package. ``start``/``stop`` return the exact detail recorded in the history."""

    fault: str

    def start(self, ctx: FaultContext, step: FaultStep) -> dict[str, Any]: ...

    def stop(self, ctx: FaultContext, step: FaultStep) -> dict[str, Any]: ...

    def heal_all(self, ctx: FaultContext) -> list[str]:
        """Undoes whatever this package could have left on any node; idempotent; says what."""
        ...
