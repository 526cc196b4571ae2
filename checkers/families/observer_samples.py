"""Observer samples (f = observe, docs/history.md) and the faults around them, as the KRaft
metadata rules read them: what a node reported, and when it may have restarted or been stopped.

The metadata, migration, metadata-log and ZooKeeper-controller checks all read these; they live
apart from any one of them so that none imports another for its input types.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from checkers.core.findings import secs
from checkers.scan.op_rows import row_value
from history.effects import RESUMED, STOPPED, Effect, ends, op_effects
from history.format import MIGRATION, NEMESIS, OBSERVER, UPGRADE

# Faults that may legitimately erase a node's persisted Raft state.
DATA_LOSS_WORDS = ("wipe", "lose", "delete", "corrupt", "truncate")
# A power loss drops only what no fsync made durable, and KRaft fsyncs its log, snapshots and
# quorum-state before it counts on them: a node that lost power restarted, and lost nothing the
# metadata rules may excuse (docs/checkers.md, "Durability"). Its record names dropped files
# (`.deleted` ones among them), which the words above must not read as an erased disk.
POWER_LOSS = "power-loss"


@dataclass(frozen=True)
class Sample:
    index: int  # the ok completion
    node: str
    invoke_time: int
    time: int
    value: dict[str, Any]

    def raft(self, name: str) -> Any:
        raft = self.value.get("raft") or {}
        return raft.get(name) if isinstance(raft, dict) else None

    def cite(self) -> str:
        return f"op {self.index} ({self.node}, {secs(self.invoke_time)}-{secs(self.time)})"


@dataclass(frozen=True)
class Disruption:
    """Something after which a node may legitimately restart from its disk."""

    index: int
    time: int
    nodes: frozenset[str] | None  # None: could be any node
    data_loss: bool


@dataclass(frozen=True)
class Freeze:
    """A span in which a node's JVM may have been stopped (effect `stopped`: SIGSTOP, say), so
    could not act at all: from the invocation of the fault to the completion of the first op
    that resumed stopped JVMs (effect `resumed`)."""

    index: int  # the stopping op's completion
    nodes: frozenset[str] | None  # None: could be any node
    start: int
    end: int | None  # None: never resumed within the history

    def covers(self, node: str) -> bool:
        return self.nodes is None or node in self.nodes


@dataclass
class MetadataInput:
    samples: list[Sample] = field(default_factory=list)
    disruptions: list[Disruption] = field(default_factory=list)
    freezes: list[Freeze] = field(default_factory=list)

    def disrupted(self, node: str, start: int, end: int, data_loss: bool) -> bool:
        """Whether `node` may have restarted (from an erased disk, with `data_loss`) in between."""
        return any(
            start <= d.time <= end
            and (d.nodes is None or node in d.nodes)
            and (d.data_loss or not data_loss)
            for d in self.disruptions
        )


def observe_samples_from_ops(rows: list[dict[str, Any]]) -> MetadataInput:
    """From op rows (columnar, with value_json) of the observer and the nemesis."""
    invoke_time = {r["index"]: r["time"] for r in rows if r["type"] == "invoke"}
    out = MetadataInput()
    nodes = {r["node"] for r in rows if r.get("node")}
    for r in rows:
        if r["type"] == "invoke":
            continue
        if r["process"] == OBSERVER and r["f"] == "observe":
            if r["type"] == "ok":
                value = json.loads(r["value_json"]) if r.get("value_json") else None
                if isinstance(value, dict) and r.get("node"):
                    start = invoke_time.get(r["invoke_index"], r["time"])
                    out.samples.append(Sample(r["index"], r["node"], start, r["time"], value))
            else:  # the node did not answer: it may have been down and restarted
                hit = frozenset({r["node"]}) if r.get("node") else None
                out.disruptions.append(Disruption(r["index"], r["time"], hit, False))
        elif r["process"] in (NEMESIS, MIGRATION, UPGRADE):
            # A migration or upgrade step restarts its node with a new config: a disruption like
            # a kill; a controller re-provisioned to join a dynamic quorum restarts wiped.
            text = (r.get("value_json") or "") + r["f"]
            hit = frozenset(n for n in nodes if f'"{n}"' in text) or None
            said = row_value(r)
            power = isinstance(said, dict) and said.get("kind") == POWER_LOSS
            loss = not power and any(w in text.lower() for w in DATA_LOSS_WORDS)
            out.disruptions.append(Disruption(r["index"], r["time"], hit, loss))
    out.samples.sort(key=lambda s: (s.invoke_time, s.index))
    out.freezes = _freezes(rows, invoke_time, nodes)
    return out


def _frozen_nodes(r: dict[str, Any], stopped: list[Effect]) -> frozenset[str] | None:
    """The nodes a start stopped; None (any node) unless it completed ok and named them.

    An effect's `done` (the JVMs seen to stop) when it names any, else the nodes it was aimed at.
    """
    if r["type"] != "ok":  # the value of a start that did not complete ok names no outcome
        return None
    out: set[str] = set()
    for e in stopped:
        hit = e.done or e.nodes
        if not hit:
            return None
        out |= hit
    return frozenset(out)


def _freezes(
    rows: list[dict[str, Any]], invoke_time: dict[int, int], names: Iterable[str]
) -> list[Freeze]:
    """A freeze from each nemesis op that says it stopped JVMs (`stopped`), whatever its outcome
    (one that failed or timed out may have stopped some), to the first op after it that resumed
    stopped JVMs (`resumed`, ok): a stop of a pause resumes every stopped JVM, not only its own,
    unless it names the only ones it ended (a choreography's, history/effects.py `ends_only`)."""
    names = sorted(names)
    nemesis = [r for r in rows if r["process"] == NEMESIS and r["type"] != "invoke"]
    values = [row_value(r) for r in nemesis]
    effects = [op_effects(r["f"], v, names) for r, v in zip(nemesis, values, strict=True)]
    resumes = [r["type"] == "ok" and any(e.effect == RESUMED for e in es)
               for r, es in zip(nemesis, effects, strict=True)]  # fmt: skip
    out = []
    for i, r in enumerate(nemesis):
        stopped = [e for e in effects[i] if e.effect == STOPPED]
        if not stopped:
            continue
        frozen = _frozen_nodes(r, stopped)
        end = next(
            (
                nemesis[j]["time"]
                for j in range(i + 1, len(nemesis))
                if resumes[j] and ends(values[j], frozen)
            ),
            None,
        )
        start = invoke_time.get(r.get("invoke_index"), r["time"])
        out.append(Freeze(r["index"], frozen, start, end))
    return out
