"""No progress while a majority is healthy, and the recovery time after the last heal: from the
clients' own ops, per operation type (`f`), in the history's clock (`time`, seconds since the
run began).

`no-progress`. For each type, the time between one ok completion and the next in which the
clients kept asking (from the first moment an op of that type was in flight, not merely since
the last ok: a type asked rarely is not stuck between asks) is a stall. A stall is a finding
when it holds a healthy stretch (health.py) longer than `Bounds.progress_s`: a connected
majority of brokers and controllers was up, unfaulted and given time to recover, and no op of
the type succeeded. Sends and transactions need a healthy stretch for writes.

`recovery-time` (always reported, in results.json's liveness block): for each type, from the
completion of the last op that ended a fault (a stop or the heal) to the first ok completion of
that type after it. With a bound (the run option `--recovery-bound`), a type asked after the
heal that took longer, or never succeeded while asked for longer, is a `slow-recovery` finding.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from checkers.core.findings import Finding
from checkers.families.liveness.health import Stretch, healthy_within
from checkers.scan.fault_windows import Faults
from history.effects import HEAL, STOP

PROGRESS_RULE = (
    "KIP-500: a majority of the controller quorum elects a leader and serves metadata, and "
    "Kafka's replication design keeps a partition writable while min.insync.replicas of its "
    "replicas are alive; so while a connected majority of brokers and controllers is up and "
    "unfaulted, and has had time to recover, clients that keep asking make progress"
)
RECOVERY_RULE = (
    "after every fault is healed, each operation type the clients still ask succeeds again "
    "within the run's recovery bound (--recovery-bound): Kafka promises no time, so the bound "
    "is the run's"
)
# Ops a client runs once to set itself up, or records without asking Kafka: not progress.
ONE_OFF_FS = frozenset({"assign", "subscribe", "crash", "debug-topic-partitions"})
WRITE_FS = frozenset({"send", "txn"})
OP_COLUMNS = ["index", "invoke_index", "type", "f", "process"]


@dataclass
class TypeOps:
    """One op type's client ops, in invocation order: times in seconds (`done` inf: never
    completed), indices for citing."""

    f: str
    invoked: np.ndarray
    done: np.ndarray
    ok: np.ndarray  # bool
    invoke_index: np.ndarray
    index: np.ndarray  # the completion's index, or the invocation's
    failed: np.ndarray | None = None  # bool: completed fail (None: not read)

    @property
    def ok_times(self) -> np.ndarray:
        return np.sort(self.done[self.ok])


def _is_client(process: str | None) -> bool:
    return process is not None and (process.isdigit() or process == "nil")


def _decoded(col: pa.ChunkedArray, fn: Any) -> np.ndarray:
    """A dictionary-encoded string column mapped through `fn` value by value: `fn` runs once
    per distinct value, not once per row (a pipelined history has millions of rows)."""
    parts = []
    for chunk in col.chunks:
        if pa.types.is_dictionary(chunk.type):
            table = np.array([fn(v) for v in chunk.dictionary.to_pylist()] + [fn(None)], object)
            idx = chunk.indices.fill_null(len(chunk.dictionary)).to_numpy(zero_copy_only=False)
            parts.append(table[idx])
        else:
            parts.append(np.array([fn(v) for v in chunk.to_pylist()], object))
    out = np.concatenate(parts) if parts else np.array([], object)
    return out.astype(bool) if out.size and isinstance(out[0], bool) else out


def _ints(col: pa.ChunkedArray, null: int = 0) -> np.ndarray:
    return col.fill_null(null).to_numpy().astype(np.int64)


class ClientOpsBuilder:
    """Client op rows arriving a row group at a time (history.columnar.op_row_groups, columns
    OP_COLUMNS + time): only times, types and indices are kept."""

    def __init__(self) -> None:
        self._inv: dict[str, list[np.ndarray]] = {}
        self._cmp: list[tuple[np.ndarray, ...]] = []

    def add(self, part: pa.Table) -> None:
        if part.num_rows == 0:
            return
        proc = _decoded(part.column("process"), _is_client)
        if not proc.any():
            return
        typ = _decoded(part.column("type"), lambda t: t)[proc]
        f = _decoded(part.column("f"), lambda t: t)[proc]
        index = _ints(part.column("index"))[proc]
        time = _ints(part.column("time"))[proc].astype(np.float64) / 1e9
        inv = _ints(part.column("invoke_index"), -1)[proc]
        is_inv = typ == "invoke"
        for name in set(f[is_inv].tolist()):
            m = is_inv & (f == name)
            self._inv.setdefault(name, []).append(np.stack([index[m], time[m]]))
        c = ~is_inv
        self._cmp.append((inv[c], time[c], typ[c] == "ok", index[c], typ[c] == "fail"))

    def finish(self) -> dict[str, TypeOps]:
        if self._cmp:
            c_inv = np.concatenate([x[0] for x in self._cmp])
            c_time = np.concatenate([x[1] for x in self._cmp])
            c_ok = np.concatenate([x[2] for x in self._cmp])
            c_index = np.concatenate([x[3] for x in self._cmp])
            c_fail = np.concatenate([x[4] for x in self._cmp])
        else:
            c_inv = c_time = c_index = np.array([], np.int64)
            c_ok = c_fail = np.array([], bool)
        order = np.argsort(c_inv, kind="stable")
        c_inv, c_time, c_ok, c_index = c_inv[order], c_time[order], c_ok[order], c_index[order]
        c_fail = c_fail[order]
        out = {}
        for f, parts in sorted(self._inv.items()):
            if f in ONE_OFF_FS:
                continue
            both = np.concatenate(parts, axis=1)
            idx, invoked = both[0].astype(np.int64), both[1]
            at = np.searchsorted(c_inv, idx)
            at = np.minimum(at, max(len(c_inv) - 1, 0))
            has = (len(c_inv) > 0) & (c_inv[at] == idx) if len(c_inv) else np.zeros(len(idx), bool)
            done = np.where(has, c_time[at] if len(c_inv) else 0.0, math.inf)
            ok = has & (c_ok[at] if len(c_inv) else False)
            failed = has & (c_fail[at] if len(c_inv) else False)
            index = np.where(has, c_index[at] if len(c_inv) else idx, idx)
            order = np.argsort(invoked, kind="stable")
            out[f] = TypeOps(
                f, invoked[order], done[order], ok[order], idx[order], index[order], failed[order]
            )
        return out


def client_ops(parts: Iterable[pa.Table]) -> dict[str, TypeOps]:
    build = ClientOpsBuilder()
    for part in parts:
        build.add(part)
    return build.finish()


@dataclass(frozen=True)
class Stall:
    f: str
    start: float  # the first moment an op was in flight with no ok since `after`
    end: float  # the next ok completion, or the last moment one was asked
    after: int | None  # the ok op before it (its completion index); None: none yet
    next: int | None  # the ok op that ended it; None: none did
    asked: int  # ops of the type invoked within it


def stalls(ops: TypeOps, longer_than: float) -> list[Stall]:
    """Stalls longer than `longer_than`, each from the first moment an op was in flight after an
    ok completion (or after the first invocation) to the next ok completion."""
    n = len(ops.invoked)
    if n == 0:
        return []
    # For each op in invocation order, the latest completion among it and those before it: an op
    # was in flight at t if one invoked before t completes after t.
    reach = np.maximum.accumulate(np.where(np.isinf(ops.done), ops.invoked, ops.done))
    oks = np.flatnonzero(ops.ok)
    oks = oks[np.argsort(ops.done[oks], kind="stable")]
    ok_times = ops.done[oks]
    ends_at = np.append(ok_times, float(np.max(reach)))
    starts_at = np.insert(ends_at[:-1], 0, -math.inf)
    out = []
    # Only the gaps longer than the bound can hold a stall longer than it.
    for j in np.flatnonzero(ends_at - starts_at > longer_than).tolist():
        prev_t, end = float(starts_at[j]), float(ends_at[j])
        prev_i = int(ops.index[oks[j - 1]]) if j > 0 else None
        nxt = int(ops.index[oks[j]]) if j < len(oks) else None
        k = int(np.searchsorted(ops.invoked, prev_t, side="right"))
        # In flight at prev_t: one invoked before it that completes (or is pending) after it.
        busy = k > 0 and reach[k - 1] > prev_t and math.isfinite(prev_t)
        start = prev_t if busy else (float(ops.invoked[k]) if k < n else math.inf)
        hi = int(np.searchsorted(ops.invoked, end, side="right"))
        if end - start > longer_than:
            out.append(Stall(ops.f, start, end, prev_i, nxt, hi - k))
    return out


def no_progress(
    ops: dict[str, TypeOps], spans: list[Stretch], bound: float, bounds_say: str
) -> list[Finding]:
    out = []
    for f, typed in ops.items():
        writes = f in WRITE_FS
        for s in stalls(typed, bound):
            healthy = healthy_within(spans, s.start, s.end, writes)
            if healthy is None or healthy[1] - healthy[0] <= bound:
                continue
            out.append(_no_progress(s, healthy, bound, writes, bounds_say))
    return out


def _no_progress(
    s: Stall, healthy: tuple[float, float], bound: float, writes: bool, bounds_say: str
) -> Finding:
    before = f"the ok op {s.after}" if s.after is not None else "the first one was invoked"
    ended = f"until the ok op {s.next}" if s.next is not None else "and none did to the end"
    need = "for writes (enough brokers for min.insync.replicas) " if writes else ""
    a, b = healthy
    return Finding(
        "no-progress",
        None,
        tuple(i for i in (s.after, s.next) if i is not None),
        f"no {s.f} op succeeded from {s.start:.3f} s (after {before}) to {s.end:.3f} s "
        f"({ended}), while clients invoked {s.asked} {s.f} op(s); from {a:.3f} s to {b:.3f} s "
        f"({b - a:.1f} s) a connected majority of brokers and controllers was healthy {need}"
        f"and had been given its recovery time after every fault, longer than the "
        f"{bound:g} s bound ({bounds_say}). Rule: {PROGRESS_RULE}",
        {
            "rule": PROGRESS_RULE,
            "f": s.f,
            "stall_s": [round(s.start, 3), round(s.end, 3)],
            "healthy_s": [round(a, 3), round(b, 3)],
            "bound_s": bound,
        },
    )


def heals(faults: Faults) -> list[tuple[float, int]]:
    """The completions (time, index) of the ops that ended a fault (a stop or the heal), in
    time order."""
    ends = [
        (op.end, op.index)
        for op, _ in faults.others
        if (op.f == HEAL or op.f.startswith(STOP)) and math.isfinite(op.end)
    ]
    ends += [
        (span.end.end, span.end.index)
        for span in faults.spans
        if span.end is not None and math.isfinite(span.end.end)
    ]
    return sorted(set(ends))


def last_heal(faults: Faults) -> tuple[float, int] | None:
    """The completion (time, index) of the last op that ended a fault: a stop or the heal."""
    ended = heals(faults)
    return ended[-1] if ended else None


@dataclass(frozen=True)
class Recovered:
    f: str
    heal: tuple[float, int]  # the last fault-ending op before the type's last invocation
    seconds: float | None  # to the first ok after it; None: asked, never ok
    asked_until: float


def recoveries(ops: dict[str, TypeOps], faults: Faults) -> dict[str, Recovered]:
    """Per type: from the last op that ended a fault while the type was still being asked
    (completed before its last invocation: kchaos's clients stop at the time limit, before the
    final heal, whose recovery the final reads then show) to its first ok after it."""
    ended = heals(faults)
    out: dict[str, Recovered] = {}
    for f, typed in ops.items():
        if not len(typed.invoked):
            continue
        asked_until = float(np.max(np.where(np.isinf(typed.done), typed.invoked, typed.done)))
        last_ask = float(typed.invoked[-1])
        before = [h for h in ended if h[0] <= last_ask]
        if not before:
            continue
        t = before[-1][0]
        later = typed.done[typed.ok & (typed.done > t)]
        took = round(float(later.min()) - t, 3) if len(later) else None
        out[f] = Recovered(f, before[-1], took, asked_until)
    return out


def recovery(ops: dict[str, TypeOps], faults: Faults) -> dict[str, Any]:
    """results.json's per-type recovery: seconds (None: asked, never ok) and the heal op."""
    return {
        f: {"seconds": r.seconds, "after_s": round(r.heal[0], 3), "after_op": r.heal[1]}
        for f, r in recoveries(ops, faults).items()
    }


def slow_recovery(ops: dict[str, TypeOps], faults: Faults, bound: float | None) -> list[Finding]:
    if bound is None:
        return []
    out = []
    for f, r in recoveries(ops, faults).items():
        t, heal_index = r.heal
        if r.seconds is None:
            if r.asked_until - t <= bound:
                continue
            said = f"no {f} op succeeded after it, though clients asked until {r.asked_until:.3f} s"
        elif r.seconds <= bound:
            continue
        else:
            said = f"the first ok {f} op completed {r.seconds:.3f} s after it"
        out.append(
            Finding(
                "slow-recovery",
                None,
                (heal_index,),
                f"the last fault ended while {f} ops were asked at {t:.3f} s (op {heal_index}); "
                f"{said}, beyond the run's recovery bound of {bound:g} s. Rule: {RECOVERY_RULE}",
                {"rule": RECOVERY_RULE, "f": f, "recovery_s": r.seconds, "bound_s": bound},
            )
        )
    return out
