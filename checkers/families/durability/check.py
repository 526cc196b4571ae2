"""The durability family over one run: lost acknowledged writes judged against Kafka's
durability model (lost.py), and the in-sync replicas' final logs compared (replicas.py).

The lost writes come from three places: the queue checker's `lost-write` findings (polls read
past a write and never returned it), its `unseen` ones (never polled) whose values no in-sync
replica's final log holds, and acknowledged writes no in-sync replica's final log holds at all
(polled before they were lost: no queue rule sees those). Each judged lost write replaces the
queue finding it was: a `lost-write` whole, an `unseen` by the values judged (the rest stay
unseen, in a finding of that kind)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from checkers.core.findings import Finding
from checkers.families.data_log.check import DataLogRead
from checkers.families.data_log.log import DataLog
from checkers.families.data_log.sends import Sends
from checkers.families.durability.lost import (
    SOURCES,
    Judge,
    Judged,
    Writes,
    follows_from,
    judge_writes,
    with_consequences,
)
from checkers.families.durability.partitions import Partitions, brokers_of
from checkers.families.durability.polled import (
    Polled,
    held_by_key,
    not_held,
    polled_then_gone,
    whole_logs_why,
)
from checkers.families.durability.power import DiskFault
from checkers.families.durability.reads import FinalReads
from checkers.families.durability.replicas import (
    compare_own_bounds,
    compare_replicas,
    read_checkpoints,
)
from checkers.families.durability.seen import FirstSeen
from checkers.families.durability.settings import Settings
from checkers.scan.op_arrays import OpArrays

LOST_WRITE, UNSEEN = "lost-write", "unseen"


@dataclass
class DurabilityResult:
    findings: list[Finding] = field(default_factory=list)
    replaces: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    checked: bool = False
    stats: dict[str, Any] = field(default_factory=dict)


@dataclass
class RunView:
    """What the family reads of a run, each part None where the run has none."""

    settings: Settings
    faults: list[DiskFault]
    topic: str
    cluster: dict[str, Any]
    partitions: Partitions | None
    queue: list[Finding]  # the queue checker's findings, then the data-log checker's
    ops: OpArrays | None  # the queue ops (times of sends and polls)
    sends: Sends | None
    data: DataLogRead | None
    data_dir: Path | None
    reads: FinalReads | None
    # The history whose poll records are read (with a power loss: when each lost write was
    # first seen lost; without one: looked for in every final log); and every value a send
    # wrote (without a power loss).
    polls_from: Path | None = None
    sent: np.ndarray | None = None


def check_durability(run: RunView) -> DurabilityResult:
    out = DurabilityResult()
    logs = run.data.logs if run.data is not None and run.data.error is None else {}
    powers = [f for f in run.faults if f.power]
    if powers:
        _lost_writes(run, logs, out)
    elif run.polls_from is not None and run.sent is not None:
        _polled_then_gone(run, logs, out)
    if logs and run.data_dir is not None:
        marks = read_checkpoints(run.data_dir, run.topic)
        if run.partitions is None and run.cluster.get("topology") == "zk":
            compared = compare_own_bounds(logs, marks, run.reads, run.topic)
        else:
            compared = compare_replicas(logs, marks, run.partitions, run.reads, run.topic)
        out.findings += compared.findings
        out.notes += compared.notes
        out.checked |= compared.judged > 0
        out.stats["replica_partitions_compared"] = compared.judged
    return out


def _polled_then_gone(run: RunView, logs: dict[str, DataLog], out: DurabilityResult) -> None:
    """Records polled during a run without a power loss, looked for in every final log
    (polled.py)."""
    assert run.polls_from is not None and run.sent is not None
    why = whole_logs_why(logs, brokers_of(run.cluster))
    if why:
        out.notes.append(f"durability: records polled during the run not looked for: {why}")
        return
    held = held_by_key(logs)
    # Only the records no final log holds are kept as the history is read.
    polled = Polled.from_parquet(run.polls_from, not_held(held))
    if not polled.read:
        return
    unclean = run.settings.unclean_leader_election or bool(
        run.partitions is not None and run.partitions.unclean
    )
    out.findings += polled_then_gone(polled, held, run.reads, run.sent, unclean)
    out.checked = True
    out.stats["polled_records_looked_for"] = polled.read


def _lost_writes(run: RunView, logs: dict[str, DataLog], out: DurabilityResult) -> None:
    brokers = brokers_of(run.cluster)
    powers = [f for f in run.faults if f.power]
    judge = Judge(run.settings, run.faults, run.partitions, brokers)
    elr = ""
    if run.settings.elr is None:
        said = {True: "on", False: "off", None: "not known"}[judge.elr_at(tuple(powers))]
        elr = f"; ELR at the power losses, as the committed metadata log says: {said}"
    out.notes.append(
        f"durability: {len(powers)} power loss(es) ("
        + ", ".join(f.cite() for f in powers)
        + f"); {run.settings.describe()}{elr}"
    )
    if run.ops is None:
        return
    served = _Served(logs, run.partitions, brokers, run.topic)
    writes, unseen = _gather(run, served)
    judged = judge_writes(judge, writes, run.topic)
    out.checked = True
    base = len(out.findings)  # where judged.findings begin in out.findings
    out.findings += judged.findings
    done = set(writes.value[judged.judged].tolist())
    out.replaces += [run.queue[i] for i in sorted(judged.replaced) if run.queue[i].kind != UNSEEN]
    for f in run.queue:
        # The queue calls an acknowledged write nobody polled `unseen` too, whether or not polls
        # read past it: a value judged here leaves it, the rest stay unseen.
        if f.kind != UNSEEN or not done.intersection(f.data.get("values", [])):
            continue
        out.replaces.append(f)
        rest = [v for v in f.data.get("values", []) if v not in done]
        if rest:
            ops = run.sends.ops_of(rest[:8]) if run.sends is not None else {}
            shown = tuple(sorted(ops.values())) or f.ops
            out.findings.append(_still_unseen(f, rest, len(f.data["values"]) - len(rest), shown))
    _consequences(run.queue, judged, out, run.ops, base)
    out.stats["lost_writes_judged"] = dict(sorted(judged.counts.items()))
    for why, n in sorted(judged.unjudged.items()):
        out.notes.append(f"durability: {n} lost write(s) not judged here: {why}")
    if unseen and not served.complete:
        out.notes.append(f"durability: unseen writes not judged: {served.why}")


def _consequences(
    queue: list[Finding], judged: Judged, out: DurabilityResult, ops: OpArrays, base: int
) -> None:
    """The queue's order and offset findings a documented loss explains, replaced by it."""
    explained: dict[int, list[Finding]] = {}
    reused = set(reused_offsets(queue, ops))
    for i, f in enumerate(queue):
        lost = judged.documented.get(f.key) if f.key is not None else None
        if lost and (follows_from(f, lost) or i in reused):
            explained.setdefault(f.key, []).append(f)  # type: ignore[arg-type]
    if not explained:
        return
    for key, fs in explained.items():
        at = base + judged.documented_at[key]
        out.findings[at] = with_consequences(out.findings[at], fs)
        out.replaces += fs


