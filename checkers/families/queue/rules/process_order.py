"""Each process's successive polls (sends) of a key continue where the last one ended:
`poll-skip` / `nonmonotonic-poll` when a process's next poll of a key does not start right after
where its last ok poll ended, `nonmonotonic-send` when its next send lands before its last one.
Assign/subscribe (keys not kept) and crash reset the position; which op a poll continues from
after a `fail` or `info` op follows the history's writer (QueueContext.keeps_position)."""

from __future__ import annotations

import numpy as np

from checkers.core.findings import Finding
from checkers.families.queue.context import QueueContext
from checkers.families.queue.elem import FAIL, INFO, OK, Elem
from checkers.families.queue.key_log import KeyLog
from checkers.families.queue.logs import Logs, runs
from checkers.families.queue.order import LogView, describe_pairs, order_pair, out_of_order, where
from checkers.scan.npsets import sort_rows

KINDS = ("poll-skip", "nonmonotonic-poll", "nonmonotonic-send")
# A process's sends are not checked for skips: other producers' sends interleave with them.
_POLL_KINDS = ("poll-skip", "nonmonotonic-poll")
_SEND_KINDS = (None, "nonmonotonic-send")


def process_pair(log: LogView, kind: str, a: Elem, b: Elem) -> Finding | None:
    """`a`: the last element of a process's previous poll (send) of the key, `b` the first of
    its next one."""
    k = log.key
    verb = "polled" if kind == "poll" else "sent"
    return order_pair(
        log,
        a,
        b,
        (a.index, b.index),
        f"process {a.process}: op {a.index} {verb} key {k} up to {where(a)}; "
        f"its next {kind} of key {k}, op {b.index}, started at {where(b)}",
        _POLL_KINDS if kind == "poll" else _SEND_KINDS,
        f"a {'consumer' if kind == 'poll' else 'producer'} that kept its partition moves "
        "forward only",
    )


# -- the reference, one key ------------------------------------------------------------------


def reference(log: KeyLog, ctx: QueueContext) -> list[Finding]:
    k, out = log.key, []
    polls = log.by_op("poll")
    last_poll: dict[str, list[Elem]] = {}

    def compare(a: Elem, b: Elem, kind: str) -> None:
        found = process_pair(log, kind, a, b)
        if found is not None:
            out.append(found)

    for index in sorted(polls):
        es = polls[index]
        p = es[0].process
        prev = last_poll.get(p)
        if prev is not None and not ctx.reset_between(p, k, prev[0].index, index):
            compare(prev[-1], es[0], "poll")
        if es[0].type == OK:
            last_poll[p] = es
        elif not ctx.keeps_position(es[0].type):
            # Where the consumer stands after this op is not known (QueueContext).
            last_poll.pop(p, None)
    for a, b in send_pairs(log, ctx):
        compare(a, b, "send")
    return out


def send_pairs(log: KeyLog, ctx: QueueContext) -> list[tuple[Elem, Elem]]:
    """The pairs nonmonotonic-send compares on one key: the last element of each process's
    previous send op (ok or info) of the key and the first of its next one, unless the process
    lost its send position in between. (The producer-order rule leaves these pairs to this
    one.)"""
    k, pairs = log.key, []
    sends = log.by_op("send")
    last_send: dict[str, list[Elem]] = {}
    for index in sorted(sends):
        es = sends[index]
        if es[0].type not in (OK, INFO):
            continue
        p = es[0].process
        prev = last_send.get(p)
        if prev is not None and not ctx.reset_between(p, k, prev[0].index, index, "send"):
            pairs.append((prev[-1], es[0]))
        last_send[p] = es
    return pairs


# -- the same over the arrays of many keys -------------------------------------------------


def vectorised(logs: Logs, ctx: QueueContext) -> list[Finding]:
    return _pairs(logs, "poll", ctx) + _pairs(logs, "send", ctx)


def _pairs(logs: Logs, kind: str, ctx: QueueContext) -> list[Finding]:
    a = logs.a
    x, y = _candidates(logs, "poll", ctx) if kind == "poll" else send_candidates(logs)
    bad = out_of_order(logs, x, y, skip=kind == "poll")
    x, y = x[bad], y[bad]
    # Resets are rare: consult them only for the pairs that would be reported.
    keep = [
        not ctx.reset_between(
            str(a.proc_names[a.proc[i]]), int(a.key[i]), int(a.index[i]), int(a.index[j]), kind
        )
        for i, j in zip(x.tolist(), y.tolist(), strict=True)
    ]
    keep_arr = np.array(keep, dtype=bool)
    return describe_pairs(logs, kind, x[keep_arr], y[keep_arr], process_pair)


def send_candidates(logs: Logs) -> tuple[np.ndarray, np.ndarray]:
    """(a, b) element rows: send_pairs over the arrays, before resets are consulted (the
    caller asks ctx.reset_between of the few pairs it would report)."""
    return _candidates(logs, "send", None)


def _candidates(logs: Logs, kind: str, ctx: QueueContext | None) -> tuple[np.ndarray, np.ndarray]:
    """(earlier, later) element rows compared: the last element of a process's earlier op of
    the key, the first of its later one (`ctx`: for polls, which ops keep the position)."""
    a = logs.a
    rows = np.flatnonzero((logs.poll if kind == "poll" else logs.send) & a.has_val)
    starts = runs(logs.kid[rows], a.index[rows])
    op_first = rows[starts]
    op_last = rows[np.r_[starts[1:] - 1, len(rows) - 1]] if len(rows) else rows
    ok = logs.is_ok[op_first]
    if kind == "send":
        # A failed send never happened: it neither moves nor is compared.
        keep = ok | logs.is_info[op_first]
        op_first, op_last, ok = op_first[keep], op_last[keep], ok[keep]
    order = sort_rows(logs.kid[op_first], a.proc[op_first], a.index[op_first])
    if ctx is not None:
        i, j = _poll_pairs(logs, op_first[order], ok[order], ctx)
        p, c = order[i], order[j]
    else:
        p, c = order[:-1], order[1:]
        same = (logs.kid[op_first[p]] == logs.kid[op_first[c]]) & (
            a.proc[op_first[p]] == a.proc[op_first[c]]
        )
        p, c = p[same], c[same]
    return op_last[p], op_first[c]


def _poll_pairs(
    logs: Logs, first: np.ndarray, ok: np.ndarray, ctx: QueueContext
) -> tuple[np.ndarray, np.ndarray]:
    """(earlier, later) positions in `first` (each poll op's first element, sorted by key,
    process, index): each op paired with the latest earlier op of its key and process that
    set the position (ok) or lost it, when that one set it. Ops that keep the position
    (QueueContext.keeps_position) are compared but set nothing."""
    a = logs.a
    n = len(first)
    if n == 0:
        return first[:0], first[:0]
    keeps = np.zeros(n, dtype=bool)
    if ctx.keeps_position(FAIL):
        keeps |= logs.is_fail[first]
    if ctx.keeps_position(INFO):
        keeps |= logs.is_info[first]
    marks = ok | ~keeps
    at = np.arange(n)
    last = np.maximum.accumulate(np.where(marks, at, -1))
    ref = np.r_[-1, last[:-1]]  # the latest marking op strictly before
    starts = runs(logs.kid[first], a.proc[first])
    group_start = np.repeat(starts, np.diff(np.r_[starts, n]))
    valid = ref >= group_start
    valid[valid] &= ok[ref[valid]]
    return ref[valid], at[valid]
