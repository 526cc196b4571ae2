"""Counting the states of checkers/core/states.py in one run. Each count comes from evidence the
run recorded; a state whose evidence the run lacks (no metadata log, no subscribers, no wall
clock) is listed under `unmeasured` with why, never counted as 0.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from checkers.core.states import METADATA, STATES
from checkers.families.elr.replay import replay
from checkers.families.groups import group_ops, subscribers
from checkers.families.liveness.progress import WRITE_FS, TypeOps
from checkers.families.metadata_log.liveness import is_fence
from checkers.families.metadata_log.parse import Record
from checkers.scan.fault_windows import TIME, WALL, fault_windows
from history.effects import CUT, DEGRADED, DOWN, FENCED, SKEWED, STALLED, STOPPED
from history.format import MIGRATION, PLAN_JSON, UPGRADE

EFFECT_STATES = {
    DOWN: "node-killed",
    STOPPED: "node-paused",
    CUT: "links-cut",
    DEGRADED: "traffic-degraded",
    SKEWED: "clock-skewed",
    STALLED: "jvm-stalled",
}
# The same effects naming no node: a client's own process or network (nemesis/client.py).
CLIENT_STATES = {
    DOWN: "client-stopped",
    STOPPED: "client-stopped",
    STALLED: "client-held",
    CUT: "client-cut",
    FENCED: "client-fenced",
}
FENCING_ERRORS = ("fenced", "producer_fenced", "invalidproducerepoch", "invalid_producer_epoch")


@dataclass
class Coverage:
    states: dict[str, int] = field(default_factory=dict)
    unmeasured: dict[str, str] = field(default_factory=dict)
    must_reach: tuple[str, ...] = ()  # the run's --must-reach

    @property
    def missing(self) -> list[str]:
        """Required states the run did not reach (or could not show it reached)."""
        return [s for s in self.must_reach if self.states.get(s, 0) == 0]

    def to_dict(self) -> dict[str, Any]:
        reached = sorted(s for s, n in self.states.items() if n > 0)
        out: dict[str, Any] = {
            "states": dict(self.states),
            "reached": reached,
            "unmeasured": dict(self.unmeasured),
        }
        if self.must_reach:
            out["must_reach"] = list(self.must_reach)
            out["missing"] = self.missing
            out["exercised"] = not self.missing
        return out


def read_must_reach(run_dir: str | Path) -> tuple[str, ...]:
    """plan.json's spec `must_reach` (comma-separated state names; harness/spec.py checks them)."""
    try:
        plan = json.loads((Path(run_dir) / PLAN_JSON).read_text())
    except (OSError, ValueError):
        return ()
    spec = plan.get("spec") if isinstance(plan, dict) else None
    value = spec.get("must_reach") if isinstance(spec, dict) else None
    if not isinstance(value, str):
        return ()
    return tuple(n.strip() for n in value.split(",") if n.strip())


def is_fencing_error(error: str | None) -> bool:
    return error is not None and any(w in error.lower() for w in FENCING_ERRORS)


def count_states(
    fault_rows: list[dict[str, Any]],
    names: Iterable[str],
    ops: dict[str, TypeOps],
    fenced_errors: int,
    group_rows: Iterable[dict[str, Any]] | None,
    committed: list[Record] | None,
    started_wall: float | None,
    must_reach: tuple[str, ...] = (),
) -> Coverage:
    out = Coverage({s.name: 0 for s in STATES}, must_reach=must_reach)
    names = sorted(names)
    timed = fault_windows(fault_rows, names, TIME)
    for span in timed.spans:
        for e in span.effects:
            if e.nodes == frozenset():
                client = CLIENT_STATES.get(e.effect)
                if client is not None:
                    out.states[client] += 1
                continue
            state = EFFECT_STATES.get(e.effect)
            if state is not None and (e.effect not in (DOWN, STOPPED) or e.done):
                out.states[state] += 1
    out.states["op-indeterminate"] = sum(
        int(np.sum(np.isfinite(o.done) & ~o.ok)) - _fails(o) for o in ops.values()
    )
    if "txn" in ops:
        out.states["txn-aborted"] = _fails(ops["txn"])
    out.states["producer-fenced"] = fenced_errors
    _groups(out, group_rows)
    _metadata(out, fault_rows, names, ops, committed, started_wall)
    return out


