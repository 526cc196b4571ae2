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
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import pairwise
from typing import Any

import pandas as pd

from checkers.findings import Finding, secs
from checkers.queue.context import QueueContext

OK, INFO, FAIL = "ok", "info", "fail"


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


@dataclass(frozen=True)
class Elem:
    """One element row of the columnar history (history.columnar.ELEMENT_COLUMNS)."""

    index: int
    type: str
    process: str
    time: int | None
    seq: int
    kind: str
    offset: int | None
    value: int | None
    rebalanced: bool


def _opt_int(x: Any) -> int | None:
    # Arrow nulls arrive as None; through pandas, nullable ints arrive as float NaN.
    return None if x is None or x != x else int(x)


def elems_from_columns(cols: dict[str, list[Any]], rows: Iterable[int] | None = None) -> list[Elem]:
    """Elements from column lists (rows: which positions, default all), in op and read order."""
    idx, typ, proc, tim = cols["index"], cols["type"], cols["process"], cols["time"]
    seq, kind, off, val, reb = (
        cols["seq"], cols["kind"], cols["offset"], cols["value"], cols["rebalanced"],
    )  # fmt: skip
    out = [
        Elem(
            int(idx[i]),
            str(typ[i]),
            str(proc[i]),
            _opt_int(tim[i]),
            int(seq[i]),
            str(kind[i]),
            _opt_int(off[i]),
            _opt_int(val[i]),
            reb[i] is True or reb[i] == 1,
        )
        for i in (range(len(idx)) if rows is None else rows)
    ]
    out.sort(key=lambda e: (e.index, e.seq))
    return out


def elems_from_frame(df: pd.DataFrame) -> list[Elem]:
    return elems_from_columns(df.to_dict("list"))


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


def _describe_skipped(skipped: list[tuple[int, list[int]]], limit: int = 8) -> str:
    shown = ", ".join(f"{o} (value {'/'.join(map(str, vs))})" for o, vs in skipped[:limit])
    more = f" and {len(skipped) - limit} more" if len(skipped) > limit else ""
    return f"offsets {shown}{more}"


def check_key(key: int, elems: list[Elem], ctx: QueueContext) -> KeyResult:
    """Every queue anomaly of `key` (its elements in op and read order), and its edges."""
    log = _Log(key, elems, ctx)
    res = KeyResult()
    _offset_anomalies(log, res)
    _read_anomalies(log, elems, ctx, res)
    _internal_order(log, elems, "poll", res)
    _internal_order(log, elems, "send", res)
    _process_order(log, elems, ctx, res)
    _edges(log, elems, res)
    return res


def _offset_anomalies(log: _Log, res: KeyResult) -> None:
    k = log.key
    for o in log.offsets:
        vals = log.at[o]
        if len(vals) > 1:
            parts = "; ".join(
                f"value {v} (shown by op {', '.join(map(str, vals[v]))})" for v in vals
            )
            res.findings.append(
                Finding(
                    "inconsistent-offsets",
                    k,
                    tuple(sorted({i for ops in vals.values() for i in ops})),
                    f"offset {o} of key {k} holds {len(vals)} different values: {parts}; "
                    "a partition offset names exactly one record",
                    {"offset": o, "values": sorted(vals)},
                )
            )
    places: dict[int, list[int]] = defaultdict(list)
    for o in log.offsets:
        for v in log.at[o]:
            places[v].append(o)
    for v, offs in places.items():
        if len(offs) > 1:
            where = "; ".join(f"offset {o} (op {', '.join(map(str, log.at[o][v]))})" for o in offs)
            res.findings.append(
                Finding(
                    "duplicate",
                    k,
                    tuple(sorted({i for o in offs for i in log.at[o][v]})),
                    f"value {v} appears {len(offs)} times in key {k}: {where}; "
                    "it was sent once, so the partition holds a duplicate record",
                    {"value": v, "offsets": offs},
                )
            )


