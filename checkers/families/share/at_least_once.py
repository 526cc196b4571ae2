"""At-least-once: every acknowledged send of the share topic is settled by the end, and the
final drain empties the group (docs/checkers.md, "Share groups").

KIP-932: "the delivery behavior is at-least-once"; a record is acquired, then acknowledged
(ACCEPT, REJECT), released or let go, and "If the delivery count has reached the cluster's
share delivery attempt limit (5 by default), the record moves into Archived state and is not
eligible for additional delivery attempts"; and size-based retention "does potentially silently
remove records that were eligible for delivery".

An ok send's record (key, offset) is *settled* when any of:
- some consumer sent ACCEPT or REJECT of it that was not certainly refused (its outcome `ok`,
  never heard, or an error that leaves it unknown whether the broker applied it: every error but
  InvalidRecordStateException);
- it was delivered with a delivery count at the limit (header `share.delivery_limit`): that
  attempt's end archives it;
- the final log read starts above its offset (removed by retention).

The *drain* is the consumer of the last ok `share-offsets` op (docs/history.md, "Final reads"):
its polls, each followed by accepting what they delivered, until nothing came for a while, then
that `share-offsets`. A key is *drained* when the drain's polls delivered nothing for the last
QUIET (max(3 locks, 6 s): every lock a departed consumer held has expired, and a member that
could not leave is gone after its 6 s session) before that `share-offsets`, and it reports the
key's lag 0 (or no lag: 4.1 gives none).

Findings, one per key and kind, naming the offsets:
- `share-never-delivered` (a failure): unsettled, never handed to any consumer, on a drained
  key, and no share-poll of the run ended without an answer (its acquisitions would be unknown):
  Kafka held the record and never delivered it even once. A poll refused with
  UnsupportedVersionException while share groups were off (share.version 0, run.py
  `off_windows`) acquired nothing and leaves the rule whole: it counts from when share groups
  work.
- `share-archived-before-limit` (tolerated): unsettled but delivered, on a drained key: Kafka
  took it out of delivery before any delivery the history shows reached the limit. KIP-932's
  delivery count is "not ... a precise count of the number of times a record is delivered to a
  consumer": acquisitions a consumer never handed to its application (records prefetched and
  released at close) count too.
- `share-unsettled` (unknown): unsettled on a key that was not drained (the drain ended with a
  lag, or never went quiet, or there was no drain): lost, or Kafka never got to it.

A drained key's finding also names the last consumer handed the key before the drain and what
its later polls handed, and a RENEW of its that no later poll handed back: on Kafka 4.2.2 (no
faults) the one consumer holding two partitions renewed a record by commitSync, never got it
back, and from then on every poll returned nothing while its client went on acquiring those
partitions' records until they were archived at the delivery count limit, never having reached
the application. In the client's bytecode: a commitSync over partitions led by two brokers sends
one ShareAcknowledgementEvent when the last answer arrives (ShareConsumeRequestManager's
ResultHandler), flagged for renewals by that last request alone; unflagged, the renewed record
is never taken out of ShareInFlightBatch.renewingRecords, and ShareConsumerImpl.collect hands
over nothing new while ShareFetch.hasRenewals(), yet asks for another fetch at each poll.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from checkers.core.findings import Finding, secs
from checkers.families.share.run import ShareRun, answered
from history.share import ACCEPT, REJECT, RENEW, SHARE_POLL

NEVER_DELIVERED_KIND = "share-never-delivered"
ARCHIVED_EARLY_KIND = "share-archived-before-limit"
UNSETTLED_KIND = "share-unsettled"
RULES = {
    NEVER_DELIVERED_KIND: (
        "an acknowledged send of the share topic is delivered at least once: on a key the final "
        "drain emptied, no record that was neither accepted nor rejected, delivered at the "
        "delivery count limit or removed by retention was never delivered (KIP-932: 'the "
        "delivery behavior is at-least-once')"
    ),
    ARCHIVED_EARLY_KIND: (
        "a record delivered but never accepted or rejected leaves delivery only at the delivery "
        "count limit; tolerated, as KIP-932's count is 'not a precise count of the number of "
        "times a record is delivered to a consumer'"
    ),
    UNSETTLED_KIND: (
        "an acknowledged send is eventually accepted, rejected, archived at the limit or removed "
        "by retention; on a key the final drain did not empty, one not yet settled may be lost "
        "or not yet delivered"
    ),
}
ARCHIVED_EARLY_TOLERATED = (
    "KIP-932: the delivery count is not a precise count of deliveries to consumers; "
    "acquisitions never handed to the application count"
)
# The drain's quiet period, below which a key is not judged drained: every departed
# consumer's lock expired (3 locks) and its member's session ended (6 s, workloads/share.py).
SESSION_NS = 6_000_000_000


def check_at_least_once(run: ShareRun) -> tuple[list[Finding], dict[str, int]]:
    settled, stats = _settled(run)
    delivered = {(d.key, d.offset) for d in run.share.deliveries}
    drained, drain_index = drained_keys(run)
    unknown_polls = bool(run.unknown_polls)
    groups: dict[tuple[str, int], list[int]] = defaultdict(list)
    for key, offset in sorted(run.sent):
        if (key, offset) in settled:
            continue
        kind = (
            UNSETTLED_KIND
            if key not in drained
            else ARCHIVED_EARLY_KIND
            if (key, offset) in delivered
            else UNSETTLED_KIND
            if unknown_polls
            else NEVER_DELIVERED_KIND
        )
        groups[(kind, key)].append(offset)
    findings = [
        _finding(kind, key, offsets, run, drain_index, key in drained)
        for (kind, key), offsets in sorted(groups.items())
    ]
    stats["share_sent"] = len(run.sent)
    stats["share_unsettled"] = sum(len(o) for o in groups.values())
    stats["share_drained_keys"] = len(drained)
    stats["share_polls_refused_while_off"] = len(run.refused_off_polls)
    return findings, stats


def _settled(run: ShareRun) -> tuple[set[tuple[int, int]], dict[str, int]]:
    settled: set[tuple[int, int]] = set()
    by_ack = at_limit = retained = 0
    for a in answered(run.share):
        if a.ack.type in (ACCEPT, REJECT) and not a.refused:
            by_ack += (a.ack.key, a.ack.offset) not in settled
            settled.add((a.ack.key, a.ack.offset))
    if run.limit is not None:
        for d in run.share.deliveries:
            if d.count is not None and d.count >= run.limit and (d.key, d.offset) not in settled:
                at_limit += 1
                settled.add((d.key, d.offset))
    for key, offset in run.sent:
        if run.log_start.get(key, -1) > offset and (key, offset) not in settled:
            retained += 1
            settled.add((key, offset))
    return settled, {
        "share_settled_by_ack": by_ack,
        "share_archived_at_limit": at_limit,
        "share_removed_by_retention": retained,
    }


def drained_keys(run: ShareRun) -> tuple[set[int], int | None]:
    """The keys the final drain emptied, and the index of its closing `share-offsets`."""
    if not run.offsets:
        return set(), None
    last = max(run.offsets, key=lambda o: o.index)
    polls = sorted(
        (d for d in run.share.deliveries if d.process == last.process), key=lambda d: d.index
    )
    began = min((o.invoked for o in run.offsets if o.process == last.process), default=last.invoked)
    quiet_from = polls[-1].completed if polls else began
    lock = (run.lock_ms or 0) * 1_000_000
    if last.process not in run.share.modes or last.invoked - quiet_from < max(3 * lock, SESSION_NS):
        return set(), last.index
    return {k for k, lag in last.lag.items() if lag in (0, None)} | _no_state(run, last), last.index


def _no_state(run: ShareRun, last: Any) -> set[int]:
    # Keys the closing share-offsets does not name: no records ever reached them.
    return {k for k, _ in run.sent if k not in last.lag and k not in last.start}


def _finding(
    kind: str, key: int, offsets: list[int], run: ShareRun, drain: int | None, drained: bool
) -> Finding:
    values = [run.sent[(key, o)].value for o in offsets]
    ops = tuple(sorted({run.sent[(key, o)].index for o in offsets} | ({drain} if drain else set())))
    shown = ", ".join(str(o) for o in offsets[:20]) + (" ..." if len(offsets) > 20 else "")
    where = (
        f"the final drain emptied partition {key} (op {drain})"
        if drained
        else (
            f"the final drain did not empty partition {key}"
            + (f" (op {drain})" if drain is not None else " (no drain in the history)")
        )
    )
    what = {
        NEVER_DELIVERED_KIND: "were never handed to any consumer",
        ARCHIVED_EARLY_KIND: "were delivered, never accepted or rejected, and never delivered "
        f"at the delivery count limit {run.limit}",
        UNSETTLED_KIND: "were neither accepted nor rejected, delivered at the limit, nor "
        "removed by retention"
        + (
            f" ({len(run.unknown_polls)} {SHARE_POLL} ops ended unanswered)"
            if run.unknown_polls and drained
            else ""
        ),
    }[kind]
    holder = _last_holder(run, key) if drained and kind != UNSETTLED_KIND else ""
    return Finding(
        kind,
        key,
        ops,
        f"partition {key}: {len(offsets)} acknowledged sends at offsets {shown} {what}; {where}"
        + holder,
        {"offsets": offsets, "values": values, "drained": drained},
        tolerated=ARCHIVED_EARLY_TOLERATED if kind == ARCHIVED_EARLY_KIND else None,
        unknown=kind == UNSETTLED_KIND,
    )


def _last_holder(run: ShareRun, key: int) -> str:
    """The last consumer but the drain handed `key`, what its later polls handed, and a RENEW of
    its no later poll handed back (a client that stopped handing records over: seen on 4.2.2)."""
    drain = max(run.offsets, key=lambda o: o.index).process if run.offsets else None
    ds = [d for d in run.share.deliveries if d.key == key and d.process != drain]
    if not ds:
        return ""
    last = max(ds, key=lambda d: d.index)
    later = [(i, t, n) for i, t, n in run.polls.get(last.process, []) if i > last.index]
    if not later:
        return ""
    handed = sum(n for _, _, n in later)
    text = (
        f"; process {last.process}, the last consumer handed partition {key} before the drain "
        f"(op {last.index} at {secs(last.completed)}), was handed "
        + ("nothing" if not handed else f"{handed} records")
        + f" by its {len(later)} later polls ({secs(later[0][1])} to {secs(later[-1][1])})"
    )
    back = {(d.key, d.offset, d.index) for d in run.share.deliveries if d.process == last.process}
    for an in answered(run.share):
        a = an.ack
        if a.process != last.process or a.type != RENEW or an.refused:
            continue
        if not last.index < a.index < later[-1][0]:
            continue  # before the key's last hand-over, or no poll after it
        if any(k == a.key and o == a.offset and i > a.index for k, o, i in back):
            continue
        return text + (
            f", after its RENEW of partition {a.key} offset {a.offset} (op {a.index}"
            + (", answered ok" if an.ok else "")
            + "), which no later poll handed back"
        )
    return text
