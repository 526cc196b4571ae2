"""Acknowledged sends whose offset, in every final log, holds another write.

An ok send says (key, offset, value): the partition leader appended the value at that offset. A
partition leader answers one more case with an offset, without appending: a batch it takes for
a retry of one of the producer's last five appended batches (the same producerId, producerEpoch
and sequence range) gets that batch's offsets back (Kafka's UnifiedLog: "if this is a client
produce request, there will be up to 5 batches which could have been duplicated. If we find a
duplicate, we return the metadata of the appended batch to the client"). So when every final
log holds a different value at the acknowledged offset, and the acknowledged value at no offset
of the partition, the send was acknowledged as something it is not: the value was never
written. The batch found there says whose it is; when it is the same producer session's (its
producerId and producerEpoch hold other values of the same process), the acknowledgement was
the leader's answer to a producer that sent a new batch with an appended batch's sequence.

The same loss shows in the history as `lost-write` (the acknowledged value never read back);
this finding says where the acknowledgement came from, from the logs alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from checkers.core.findings import Finding
from checkers.families.data_log.log import Batch, DataLog, distinct, is_value_text
from checkers.families.data_log.sends import OpRef, Sends

KIND = "acked-offset-holds-other-write"
# Acknowledged writes looked up at a time: the lookups' temporaries stay a few tens of MB.
CHUNK = 1 << 20
RULE = (
    "an ok send was appended at the offset its acknowledgement gives (the queue's history "
    "contract); Kafka's UnifiedLog (3.9): \"if this is a client produce request, there will be "
    "up to 5 batches which could have been duplicated. If we find a duplicate, we return the "
    'metadata of the appended batch to the client"'
)


@dataclass(frozen=True)
class Suspect:
    """An acknowledged write every final log holding its offset contradicts."""

    op: OpRef
    key: int
    offset: int
    value: int
    held: list[Batch]  # the batches holding the offset, one per log that has it


@dataclass
class AckedScan:
    """What the acknowledged sends' pass over the logs found: the sends a finding names, in
    history order, and the acknowledged values held at another offset."""

    suspects: list[Suspect] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)

    def other_values(self) -> set[int]:
        """The values found where the suspects were acknowledged: the only ones whose ops
        their findings look up."""
        out = set()
        for s in self.suspects:
            other = _other(s.held, s.offset)[1]
            if other is not None:
                out.add(other)
        return out


def scan_acked(logs: dict[str, DataLog], sends: Sends) -> AckedScan:
    """Every acknowledged write looked up in every log at once. Skipped: one held by no log
    (not in the logs' range), or whose value, or a marker, a log holds at its offset."""
    acked = sends.acked
    unique = distinct(logs)  # a union over the logs: a log read again adds nothing
    suspects = []
    for lo in range(0, len(acked), CHUNK):
        part = acked[lo : lo + CHUNK]
        key, offset, value = sends.key[part], sends.offset[part], sends.value[part]
        held = np.zeros(len(part), dtype=bool)
        borne = np.zeros(len(part), dtype=bool)
        for log in unique:
            records, rows = log.locate(key, offset)
            held |= rows >= 0
            borne |= log.holds(records, value) | ((rows >= 0) & (records < 0))
        suspects.append(lo + np.flatnonzero(held & ~borne))
    scan = AckedScan()
    suspects = np.concatenate(suspects) if suspects else np.zeros(0, np.int64)
    if not len(suspects):
        return scan
    rows = acked[suspects]
    key, offset, value = sends.key[rows], sends.offset[rows], sends.value[rows]
    found_at = _offsets_of(logs, key, value)
    for i, row in enumerate(rows.tolist()):
        k, o, v = int(key[i]), int(offset[i]), int(value[i])
        op = sends.ref(row)
        elsewhere = found_at.get((k, v))
        if elsewhere:
            scan.moved.append(
                f"op {op.index} value {v}: acknowledged at key {k} offset {o}, held at "
                f"offset(s) {sorted(elsewhere)}"
            )
            continue
        batches = [b for log in logs.values() if (b := log.batch_at(k, o)) is not None]
        scan.suspects.append(Suspect(op, k, o, v, batches))
    return scan


def acked_findings(
    scan: AckedScan, logs: dict[str, DataLog], sends: Sends
) -> tuple[list[Finding], list[str]]:
    """The findings and notes of a scan; `sends` names the ops of `scan.other_values()`."""
    findings = [_finding(s, sends, logs) for s in scan.suspects]
    moved = scan.moved
    notes = []
    if moved:
        notes.append(
            f"data logs: {len(moved)} acknowledged values held at another offset than "
            "acknowledged: " + "; ".join(moved[:5]) + (" …" if len(moved) > 5 else "")
        )
    return findings, notes


def _other(held: list[Batch], offset: int) -> tuple[list[str], int | None]:
    """What the batches hold at the offset, and that as one value when it is one integer."""
    others = sorted({b.payloads[offset] for b in held})
    other = int(others[0]) if len(others) == 1 and is_value_text(others[0]) else None
    return others, other


def _offsets_of(
    logs: dict[str, DataLog], keys: np.ndarray, values: np.ndarray
) -> dict[tuple[int, int], set[int]]:
    """(key, value) -> the offsets of its partition where some log holds the value."""
    wanted = set(zip(keys.tolist(), values.tolist(), strict=True))
    out: dict[tuple[int, int], set[int]] = {}
    for log in logs.values():
        rows = np.flatnonzero(np.isin(log.values, values))
        odd = log.odd_mask
        if odd is not None:
            rows = rows[~odd[rows]]
        parts = log.partition[log.record_batch[rows]]
        for r, p in zip(rows.tolist(), parts.tolist(), strict=True):
            kv = (int(p), int(log.values[r]))
            if kv in wanted:
                out.setdefault(kv, set()).add(int(log.offsets[r]))
    return out


def _finding(s: Suspect, sends: Sends, logs: dict[str, DataLog]) -> Finding:
    op, key, offset, value, held = s.op, s.key, s.offset, s.value, s.held
    batch = held[0]
    others, other = _other(held, offset)
    other_op = sends.op_of(other) if other is not None else None
    cites = sorted({b.cite() for b in held})
    ops = [op.index]
    words = [
        f"send of value {value} to key {key} was acknowledged at offset {offset} (op "
        f"{op.index}, process {op.process}), but every final log holding offset "
        f"{offset} has {' or '.join(others)} there ({'; '.join(cites)}) and {value} at no "
        f"offset of the partition: the value was never written"
    ]
    if other_op is not None:
        ops.append(other_op.index)
        same = other_op.process == op.process
        fate = {"ok": "ok", "fail": "failed (its transaction aborted)", "info": "unknown"}.get(
            other_op.type, other_op.type
        )
        words.append(
            f"{other} was sent by op {other_op.index} of "
            f"{'the same' if same else 'another'} process ({other_op.process}), "
            f"outcome {fate}"
        )
        abort = _abort_after(batch)
        if abort is not None:
            words.append(f"its transaction's ABORT marker follows ({abort.cite()})")
        if same:
            words.append(
                f"the batch at offset {offset} is the same producer session's (producerId "
                f"{batch.producer_id}, producerEpoch {batch.producer_epoch}): a leader answers "
                "a batch with an appended batch's offsets when it takes it for a retry of that "
                "batch (the same producerId, producerEpoch and sequence), so the producer sent "
                f"{value} with the sequence of {other}'s batch"
            )
    return Finding(
        KIND,
        key,
        tuple(ops),
        "; ".join(words) + f". Rule: {RULE}",
        {
            "value": value,
            "offset": offset,
            "held": others,
            "batches": cites,
            "producer_id": batch.producer_id,
            "producer_epoch": batch.producer_epoch,
        },
    )


def _abort_after(batch: Batch) -> Batch | None:
    """The first marker of the batch's producer after it, in the batch's own log, when the
    batch is transactional and that marker, of its epoch or a later one (KIP-890's markers
    carry the bumped epoch), is an ABORT: an idempotent batch outside a transaction has none."""
    if not batch.transactional:
        return None
    log = batch.log
    span = log.rows_of(batch.partition)
    rows = np.arange(span.start, span.stop)
    later = rows[
        (log.base[rows] > batch.last)
        & (log.producer_id[rows] == batch.producer_id)
        & (log.producer_epoch[rows] >= batch.producer_epoch)
        & log.control[rows]
    ]
    if not len(later):
        return None
    first = log.batch(int(later[0]))
    return first if first.marker == "ABORT" else None
