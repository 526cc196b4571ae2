"""Within one op, successive reads (sends) of a key must be adjacent in the key's log:
`int-poll-skip` / `int-nonmonotonic-poll` when a read skips records / goes back,
`int-send-skip` / `int-nonmonotonic-send` for sends. Keys in the op's rebalance_log are exempt
for polls (a rebalance during the op may move the consumer's position)."""

from __future__ import annotations

from itertools import pairwise

import numpy as np

from checkers.core.findings import Finding
from checkers.families.queue.context import QueueContext
from checkers.families.queue.elem import Elem
from checkers.families.queue.key_log import KeyLog
from checkers.families.queue.logs import Logs
from checkers.families.queue.order import LogView, describe_pairs, order_pair, out_of_order, where

KINDS = ("int-poll-skip", "int-nonmonotonic-poll", "int-send-skip", "int-nonmonotonic-send")
_POLL_KINDS = ("int-poll-skip", "int-nonmonotonic-poll")
_SEND_KINDS = ("int-send-skip", "int-nonmonotonic-send")


def internal_pair(log: LogView, kind: str, a: Elem, b: Elem) -> Finding | None:
    """Successive reads (sends) `a`, `b` of one key within op `a.index`."""
    verb = "polled" if kind == "poll" else "sent"
    return order_pair(
        log,
        a,
        b,
        (a.index,),
        f"op {a.index} {verb} key {log.key} at {where(a)} and next at {where(b)}",
        _POLL_KINDS if kind == "poll" else _SEND_KINDS,
        "within one op a partition is read and written in offset order",
    )


def reference(log: KeyLog, ctx: QueueContext) -> list[Finding]:
    out = []
    for kind in ("poll", "send"):
        for es in log.by_op(kind).values():
            for a, b in pairwise(es):
                if kind == "poll" and (a.rebalanced or b.rebalanced):
                    continue  # a rebalance during the op: the consumer's position may move
                found = internal_pair(log, kind, a, b)
                if found is not None:
                    out.append(found)
    return out


def vectorised(logs: Logs, ctx: QueueContext) -> list[Finding]:
    a, out = logs.a, []
    for kind in ("poll", "send"):
        rows = np.flatnonzero((logs.poll if kind == "poll" else logs.send) & a.has_val)
        x, y = rows[:-1], rows[1:]
        same = (logs.kid[x] == logs.kid[y]) & (a.index[x] == a.index[y])
        if kind == "poll":
            same &= ~a.rebalanced[x] & ~a.rebalanced[y]  # a rebalance may move the position
        bad = same & out_of_order(logs, x, y, skip=True)
        out += describe_pairs(logs, kind, x[bad], y[bad], internal_pair)
    return out
