"""Which transaction protocol the brokers' logs show the run's transactions ended with.

Under the classic protocol a transaction's COMMIT or ABORT marker carries the producer epoch its
writes carried. Under transaction.version 2 (KIP-890 part 2) the coordinator bumps the epoch as
it ends every transaction and writes the markers with the bumped epoch, so a marker is one epoch
above the writes it ends. Counting both shapes says, from the data alone, which protocol the
clients and the cluster used: what `--txn-protocol` asked for, and what a client library speaks.
"""

from __future__ import annotations

from checkers.families.data_log.parse import DataLog


def marker_epochs(logs: dict[str, DataLog]) -> tuple[int, int]:
    """(markers at their writes' epoch, markers one epoch above), over every broker's log (a
    replicated marker counts once per log holding it)."""
    same = bumped = 0
    for log in logs.values():
        for batches in log.partitions.values():
            last_write: dict[int, int] = {}  # producer id -> epoch of its latest data batch
            for b in batches:
                if b.producer_id < 0 or not b.transactional:
                    continue
                if not b.control:
                    last_write[b.producer_id] = b.producer_epoch
                    continue
                wrote = last_write.pop(b.producer_id, None)
                if wrote is None:
                    continue  # a marker with no write before it in this log: nothing to compare
                if b.producer_epoch == wrote:
                    same += 1
                elif b.producer_epoch == wrote + 1:
                    bumped += 1
    return same, bumped


def protocol_note(logs: dict[str, DataLog]) -> str | None:
    same, bumped = marker_epochs(logs)
    if not same and not bumped:
        return None
    if bumped and not same:
        shape = "transaction.version 2 (KIP-890 part 2)"
    elif same and not bumped:
        shape = "the classic transaction protocol"
    else:
        shape = "both protocols"
    return (
        f"data logs: transactions ended with {shape}: {bumped} marker(s) one producer epoch "
        f"above their transaction's writes (KIP-890 part 2's epoch bump at each end), {same} at "
        "the same epoch (classic)"
    )
