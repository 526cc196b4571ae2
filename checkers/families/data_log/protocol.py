"""Which transaction protocol the brokers' logs show the run's transactions ended with.

Under the classic protocol a transaction's COMMIT or ABORT marker carries the producer epoch its
writes carried. Under transaction.version 2 (KIP-890 part 2) the coordinator bumps the epoch as
it ends every transaction and writes the markers with the bumped epoch, so a marker is one epoch
above the writes it ends. Counting both shapes says, from the data alone, which protocol the
clients and the cluster used: what `--txn-protocol` asked for, and what a client library speaks.
"""

from __future__ import annotations

import numpy as np

from checkers.families.data_log.log import DataLog, producer_groups


def marker_epochs(logs: dict[str, DataLog]) -> tuple[int, int]:
    """(markers at their writes' epoch, markers one epoch above), over every broker's log (a
    replicated marker counts once per log holding it). A marker is compared with its
    producer's latest data batch before it in the partition, since its previous marker; one
    without such a write (truncated away) says nothing either way."""
    same = bumped = 0
    for log in logs.values():
        rows = np.flatnonzero((log.producer_id >= 0) & log.transactional)
        order, group = producer_groups(log, rows)
        if len(order) < 2:
            continue
        ctl = log.control[order]
        epoch = log.producer_epoch[order]
        # A marker right after its group's data batch (a marker before it would have ended
        # the write it compares with).
        pair = ctl[1:] & ~ctl[:-1] & (group[1:] == group[:-1])
        same += int(np.count_nonzero(pair & (epoch[1:] == epoch[:-1])))
        bumped += int(np.count_nonzero(pair & (epoch[1:] == epoch[:-1] + 1)))
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