def _fails(o: TypeOps) -> int:
    return 0 if o.failed is None else int(o.failed.sum())


def _groups(out: Coverage, group_rows: Iterable[dict[str, Any]] | None) -> None:
    why = "no subscriber recorded rebalance events"
    rows = list(group_rows) if group_rows is not None else []
    members = subscribers(rows)
    gops = [o for o in group_ops(rows)[0] if o.process in members] if members else []
    if not any(o.events for o in gops):
        for s in ("partitions-revoked", "partitions-lost", "redelivery"):
            out.states.pop(s, None)
            out.unmeasured[s] = why
        return
    readers: dict[tuple[int, int], set[int]] = {}
    for o in gops:
        for kind, keys, _ in o.events:
            if kind == "revoked" and keys:
                out.states["partitions-revoked"] += 1
            elif kind == "lost" and keys:
                out.states["partitions-lost"] += 1
        for key, offsets in o.reads.items():
            for offset in offsets:
                if offset >= 0:
                    readers.setdefault((key, offset), set()).add(o.process)
    out.states["redelivery"] = sum(len(ps) > 1 for ps in readers.values())


def _metadata(
    out: Coverage,
    fault_rows: list[dict[str, Any]],
    names: list[str],
    ops: dict[str, TypeOps],
    committed: list[Record] | None,
    started_wall: float | None,
) -> None:
    metadata = [s.name for s in STATES if s.evidence == METADATA]
    if not committed:
        for s in metadata:
            out.states.pop(s, None)
            out.unmeasured[s] = "the run has no committed metadata log (ZooKeeper mode, or none)"
        return
    # Only what happened once the history began (bring-up's elections and epochs are not the
    # run's), when the header says when that was.
    since = (started_wall or -math.inf) * 1000
    changed = replay(committed).changes
    elections = [c for c in changed if c.elected is not None and c.record.create_ms >= since]
    out.states["leader-elected"] = len(elections)
    out.states["broker-fenced"] = sum(
        is_fence(r) is not None and r.create_ms >= since for r in committed
    )
    # Each new Raft epoch is an election (a new active controller, or the same one again).
    firsts: dict[int, int] = {}
    for r in committed:
        if r.epoch >= 0:
            firsts[r.epoch] = min(firsts.get(r.epoch, r.create_ms), r.create_ms)
    changes = [(e, ms) for e, ms in sorted(firsts.items())[1:] if ms >= since]
    out.states["controller-failover"] = len(changes)
    walled = fault_windows(fault_rows, names, WALL)
    steps = [op for op, _ in walled.others if op.process in (UPGRADE, MIGRATION)]
    out.states["controller-failover-during-step"] = sum(
        any(op.start <= ms / 1000 <= op.end for op in steps) for _, ms in changes
    )
    writes = [o for f, o in ops.items() if f in WRITE_FS and len(o.invoked)]
    if started_wall is None or not writes:
        out.states.pop("leader-change-with-sends-in-flight", None)
        why = "no sends, or no started_wall in the history's header to place them by"
        out.unmeasured["leader-change-with-sends-in-flight"] = why
        return
    invoked = np.concatenate([o.invoked for o in writes]) + started_wall
    done = np.concatenate([np.where(np.isinf(o.done), o.invoked, o.done) for o in writes])
    done = done + started_wall
    order = np.argsort(invoked, kind="stable")
    invoked, reach = invoked[order], np.maximum.accumulate(done[order])
    hits = 0
    for c in elections:
        t = c.record.create_ms / 1000
        k = int(np.searchsorted(invoked, t, side="right"))
        hits += bool(k > 0 and reach[k - 1] >= t and math.isfinite(t))
    out.states["leader-change-with-sends-in-flight"] = hits
