"""Every replica's final log of every partition, compared, after the heal (issue 29's
deliverable 6): records one in-sync replica lacks, replicas that diverge below what was
committed, and committed records the final reads were not served.

What counts as committed. Kafka's design: "a message is considered committed when all replicas
in the ISR for that partition have applied it to their log". A partition's committed bound H is
the highest of: each in-sync replica's high watermark as it last checkpointed it
(`data/<broker>-raw/replication-offset-checkpoint`: offsets below it are committed; a follower's
is at most its leader's), and one past the highest offset the final reads returned (a consumer
is handed only records below the high watermark). The in-sync replicas are the final
committed ISR and leader (the metadata log): the replicas Kafka claimed in sync when the run
ended. A replica outside it (a follower still catching up, one that never restarted) is not
judged: it owes nothing below H. Above H nothing is judged: a leader's uncommitted tail, and a
follower's, are truncated or completed later, as Kafka does.

The logs are collected after the final reads, with no write in flight (the run's sends and
faults are over), each broker's checkpoint before any segment: so an in-sync replica's log as
copied holds everything below H, as it did when the checkpoint was written.

- `replica-missing-committed-records`: an in-sync replica's log lacks offsets below H that
  another in-sync replica holds (a record or a transaction marker);
- `replica-divergence`: two in-sync replicas hold different records at an offset below H;
- `committed-record-not-served`: an in-sync replica holds, below H, a non-transactional record
  the final reads read past (they returned a later offset of its partition, reading it from the
  beginning) and never returned.

Without a committed ISR (ZooKeeper mode keeps the ISR in ZooKeeper, which a run does not
collect), `compare_own_bounds` holds each replica only to what its own checkpoint claimed: two
replicas below the lower of their two checkpoints, each replica's records below its own (and
below where the final reads reached) against the final reads.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from checkers.core.findings import Finding
from checkers.families.data_log.log import DataLog
from checkers.families.durability.partitions import Partitions
from checkers.families.durability.reads import FinalReads
from history.format import HW_CHECKPOINT

MISSING = "replica-missing-committed-records"
DIVERGED = "replica-divergence"
NOT_SERVED = "committed-record-not-served"
KINDS = (MISSING, DIVERGED, NOT_SERVED)

COMMITTED = (
    "Kafka's design: \"a message is considered committed when all replicas in the ISR for "
    'that partition have applied it to their log"'
)
COPIES = (
    "Kafka's design: \"As long as the leader remains alive, all followers need to only copy the "
    'values and ordering the leader chooses"; "The fundamental guarantee a log replication '
    "algorithm must provide is that if we tell the client a message is committed, and the "
    'leader fails, the new leader we elect must also have that message"'
)
SERVED = (
    'Kafka\'s design: "Only committed messages are ever given out to the consumer"; a consumer '
    "reading a partition from its beginning is given its committed records in offset order"
)
RULES = {
    MISSING: "every in-sync replica holds every committed record of its partition: " + COMMITTED,
    DIVERGED: "replicas hold the same committed record at each offset: " + COPIES,
    NOT_SERVED: (
        "a consumer reading a partition from its beginning past a committed record is given it: "
        + SERVED
    ),
}
SHOWN = 8
DATA, MARKER, ODD = 0, 1, 2  # what an offset holds


@dataclass
class Held:
    """What one broker's log holds of one partition: per offset, ascending."""

    log: DataLog
    partition: int
    offset: np.ndarray
    what: np.ndarray  # DATA, MARKER, ODD
    content: np.ndarray  # the value; the marker code; a checksum of an odd payload
    transactional: np.ndarray  # bool, of the batch holding it

    def cite(self, offset: int) -> str:
        b = self.log.batch_at(self.partition, offset)
        return b.cite() if b is not None else f"{self.log.node}: nothing at offset {offset}"

    def says(self, i: int) -> str:
        w, c = int(self.what[i]), int(self.content[i])
        return {DATA: f"value {c}", MARKER: "a transaction marker", ODD: "an odd payload"}[w]


