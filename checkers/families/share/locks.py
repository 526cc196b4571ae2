"""Lock exclusivity: a record acquired by one consumer is not handed to another while the first
one's acquisition lock holds, and the broker accepts no acknowledgement from a consumer that no
longer holds the record (docs/checkers.md, "Share groups").

KafkaShareConsumer's javadoc: "Records are acquired for delivery to this consumer with a
time-limited acquisition lock. While a record is acquired, it is not available for another
consumer"; the lock ends when the record is acknowledged (ACCEPT, RELEASE, REJECT: RENEW extends
it), when "the lock duration has elapsed", when the consumer closes ("releases any remaining
acquired records"), and "If the leadership of the partition for a record being delivered changes
or the application's connection to the leader broker is disconnected, the current delivery
attempt ends". KIP-932: acknowledging a record whose lock has gone "will fail with
org.apache.kafka.common.errors.InvalidRecordStateException".

Acquisition times are not in the history (the client may prefetch: "The share consumer may also
prefetch records and buffer them temporarily awaiting the application's next call to poll", so a
record can be acquired before the poll that hands it is invoked, and handed after its lock
expired: a stale copy), so the rules rest on what bounds them:
- B's acquisition is before B's poll completed, and it is a later acquisition than A's when its
  delivery count is higher. Counts can repeat or go down only across a fault window (a release
  at close gives one back: the same count again, never a higher one), so pairs whose span meets
  a fault window (run.py) are not judged.
- A's acquisition is after the record was sent (its send's invocation), so A's lock, unless A
  ended it, holds until at least that time plus the lock duration (the poll's `lock_ms`, or the
  header's) less MARGIN: the brokers' timers and the history's clock may differ, and a timer
  fires late rather than early.

`share-lock-overlap` (a failure): process A was handed record r with count c; process B (another
consumer) was handed r with count above c by a poll that completed before A's lock could have
ended: before A's send invocation + lock - MARGIN, before A sent any ACCEPT, RELEASE or REJECT of
r after that delivery, and before A's last op (its close).

`share-ack-after-reacquired` (a failure): process A's acknowledgement of r (any type) was answered
`ok`, and A sent it after another process B's poll had been handed r with a count above that of
A's delivery it acknowledged: the broker applied an acknowledgement of a consumer that no longer
held the record. Not judged when A was handed r again, with a count above B's, before its
acknowledgement was answered (A acquired it anew).

`share-ack-ok-after-final` (tolerated): the same, when the record was final before A sent its
acknowledgement: another consumer's ACCEPT or REJECT of a later acquisition than A's, sent
before A's, was answered ok. Kafka's broker then applies nothing and answers ok:
SharePartition.acknowledge skips an acknowledgement batch whose last offset is below the
share-partition start offset ("All offsets in the acknowledgement batch {} are already
archived", trace level; read in the 4.1.2 and 4.4.0 brokers' bytecode and in the source since
KIP-932's first code), and a record the other consumer accepted or rejected is below it once the
start offset passed it. KIP-932 promises InvalidRecordStateException for a record that "had
reached its acquisition lock timeout and reverted to Available state"; of an acknowledgement of
a record already Acknowledged or Archived by another consumer neither KIP-932 nor the javadoc
says anything, and no state changes (a terminal state takes no transition), so it is reported,
not failed. Seen on Kafka 4.1.2 with no faults (13 of them); none of the 8 stored 4.4.0 runs
had the pattern at all (no stale copy acknowledged after another consumer's ok ACCEPT or
REJECT), and 4.4.0's brokers skip such a batch alike. Had A's acknowledgement been applied,
the other consumer's ACCEPT or REJECT could not have been answered ok: SharePartition accepts
an acknowledgement only from the member holding the record in Acquired state.

Not anomalies: the same consumer handed a record twice (e.g. Kafka 4.4.0's one `poll()` that
returned offsets 0-13 of a partition twice, with delivery counts 1 and 2, after that partition's
leader was killed: the leader change ended the first delivery attempt, and a second attempt went
to the same consumer: no second consumer, so no overlap; that poll's order is judged by
`share-poll-offsets-not-increasing`, ordering.py); a record handed to B with a count at or below
A's (a stale copy, or a count given back); a renewed record handed to its holder again.
"""

from __future__ import annotations

from collections import defaultdict

from checkers.core.findings import Finding, secs
from checkers.families.share.run import ENDING, Answered, ShareRun, answered
from history.share import ACCEPT, REJECT, Delivery