def reused_offsets(queue: list[Finding], ops: OpArrays) -> list[int]:
    """The queue's `lost-write` findings whose poll read past the write's offset before the write
    was sent: Jepsen's rule takes an offset to name one record for good, and after a loss Kafka
    gives a lost record's offset again, so the read saw the earlier record there."""
    out = []
    for i, f in enumerate(queue):
        if f.kind != LOST_WRITE or len(f.ops) != 2:
            continue
        j, w = ops.rows_of(np.array([f.ops[1], f.ops[0]])).tolist()
        if j >= 0 and w >= 0 and 0 <= ops.complete_time[j] <= ops.invoke_time[w]:
            out.append(i)
    return out


class _Served:
    """Which values an in-sync replica's final log holds (the final committed ISR and leader; any
    broker's log when the history holds no ISR): a write none holds was lost. `complete`: every
    broker's log was read whole, so a value in none of them is in no final log."""

    def __init__(
        self, logs: dict[str, DataLog], parts: Partitions | None, brokers: list[str], topic: str
    ) -> None:
        self.why = ""
        missing = [b for b in brokers if b not in logs]
        cut = sorted({n for log in logs.values() for n in log.notes})
        if not logs:
            self.why = "the run has no readable data logs"
        elif not brokers:
            self.why = "cluster.json names no brokers: every broker's log here is not known"
        elif missing:
            self.why = f"no data log of {', '.join(missing)}"
        elif cut:
            self.why = f"a data log could not be read whole ({cut[0]})"
        self.complete = not self.why
        held = []
        for name, log in logs.items():
            rows = np.zeros(len(log.offsets), bool)
            for p in log.partition_ids:
                final = parts.final(p) if parts is not None else None
                # A partition left with no leader and no ISR says nothing of who holds what.
                counted = (
                    final is None
                    or not (final.isr or final.leader)
                    or name in final.isr
                    or name == final.leader
                )
                if counted:
                    r = log.rows_of(p)
                    if len(r):
                        lo = int(log.first[r.start])
                        hi = int(log.first[r.stop - 1] + log.n[r.stop - 1])
                        rows[lo:hi] = True
            if log.odd_mask is not None:
                rows &= ~log.odd_mask
            held.append(log.values[rows])
        self.values = np.unique(np.concatenate(held)) if held else np.zeros(0, np.int64)

    def holds(self, values: np.ndarray) -> np.ndarray:
        return np.isin(values, self.values)


