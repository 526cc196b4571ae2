"""Fault spans per node, from the op rows of the nemesis, upgrade and migration processes
(docs/history.md): what each fault did to which nodes and links, from when to when. This is the
one place fault spans are made: the lease checks, the report's shading and its fault table all
read `fault_windows`.

What a fault did is its start op's effects (history/effects.py), never its package's name: a
package this module has never heard of is judged by the effects it recorded, and an effect no
checker knows is kept as it is, for each checker to treat as disrupting the nodes it names and
to say so (`Faults.unknown`).

observer_samples.py reads the same ops as instants (Disruption) and, from the same effects,
spans in which JVMs were stopped in run time (Freeze), for rules over observer samples. The
lease rules compare these ops with the controllers' record timestamps (wall milliseconds), and
need two readings of one fault:

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
from history.effects import (
    CUT,
    HEAL,
    LEAVES_OTHERS,
    START,
    STOP,
    Effect,
    Link,
    ends,
    op_effects,
    started,
)
from history.format import MIGRATION, NEMESIS, UPGRADE

FAULT_PROCESSES = (NEMESIS, UPGRADE, MIGRATION)
# The clocks an op span can be placed by: the harness host's wall clock (seconds, what the
# controllers' records are stamped with) or the history's own (`time`, ns since the run began).
WALL, TIME = "wall", "time"


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
    start: float  # seconds, by the clock op_spans was asked for
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
    package: str  # the start op's package (start-<package>), for the words only
    start: OpSpan
    end: OpSpan | None  # the stop or heal that ended it; None: in place at the end
    # The op that may first have undone it (its invocation ends `held`); None: nothing did.
    undone_by: OpSpan | None
    effects: tuple[Effect, ...]  # what the start did (history/effects.py)
    kind: str | None = None  # the start value's kind, for the words only

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

    @property
    def nodes(self) -> frozenset[str] | None:
        """Every node an effect was aimed at; None when one names none (any node)."""
        return _aimed(self.effects)

    @property
    def cut(self) -> frozenset[Link]:
        """The pairs of nodes that could not talk while it held."""
        return frozenset(p for e in self.effects if e.effect == CUT for p in e.links or ())

    @property
    def unknown(self) -> tuple[Effect, ...]:
        return tuple(e for e in self.effects if not e.known)

    def touches(self, node: str) -> bool:
        return any(e.on(node) for e in self.effects)

    def separated(self, a: str, b: str) -> bool:
        return frozenset((a, b)) in self.cut

    def says(self) -> str:
        """The fault in words, with the effects no checker knows named."""
        odd = ", ".join(sorted({e.effect if e.by is None else f"{e.effect} ({e.by})"
                                for e in self.unknown}))  # fmt: skip
        return f"{self.package} fault {self.start.cite()}" + (
            f" (effects not known to this check: {odd})" if odd else ""
        )


@dataclass
class Faults:
    spans: list[FaultSpan] = field(default_factory=list)
    # Ops that start no fault and end none only: heals, stops that restarted or resumed JVMs
    # (the nodes they did), upgrade and migration steps, each with the nodes it names (None:
    # any).
    others: list[tuple[OpSpan, frozenset[str] | None]] = field(default_factory=list)
    walls: bool = True  # False: some op has no wall clock, so nothing here is placed in time

    @property
    def unknown(self) -> list[FaultSpan]:
        """Spans with an effect no checker knows: each checker treats them as disrupting the
        nodes they name (every node when they name none) and says so."""
        return [s for s in self.spans if s.unknown]


def op_spans(
    rows: Iterable[dict[str, Any]], processes: tuple[str, ...], clock: str = WALL
) -> list[OpSpan] | None:
    """Invocation-completion pairs of `processes`, in invocation order, in seconds by `clock`;
    None when some row has no wall clock (a history written before `wall`, or a hand-made
    one)."""
    scale = 1.0 if clock == WALL else 1e-9
    invokes: dict[int, dict[str, Any]] = {}
    done: dict[int, dict[str, Any]] = {}
    for r in rows:
        if r["process"] not in processes:
            continue
        if r.get(clock) is None:
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
                float(inv[clock]) * scale,
                float(c[clock]) * scale if c else math.inf,
                row_value(c) if c and c.get("value_json") else row_value(inv),
            )
        )
    return out


def named(value: Any, names: Iterable[str]) -> frozenset[str] | None:
    """The node names a value mentions as JSON strings; None when it mentions none."""
    text = json.dumps(value)  # searched, not written
    hit = frozenset(n for n in names if f'"{n}"' in text)
    return hit or None


def _aimed(effects: tuple[Effect, ...]) -> frozenset[str] | None:
    """Every node the effects were aimed at; None when one names none (any node)."""
    out: set[str] = set()
    for e in effects:
        if e.nodes is None:
            return None
        out |= e.nodes
    return frozenset(out)


def _keeps_faults(effects: tuple[Effect, ...]) -> bool:
    return bool(effects) and all(e.effect in LEAVES_OTHERS for e in effects)


def fault_windows(
    rows: Iterable[dict[str, Any]], names: Iterable[str], clock: str = WALL
) -> Faults:
    """Every fault of the nemesis op rows, and every other nemesis, upgrade and migration op.

    `rows`: op rows with every column (value_json, and `clock`); `names`: the cluster's node
    names. A fault is a `start-<package>` op that did not fail; it ends at the next
    `stop-<package>` or heal, and is undone at the first op that may undo it: any op but a
    start whose effects all leave earlier faults in place (history/effects.py LEAVES_OTHERS).
    """
    names = sorted(names)
    spans = op_spans(rows, FAULT_PROCESSES, clock)
    if spans is None:
        return Faults(walls=False)
    out = Faults()
    effects = [op_effects(s.f, s.value, names) if s.process == NEMESIS else () for s in spans]
    keeps = [
        s.process == NEMESIS and s.f.startswith(START) and _keeps_faults(e)
        for s, e in zip(spans, effects, strict=True)
    ]
    for i, s in enumerate(spans):
        if s.process != NEMESIS:
            out.others.append((s, None))  # a restart, a new config, a feature level: any node
            continue
        if s.f == HEAL or not s.f.startswith((START, STOP)):
            out.others.append((s, None if s.f == HEAL else named(s.value, names)))
            continue
        if s.f.startswith(STOP):
            # A stop ends the spans below (to its completion); one that started or resumed
            # JVMs (whatever stopped them) says which, and is an op on those nodes too.
            if effects[i]:
                acted = [e.nodes for e in effects[i]]
                hit = None if None in acted else frozenset().union(*acted)
                out.others.append((s, hit))
            continue
        if s.type == "fail":  # a fault step that failed changed nothing (docs/history.md)
            continue
        package = started(s.f) or ""
        later = range(i + 1, len(spans))
        on = _aimed(effects[i])
        # A stop that names the only nodes it ended (a choreography's) ends no fault elsewhere.
        end = next(
            (
                spans[j]
                for j in later
                if spans[j].process == NEMESIS
                and (
                    spans[j].f == HEAL
                    or (spans[j].f == STOP + package and ends(spans[j].value, on))
                )
            ),
            None,
        )
        undone = next((spans[j] for j in later if not keeps[j]), None)
        kind = s.value.get("kind") if isinstance(s.value, dict) else None
        out.spans.append(
            FaultSpan(package, s, end, undone, effects[i], kind if isinstance(kind, str) else None)
        )
    return out