def held_of(log: DataLog, partition: int) -> Held:
    rows = log.rows_of(partition)
    if not len(rows):
        z = np.zeros(0, np.int64)
        return Held(log, partition, z, z, z, np.zeros(0, bool))
    b = log.batches[rows.start : rows.stop]
    lo = int(b["first"][0])
    hi = int(b["first"][-1] + b["n"][-1])
    offs = log.offsets[lo:hi]
    vals = log.values[lo:hi].copy()
    what = np.zeros(hi - lo, np.int64)
    if log.odd:
        for r, text in log.odd.items():
            if lo <= r < hi:
                what[r - lo] = ODD
                vals[r - lo] = zlib.crc32((text or "").encode())
    txn = np.repeat(log.transactional[rows.start : rows.stop], log.n[rows.start : rows.stop])
    ctrl = np.flatnonzero(log.control[rows.start : rows.stop]) + rows.start
    offset = np.concatenate([offs, log.base[ctrl]])
    content = np.concatenate([vals, log.marker[ctrl].astype(np.int64)])
    what = np.concatenate([what, np.full(len(ctrl), MARKER, np.int64)])
    transactional = np.concatenate([txn, np.ones(len(ctrl), bool)])
    order = np.argsort(offset, kind="stable")
    return Held(log, partition, offset[order], what[order], content[order], transactional[order])


def read_checkpoints(data_dir: Path, topic: str) -> dict[str, dict[int, int]]:
    """Each broker's checkpointed high watermark of each partition of `topic`: broker ->
    partition -> offset. A file that does not read as Kafka writes it is left out."""
    out: dict[str, dict[int, int]] = {}
    for path in sorted(data_dir.glob(f"*-raw/{HW_CHECKPOINT}")):
        broker = path.parent.name[: -len("-raw")]
        marks = parse_checkpoint(path.read_text(errors="replace"), topic)
        if marks is not None:
            out[broker] = marks
    return out


def parse_checkpoint(text: str, topic: str) -> dict[int, int] | None:
    """Kafka's OffsetCheckpointFile: version 0, a count, then `topic partition offset` lines."""
    lines = text.splitlines()
    if len(lines) < 2 or lines[0].strip() != "0" or not lines[1].strip().isdigit():
        return None
    entries = lines[2:]
    if len(entries) != int(lines[1]):
        return None
    out = {}
    for line in entries:
        parts = line.split()
        if len(parts) != 3 or not parts[1].isdigit() or not parts[2].lstrip("-").isdigit():
            return None
        if parts[0] == topic:
            out[int(parts[1])] = int(parts[2])
    return out


@dataclass
class ReplicaResult:
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    judged: int = 0  # partitions compared


def compare_replicas(
    logs: dict[str, DataLog],
    checkpoints: dict[str, dict[int, int]],
    partitions: Partitions | None,
    reads: FinalReads | None,
    topic: str,
) -> ReplicaResult:
    out = ReplicaResult()
    if partitions is None:
        out.notes.append(
            "durability: replicas not compared: the history holds no committed ISR (no "
            "readable metadata log), so which replicas Kafka claimed in sync is not known"
        )
        return out
    ids = sorted({p for log in logs.values() for p in log.partition_ids} | set(partitions.states))
    skipped = []
    for p in ids:
        final = partitions.final(p)
        if final is None:
            continue
        members = sorted((final.isr | ({final.leader} if final.leader else set())) & set(logs))
        if _cut(logs, members, topic, p):
            skipped.append(p)
            continue
        marks = {b: checkpoints[b][p] for b in members if p in checkpoints.get(b, {})}
        top = reads.top(p) if reads is not None else -1
        bound, said = _bound(marks, top)
        if bound <= 0 or not members:
            continue
        out.judged += 1
        held = {b: held_of(logs[b], p) for b in members}
        why = (
            f"committed below offset {bound} ({said}); in sync: {', '.join(members)} "
            f"({final.record})"
        )
        out.findings += _missing(held, bound, p, topic, why)
        out.findings += _diverged(held, bound, p, topic, why)
        if reads is not None:
            out.findings += _not_served(held, bound, p, topic, why, reads)
    if skipped:
        out.notes.append(
            f"durability: partitions {skipped} not compared: an in-sync replica's log could not "
            "be read whole (the data-log notes say where)"
        )
    out.notes.append(
        f"durability: {out.judged} partitions' in-sync replicas compared below their committed "
        f"bound ({sum(len(v) for v in checkpoints.values())} checkpointed high watermarks)"
    )
    return out


