"""All queue checks of one key, given every element of that key: the unit of work after a shuffle.

Semantics follow Jepsen's Kafka checker (jepsen.tests.kafka), with its anomaly names:

- The version order of a key comes from offsets: every [offset, value] any poll returned (polls
  are always safe data, whatever became of their op), and the offsets of sends that certainly
  happened (ok, or info with some send of the same op seen by a poll). Offsets are not dense:
  transaction markers take offsets no poll returns, so positions are ranks among the offsets
  known to hold a value.
- Where an element has an offset we place it by that offset; otherwise by the value's first
  place in the log. (Jepsen places by value only; with duplicates, by offset is the exact one.)

The function also returns the key's ww and wr dependency edges for the cycle search.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from itertools import pairwise

from checkers.findings import Finding
from checkers.queue import describe
from checkers.queue.context import QueueContext
from checkers.queue.elem import FAIL, INFO, OK, Elem, elems_from_columns, elems_from_frame
from checkers.queue.fencing import fenced_reads_key

__all__ = ["Edge", "Elem", "KeyResult", "check_key", "elems_from_columns", "elems_from_frame"]


@dataclass(frozen=True)
class Edge:
    """A dependency between two ops on one key: `rel` is "ww" or "wr"."""

    rel: str
    src: int
    dst: int
    key: int
    value: int  # ww: the earlier value; wr: the value read
    value2: int | None = None  # ww: the later value


@dataclass
class KeyResult:
    findings: list[Finding] = field(default_factory=list)
    edges: list[Edge] = field(default_factory=list)


class _Log:
    """The version order of one key, with who showed each [offset, value]."""

    def __init__(self, key: int, elems: list[Elem], ctx: QueueContext) -> None:
        self.key = key
        self.writer: dict[int, Elem] = {}
        for e in elems:
            if e.kind == "send" and e.value is not None:
                self.writer.setdefault(e.value, e)
        # offset -> value -> ops that showed it there (sends first, then polls, index order)
        self.at: dict[int, dict[int, list[int]]] = defaultdict(lambda: defaultdict(list))
        for e in elems:
            if e.offset is None or e.value is None:
                continue
            if e.kind == "poll" or self.committed(e, ctx):
                shown = self.at[e.offset][e.value]
                if e.index not in shown:
                    shown.append(e.index)
        self.offsets = sorted(self.at)
        self.rank = {o: i for i, o in enumerate(self.offsets)}
        self.first: dict[int, int] = {}
        self.last: dict[int, int] = {}
        for o in self.offsets:
            for v in self.at[o]:
                self.first.setdefault(v, self.rank[o])
                self.last[v] = self.rank[o]

    @staticmethod
    def committed(e: Elem, ctx: QueueContext) -> bool:
        return e.type == OK or (e.type == INFO and e.index in ctx.committed_info)

    def pos(self, e: Elem) -> int | None:
        if e.offset is not None and e.offset in self.rank:
            return self.rank[e.offset]
        return None if e.value is None else self.first.get(e.value)

    def values_at(self, rank: int) -> list[int]:
        return sorted(self.at[self.offsets[rank]])

    def between(self, r1: int, r2: int) -> list[tuple[int, list[int]]]:
        return [(self.offsets[r], self.values_at(r)) for r in range(r1 + 1, r2)]


def check_key(key: int, elems: list[Elem], ctx: QueueContext) -> KeyResult:
    """Every queue anomaly of `key` (its elements in op and read order), and its edges."""
    log = _Log(key, elems, ctx)
    res = KeyResult()
    _offset_anomalies(log, res)
    _read_anomalies(log, elems, ctx, res)
    _internal_order(log, elems, "poll", res)
    _internal_order(log, elems, "send", res)
    _process_order(log, elems, ctx, res)
    res.findings += fenced_reads_key(log, elems, ctx.slots)
    _edges(log, elems, res)
    return res


def _offset_anomalies(log: _Log, res: KeyResult) -> None:
    k = log.key
    for o in log.offsets:
        vals = log.at[o]
        if len(vals) > 1:
            res.findings.append(describe.inconsistent_offsets(k, o, vals))
    places: dict[int, list[int]] = defaultdict(list)
    for o in log.offsets:
        for v in log.at[o]:
            places[v].append(o)
    for v, offs in places.items():
        if len(offs) > 1:
            res.findings.append(describe.duplicate(k, v, [(o, log.at[o][v]) for o in offs]))


def _read_anomalies(log: _Log, elems: list[Elem], ctx: QueueContext, res: KeyResult) -> None:
    k = log.key
    polls = [e for e in elems if e.kind == "poll" and e.value is not None]
    read_values = {e.value for e in polls}
    for e in polls:
        w = log.writer.get(e.value)
        if w is None:
            res.findings.append(describe.garbage_read(k, e))
        elif w.index == e.index:
            res.findings.append(describe.precommitted_read(k, e))
        elif w.type == FAIL and e.type == OK:
            res.findings.append(describe.g1a(k, e, w))

    # lost-write: everything at or below the highest offset any poll returned must have been
    # returned by some poll, if its send certainly happened.
    bound_elem = max(
        (e for e in polls if e.offset is not None and e.offset in log.rank),
        key=lambda e: (log.rank[e.offset], -e.index),
        default=None,
    )
    if bound_elem is not None:
        bound = log.rank[bound_elem.offset]
        for v, last in sorted(log.last.items(), key=lambda kv: kv[1]):
            if last > bound or v in read_values:
                continue
            w = log.writer.get(v)
            if w is None or not log.committed(w, ctx):
                continue
            res.findings.append(describe.lost_write(k, v, w, bound_elem, log.offsets[last]))

    # unseen: acknowledged, never polled. Lost, or consumers never caught up: we cannot tell.
    unseen = [e for e in elems if e.kind == "send" and e.type == OK and e.value not in read_values]
    unseen = [e for e in unseen if e.value is not None]
    if unseen:
        res.findings.append(describe.unseen(k, unseen[:8], [e.value for e in unseen], bound_elem))


def _by_op(elems: list[Elem], kind: str) -> dict[int, list[Elem]]:
    ops: dict[int, list[Elem]] = defaultdict(list)
    for e in elems:
        if e.kind == kind and e.value is not None:
            ops[e.index].append(e)
    return ops


def _internal_order(log: _Log, elems: list[Elem], kind: str, res: KeyResult) -> None:
    """Within one op, successive reads (or sends) of a key must be adjacent in the log."""
    for es in _by_op(elems, kind).values():
        for a, b in pairwise(es):
            if kind == "poll" and (a.rebalanced or b.rebalanced):
                continue  # a rebalance during the op: the consumer's position may move
            found = describe.internal_pair(log, kind, a, b)
            if found is not None:
                res.findings.append(found)


def _process_order(log: _Log, elems: list[Elem], ctx: QueueContext, res: KeyResult) -> None:
    """Each process's successive polls (and sends) of a key continue where the last one ended."""
    k = log.key
    polls, sends = _by_op(elems, "poll"), _by_op(elems, "send")
    last_poll: dict[str, list[Elem]] = {}
    last_send: dict[str, list[Elem]] = {}
    for index in sorted(set(polls) | set(sends)):
        if index in polls:
            es = polls[index]
            p = es[0].process
            prev = last_poll.get(p)
            if prev is not None and not ctx.reset_between(p, k, prev[0].index, index):
                _compare_ops(log, prev, es, "poll", res)
            if es[0].type == OK:
                last_poll[p] = es
            elif not ctx.keeps_position(es[0].type):
                # Where the consumer stands after this op is not known (QueueContext).
                last_poll.pop(p, None)
        if index in sends:
            es = sends[index]
            if es[0].type not in (OK, INFO):
                continue
            p = es[0].process
            prev = last_send.get(p)
            if prev is not None and not ctx.reset_between(p, k, prev[0].index, index, "send"):
                _compare_ops(log, prev, es, "send", res)
            last_send[p] = es


def _compare_ops(log: _Log, prev: list[Elem], cur: list[Elem], kind: str, res: KeyResult) -> None:
    found = describe.process_pair(log, kind, prev[-1], cur[0])
    if found is not None:
        res.findings.append(found)


def _edges(log: _Log, elems: list[Elem], res: KeyResult) -> None:
    """ww: the writer of each log value precedes the writer of the next; wr: writer -> readers."""
    k = log.key
    for r in range(1, len(log.offsets)):
        for v1 in log.values_at(r - 1):
            for v2 in log.values_at(r):
                w1, w2 = log.writer.get(v1), log.writer.get(v2)
                if w1 is not None and w2 is not None and w1.index != w2.index:
                    res.edges.append(Edge("ww", w1.index, w2.index, k, v1, v2))
    seen: set[tuple[int, int]] = set()
    for e in elems:
        if e.kind != "poll" or e.value is None:
            continue
        w = log.writer.get(e.value)
        if w is None or w.index == e.index or (w.index, e.index) in seen:
            continue
        seen.add((w.index, e.index))
        res.edges.append(Edge("wr", w.index, e.index, k, e.value))
