"""The nemesis interface the harness drives, and the vocabulary plans are written in.

A plan step names a fault package, a kind and a target *selector*; the nemesis resolves the
selector against the live cluster at fault time (who is the active controller now?) with the
step's own seed, and returns exactly what it did, which the harness records as the operation's
value. Deciding (the plan) and doing (the nemesis) stay apart, as in Jepsen's generators.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from clusters.capabilities import Controllable
from clusters.topology import Topology
from nemesis.errors import NemesisError

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

# The parameters each kind reads from ``FaultStep.params``: the one vocabulary of plans and
# nemeses. The suffix is the unit: clock faults take seconds (libfaketime's offsets are seconds),
# packet faults milliseconds (netem's). A key not listed here is refused, so a plan and a nemesis
# cannot drift apart silently (a misspelt key would otherwise fall back to a default).
PARAM_MEANINGS: dict[str, str] = {
    "delta_s": "clock offset in seconds, fractional and negative allowed (default 60)",
    "period_s": "strobe: seconds at +delta, then at 0; at least 2 (default 2)",
    "duration_s": "strobe: seconds the flipping goes on unless stopped first (default 10)",
    "delay_ms": "packet delay, ms (default 100)",
    "jitter_ms": "packet delay jitter, ms (default 0)",
    "percent": "share of packets lost, duplicated or reordered, in (0, 100] (default 10)",
    "partition": "partition-leader selector: the 'topic-partition' whose leader is meant",
}
PARAMS: dict[str, dict[str, tuple[str, ...]]] = {
    "partition": {kind: () for kind in FAULT_KINDS["partition"]},
    "kill": {kind: () for kind in TARGETS},
    "pause": {kind: () for kind in TARGETS},
    "clock": {
        "bump": ("delta_s",),
        "restart-skewed": ("delta_s",),
        "strobe": ("delta_s", "period_s", "duration_s"),
        "reset": (),
    },
    "packet": {
        "delay": ("delay_ms", "jitter_ms"),
        "reorder": ("delay_ms", "jitter_ms", "percent"),
        "duplicate": ("percent",),
        "loss": ("percent",),
    },
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
    params: dict[str, Any] = field(default_factory=dict)  # keys from PARAMS, e.g. {"delta_s": 30}


def check_keys(step: FaultStep) -> None:
    """Refuses a kind its package does not have, or a parameter its kind does not read."""
    kinds = PARAMS.get(step.fault)
    if kinds is None:
        raise NemesisError(f"unknown fault '{step.fault}': choose one of {', '.join(PARAMS)}")
    if step.kind not in kinds:
        raise NemesisError(
            f"unknown {step.fault} kind '{step.kind}': choose one of {', '.join(kinds)}"
        )
    allowed = set(kinds[step.kind])
    if "partition-leader" in (step.target, step.kind):
        allowed.add("partition")
    unknown = sorted(set(step.params) - allowed)
    if unknown:
        takes = ", ".join(sorted(allowed)) or "no parameters"
        raise NemesisError(
            f"{step.fault} {step.kind} does not read {', '.join(unknown)}: it takes {takes}"
        )


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


class Preparable(Protocol):
    """A package that needs the nodes set up before a run (clock: the JVMs under libfaketime).

    Optional, as Jepsen's small capability protocols are: the harness calls ``prepare`` once,
    before the workload, where a package has it, and waits until the cluster is ready again.
    """

    def prepare(self, ctx: FaultContext) -> list[str]:
        """Sets every running node up; says what it did (empty: nothing was needed)."""
        ...