def compare_own_bounds(
    logs: dict[str, DataLog],
    checkpoints: dict[str, dict[int, int]],
    reads: FinalReads | None,
    topic: str,
) -> ReplicaResult:
    """The same three rules where the history holds no ISR (ZooKeeper mode: the ISR lives in
    ZooKeeper, which the run does not collect): each replica is held only to what its own
    high-watermark checkpoint claimed committed. Two replicas must hold the same records below
    the lower of their two checkpoints, and neither may lack there what the other holds; a
    replica's records below its own checkpoint and below where the final reads reached must
    have been served. A replica without a checkpoint of the partition owes nothing."""
    out = ReplicaResult()
    ids = sorted({p for b, marks in checkpoints.items() if b in logs for p in marks})
    skipped = []
    for p in ids:
        owners = sorted(b for b in logs if p in checkpoints.get(b, {}) and checkpoints[b][p] > 0)
        if not owners:
            continue
        if _cut(logs, owners, topic, p):
            skipped.append(p)
            continue
        out.judged += 1
        held = {b: held_of(logs[b], p) for b in owners}
        for i, b in enumerate(owners):
            for c in owners[i + 1 :]:
                hb, hc = checkpoints[b][p], checkpoints[c][p]
                bound = min(hb, hc)
                why = (
                    f"committed below offset {bound} ({b}'s high-watermark checkpoint {hb}, "
                    f"{c}'s {hc}); no committed ISR in the history (ZooKeeper mode): each "
                    "replica is held to what its own checkpoint claimed committed"
                )
                pair = {b: held[b], c: held[c]}
                out.findings += _missing(pair, bound, p, topic, why)
                out.findings += _diverged(pair, bound, p, topic, why)
        if reads is None:
            continue
        for b in owners:
            why = (
                f"committed below offset {checkpoints[b][p]} ({b}'s high-watermark checkpoint); "
                "no committed ISR in the history (ZooKeeper mode)"
            )
            out.findings += _not_served({b: held[b]}, checkpoints[b][p], p, topic, why, reads)
    out.findings = _once(out.findings)
    if skipped:
        out.notes.append(
            f"durability: partitions {skipped} not compared: a replica's log could not be read "
            "whole (the data-log notes say where)"
        )
    out.notes.append(
        f"durability: {out.judged} partitions' replicas compared below their own checkpointed "
        "high watermarks (no committed ISR in the history: ZooKeeper mode)"
    )
    return out


def _once(found: list[Finding]) -> list[Finding]:
    """A replica compared pair by pair is reported once per kind and partition: of its
    `replica-missing-committed-records` findings, the one lacking most (each names the replica
    it was compared with); a record not served, once per set of values."""
    out: dict[tuple, Finding] = {}
    for f in found:
        if f.kind == NOT_SERVED:
            key: tuple = (f.kind, f.key, tuple(f.data["values"]))
        else:
            key = (f.kind, f.key, f.data.get("broker") or tuple(f.data.get("brokers", ())))
        if key not in out or f.data.get("count", 0) > out[key].data.get("count", 0):
            out[key] = f
    return list(out.values())


def _cut(logs: dict[str, DataLog], members: list[str], topic: str, p: int) -> bool:
    return any(f"{topic}-{p}/" in note for b in members for note in logs[b].notes)


def _bound(marks: dict[str, int], top: int) -> tuple[int, str]:
    said = [f"{b}'s high-watermark checkpoint {h}" for b, h in sorted(marks.items())]
    if top >= 0:
        said.append(f"the final reads returned up to offset {top}")
    bound = max([*marks.values(), top + 1])
    return bound, "; ".join(said) or "nothing says"


def _ranges(offsets: np.ndarray) -> str:
    """Offsets as runs: 3..7, 9."""
    if not len(offsets):
        return ""
    cuts = np.flatnonzero(np.diff(offsets) != 1) + 1
    runs = np.split(offsets, cuts)
    text = ", ".join(f"{r[0]}..{r[-1]}" if len(r) > 1 else f"{r[0]}" for r in runs[:SHOWN])
    return text + (f" and {len(runs) - SHOWN} more runs" if len(runs) > SHOWN else "")