OVERLAP_KIND = "share-lock-overlap"
ACK_AFTER_KIND = "share-ack-after-reacquired"
ACK_AFTER_FINAL_KIND = "share-ack-ok-after-final"
RULES = {
    OVERLAP_KIND: (
        "while one consumer's acquisition lock on a record holds (from its acquisition to its "
        "ACCEPT, RELEASE or REJECT, its close, or the lock's expiry), no other consumer is handed "
        "a later acquisition of it (KafkaShareConsumer: 'While a record is acquired, it is not "
        "available for another consumer')"
    ),
    ACK_AFTER_KIND: (
        "an acknowledgement is accepted only from the consumer holding the record: none sent "
        "after another consumer was handed a later acquisition of it is answered ok (KIP-932: "
        "InvalidRecordStateException)"
    ),
    ACK_AFTER_FINAL_KIND: (
        "an acknowledgement of a record another consumer's ACCEPT or REJECT had already made "
        "final (sent before it, answered ok) may be answered ok though nothing is applied: "
        "Kafka skips acknowledgements below the share-partition start offset; KIP-932 names "
        "InvalidRecordStateException only for a record that 'reverted to Available state'"
    ),
}
ACK_AFTER_FINAL_TOLERATED = (
    "the record was already final (another consumer's ACCEPT or REJECT, sent first, answered "
    "ok): Kafka answers an acknowledgement below the share-partition start offset ok and applies "
    "nothing (SharePartition.acknowledge); KIP-932 promises InvalidRecordStateException only for "
    "a record that reverted to Available"
)
# The clock margin: the brokers' lock timers against the history's clock (ns), at least 200 ms
# and a tenth of the lock.
MARGIN_NS = 200_000_000


