"""The power losses a run's nemesis recorded (nemesis/disk.py, docs/disk.md), and its other
faults that may destroy what a disk holds, read from what each fault op says it did.

A power loss is a fault start whose `ok` value says, per node, what the node's disk dropped
(`dropped`: files and the bytes written since their last fsync; `lost_offsets` per partition
where the nemesis could tell); a node whose drop failed (`drop_failed`: killed all the same, a
crash and no power loss) or that was not running is not in it. A start that completed `info` (or
never) and whose planned step is a power loss may have dropped any node's disk; one that failed
touched nothing (nemesis/errors.py before_touching). The drop happens between the invocation and
the completion (every target stopped, dropped, killed: nemesis/disk.py).

Any other start whose effects include one no checker knows (history/effects.py: a corruption, a
full disk, as the disk package's other kinds record them) may have destroyed what a disk kept;
a start of known effects (a kill, a pause, a cut link, a skewed clock...) destroys nothing
durable.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from checkers.core.findings import secs
from checkers.scan.op_rows import row_value
from history.effects import Effect, op_effects, started

POWER_LOSS = "power-loss"
DROPPED = "dropped"


@dataclass(frozen=True)
class DiskFault:
    """One fault that may destroy what disks hold: a power loss (`power`), or a start of an
    effect no checker knows (a corruption, a full disk)."""

    op: int  # its completion (its invocation when it never completed)
    kind: str
    target: str | None
    at_s: float | None  # when the plan placed it
    start: int  # invocation, run ns
    end: float  # completion, run ns; inf when it never completed
    wall: float | None  # invocation, Unix seconds
    end_wall: float | None
    # The nodes whose disks it hit; None: not known (it did not complete ok), any node.
    nodes: frozenset[str] | None
    outcome: str  # ok, info, or "open" (never completed)
    # Power losses: per node, the bytes of each dropped file written since its last fsync.
    written: dict[str, dict[str, int]] = field(default_factory=dict, compare=False)
    # Per node, "<topic>-<p>" -> [first, last] offsets its segments lost (None: could not tell).
    lost_offsets: dict[str, dict[str, Any]] = field(default_factory=dict, compare=False)

    @property
    def power(self) -> bool:
        return self.kind == POWER_LOSS

    def overlaps(self, start: float, end: float) -> bool:
        """Whether its drop can have fallen in (start, end): it may drop from its invocation
        until its completion."""
        return self.end > start and self.start < end

    def hit(self, nodes: Iterable[str]) -> frozenset[str]:
        """Of `nodes`, those whose disks it may have hit."""
        nodes = frozenset(nodes)
        return nodes if self.nodes is None else nodes & self.nodes

    def cite(self) -> str:
        where = f"@{self.target}" if self.target else ""
        planned = f", planned at {self.at_s:g} s" if self.at_s is not None else ""
        end = "never completed" if math.isinf(self.end) else secs(int(self.end))
        how = "" if self.outcome == "ok" else f", {self.outcome}: its targets are not known"
        return f"op {self.op} ({self.kind}{where}{planned}, {secs(self.start)}-{end}{how})"

    def partition_evidence(self, node: str, topic: str, partition: int) -> str:
        """What the record says the node's copy of the partition lost, in words; '' if nothing."""
        name = f"{topic}-{partition}"
        lost = self.lost_offsets.get(node, {}).get(name)
        written = sum(
            b
            for path, b in self.written.get(node, {}).items()
            if path.endswith(".log") and f"/{name}/" in f"/{path}"
        )
        parts = []
        if written:
            parts.append(f"{written} bytes of {name}'s segments written since their last fsync")
        if isinstance(lost, list) and len(lost) == 2:
            a, b = lost
            parts.append(
                f"offsets {a if a is not None else '?'}..{b if b is not None else '?'} lost"
            )
        return f"{node}: " + ", ".join(parts) if parts else ""


