"""KIP-966's "strict min ISR": the high watermark advances only while the ISR has at least
min.insync.replicas members, judged as far as the history can tell.

What the history can tell. The queue's producers use acks=all, and a leader answers such a send
only once its high watermark has passed the send's offset (Kafka's DelayedProduce: "leaderLog.
highWatermark >= requiredOffset"). So an acknowledged send at offset o proves that partition's
high watermark passed o between the send's invocation and its acknowledgement. The committed
metadata log gives the ISR the controller committed, record by record, stamped with the
controller's wall clock (create_ms); the history stamps each op with the harness's (`wall`).

What is judged: an acknowledged send whose whole span, from invocation to acknowledgement, lies
inside one stretch in which the committed ISR of its partition had fewer members than the
topic's min.insync.replicas (capped at the replica count, as Kafka's effective min ISR is),
starting SHRINK_LAG_MS after the record that shrank it (a leader learns of a shrink the
controller made from the metadata it fetches) and ending TOLERANCE_MS before the record that
grew it again (the leader advances the high watermark only with the ISR it knows committed:
Partition.isUnderMinIsr reads the committed ISR, not a pending expansion). Such a send was
acknowledged while the high watermark could not advance.

What is not judged, and why:
- any send whose span, or the stretch before it, overlaps a fault that can hold a leader's view
  of the ISR back (a cut or degraded link, a paused or stalled JVM, a skewed clock, an effect
  no checker knows): a deposed or cut-off leader acknowledges with the ISR it last knew (the
  lease rules judge that); kills and restarts do not hold a view back;
- polls: a poll returns records below the high watermark too, but when the watermark passed a
  record it does not bound;
- partitions of other topics than the queue's (`generator.topic`), and runs whose committed log
  sets no min.insync.replicas and whose plan names none;
- the clock: the controllers' and the harness's wall clocks are one host's on Docker; on SSH
  hosts they may differ by more than TOLERANCE_MS, and the rule may then misplace a record.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from checkers.core.findings import Finding
from checkers.families.elr.replay import Change, Replayed
from checkers.scan.fault_windows import FaultSpan, utc
from checkers.scan.op_rows import row_value
from history.effects import DOWN, RESTARTED

RULE = (
    'KIP-966: "We propose to enforce that High Watermark can only advance if the ISR size is '
    'larger or equal to min.insync.replicas"; Kafka\'s docs (Eligible Leader Replicas): "the '
    "high watermark for the data partition can't advance if the size of the ISR is smaller "
    'than the min ISR(min.insync.replicas)"'
)
KIND = "hw-advanced-below-min-isr"
# How long after a committed shrink a leader may still advance with the ISR it knew.
SHRINK_LAG_MS = 3000
# The controllers' clock against the harness's (the lease rules' DEFAULT_TOLERANCE_MS).
TOLERANCE_MS = 2000
# Effects that cannot hold a live leader's view of the ISR back.
HARMLESS = frozenset({DOWN, RESTARTED})


@dataclass(frozen=True)
class Low:
    """A stretch in which a partition's committed ISR was below its effective min ISR."""

    partition: int
    start_ms: int
    end_ms: float  # math.inf: never grown again in the committed log
    shrink: Change
    grow: Change | None
    isr: tuple[int, ...]
    min_isr: int

    def judged(self) -> tuple[float, float]:
        """The wall seconds in which an acknowledgement is a violation."""
        return (self.start_ms + SHRINK_LAG_MS) / 1000, (self.end_ms - TOLERANCE_MS) / 1000


def low_stretches(replayed: Replayed, topic: str, min_isr: int) -> list[Low]:
    """Each stretch of the topic's partitions with fewer committed ISR members than
    min(min_isr, replicas)."""
    ids = [t for t, name in replayed.topics.items() if name == topic]
    out: list[Low] = []
    open_: dict[int, Low] = {}
    for c in replayed.changes:
        if c.after.topic_id not in ids:
            continue
        p = c.after.partition
        need = min(min_isr, len(c.after.replicas))
        low = len(c.after.isr) < need
        if low and p not in open_:
            open_[p] = Low(p, c.record.create_ms, math.inf, c, None, c.after.isr, need)
        elif not low and p in open_:
            began = open_.pop(p)
            out.append(Low(p, began.start_ms, c.record.create_ms, began.shrink, c, began.isr, need))
    return sorted(out + list(open_.values()), key=lambda s: (s.partition, s.start_ms))