def _missing(held: dict[str, Held], bound: int, p: int, topic: str, why: str) -> list[Finding]:
    out = []
    union = np.unique(np.concatenate([h.offset[h.offset < bound] for h in held.values()]))
    for b, h in held.items():
        lacks = np.setdiff1d(union, h.offset, assume_unique=True)
        if not len(lacks):
            continue
        first = int(lacks[0])
        holder = next(c for c, x in held.items() if c != b and first in x.offset)
        below = h.offset[h.offset < first]
        around = (
            f"its last record before them: {h.cite(int(below[-1]))}"
            if len(below)
            else "it holds nothing before them"
        )
        out.append(
            Finding(
                MISSING,
                p,
                (),
                f"{b}'s final log of {topic}-{p} lacks {len(lacks)} offset(s) another in-sync "
                f"replica holds below the committed bound: {_ranges(lacks)}; {holder} holds "
                f"offset {first} in {held[holder].cite(first)}; {around}. {why}. {COMMITTED}",
                {
                    "broker": b,
                    "partition": p,
                    "offsets": lacks[:1000].tolist(),
                    "count": len(lacks),
                    "holder": holder,
                    "bound": bound,
                },
            )
        )
    return out


def _diverged(held: dict[str, Held], bound: int, p: int, topic: str, why: str) -> list[Finding]:
    out = []
    names = sorted(held)
    for i, b in enumerate(names):
        for c in names[i + 1 :]:
            x, y = held[b], held[c]
            if _same(x, y):
                continue  # a follower that caught up holds its leader's log again
            common, ix, iy = np.intersect1d(x.offset, y.offset, return_indices=True)
            below = common < bound
            common, ix, iy = common[below], ix[below], iy[below]
            differ = (x.what[ix] != y.what[iy]) | (x.content[ix] != y.content[iy])
            if not differ.any():
                continue
            k = np.flatnonzero(differ)
            o = int(common[k[0]])
            out.append(
                Finding(
                    DIVERGED,
                    p,
                    (),
                    f"{b} and {c} hold different records of {topic}-{p} at {len(k)} offset(s) "
                    f"below the committed bound: {_ranges(common[k])}; at offset {o} {b} holds "
                    f"{x.says(int(ix[k[0]]))} ({x.cite(o)}), {c} holds {y.says(int(iy[k[0]]))} "
                    f"({y.cite(o)}). {why}. {COPIES}",
                    {
                        "brokers": [b, c],
                        "partition": p,
                        "offsets": common[k][:1000].tolist(),
                        "count": len(k),
                        "bound": bound,
                    },
                )
            )
    return out


def _same(x: Held, y: Held) -> bool:
    return (
        np.array_equal(x.offset, y.offset)
        and np.array_equal(x.what, y.what)
        and np.array_equal(x.content, y.content)
    )


def _not_served(
    held: dict[str, Held], bound: int, p: int, topic: str, why: str, reads: FinalReads
) -> list[Finding]:
    offs, vals, ops = reads.of(p)
    if not len(offs):
        return []
    top = int(offs.max())
    out = []
    reported: set[int] = set()
    for b, h in held.items():
        m = (h.offset < min(bound, top)) & (h.what == DATA) & ~h.transactional
        m &= ~np.isin(h.content, vals)
        m &= ~np.isin(h.content, np.fromiter(reported, np.int64, len(reported)))
        k = np.flatnonzero(m)
        if not len(k):
            continue
        reported.update(h.content[k].tolist())
        o = int(h.offset[k[0]])
        last = ops[int(np.argmax(offs))]
        out.append(
            Finding(
                NOT_SERVED,
                p,
                (int(last),),
                f"{b} holds {len(k)} committed record(s) of {topic}-{p} the final reads never "
                f"returned, though they read it from the beginning up to offset {top} (op "
                f"{int(last)}): offsets {_ranges(h.offset[k])}; at offset {o} value "
                f"{int(h.content[k[0]])} in {h.cite(o)}. {why}. {SERVED}",
                {
                    "broker": b,
                    "partition": p,
                    "offsets": h.offset[k][:1000].tolist(),
                    "values": h.content[k][:1000].tolist(),
                    "count": len(k),
                    "read_up_to": top,
                    "bound": bound,
                },
            )
        )
    return out
