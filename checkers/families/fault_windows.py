"""Fault spans per node in wall-clock time, from the op rows of the nemesis, upgrade and migration
processes (docs/history.md): what each fault acted on, from when to when.

observer_samples.py reads the same ops as instants (Disruption) and pause spans in run time
(Freeze), for rules over observer samples. The lease rules compare these ops with the
controllers' record timestamps (wall milliseconds), and need two readings of one fault:

- the span a node was certainly faulted (`FaultSpan.held`): from the start's ok completion (the
  nemesis saw the JVM exit, stop, or the rules installed) to the invocation of the first op that
  may have undone it; an obligation is only ever drawn from that;
- the span a node may have been faulted (`FaultSpan.outer`): from the start's invocation to the
  completion of the stop or heal that ended it (the end of the history if none did); anything
  overlapping it is excused.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from checkers.scan.op_rows import row_value
from history.format import MIGRATION, NEMESIS, UPGRADE

# Fault starts that leave any earlier fault in place: none of them starts a stopped or exited
# JVM, or removes a partition's rules. Every other op (stops, heal, clock, which restarts the
# node it first skews, a JVM fault that may restart with an agent, packages this module does
# not know, every upgrade and migration step) may undo one, so a fault held until then.
KEEPS_FAULTS = ("start-kill", "start-pause", "start-partition", "start-packet")
# The value key each signal fault names its acted-on nodes by (nemesis/process.py took_key).
ACTED_KEY = {"kill": "exited_after_s", "pause": "stopped_after_s"}
FAULT_PROCESSES = (NEMESIS, UPGRADE, MIGRATION)
RESTARTED_KEY = {"stop-kill": "restarted", "stop-pause": "resumed"}


def utc(wall: float) -> str:
    """A wall time as the nodes' logs print it (they run in UTC), to the millisecond."""
    if math.isinf(wall):
        return "never"
    return datetime.fromtimestamp(wall, UTC).strftime("%H:%M:%S.%f")[:-3] + " UTC"


@dataclass(frozen=True)
class OpSpan:
    """One op from its invocation to its completion (`end` inf: never completed)."""

    index: int  # the completion's index, or the invocation's when it never completed
    invoke_index: int
    process: str
    f: str
    type: str  # ok, fail, info, or "invoke" (never completed)
    start: float  # wall seconds
    end: float
    value: Any  # the completion's value, else the invocation's

    def cite(self) -> str:
        done = "never completed" if math.isinf(self.end) else f"{self.type} at {utc(self.end)}"
        return (
            f"op {self.invoke_index}-{self.index} {self.f} (invoked at {utc(self.start)}, {done})"
        )

    def overlaps(self, lo: float, hi: float) -> bool:
        return self.start <= hi and self.end >= lo


@dataclass(frozen=True)
class FaultSpan:
    package: str  # kill, pause, partition, packet, clock, jvm, or one this module does not know
    start: OpSpan
    end: OpSpan | None  # the stop or heal that ended it; None: in place at the end
    # The op that may first have undone it (its invocation ends `held`); None: nothing did.
    undone_by: OpSpan | None
    nodes: frozenset[str] | None  # the nodes it acted on; None: cannot tell, any node
    # partition only: the pairs of nodes that could not talk while it held
    cut: frozenset[frozenset[str]] = field(default_factory=frozenset)
    acted: frozenset[str] = field(default_factory=frozenset)  # confirmed by the ok value

    @property
    def outer(self) -> tuple[float, float]:
        return self.start.start, self.end.end if self.end is not None else math.inf

    @property
    def held(self) -> tuple[float, float] | None:
        """When the fault was certainly in place; None unless the start completed ok."""
        if self.start.type != "ok":
            return None
        until = self.undone_by.start if self.undone_by is not None else math.inf
        return (self.start.end, until) if until > self.start.end else None

    def touches(self, node: str) -> bool:
        return self.nodes is None or node in self.nodes

    def separated(self, a: str, b: str) -> bool:
        return frozenset((a, b)) in self.cut


@dataclass
class Faults:
    spans: list[FaultSpan] = field(default_factory=list)
    # Ops that start no fault and end none only: heals, kill and pause stops (what they
    # restarted or resumed), upgrade and migration steps, each with the nodes it names (None:
    # any).
    others: list[tuple[OpSpan, frozenset[str] | None]] = field(default_factory=list)
    walls: bool = True  # False: some op has no wall clock, so nothing here is placed in time


