"""Under read_committed, a share group delivers no record of an aborted transaction and nothing
of an open one (docs/checkers.md, "Share groups").

KafkaShareConsumer's javadoc: "In read_committed isolation level, the share group only consumes
non-transactional records and committed transactional records. The set of records which are
eligible to become in-flight records are non-transactional records and committed transactional
records only. The consumption is bounded by the last stable offset, so an open transaction
blocks the progress of the share group with read_committed isolation level." The isolation level
is the group's (`group.share.isolation.level`), stated in the header as
`share.isolation_level`; absent, Kafka's default read_uncommitted, and nothing is judged.

The share workload has no transactional producer yet: this rule reads the queue's `txn` ops
(docs/history.md, "The queue workload": a `txn` is committed on `ok`, aborted on `fail`, unknown
on `info`), which a share run would need to write to the share topic, with the header's
`share.isolation_level` `read_committed`.

`share-aborted-read` (a failure): a delivery of a value that a `txn` op which ended `fail`
(aborted) sent, by a poll that completed after that op. `share-open-transaction-read` (a
failure): the same, by a poll that completed before the `txn` op did: the record was handed
over while its transaction was still open (it aborted later). A value of
an `info` transaction is not judged (it may have committed). To judge the reads of transactions
that committed later, the history would need each `txn`'s commit time (when commitTransaction
was called): a delivery handed before it is a read of an open transaction.
"""

from __future__ import annotations

from checkers.core.findings import Finding, secs
from checkers.families.share.run import READ_COMMITTED, ShareRun
from history.format import FAIL

ABORTED_KIND = "share-aborted-read"
OPEN_KIND = "share-open-transaction-read"
RULES = {
    ABORTED_KIND: (
        "under read_committed a share group delivers no record of an aborted transaction "
        "(KafkaShareConsumer: it 'only consumes non-transactional records and committed "
        "transactional records')"
    ),
    OPEN_KIND: (
        "under read_committed nothing of an open transaction is delivered: 'The consumption is "
        "bounded by the last stable offset, so an open transaction blocks the progress of the "
        "share group' (KafkaShareConsumer)"
    ),
}


def check_committed(run: ShareRun) -> tuple[list[Finding], dict[str, int]]:
    if run.isolation != READ_COMMITTED:
        return [], {}
    findings: list[Finding] = []
    judged = 0
    txn_time = run.txn_times
    for d in sorted(run.share.deliveries, key=lambda d: d.index):
        if d.value is None or d.value not in run.txn_of:
            continue
        judged += 1
        outcome, txn = run.txn_of[d.value]
        if outcome != FAIL:
            continue
        invoked, completed = txn_time.get(txn, (None, None))
        early = completed is not None and d.completed < completed
        kind = OPEN_KIND if early else ABORTED_KIND
        when = (
            f"completed at {secs(d.completed)}, while that transaction was open (its op "
            f"invoked at {secs(invoked)} completed at {secs(completed)})"
            if early
            else f"completed at {secs(d.completed)}"
        )
        findings.append(
            Finding(
                kind,
                d.key,
                tuple(sorted({txn, d.index})),
                f"partition {d.key} offset {d.offset}: value {d.value}, sent by a transaction "
                f"that aborted (op {txn}), was handed to process {d.process} by a poll that "
                f"{when} (op {d.index})",
                {"offset": d.offset, "value": d.value, "txn": txn, "process": d.process},
            )
        )
    return findings, {"share_transactional_deliveries": judged}
