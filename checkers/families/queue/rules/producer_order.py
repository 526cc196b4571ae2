"""`producer-nonmonotonic-send`: one idempotent producer's acknowledged sends to a partition
appended out of its send order.

Judged only when the history's header declares pipelined idempotent producers (acks=all,
enable.idempotence=true: history.format.idempotent_producers, QueueContext.producers). Each
pipelined send is one op on one of its producer's lanes (process ids) and names its `producer`;
the order of one producer's invocations in the history is the order of its produce() calls
(docs/history.md, "Pipelined sends"). For two sends a, b of one producer to one key (partition),
a invoked before b, both `ok` with a known offset, Kafka promises offset(a) < offset(b).

What is compared: each acknowledged send with its next one, in that producer's send order
to that key (sends `fail`, `info`, or acknowledged without an offset are not in the sequence:
they promise nothing about where they sit). An increasing sequence has no such pair going down,
and a sequence with any two sends out of order has one, so every reordering is reported.
Equal offsets are not this rule's (two values at one offset: `inconsistent-offsets`); nor are
two sends of one op (`int-nonmonotonic-send`), nor a pair `nonmonotonic-send` already compares
(one lane's successive sends: send_pairs), so one reordering is one finding.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise

import numpy as np

from checkers.core.findings import Finding, secs
from checkers.families.queue.context import QueueContext
from checkers.families.queue.elem import OK, Elem
from checkers.families.queue.key_log import KeyLog
from checkers.families.queue.logs import Logs
from checkers.families.queue.rules.process_order import send_candidates, send_pairs
from checkers.scan.npsets import member, sort_rows

KINDS = ("producer-nonmonotonic-send",)
# Kafka's and librdkafka's own words for KIP-98's idempotent producer: the producer
# configuration docs of Kafka (ProducerConfig, 3.9 and trunk) and of librdkafka
# (CONFIGURATION.md), the client kchaos's producers run.
RULE = (
    'Kafka, max.in.flight.requests.per.connection: "if retries are disabled or if '
    'enable.idempotence is set to true, ordering will be preserved"; librdkafka, '
    'enable.idempotence: "When set to true, the producer will ensure that messages are '
    "successfully produced exactly once and in the original produce order.\" (KIP-98's "
    "idempotent producer)"
)


def producer_reorder(k: int, a: Elem, b: Elem) -> Finding:
    """`a`, `b`: successive acknowledged sends of one producer to key k, in its send order."""
    return Finding(
        "producer-nonmonotonic-send",
        k,
        (a.index, b.index),
        f"producer {a.producer} sent value {a.value} to key {k} (invoked at index "
        f"{a.invoke_index} on process {a.process}) before value {b.value} (invoked at index "
        f"{b.invoke_index} on process {b.process}); both were acknowledged, op {a.index} at "
        f"offset {a.offset} (ok at {secs(a.time)}) and op {b.index} at offset {b.offset} (ok at "
        f"{secs(b.time)}): the later send sits below the earlier one in the partition. The "
        "producer ran with acks=all and enable.idempotence=true, so its sends to one partition "
        f"are appended in the order it sent them, whatever its requests in flight and retries. "
        f"Rule: {RULE}",
        {
            "producer": a.producer,
            "values": [a.value, b.value],
            "offsets": [a.offset, b.offset],
            "invoked": [a.invoke_index, b.invoke_index],
            "processes": [a.process, b.process],
            "rule": RULE,
        },
    )


# -- the reference, one key ------------------------------------------------------------------


def reference(log: KeyLog, ctx: QueueContext) -> list[Finding]:
    if not ctx.producers:
        return []
    by_producer: dict[int, list[Elem]] = defaultdict(list)
    for e in log.elems:
        known = e.offset is not None and e.value is not None and e.invoke_index is not None
        if e.kind == "send" and e.type == OK and e.producer is not None and known:
            by_producer[e.producer].append(e)
    if not by_producer:
        return []
    process_rule = {((a.index, a.seq), (b.index, b.seq)) for a, b in send_pairs(log, ctx)}
    out = []
    for sends in by_producer.values():
        sends.sort(key=lambda e: (e.invoke_index, e.seq))
        for a, b in pairwise(sends):
            if a.invoke_index == b.invoke_index or b.offset >= a.offset:
                continue
            if a.process == b.process and ((a.index, a.seq), (b.index, b.seq)) in process_rule:
                continue  # nonmonotonic-send reports this pair
            out.append(producer_reorder(log.key, a, b))
    return out


# -- the same over the arrays of many keys -------------------------------------------------


def vectorised(logs: Logs, ctx: QueueContext) -> list[Finding]:
    a = logs.a
    if not ctx.producers or a.producer is None or a.invoke_index is None:
        return []
    rows = np.flatnonzero(logs.send & logs.is_ok & a.has_off & a.has_val & (a.producer >= 0))
    if len(rows) < 2:
        return []
    rows = rows[sort_rows(logs.kid[rows], a.producer[rows], a.invoke_index[rows], a.seq[rows])]
    x, y = rows[:-1], rows[1:]
    bad = (
        (logs.kid[x] == logs.kid[y])
        & (a.producer[x] == a.producer[y])
        & (a.invoke_index[x] != a.invoke_index[y])
        & (a.offset[y] < a.offset[x])
    )
    x, y = x[bad], y[bad]
    same = a.proc[x] == a.proc[y]
    if same.any():
        # Pairs on one lane that nonmonotonic-send compares (and so reports): its candidate
        # pairs, less those a reset separates, asked only of the few pairs found here.
        cx, cy = send_candidates(logs)
        n = np.int64(len(a))
        skip = same & member(x * n + y, cx * n + cy)
        for i in np.flatnonzero(skip).tolist():
            xi, yi = int(x[i]), int(y[i])
            p, k = str(a.proc_names[a.proc[xi]]), int(a.key[xi])
            skip[i] = not ctx.reset_between(p, k, int(a.index[xi]), int(a.index[yi]), "send")
        x, y = x[~skip], y[~skip]
    return [
        producer_reorder(int(a.key[i]), a.elem(i), a.elem(j))
        for i, j in zip(x.tolist(), y.tolist(), strict=True)
    ]
