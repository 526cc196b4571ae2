"""A run's data logs as a person reads them (`kchaos data-log`): DumpLogSegments' shape, from
the decoded rows (or the text an older run kept), for the batches a finding cites.

Each segment starts with its `Dumping data/<broker>-raw/<topic>-<p>/<segment>.log` line (the
file the text named, for a log read from `data/<broker>.txt`), each
batch with a header line (`baseOffset ... position: P CreateTime: T ...`), each record a line
with its offset and payload, a marker its `endTxnMarker`. The shape is DumpLogSegments' as
parse.py reads it, so a whole log shown reads back as the same batches and records; what the
decoder does not keep (sizes, CRCs, keys, each record's own timestamp) is left out, and a
record's CreateTime is its batch's. Kafka's own `kafka-dump-log.sh --deep-iteration
--print-data-log --files <segment>` prints the rest of any segment a finding cites.
"""

from __future__ import annotations

from collections.abc import Iterator

from checkers.families.data_log.log import Batch, DataLog


def show(
    log: DataLog, partition: int | None = None, offsets: tuple[int, int] | None = None
) -> Iterator[str]:
    """The lines of `log`'s batches: of one partition, and of those overlapping `offsets`
    (first, last) when given."""
    where = None
    for p in log.partition_ids:
        if partition is not None and p != partition:
            continue
        for row in log.rows_of(p):
            b = log.batch(row)
            if offsets is not None and (b.last < offsets[0] or b.base > offsets[1]):
                continue
            here = _file(log, row)
            if here != where:
                where = here
                yield f"Dumping {here}"
            yield _header(b)
            if b.control:
                yield (
                    f"| offset: {b.base} CreateTime: {b.create_ms} sequence: -1 "
                    f"endTxnMarker: {b.marker} (a control record)"
                )
                continue
            seq = b.base_sequence
            for offset, payload in b.payloads.items():
                at = -1 if seq is None else seq + offset - b.base
                yield (
                    f"| offset: {offset} CreateTime: {b.create_ms} sequence: {at} "
                    f"payload: {payload}"
                )


def _file(log: DataLog, row: int) -> str:
    file = log.files[int(log.batches["segment"][row])]
    return file if log.text_name is not None else f"data/{log.node}-raw/{file}"


def _header(b: Batch) -> str:
    seq = -1 if b.base_sequence is None else b.base_sequence
    count = int(b.log.batches["count"][b.row])
    last_seq = -1 if seq < 0 else seq + b.last - b.base
    return (
        f"baseOffset: {b.base} lastOffset: {b.last} count: {count} baseSequence: {seq} "
        f"lastSequence: {last_seq} producerId: {b.producer_id} producerEpoch: "
        f"{b.producer_epoch} partitionLeaderEpoch: {b.leader_epoch} isTransactional: "
        f"{str(b.transactional).lower()} isControl: {str(b.control).lower()} position: "
        f"{b.position} CreateTime: {b.create_ms} "
    )
