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

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from checkers.core.findings import Finding
from checkers.families.data_log.attribution import acked_writes
from checkers.families.data_log.parse import Batch, DataLog

KIND = "acked-offset-holds-other-write"
RULE = (
    "an ok send was appended at the offset its acknowledgement gives (the queue's history "
    "contract); Kafka's UnifiedLog (3.9): \"if this is a client produce request, there will be "
    "up to 5 batches which could have been duplicated. If we find a duplicate, we return the "
    'metadata of the appended batch to the client"'
)


def acked_other_writes(
    logs: dict[str, DataLog], op_rows: list[dict[str, Any]], op_of_value: dict[int, int]
) -> tuple[list[Finding], list[str]]:
    """Findings, and notes for acknowledged values found at another offset than acknowledged.

    `op_rows`: the history's send/txn op rows; `op_of_value`: value -> the op that sent it."""
    scan = scan_acked(logs, op_rows)
    return acked_findings(scan, logs, {r["index"]: r for r in op_rows}, op_of_value)


@dataclass
class AckedScan:
    """What the acknowledged sends' pass over the logs found: the sends a finding names (its
    op row, key, offset, value and the batches holding the offset), in history order, and the
    acknowledged values held at another offset."""

    suspects: list[tuple[dict[str, Any], int, int, int, list[Batch]]] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)

    def other_values(self) -> set[int]:
        """The values found where the suspects were acknowledged: the only ones whose ops
        their findings look up."""
        out = set()
        for _, _, offset, _, held in self.suspects:
            other = _other(held, offset)[1]
            if other is not None:
                out.add(other)
        return out


def scan_acked(logs: dict[str, DataLog], ops: Iterable[dict[str, Any]]) -> AckedScan:
    """`ops`: send/txn op rows in history order (only ok ones are read: `index`, `type`,
    `process`, `value` or `value_json`); each is kept only when a finding names it."""
    scan = AckedScan()
    for op in ops:
        if op.get("type") != "ok":
            continue
        for key, offset, value in acked_writes(op):
            held = [b for log in logs.values() if (b := log.batch_at(key, offset)) is not None]
            there = {b.payloads.get(offset) for b in held}
            if not held or str(value) in there or None in there:
                continue  # not in the logs' range, or the value is there, or a marker is
            found_at = _offsets_of(logs, key, str(value))
            if found_at:
                scan.moved.append(
                    f"op {op['index']} value {value}: acknowledged at key {key} offset "
                    f"{offset}, held at offset(s) {sorted(found_at)}"
                )
                continue
            scan.suspects.append((op, key, offset, value, held))
    return scan


def acked_findings(
    scan: AckedScan,
    logs: dict[str, DataLog],
    rows: dict[int, dict[str, Any]],
    op_of_value: dict[int, int],
) -> tuple[list[Finding], list[str]]:
    """The findings and notes of a scan; `rows` (op rows by index) and `op_of_value` need
    hold only the ops of `scan.other_values()`."""
    findings = [
        _finding(op, key, offset, value, held, rows, op_of_value, logs)
        for op, key, offset, value, held in scan.suspects
    ]
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
    other = int(others[0]) if len(others) == 1 and others[0].lstrip("-").isdigit() else None
    return others, other


def _offsets_of(logs: dict[str, DataLog], key: int, payload: str) -> set[int]:
    return {
        o
        for log in logs.values()
        for b in log.partitions.get(key, ())
        for o, p in b.payloads.items()
        if p == payload
    }


def _finding(
    op: dict[str, Any],
    key: int,
    offset: int,
    value: int,
    held: list[Batch],
    rows: dict[int, dict[str, Any]],
    op_of_value: dict[int, int],
    logs: dict[str, DataLog],
) -> Finding:
    batch = held[0]
    others, other = _other(held, offset)
    other_op = rows.get(op_of_value.get(other, -1)) if other is not None else None
    cites = sorted({b.cite() for b in held})
    ops = [op["index"]]
    words = [
        f"send of value {value} to key {key} was acknowledged at offset {offset} (op "
        f"{op['index']}, process {op.get('process')}), but every final log holding offset "
        f"{offset} has {' or '.join(others)} there ({'; '.join(cites)}) and {value} at no "
        f"offset of the partition: the value was never written"
    ]
    if other_op is not None:
        ops.append(other_op["index"])
        same = other_op.get("process") == op.get("process")
        fate = {"ok": "ok", "fail": "failed (its transaction aborted)", "info": "unknown"}.get(
            str(other_op.get("type")), str(other_op.get("type"))
        )
        words.append(
            f"{other} was sent by op {other_op['index']} of "
            f"{'the same' if same else 'another'} process ({other_op.get('process')}), "
            f"outcome {fate}"
        )
        abort = _abort_after(logs, batch)
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


def _abort_after(logs: dict[str, DataLog], batch: Batch) -> Batch | None:
    """The first ABORT marker of the batch's producer after it, in the batch's own log."""
    log = logs.get(batch.node)
    if log is None:
        return None
    later = [b for b in log.partitions.get(batch.partition, ()) if b.base > batch.last]
    for b in later:
        if b.producer_id == batch.producer_id and b.control:
            return b if b.marker == "ABORT" else None
    return None