def op_spans(rows: Iterable[dict[str, Any]], processes: tuple[str, ...]) -> list[OpSpan] | None:
    """Invocation-completion pairs of `processes`, in invocation order; None when some row has
    no wall clock (a history written before `wall`, or a hand-made one)."""
    invokes: dict[int, dict[str, Any]] = {}
    done: dict[int, dict[str, Any]] = {}
    for r in rows:
        if r["process"] not in processes:
            continue
        if r.get("wall") is None:
            return None
        if r["type"] == "invoke":
            invokes[r["index"]] = r
        elif r.get("invoke_index") is not None:
            done[r["invoke_index"]] = r
    out = []
    for i, inv in sorted(invokes.items()):
        c = done.get(i)
        out.append(
            OpSpan(
                c["index"] if c else i,
                i,
                str(inv["process"]),
                inv["f"],
                c["type"] if c else "invoke",
                float(inv["wall"]),
                float(c["wall"]) if c else math.inf,
                row_value(c) if c and c.get("value_json") else row_value(inv),
            )
        )
    return out


def named(value: Any, names: Iterable[str]) -> frozenset[str] | None:
    """The node names a value mentions as JSON strings; None when it mentions none."""
    text = json.dumps(value)
    hit = frozenset(n for n in names if f'"{n}"' in text)
    return hit or None


def _targets(value: Any, package: str, names: Iterable[str]) -> frozenset[str] | None:
    if isinstance(value, dict):
        listed = value.get("targets")
        acted = value.get(ACTED_KEY.get(package, ""))
        found = set(listed) if isinstance(listed, list) else set()
        found |= set(acted) if isinstance(acted, dict) else set()
        found |= set(value.get("not_running") or [])
        if found:
            return frozenset(str(n) for n in found)
    return named(value, names)


def _acted(value: Any, package: str) -> frozenset[str]:
    acted = value.get(ACTED_KEY.get(package, "")) if isinstance(value, dict) else None
    return frozenset(str(n) for n in acted) if isinstance(acted, dict) else frozenset()


def cut_pairs(value: Any) -> frozenset[frozenset[str]] | None:
    """The pairs a partition's grudge separates (either side's rules cut TCP); None when the
    value has no grudge to read. A pair whose two nodes were both down at the start got no
    rules at all (nemesis/partition.py `not_running`): not cut."""
    grudge = value.get("grudge") if isinstance(value, dict) else None
    if not isinstance(grudge, dict):
        return None
    down = set(value.get("not_running") or [])
    pairs = set()
    for a, drops in grudge.items():
        for b in drops if isinstance(drops, list) else []:
            if a != b and not (a in down and b in down):
                pairs.add(frozenset((str(a), str(b))))
    return frozenset(pairs)


def fault_windows(rows: Iterable[dict[str, Any]], names: Iterable[str]) -> Faults:
    """Every fault of the nemesis op rows, and every other nemesis, upgrade and migration op.

    `rows`: op rows with every column (value_json, wall); `names`: the cluster's node names.
    """
    names = sorted(names)
    spans = op_spans(rows, FAULT_PROCESSES)
    if spans is None:
        return Faults(walls=False)
    out = Faults()
    for i, s in enumerate(spans):
        if s.process != NEMESIS:
            out.others.append((s, None))  # a restart, a new config, a feature level: any node
            continue
        if s.f == "heal" or not s.f.startswith(("start-", "stop-")):
            out.others.append((s, None if s.f == "heal" else named(s.value, names)))
            continue
        if s.f in ("stop-kill", "stop-pause"):
            # A stop ends the spans below (to its completion); these two also start or resume
            # any other stopped JVM, whatever stopped it, and list each.
            acted = s.value.get(RESTARTED_KEY[s.f]) if isinstance(s.value, dict) else None
            out.others.append((s, named(acted, names) or frozenset()))
            continue
        if s.f.startswith("stop-"):
            continue
        if s.type == "fail":  # a fault step that failed changed nothing (docs/history.md)
            continue
        package = s.f[len("start-") :]
        later = spans[i + 1 :]
        end = next(
            (x for x in later if x.process == NEMESIS and x.f in (f"stop-{package}", "heal")), None
        )
        undone = next((x for x in later if x.f not in KEEPS_FAULTS or x.process != NEMESIS), None)
        cut: frozenset[frozenset[str]] = frozenset()
        if package == "partition":
            pairs = cut_pairs(s.value)
            nodes = None if pairs is None else frozenset(n for p in pairs for n in p)
            cut = pairs or frozenset()
        else:
            nodes = _targets(s.value, package, names)
        out.spans.append(FaultSpan(package, s, end, undone, nodes, cut, _acted(s.value, package)))
    return out