def _gather(run: RunView, served: _Served) -> tuple[Writes, bool]:
    """The lost writes to judge, as columns; and whether the queue reported any `unseen`."""
    ops = run.ops
    assert ops is not None
    key: list[np.ndarray] = []
    value: list[np.ndarray] = []
    offset: list[np.ndarray] = []
    op: list[np.ndarray] = []
    until: list[np.ndarray] = []
    saw: list[np.ndarray] = []
    finding: list[np.ndarray] = []

    def add(k: Any, v: Any, o: Any, i: Any, u: Any, source: str, f: Any) -> None:
        n = len(np.atleast_1d(v))
        key.append(np.broadcast_to(np.asarray(k, np.int64), n))
        value.append(np.atleast_1d(np.asarray(v, np.int64)))
        offset.append(np.broadcast_to(np.asarray(o, np.int64), n))
        op.append(np.broadcast_to(np.asarray(i, np.int64), n))
        until.append(np.broadcast_to(np.asarray(u, float), n))
        saw.append(np.full(n, SOURCES.index(source), np.int64))
        finding.append(np.broadcast_to(np.asarray(f, np.int64), n))

    seen: list[int] = []
    unseen = False
    first = None
    keys = [f.key for f in run.queue if f.kind == LOST_WRITE and f.key is not None]
    if run.polls_from is not None and keys:
        wanted = np.unique(np.array(keys, np.int64))
        polled = Polled.from_parquet(run.polls_from, lambda k, _v: np.isin(k, wanted))
        first = FirstSeen(polled, ops)
    for i, f in enumerate(run.queue):
        if f.kind == LOST_WRITE and f.key is not None and len(f.ops) == 2:
            v = f.data.get("value")
            if not isinstance(v, int) or served.holds(np.array([v]))[0]:
                continue  # held by an in-sync replica: served less, which replicas.py judges
            j, w = ops.rows_of(np.array([f.ops[1], f.ops[0]])).tolist()
            end = int(ops.complete_time[j]) if j >= 0 else -1
            if 0 <= end <= (int(ops.invoke_time[w]) if w >= 0 else -1):
                # The poll that read past its offset did so before it was sent: that offset was
                # given again after a loss, which is the earlier write's (reused_offsets).
                continue
            o = f.data.get("offset")
            missed = math.inf if end < 0 else end
            if first is not None and isinstance(o, int) and w >= 0:
                # An earlier poll may have seen it gone already (seen.py): a power loss after
                # that cannot explain it.
                acked = int(ops.complete_time[w]) if ops.typ[w] == _ok(ops) else -1
                missed = min(missed, first.seen(f.key, o, v, acked))
            add(f.key, v, -1 if o is None else o, f.ops[0], missed, LOST_WRITE, i)
            seen.append(v)
        elif f.kind == UNSEEN and f.key is not None:
            unseen = True
            if not served.complete or run.sends is None:
                continue
            values = np.array(f.data.get("values") or [], np.int64)
            gone = values[~served.holds(values)]
            rows = _send_rows(run.sends, gone)
            if len(rows):
                s = run.sends
                add(f.key, s.value[rows], s.offset[rows], s.op[rows], math.inf, UNSEEN, i)
                seen += s.value[rows].tolist()
    if served.complete and run.sends is not None:
        s = run.sends
        acked = s.acked
        gone = acked[~served.holds(s.value[acked])]
        gone = gone[~np.isin(s.value[gone], np.array(seen, np.int64))]
        add(s.key[gone], s.value[gone], s.offset[gone], s.op[gone], math.inf, "data", -1)
    cat = {
        "key": np.concatenate(key) if key else np.zeros(0, np.int64),
        "value": np.concatenate(value) if value else np.zeros(0, np.int64),
        "offset": np.concatenate(offset) if offset else np.zeros(0, np.int64),
        "op": np.concatenate(op) if op else np.zeros(0, np.int64),
        "until": np.concatenate(until) if until else np.zeros(0, float),
        "saw": np.concatenate(saw) if saw else np.zeros(0, np.int64),
        "finding": np.concatenate(finding) if finding else np.zeros(0, np.int64),
    }
    j = ops.rows_of(cat["op"])
    keep = j >= 0  # a send op the queue ops do not hold (it cannot be timed): left alone
    j = j[keep]
    ok = ops.type_names.index("ok") if "ok" in ops.type_names else -1
    return (
        Writes(
            **{c: a[keep] for c, a in cat.items()},
            acked=ops.typ[j] == ok,
            invoked=ops.invoke_time[j].astype(np.int64),
            completed=ops.complete_time[j].astype(np.int64),
        ),
        unseen,
    )


def _ok(ops: OpArrays) -> int:
    return ops.type_names.index("ok") if "ok" in ops.type_names else -1


def _send_rows(sends: Sends, values: np.ndarray) -> np.ndarray:
    """The acknowledged send rows of `values` (each value is sent once)."""
    acked = sends.acked
    return acked[np.isin(sends.value[acked], values)]


def _still_unseen(f: Finding, rest: list[int], judged: int, ops: tuple[int, ...]) -> Finding:
    """The queue's `unseen` finding less the values judged lost above (by this family)."""
    return Finding(
        "unseen",
        f.key,
        ops,
        f"{len(rest)} acknowledged send(s) to key {f.key} were never returned by any poll, e.g. "
        f"{', '.join(map(str, rest[:8]))}: either lost or no consumer caught up before the run "
        f"ended ({judged} more, in no in-sync replica's final log, are judged as lost writes "
        "after a power loss)",
        {**f.data, "count": len(rest), "values": rest},
        unknown=True,
    )
