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

from checkers.core.findings import Finding
from checkers.families.data_log.parse import Batch, DataLog

RULE = (
    'KIP-98: InitPidRequest "Bumps up the epoch of the PID, so that any previous zombie '
    'instance of the producer is fenced off and cannot move forward with its transaction"; '
    '"Exactly one active producer with a given TransactionalId. This is achieved by fencing off '
    'old generations when a new instance with the same TransactionalId comes online"'
)


def stale_producer_writes(
    logs: dict[str, DataLog], op_of_value: dict[int, int] | None = None
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
    found: dict[tuple[str, int, int], tuple[Batch, Batch, list[Batch]]] = {}
    for log in logs.values():
        for batches in log.partitions.values():
            newest: dict[int, Batch] = {}
            for b in batches:
                if b.producer_id < 0:
                    continue  # a producer without id (no idempotence) has no epoch
                prior = newest.get(b.producer_id)
                stale = prior is not None and b.producer_epoch < prior.producer_epoch
                if stale and (not b.control or b.marker == "COMMIT"):
                    key = (b.topic, b.partition, b.base)
                    found.setdefault(key, (b, prior, []))[2].append(b)
                if prior is None or b.producer_epoch > prior.producer_epoch:
                    newest[b.producer_id] = b
    return list(found.values())


def stale_values(found: list[Stale]) -> set[int]:
    """The values the stale batches hold: the only ones their findings look up."""
    return {v for stale, _, _ in found for v in _values(stale)}


def _values(b: Batch) -> list[int]:
    return [int(v) for v in b.payloads.values() if v.lstrip("-").isdigit()]


def stale_findings(found: list[Stale], op_of_value: dict[int, int] | None) -> list[Finding]:
    out = []
    for stale, prior, copies in found:
        values = _values(stale)
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
