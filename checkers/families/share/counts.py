"""Delivery counts: each delivery's count is between 1 and the group's delivery count limit
(docs/checkers.md, "Share groups").

KIP-932: "Every time that a record is acquired by a consumer in a share group, its delivery
count increments by 1"; at the limit the record "moves into Archived state and is not eligible
for additional delivery attempts"; and "These updates are not performed with exactly-once
semantics, so the delivery count cannot be relied upon to be precise in all situations. It is
intended as a way to protect against poison messages, rather than a precise count of the number
of times a record is delivered to a consumer."

What that imprecision allows, as kchaos reads it (and as real runs showed): a count may skip
values (acquisitions the application never saw: records a consumer prefetched and released at
close, or whose fetch answer was lost), may repeat (the same count handed to two consumers one
after the other: seen on 4.1.2 without any fault, a release at a consumer's close giving the
count back) and may go down (increments lost when a share-partition leader or the share
coordinator fails over). So no order between two deliveries' counts is judged. What it does not
allow: a delivery with a count above the limit (that acquisition should never have happened:
the record was Archived at the limit), or a count below 1 (an acquisition counts from 1).

`share-delivery-count-above-limit` (a failure): a delivery whose count is above the header's
`share.delivery_limit`. `share-delivery-count-invalid` (a failure): a count below 1. Deliveries
without a count (the client gave none) are counted in `share_uncounted`.
"""

from __future__ import annotations

from checkers.core.findings import Finding
from checkers.families.share.run import ShareRun

ABOVE_LIMIT_KIND = "share-delivery-count-above-limit"
INVALID_KIND = "share-delivery-count-invalid"
RULES = {
    ABOVE_LIMIT_KIND: (
        "a record is never delivered with a delivery count above "
        "group.share.delivery.count.limit: at the limit it is Archived, 'not eligible for "
        "additional delivery attempts' (KIP-932)"
    ),
    INVALID_KIND: (
        "a delivery count is at least 1: 'Every time that a record is acquired by a consumer in "
        "a share group, its delivery count increments by 1' (KIP-932)"
    ),
}


def check_counts(run: ShareRun) -> tuple[list[Finding], dict[str, int]]:
    findings: list[Finding] = []
    counted = [d for d in run.share.deliveries if d.count is not None]
    for d in sorted(counted, key=lambda d: (d.index, d.key, d.offset)):
        if d.count >= 1 and (run.limit is None or d.count <= run.limit):
            continue
        kind = INVALID_KIND if d.count < 1 else ABOVE_LIMIT_KIND
        why = "below 1" if d.count < 1 else f"above the delivery count limit {run.limit}"
        findings.append(
            Finding(
                kind,
                d.key,
                (d.index,),
                f"partition {d.key} offset {d.offset} (value {d.value}) was handed to process "
                f"{d.process} with delivery count {d.count}, {why} (op {d.index})",
                {"offset": d.offset, "count": d.count, "limit": run.limit, "process": d.process},
            )
        )
    return findings, {
        "share_max_delivery_count": max((d.count for d in counted), default=0),
        "share_deliveries_at_limit": sum(
            1 for d in counted if run.limit is not None and d.count == run.limit
        ),
        "share_uncounted": len(run.share.deliveries) - len(counted),
    }
