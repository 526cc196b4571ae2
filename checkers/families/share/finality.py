"""`redelivered-after-final-ack`: a record whose ACCEPT or REJECT a consumer was told succeeded is
handed over again by a later acquisition, from the history alone.

AcknowledgeType: ACCEPT, "The record was consumed successfully"; REJECT, "The record was not
consumed successfully. Reject it and do not release it for another delivery attempt". Either,
applied, leaves the record in a terminal state (KIP-932: Acknowledged or Archived), so no
consumer of the group acquires it again.

Read as (docs/history.md, "The share workload"): an outcome `ok` heard by process p of
(key, offset), in `commit` or in `acked`, is the outcome of p's latest acknowledgement of that
record sent at or before the op it came in; when that acknowledgement was `accept` or `reject`
the record is final from the op's completion on (the broker applied it before p heard so). The
acknowledged delivery is p's latest delivery of the record before the acknowledgement was sent.

An acknowledgement names an offset, not a delivery: the broker applies it to the record's
current acquisition when the sender's member holds it (SharePartition checks the state and the
member, not the delivery count), and that acquisition may be one the application has not been
handed yet. Kafka 4.4.0's client keeps a queue of fetched batches (ShareFetchBuffer) and fetches
a partition again while an older batch of it waits there (a node is skipped only while a request
to it is in flight), so a consumer may be handed a copy whose lock already expired, acknowledge
it, and have the acknowledgement applied to a newer acquisition it is handed only later, with a
higher count (seen: run 20261128T172427-4232, docs/checkers.md). Such a copy was acquired before
the record became final, and the history cannot tell it from a new acquisition, except where
the consumer could not have held one then. So a violation is a delivery of the record, by a
poll invoked after that completion, to a consumer whose `share-subscribe` was invoked after that
completion (the final reads' drain, a consumer started later): its client can hold no
acquisition from before the record became final, whatever the count.

Not judged, and why: hand-overs after the final acknowledgement to consumers subscribed before
it: with a count at or below the acknowledged delivery's (`share_stale_after_final`), above it
(`share_higher_after_final`: possibly acquired before the acknowledgement, as above), or with
either count unknown (`share_uncounted_after_final`); polls invoked before the outcome was
heard (the acknowledgement may not have been applied yet); outcomes other than `ok`.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from checkers.core.findings import Finding, secs
from history.share import (
    ACCEPT,
    OUTCOME_OK,
    REJECT,
    SHARE_FS,
    Ack,
    Delivery,
    Outcome,
    ShareOps,
    ops_of_rows,
    read_share,
)

# The ops read: the share workload's (history/share.py).
SHARE_OP_FS = tuple(sorted(SHARE_FS))

KIND = "redelivered-after-final-ack"
RULE = (
    "a record whose ACCEPT or REJECT a consumer was told succeeded is never acquired again: no "
    "consumer subscribed after that outcome was heard is handed it (AcknowledgeType: REJECT "
    "does 'not release it for another delivery attempt'; KIP-932's Acknowledged and Archived "
    "states are terminal)"
)


@dataclass(frozen=True)
class Final:
    """A record's first successful final acknowledgement: what was sent, what was heard, and
    the delivery it acknowledged (None: no earlier delivery to that process)."""

    ack: Ack
    outcome: Outcome
    delivery: Delivery | None


def finals(share: ShareOps) -> dict[tuple[int, int], Final]:
    """Each record's first `ok` outcome of an accept or reject, by (key, offset)."""
    acks: dict[tuple[object, int, int], list[Ack]] = defaultdict(list)
    for a in sorted(share.acks, key=lambda a: a.index):
        acks[(a.process, a.key, a.offset)].append(a)
    delivered: dict[tuple[object, int, int], list[Delivery]] = defaultdict(list)
    for d in sorted(share.deliveries, key=lambda d: d.index):
        delivered[(d.process, d.key, d.offset)].append(d)
    out: dict[tuple[int, int], Final] = {}
    for o in sorted(share.outcomes, key=lambda o: o.index):
        if o.outcome != OUTCOME_OK or (o.key, o.offset) in out:
            continue
        sent = acks.get((o.process, o.key, o.offset), [])
        at = bisect_left([a.index for a in sent], o.index)
        if not at:
            continue  # no acknowledgement of it was sent before: nothing to pair it with
        ack = sent[at - 1]
        if ack.type not in (ACCEPT, REJECT):
            continue
        before = [d for d in delivered.get((o.process, o.key, o.offset), []) if d.index < ack.index]
        out[(o.key, o.offset)] = Final(ack, o, before[-1] if before else None)
    return out


def check_share(
    rows: Iterable[Mapping[str, Any]], path: str = "history"
) -> tuple[list[Finding], dict[str, int]]:
    """(findings, stats) of a history's op rows with f in SHARE_OP_FS, in index order."""
    return redelivered_after_final(read_share(ops_of_rows(rows), path))


def redelivered_after_final(share: ShareOps) -> tuple[list[Finding], dict[str, int]]:
    """(findings, stats) over the share ops of one history."""
    final = finals(share)
    findings: list[Finding] = []
    stale = higher = uncounted = 0
    for d in sorted(share.deliveries, key=lambda d: d.index):
        f = final.get((d.key, d.offset))
        if f is None or d.invoked <= f.outcome.time:
            continue
        subscribed = share.subscribed.get(d.process)
        if subscribed is not None and subscribed > f.outcome.time:
            findings.append(_finding(d, f, subscribed))
            continue
        acked = f.delivery.count if f.delivery is not None else None
        if d.count is None or acked is None:
            uncounted += 1
        elif d.count <= acked:
            stale += 1
        else:
            higher += 1
    stats = {
        "share_final_acks": len(final),
        "share_stale_after_final": stale,
        "share_higher_after_final": higher,
        "share_uncounted_after_final": uncounted,
    }
    return findings, stats


def _finding(d: Delivery, f: Final, subscribed: int) -> Finding:
    acked = f.delivery
    was = (
        f"its delivery to process {acked.process} by op {acked.index} (delivery count "
        f"{acked.count})"
        if acked is not None
        else "a delivery the history does not show"
    )
    return Finding(
        KIND,
        d.key,
        tuple(sorted({f.ack.index, f.outcome.index, d.index})),
        f"partition {d.key} offset {d.offset} (value {d.value}): process {f.ack.process} sent "
        f"{f.ack.type.upper()} of {was} in op {f.ack.index} and heard it succeed in op "
        f"{f.outcome.index} at {secs(f.outcome.time)} ({f.outcome.source}); process "
        f"{d.process}, subscribed at {secs(subscribed)} (after that: its client held no "
        f"acquisition from before), was handed it again with delivery count {d.count} by a "
        f"poll invoked at {secs(d.invoked)} (op {d.index}): a new acquisition of a final record",
        {
            "offset": d.offset,
            "value": d.value,
            "type": f.ack.type,
            "acked_by": f.ack.process,
            "acked_count": acked.count if acked is not None else None,
            "ok_at": f.outcome.time,
            "delivered_to": d.process,
            "count": d.count,
            "subscribed": subscribed,
        },
    )