def _acked(row: dict[str, Any]) -> list[tuple[int, int]]:
    """(key, offset) of each send an ok send or txn op acknowledged."""
    out = []
    for mop in row_value(row) or []:
        if not (isinstance(mop, list) and len(mop) == 3 and mop[0] == "send"):
            continue
        key, result = mop[1], mop[2]
        ok = isinstance(result, list) and len(result) == 2 and isinstance(result[0], int)
        if isinstance(key, int) and ok:
            out.append((key, result[0]))
    return out


def advanced_below_min_isr(
    lows: list[Low],
    sends: Iterable[dict[str, Any]],
    faults: list[FaultSpan],
) -> tuple[list[Finding], int]:
    """One finding per stretch with acknowledgements inside it (the first and a count), and how
    many sends were judged. `sends`: ok send/txn op rows with `wall` (the acknowledgement) and
    `invoke_wall`; `faults`: the run's fault spans in wall seconds."""
    lagging = [f for f in faults if any(e.effect not in HARMLESS for e in f.effects)]
    by_partition: dict[int, list[tuple[Low, float, float]]] = {}
    for s in lows:
        lo, hi = s.judged()
        hi = min(hi, _cut(s, lagging))
        if hi > lo:
            by_partition.setdefault(s.partition, []).append((s, lo, hi))
    if not by_partition:
        return [], 0
    if hasattr(sends, "within"):
        # A columnar history's sends (metadata_log.check.SendRows) are read only inside the
        # stretches, a row group at a time: a run's sends whole took gigabytes at millions.
        # The windows are widened a little: the loop below applies the exact bounds.
        sends = sends.within(
            [(lo - 1e-3, hi + 1e-3) for v in by_partition.values() for _, lo, hi in v]
        )
    hits: dict[tuple[int, int], tuple[Low, list[tuple[dict[str, Any], int]]]] = {}
    judged = 0
    for row in sends:
        start, end = row.get("invoke_wall"), row.get("wall")
        if not isinstance(start, float | int) or not isinstance(end, float | int):
            continue
        for key, offset in _acked(row):
            for s, lo, hi in by_partition.get(key, ()):
                if lo <= start and end <= hi:
                    judged += 1
                    hits.setdefault((s.partition, s.start_ms), (s, []))[1].append((row, offset))
    out = []
    for s, found in hits.values():
        row, offset = found[0]
        grow = (
            f"until committed offset {s.grow.record.offset} grew it at {utc(s.end_ms / 1000)}"
            if s.grow is not None
            else "to the end of the committed log"
        )
        cites = [s.shrink.record.cite()] + ([s.grow.record.cite()] if s.grow else [])
        out.append(
            Finding(
                KIND,
                None,
                tuple(sorted({r["index"] for r, _ in found})),
                f"key {s.partition} (partition {s.partition}): committed offset "
                f"{s.shrink.record.offset} shrank its ISR to {list(s.isr)} at "
                f"{utc(s.start_ms / 1000)}, below min.insync.replicas {s.min_isr}, {grow}; yet op "
                f"{row['index']} (invoked at {utc(row['invoke_wall'])}, acknowledged at "
                f"{utc(row['wall'])}, more than {SHRINK_LAG_MS / 1000:g} s after the shrink and "
                f"{TOLERANCE_MS / 1000:g} s before any growth) was acknowledged with acks=all "
                f"at offset {offset}, so the high watermark passed it"
                + (f"; {len(found) - 1} more such sends" if len(found) > 1 else "")
                + f". Records: {'; '.join(cites)}. Rule: {RULE}",
                {
                    "rule": RULE,
                    "records": cites,
                    "partition": s.partition,
                    "isr": list(s.isr),
                    "min_isr": s.min_isr,
                    "sends": len(found),
                },
            )
        )
    return out, judged


def _cut(s: Low, lagging: list[FaultSpan]) -> float:
    """Where the first fault that may hold a view back ends the stretch's judged part: one in
    place at the shrink (or ended less than SHRINK_LAG_MS before it) leaves nothing judged."""
    since = (s.start_ms - SHRINK_LAG_MS) / 1000
    starts = [f.outer[0] for f in lagging if f.outer[1] >= since]
    return min(starts, default=math.inf)