def _read_anomalies(log: _Log, elems: list[Elem], ctx: QueueContext, res: KeyResult) -> None:
    k = log.key
    polls = [e for e in elems if e.kind == "poll" and e.value is not None]
    read_values = {e.value for e in polls}
    for e in polls:
        w = log.writer.get(e.value)
        at = f"at offset {e.offset}" if e.offset is not None else "(offset unknown)"
        if w is None:
            res.findings.append(
                Finding(
                    "garbage-read",
                    k,
                    (e.index,),
                    f"op {e.index} polled value {e.value} from key {k} {at}, "
                    f"but no operation ever sent {e.value} to key {k}",
                    {"value": e.value, "offset": e.offset},
                )
            )
            continue
        if w.index == e.index:
            res.findings.append(
                Finding(
                    "precommitted-read",
                    k,
                    (e.index,),
                    f"op {e.index} polled value {e.value} from key {k} {at}, which it had sent "
                    "itself in the same transaction: a read_committed consumer must never see a "
                    "record before its transaction commits",
                    {"value": e.value, "offset": e.offset},
                )
            )
        elif w.type == FAIL and e.type == OK:
            res.findings.append(
                Finding(
                    "G1a",
                    k,
                    (w.index, e.index),
                    f"op {e.index} (ok at {secs(e.time)}) polled value {e.value} from key {k} "
                    f"{at}, but the send of {e.value} (op {w.index}) failed: an aborted "
                    "write must never be visible",
                    {"value": e.value, "offset": e.offset, "writer": w.index, "reader": e.index},
                )
            )

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
            how = (
                f"acknowledged at offset {w.offset} (op {w.index}, ok at {secs(w.time)})"
                if w.type == OK
                else f"in op {w.index}, which timed out (info) but another of its sends was "
                f"polled, so it happened, at offset {log.offsets[last]}"
            )
            res.findings.append(
                Finding(
                    "lost-write",
                    k,
                    (w.index, bound_elem.index),
                    f"send of value {v} to key {k} was {how}, but no poll ever returned it "
                    f"although polls of key {k} read up to offset {bound_elem.offset} "
                    f"(op {bound_elem.index})",
                    {"value": v, "offset": log.offsets[last], "max_read_offset": bound_elem.offset},
                )
            )

    # unseen: acknowledged, never polled. Lost, or consumers never caught up: we cannot tell.
    unseen = [e for e in elems if e.kind == "send" and e.type == OK and e.value not in read_values]
    unseen = [e for e in unseen if e.value is not None]
    if unseen:
        sample = ", ".join(f"{e.value} (op {e.index})" for e in unseen[:8])
        top = f"offset {bound_elem.offset}" if bound_elem is not None else "nothing"
        res.findings.append(
            Finding(
                "unseen",
                k,
                tuple(e.index for e in unseen[:8]),
                f"{len(unseen)} acknowledged send(s) to key {k} were never returned by any poll, "
                f"e.g. {sample}; polls of key {k} read up to {top}: either lost or no consumer "
                "caught up before the run ended",
                {"count": len(unseen), "values": [e.value for e in unseen]},
                unknown=True,
            )
        )


def _by_op(elems: list[Elem], kind: str) -> dict[int, list[Elem]]:
    ops: dict[int, list[Elem]] = defaultdict(list)
    for e in elems:
        if e.kind == kind and e.value is not None:
            ops[e.index].append(e)
    return ops


def _where(e: Elem) -> str:
    return f"offset {e.offset} (value {e.value})" if e.offset is not None else f"value {e.value}"


def _order_pair(
    log: _Log,
    a: Elem,
    b: Elem,
    ops: tuple[int, ...],
    head: str,
    kinds: tuple[str | None, str],
    rule: str,
    res: KeyResult,
) -> None:
    """b should sit right after a in the log: report a skip (kinds[0], if any is checked) or
    going back (kinds[1]); `head` says where a and b come from, `rule` why going back is wrong."""
    pa, pb = log.pos(a), log.pos(b)
    if pa is None or pb is None:
        return
    delta = pb - pa
    skip_kind, back_kind = kinds
    if skip_kind is not None and delta > 1:
        skipped = log.between(pa, pb)
        text = f"{head}, skipping {len(skipped)} record(s) in between: {_describe_skipped(skipped)}"
        res.findings.append(
            Finding(skip_kind, log.key, ops, text, {"values": [a.value, b.value], "delta": delta})
        )
    elif delta < 1:
        where = "the same place" if delta == 0 else "earlier"
        res.findings.append(
            Finding(
                back_kind,
                log.key,
                ops,
                f"{head}, {where} in the log: {rule}",
                {"values": [a.value, b.value], "delta": delta},
            )
        )


def _internal_order(log: _Log, elems: list[Elem], kind: str, res: KeyResult) -> None:
    """Within one op, successive reads (or sends) of a key must be adjacent in the log."""
    verb = "polled" if kind == "poll" else "sent"
    for index, es in _by_op(elems, kind).items():
        for a, b in pairwise(es):
            if kind == "poll" and (a.rebalanced or b.rebalanced):
                continue  # a rebalance during the op: the consumer's position may move
            _order_pair(
                log,
                a,
                b,
                (index,),
                f"op {index} {verb} key {log.key} at {_where(a)} and next at {_where(b)}",
                (f"int-{kind}-skip", f"int-nonmonotonic-{kind}"),
                "within one op a partition is read and written in offset order",
                res,
            )


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
            else:
                # The records were delivered, but an aborted transaction may or may not rewind
                # the consumer to its committed offset: the next poll may start at either.
                # (Jepsen keeps the older position here, which can report a false poll-skip.)
                last_poll.pop(p, None)
        if index in sends:
            es = sends[index]
            if es[0].type not in (OK, INFO):
                continue
            p = es[0].process
            prev = last_send.get(p)
            if prev is not None and not ctx.reset_between(p, k, prev[0].index, index):
                _compare_ops(log, prev, es, "send", res)
            last_send[p] = es


def _compare_ops(log: _Log, prev: list[Elem], cur: list[Elem], kind: str, res: KeyResult) -> None:
    k, a, b = log.key, prev[-1], cur[0]
    verb = "polled" if kind == "poll" else "sent"
    _order_pair(
        log,
        a,
        b,
        (a.index, b.index),
        f"process {a.process}: op {a.index} {verb} key {k} up to {_where(a)}; "
        f"its next {kind} of key {k}, op {b.index}, started at {_where(b)}",
        ("poll-skip" if kind == "poll" else None, f"nonmonotonic-{kind}"),
        f"a {'consumer' if kind == 'poll' else 'producer'} that kept its partition moves "
        "forward only",
        res,
    )


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
