"""Fenced producers whose writes or commits took effect, from the final data logs.

A producer id's epoch only grows: InitProducerId bumps it to fence the previous instance of a
transactional producer, and a partition leader refuses a batch or marker whose epoch is below
the newest it holds for that producer id (ProducerStateManager). So in one broker's log, a data
batch or a COMMIT marker of producer P with epoch e after any batch or marker of P with an epoch
above e is a fenced producer's write or commit appended and, for a commit, made visible to
read_committed readers. ABORT markers are not judged: an abort of a stale epoch hides nothing.
Each final log is checked alone: a follower's log is a prefix of some leader's, a dead broker's
divergent tail is one leader's appends, so neither can put epochs out of order without a leader
having accepted them. (Producer state expires after producer.id.expiration.ms, one day by
default; runs are far shorter.)
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from checkers.core.findings import Finding
from checkers.families.data_log.log import COMMIT, Batch, DataLog, producer_groups

RULE = (
    'KIP-98: InitPidRequest "Bumps up the epoch of the PID, so that any previous zombie '
    'instance of the producer is fenced off and cannot move forward with its transaction"; '
    '"Exactly one active producer with a given TransactionalId. This is achieved by fencing off '
    'old generations when a new instance with the same TransactionalId comes online"'
)


def stale_producer_writes(
    logs: dict[str, DataLog], op_of_value: Mapping[int, int] | None = None
) -> list[Finding]:
    """One finding per stale batch (its copies in several logs cited together).

    `op_of_value`: value -> the op that sent it, to name the ops a stale data batch holds (only
    the values of `stale_batches(logs)` are looked up).
    """
    return stale_findings(stale_batches(logs), op_of_value)


Stale = tuple[Batch, Batch, list[Batch]]  # the stale batch, the newer epoch's, its copies


def stale_batches(logs: dict[str, DataLog]) -> list[Stale]:
    """Each stale data batch or COMMIT marker (by topic, partition and base offset), with the
    batch of the newer epoch it follows and its copies in every log, in the order found."""
    found: dict[tuple[str, int, int], Stale] = {}
    for log in logs.values():
        for row, prior in _stale_rows(log):
            b = log.batch(row)
            key = (b.topic, b.partition, b.base)
            found.setdefault(key, (b, log.batch(prior), []))[2].append(b)
    return list(found.values())


def _stale_rows(log: DataLog) -> list[tuple[int, int]]:
    """(stale row, the row of the newer epoch it follows) in log order. Per partition and
    producer id (a producer without id has no epoch), in log order: a batch whose epoch is
    below the highest before it, and the first batch that reached that highest."""
    order, group = producer_groups(log, np.flatnonzero(log.producer_id >= 0))
    if not len(order):
        return []
    epoch = log.producer_epoch[order]
    epoch = epoch - epoch.min() + 1  # from 1: 0 is "nothing before" below
    span = int(epoch.max()) + 1
    running = np.maximum.accumulate(group * span + epoch) - group * span  # highest so far
    before = np.empty_like(running)
    before[0], before[1:] = 0, running[:-1]
    first_in_group = np.ones(len(order), dtype=bool)
    first_in_group[1:] = group[1:] != group[:-1]
    before[first_in_group] = 0
    judged = ~log.control[order] | (log.marker[order] == COMMIT)
    stale = np.flatnonzero((epoch < before) & judged)
    out = []
    for i in stale.tolist():
        g = np.flatnonzero((group == group[i]) & (epoch == before[i]))
        out.append((int(order[i]), int(order[g[0]])))
    return sorted(out)


def stale_values(found: list[Stale]) -> set[int]:
    """The values the stale batches hold: the only ones their findings look up."""
    return {v for stale, _, _ in found for v in stale.values()}


def stale_findings(found: list[Stale], op_of_value: Mapping[int, int] | None) -> list[Finding]:
    out = []
    for stale, prior, copies in found:
        values = stale.values()
        ops = sorted({op_of_value[v] for v in values if op_of_value and v in op_of_value})
        what = "COMMIT marker" if stale.control else f"data batch (values {values[:5]})"
        kind = "fenced-producer-commit" if stale.control else "fenced-producer-write"
        brokers = sorted(b.node for b in copies)
        out.append(
            Finding(
                kind,
                stale.partition,
                tuple(ops),
                f"partition {stale.topic}-{stale.partition}: a {what} of producerId "
                f"{stale.producer_id} with producerEpoch {stale.producer_epoch} "
                f"({stale.cite()}) follows its epoch {prior.producer_epoch} ({prior.cite()}) "
                f"in the final log of {', '.join(brokers)}: the fenced epoch's "
                f"{'commit took effect' if stale.control else 'write was appended'}. "
                f"Rule: {RULE}",
                {
                    "rule": RULE,
                    "batches": [prior.cite(), *(b.cite() for b in copies)],
                    "producer_id": stale.producer_id,
                },
            )
        )
    return out