def disk_faults(
    rows: list[dict[str, Any]], started_wall: float | None, names: Iterable[str] = ()
) -> list[DiskFault]:
    """Every power loss, and every other fault start of an effect no checker knows, of the
    nemesis op rows (columnar, with value_json), in invocation order. `started_wall`: the
    header's, for rows without a wall clock; `names`: the cluster's nodes."""
    names = sorted(names)
    done = {r["invoke_index"]: r for r in rows if r["type"] != "invoke" and r.get("invoke_index")}
    out = []
    for inv in rows:
        if inv["type"] != "invoke" or started(inv["f"]) is None:
            continue
        end = done.get(inv["index"])
        planned = row_value(inv)
        said = row_value(end) if end is not None else None
        planned = planned if isinstance(planned, dict) else {}
        said = said if isinstance(said, dict) else {}
        if end is not None and end["type"] == "fail":
            continue  # refused before anything was touched
        outcome = "open" if end is None else str(end["type"])
        if DROPPED in said or (outcome != "ok" and planned.get("kind") == POWER_LOSS):
            kind = POWER_LOSS
            nodes = _hit(said) if outcome == "ok" else None
        else:
            unknown = [
                e for e in op_effects(inv["f"], said if end is not None else planned, names)
                if not e.known
            ]  # fmt: skip
            if not unknown:
                continue
            kind = str(said.get("kind") or planned.get("kind") or unknown[0].effect)
            nodes = _effect_nodes(unknown) if outcome == "ok" else None
        out.append(
            DiskFault(
                end["index"] if end is not None else inv["index"],
                kind,
                str(planned.get("target") or said.get("target") or "") or None,
                planned.get("at_s") if isinstance(planned.get("at_s"), (int, float)) else None,
                int(inv["time"]),
                math.inf if end is None else float(end["time"]),
                _wall(inv, started_wall),
                None if end is None else _wall(end, started_wall),
                nodes,
                outcome,
                _written(said) if kind == POWER_LOSS else {},
                _lost_offsets(said) if kind == POWER_LOSS else {},
            )
        )
    return out


def _wall(row: dict[str, Any], started_wall: float | None) -> float | None:
    if isinstance(row.get("wall"), (int, float)):
        return float(row["wall"])
    if started_wall is None or row.get("time") is None:
        return None
    return started_wall + row["time"] / 1e9


def _hit(said: dict[str, Any]) -> frozenset[str] | None:
    """The nodes whose disks an ok power loss dropped (a node whose drop failed was only killed,
    one not running was not touched)."""
    dropped = said.get(DROPPED)
    return frozenset(map(str, dropped)) if isinstance(dropped, dict) else None


def _effect_nodes(effects: list[Effect]) -> frozenset[str] | None:
    """The nodes unknown effects name (each its `done` nodes, else its aim); None: any node."""
    out: set[str] = set()
    for e in effects:
        hit = e.done or e.nodes
        if hit is None:
            return None
        out |= hit
    return frozenset(out)


def _written(said: dict[str, Any]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    dropped = said.get("dropped")
    if not isinstance(dropped, dict):
        return out
    for node, d in dropped.items():
        w = d.get("written") if isinstance(d, dict) else None
        if isinstance(w, dict):
            out[str(node)] = {str(p): b for p, b in w.items() if isinstance(b, int)}
    return out


def _lost_offsets(said: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """`lost_offsets` per node: in each node's `dropped` record, or beside it keyed by node."""
    out: dict[str, dict[str, Any]] = {}
    dropped = said.get("dropped")
    for node, d in dropped.items() if isinstance(dropped, dict) else ():
        lost = d.get("lost_offsets") if isinstance(d, dict) else None
        if isinstance(lost, dict):
            out[str(node)] = lost
    beside = said.get("lost_offsets")
    if isinstance(beside, dict):
        for node, lost in beside.items():
            if isinstance(lost, dict):
                out.setdefault(str(node), lost)
    return out
