"""A record sent once, appended twice: what the two batches holding it say of how.

kchaos sends every value once (producer q's n-th value is q * stride + n), and every producer is
idempotent. A value at two offsets of one partition in a final log is a duplicate record (the
history shows it as `duplicate`); the batches around it name the mechanism, from the logs alone:

- the same producerId under a higher producerEpoch, its sequence restarted: the producer bumped
  its epoch and sent the record again. A leader drops a retry as a duplicate only when it has
  the same producerId, producerEpoch and sequence as one of the last five batches it appended
  (Kafka's ProducerStateManager), so a resend under a new epoch is appended again. librdkafka
  does this after a leader change when in-flight requests fail out of order
  (confluentinc/librdkafka#4953);
- the same producerId and producerEpoch: the leader appended a retry it should have answered as
  a duplicate, or the producer gave it a new sequence;
- another producerId: a new producer session sent the record again.

A copy inside a transaction that was aborted is invisible to read_committed readers and is not
judged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from checkers.core.findings import Finding
from checkers.families.data_log.log import ABORT, Batch, DataLog, distinct, producer_groups

KIND = "record-appended-twice"
RULE = (
    "Kafka's producer configuration, enable.idempotence (kchaos's producers set it): \"When "
    "set to 'true', the producer will ensure that exactly one copy of each message is written "
    'in the stream"; a leader drops a retry as a duplicate only under the same producerId, '
    "producerEpoch and sequence"
)


@dataclass(frozen=True)
class Copy:
    offset: int
    batch: Batch


def appended_twice(logs: dict[str, DataLog]) -> list[tuple[int, int, list[Copy]]]:
    """(key, value, its copies in log order) for every value held at more than one offset of
    its partition in some final log (the first log, by broker name, that shows it), copies in
    aborted transactions left out."""
    found: dict[tuple[int, int], list[Copy]] = {}
    # A log holding what an earlier one (by name) holds finds the same copies, the earlier
    # log's kept.
    for log in distinct({node: logs[node] for node in sorted(logs)}):
        for (key, value), copies in _repeats(log).items():
            found.setdefault((key, value), copies)
    return [(key, value, copies) for (key, value), copies in sorted(found.items())]


def _repeats(log: DataLog) -> dict[tuple[int, int], list[Copy]]:
    """(partition, value) -> its copies, for the values one partition of the log holds twice.
    Values are unique across a run's partitions: one sort of the log's values finds the few
    held twice anywhere, and only their records are looked at one by one."""
    judged = ~log.control & (log.n > 0)
    judged[_aborted(log)] = False
    records = np.repeat(judged, log.n)
    odd = log.odd_mask
    if odd is not None:
        records &= ~odd
    values = log.values[records]
    ordered = np.sort(values)
    twice = np.unique(ordered[1:][ordered[1:] == ordered[:-1]])
    if not len(twice):
        return {}
    rows = np.flatnonzero(records)[np.isin(values, twice)]
    held: dict[tuple[int, int], list[Copy]] = {}
    batch_of = log.record_batch
    for r in rows.tolist():
        b = log.batch(int(batch_of[r]))
        held.setdefault((b.partition, int(log.values[r])), []).append(Copy(int(log.offsets[r]), b))
    return {k: copies for k, copies in held.items() if len(copies) > 1}


def _aborted(log: DataLog) -> np.ndarray:
    """The rows of the transactional data batches whose producer's next marker in the
    partition is ABORT."""
    order, group = producer_groups(log, np.arange(len(log)))
    if not len(order):
        return order
    n = len(order)
    place = np.where(log.control[order], np.arange(n), n)
    # The next control batch strictly after each place, in the same group.
    nxt = np.minimum.accumulate(place[::-1])[::-1]
    after = np.empty(n, dtype=np.int64)
    after[:-1], after[-1] = nxt[1:], n
    has = after < n
    at = np.where(has, after, 0)
    has &= group[at] == group
    data = ~log.control[order] & log.transactional[order]
    return order[has & data & (log.marker[order[at]] == ABORT)]


def resent_findings(
    twice: list[tuple[int, int, list[Copy]]], op_of_value: Mapping[int, int]
) -> list[Finding]:
    """One finding per record of `appended_twice`; `op_of_value` (value -> the op that sent
    it) need hold only their values."""
    return [_finding(key, value, copies, op_of_value.get(value)) for key, value, copies in twice]


def _finding(key: int, value: int, copies: list[Copy], op: int | None) -> Finding:
    a, b = copies[0].batch, copies[1].batch
    where = "; ".join(f"offset {c.offset}: {c.batch.cite()}, sequence {_seq(c)}" for c in copies)
    sent = f"op {op}" if op is not None else "one send"
    if a.producer_id != b.producer_id:
        how = (
            f"the copies were written by two producer sessions (producerId {a.producer_id}, then "
            f"{b.producer_id}): a new producer sent the record again"
        )
    elif b.producer_epoch > a.producer_epoch:
        first, then = _seq(copies[0]), _seq(copies[1])
        restarted = first is not None and then is not None and then < first
        how = (
            f"the same producerId {a.producer_id} wrote it under producerEpoch "
            f"{a.producer_epoch} and again under {b.producer_epoch}"
            + (" with its sequence restarted" if restarted else f" (sequences {first}, {then})")
            + ": the producer bumped its epoch and resent a record the leader had already "
            "appended, and a leader recognises a retry only under the same producerId and epoch"
        )
    elif a.producer_epoch != b.producer_epoch:
        how = (
            f"the same producerId {a.producer_id} wrote it under producerEpoch "
            f"{a.producer_epoch} and later under the lower {b.producer_epoch}: a fenced "
            "producer's write was appended again"
        )
    else:
        how = (
            f"the same producerId {a.producer_id} and producerEpoch {a.producer_epoch} wrote it "
            f"twice (sequences {_seq(copies[0])} and {_seq(copies[1])}): the leader appended a "
            "batch it should have taken for a retry of an appended one, or the producer sent the "
            "record again under a new sequence"
        )
    text = (
        f"value {value} to key {key}, sent once ({sent}), is appended at "
        f"{len(copies)} offsets of the partition ({where}); {how}. Rule: {RULE}"
    )
    return Finding(
        KIND,
        key,
        (op,) if op is not None else (),
        text,
        {
            "value": value,
            "offsets": [c.offset for c in copies],
            "batches": [c.batch.cite() for c in copies],
            "producer_ids": [c.batch.producer_id for c in copies],
            "producer_epochs": [c.batch.producer_epoch for c in copies],
        },
    )


def _seq(c: Copy) -> int | None:
    """The record's sequence: its batch's base sequence plus its place in the batch."""
    base = c.batch.base_sequence
    return None if base is None or base < 0 else base + (c.offset - c.batch.base)