def margin(lock_ns: int) -> int:
    return max(MARGIN_NS, lock_ns // 10)


def check_locks(run: ShareRun) -> tuple[list[Finding], dict[str, int]]:
    by_record: dict[tuple[int, int], list[Delivery]] = defaultdict(list)
    for d in sorted(run.share.deliveries, key=lambda d: d.index):
        by_record[(d.key, d.offset)].append(d)
    ends: dict[tuple[object, int, int], list[int]] = defaultdict(list)
    for a in run.share.acks:
        if a.type in ENDING:
            ends[(a.process, a.key, a.offset)].append(a.index)
    inv_time = {a.index: a.invoked for a in run.share.acks}
    findings: list[Finding] = []
    excused = judged = 0
    for (key, offset), ds in by_record.items():
        sent = run.sent.get((key, offset))
        if sent is None:
            continue
        for a in ds:
            if a.count is None:
                continue
            lock = (a.lock_ms or run.lock_ms or 0) * 1_000_000
            if not lock:
                continue
            end = sent.invoked + lock - margin(lock)
            ended = [i for i in ends.get((a.process, key, offset), []) if i > a.index]
            if ended:
                end = min(end, inv_time[min(ended)])
            end = min(end, run.last_op.get(a.process, end))
            for b in ds:
                if b.process == a.process or b.count is None or b.count <= a.count:
                    continue
                judged += 1
                if b.completed >= end:
                    continue
                if run.disturbed(sent.invoked, b.completed):
                    excused += 1
                    continue
                findings.append(_overlap(a, b, sent.invoked, lock, end))
    ack_findings, ack_excused, acks = _acks_after(run, by_record)
    return findings + ack_findings, {
        "share_lock_pairs": judged,
        "share_acks_ok_judged": acks,
        "share_lock_pairs_excused_by_faults": excused + ack_excused,
    }


def _overlap(a: Delivery, b: Delivery, sent: int, lock: int, end: int) -> Finding:
    return Finding(
        OVERLAP_KIND,
        a.key,
        (a.index, b.index),
        f"partition {a.key} offset {a.offset} (value {a.value}): process {a.process} was handed "
        f"it with delivery count {a.count} (op {a.index}), acquired after its send was invoked "
        f"at {secs(sent)}, so locked until at least {secs(end)} (lock {lock // 1_000_000} ms, "
        f"margin {margin(lock) // 1_000_000} ms, or its own acknowledgement or close); process "
        f"{b.process} was handed a later acquisition (delivery count {b.count}) by a poll that "
        f"completed at {secs(b.completed)} (op {b.index})",
        {
            "offset": a.offset,
            "holder": a.process,
            "holder_count": a.count,
            "other": b.process,
            "other_count": b.count,
            "lock_until": end,
        },
    )


def _acks_after(
    run: ShareRun, by_record: dict[tuple[int, int], list[Delivery]]
) -> tuple[list[Finding], int, int]:
    findings: list[Finding] = []
    excused = judged = 0
    every = answered(run.share)
    # ACCEPT or REJECT answered ok: the record is final from then on (KIP-932's terminal states).
    final: dict[tuple[int, int], list[Answered]] = defaultdict(list)
    for an in every:
        if an.ok and an.ack.type in (ACCEPT, REJECT) and an.delivery is not None:
            final[(an.ack.key, an.ack.offset)].append(an)
    for an in every:
        if not an.ok or an.delivery is None or an.delivery.count is None:
            continue
        judged += 1
        a, mine = an.ack, an.delivery
        heard = min(o.time for o in an.outcomes if o.outcome == "ok")
        ds = by_record.get((a.key, a.offset), [])
        others = [
            b
            for b in ds
            if b.process != a.process
            and b.count is not None
            and b.count > mine.count
            and b.completed < a.invoked
        ]
        for b in others[:1]:
            again = [
                d
                for d in ds
                if d.process == a.process
                and d.index > b.index
                and d.completed < heard
                and d.count is not None
                and d.count > b.count
            ]
            if again:
                continue
            if run.disturbed(min(mine.invoked, b.invoked), heard):
                excused += 1
                continue
            settled = _final_before(final.get((a.key, a.offset), []), an)
            if settled is not None:
                findings.append(_after_final(an, heard, settled))
                continue
            findings.append(
                Finding(
                    ACK_AFTER_KIND,
                    a.key,
                    tuple(sorted({mine.index, b.index, a.index})),
                    f"partition {a.key} offset {a.offset} (value {mine.value}): process "
                    f"{b.process} was handed it with delivery count {b.count} by a poll that "
                    f"completed at {secs(b.completed)} (op {b.index}); process {a.process}, "
                    f"holding delivery count {mine.count} (op {mine.index}), then sent "
                    f"{a.type.upper()} of it at {secs(a.invoked)} (op {a.index}) and heard it "
                    f"succeed at {secs(heard)}",
                    {
                        "offset": a.offset,
                        "acked_by": a.process,
                        "acked_count": mine.count,
                        "type": a.type,
                        "other": b.process,
                        "other_count": b.count,
                    },
                )
            )
    return findings, excused, judged


def _final_before(finals: list[Answered], an: Answered) -> Answered | None:
    """Another consumer's ACCEPT or REJECT answered ok, of a later acquisition than the one `an`
    acknowledged, sent before `an` was: the record was final when `an` reached the broker (had
    `an` been applied first, that one would have been refused)."""
    mine = an.delivery
    if mine is None or mine.count is None:
        return None
    for f in finals:
        d = f.delivery
        if (
            f.ack.process != an.ack.process
            and d is not None
            and d.count is not None
            and d.count > mine.count
            and f.ack.invoked < an.ack.invoked
        ):
            return f
    return None


def _after_final(an: Answered, heard: int, final: Answered) -> Finding:
    a, f = an.ack, final.ack
    mine, theirs = an.delivery, final.delivery
    assert mine is not None and theirs is not None  # _final_before found both
    late = (
        f", handed over after process {f.process}'s later acquisition: a prefetched copy"
        if mine.index > theirs.index
        else ""
    )
    told = min(o.time for o in final.outcomes if o.outcome == "ok")
    return Finding(
        ACK_AFTER_FINAL_KIND,
        a.key,
        tuple(sorted({mine.index, theirs.index, f.index, a.index})),
        f"partition {a.key} offset {a.offset} (value {mine.value}): process {f.process} was "
        f"handed it with delivery count {theirs.count} (op {theirs.index}) and sent "
        f"{f.type.upper()} of it at {secs(f.invoked)} (op {f.index}, heard ok at {secs(told)}); "
        f"process {a.process}, holding the earlier delivery count {mine.count} (op "
        f"{mine.index}{late}), then sent {a.type.upper()} "
        f"of it at {secs(a.invoked)} (op {a.index}) and heard it succeed at {secs(heard)}: the "
        "record was already final, and Kafka answers an acknowledgement below the "
        "share-partition start offset ok without applying it",
        {
            "offset": a.offset,
            "acked_by": a.process,
            "acked_count": mine.count,
            "type": a.type,
            "final_by": f.process,
            "final_count": theirs.count,
            "final_type": f.type,
        },
        tolerated=ACK_AFTER_FINAL_TOLERATED,
    )
