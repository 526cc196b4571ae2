"""The findings of one key, worded once: the reference and the vectorised path both build them here.

Each builder takes only the few elements a finding quotes, so a fast path that detects anomalies
on arrays can materialise exactly the text the reference path would write.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from checkers.findings import Finding, secs
from checkers.queue.elem import OK, Elem


class LogView(Protocol):
    """What wording an order anomaly needs from a key's version order."""

    key: int

    def pos(self, e: Elem) -> int | None: ...

    def between(self, r1: int, r2: int) -> Sequence[tuple[int, list[int]]]: ...


def inconsistent_offsets(k: int, o: int, vals: dict[int, list[int]]) -> Finding:
    """`vals`: value -> ops that showed it at offset `o`, in order of first appearance."""
    parts = "; ".join(f"value {v} (shown by op {', '.join(map(str, vals[v]))})" for v in vals)
    return Finding(
        "inconsistent-offsets",
        k,
        tuple(sorted({i for ops in vals.values() for i in ops})),
        f"offset {o} of key {k} holds {len(vals)} different values: {parts}; "
        "a partition offset names exactly one record",
        {"offset": o, "values": sorted(vals)},
    )


def duplicate(k: int, v: int, places: list[tuple[int, list[int]]]) -> Finding:
    """`places`: (offset, ops that showed `v` there), offsets ascending."""
    where = "; ".join(f"offset {o} (op {', '.join(map(str, ops))})" for o, ops in places)
    return Finding(
        "duplicate",
        k,
        tuple(sorted({i for _, ops in places for i in ops})),
        f"value {v} appears {len(places)} times in key {k}: {where}; "
        "it was sent once, so the partition holds a duplicate record",
        {"value": v, "offsets": [o for o, _ in places]},
    )


def _at(e: Elem) -> str:
    return f"at offset {e.offset}" if e.offset is not None else "(offset unknown)"


def garbage_read(k: int, e: Elem) -> Finding:
    return Finding(
        "garbage-read",
        k,
        (e.index,),
        f"op {e.index} polled value {e.value} from key {k} {_at(e)}, "
        f"but no operation ever sent {e.value} to key {k}",
        {"value": e.value, "offset": e.offset},
    )


def precommitted_read(k: int, e: Elem) -> Finding:
    return Finding(
        "precommitted-read",
        k,
        (e.index,),
        f"op {e.index} polled value {e.value} from key {k} {_at(e)}, which it had sent "
        "itself in the same transaction: a read_committed consumer must never see a "
        "record before its transaction commits",
        {"value": e.value, "offset": e.offset},
    )


def g1a(k: int, e: Elem, w: Elem) -> Finding:
    return Finding(
        "G1a",
        k,
        (w.index, e.index),
        f"op {e.index} (ok at {secs(e.time)}) polled value {e.value} from key {k} "
        f"{_at(e)}, but the send of {e.value} (op {w.index}) failed: an aborted "
        "write must never be visible",
        {"value": e.value, "offset": e.offset, "writer": w.index, "reader": e.index},
    )


def lost_write(k: int, v: int, w: Elem, bound: Elem, offset: int) -> Finding:
    """`offset`: the last offset `v` holds; `bound`: the poll that read highest."""
    how = (
        f"acknowledged at offset {w.offset} (op {w.index}, ok at {secs(w.time)})"
        if w.type == OK
        else f"in op {w.index}, which timed out (info) but another of its sends was "
        f"polled, so it happened, at offset {offset}"
    )
    return Finding(
        "lost-write",
        k,
        (w.index, bound.index),
        f"send of value {v} to key {k} was {how}, but no poll ever returned it "
        f"although polls of key {k} read up to offset {bound.offset} "
        f"(op {bound.index})",
        {"value": v, "offset": offset, "max_read_offset": bound.offset},
    )


def unseen(k: int, head: list[Elem], values: list[int], bound: Elem | None) -> Finding:
    """`head`: the first 8 unseen sends; `values`: every unseen value, in op order."""
    sample = ", ".join(f"{e.value} (op {e.index})" for e in head)
    top = f"offset {bound.offset}" if bound is not None else "nothing"
    return Finding(
        "unseen",
        k,
        tuple(e.index for e in head),
        f"{len(values)} acknowledged send(s) to key {k} were never returned by any poll, "
        f"e.g. {sample}; polls of key {k} read up to {top}: either lost or no consumer "
        "caught up before the run ended",
        {"count": len(values), "values": values},
        unknown=True,
    )


def _describe_skipped(skipped: Sequence[tuple[int, list[int]]], limit: int = 8) -> str:
    shown = ", ".join(f"{o} (value {'/'.join(map(str, vs))})" for o, vs in skipped[:limit])
    more = f" and {len(skipped) - limit} more" if len(skipped) > limit else ""
    return f"offsets {shown}{more}"


def _where(e: Elem) -> str:
    return f"offset {e.offset} (value {e.value})" if e.offset is not None else f"value {e.value}"


def _order_pair(
    log: LogView,
    a: Elem,
    b: Elem,
    ops: tuple[int, ...],
    head: str,
    kinds: tuple[str | None, str],
    rule: str,
) -> Finding | None:
    """b should sit right after a in the log: a skip (kinds[0], if any is checked) or going
    back (kinds[1]); `head` says where a and b come from, `rule` why going back is wrong."""
    pa, pb = log.pos(a), log.pos(b)
    if pa is None or pb is None:
        return None
    delta = pb - pa
    skip_kind, back_kind = kinds
    if skip_kind is not None and delta > 1:
        skipped = log.between(pa, pb)
        text = f"{head}, skipping {len(skipped)} record(s) in between: {_describe_skipped(skipped)}"
        data = {"values": [a.value, b.value], "delta": delta}
        return Finding(skip_kind, log.key, ops, text, data)
    if delta < 1:
        where = "the same place" if delta == 0 else "earlier"
        return Finding(
            back_kind,
            log.key,
            ops,
            f"{head}, {where} in the log: {rule}",
            {"values": [a.value, b.value], "delta": delta},
        )
    return None


def internal_pair(log: LogView, kind: str, a: Elem, b: Elem) -> Finding | None:
    """Successive reads (sends) `a`, `b` of one key within op `a.index`."""
    verb = "polled" if kind == "poll" else "sent"
    return _order_pair(
        log,
        a,
        b,
        (a.index,),
        f"op {a.index} {verb} key {log.key} at {_where(a)} and next at {_where(b)}",
        (f"int-{kind}-skip", f"int-nonmonotonic-{kind}"),
        "within one op a partition is read and written in offset order",
    )


def process_pair(log: LogView, kind: str, a: Elem, b: Elem) -> Finding | None:
    """`a`: the last element of a process's previous poll (send) of the key, `b` the first of
    its next one."""
    k = log.key
    verb = "polled" if kind == "poll" else "sent"
    return _order_pair(
        log,
        a,
        b,
        (a.index, b.index),
        f"process {a.process}: op {a.index} {verb} key {k} up to {_where(a)}; "
        f"its next {kind} of key {k}, op {b.index}, started at {_where(b)}",
        ("poll-skip" if kind == "poll" else None, f"nonmonotonic-{kind}"),
        f"a {'consumer' if kind == 'poll' else 'producer'} that kept its partition moves "
        "forward only",
    )


def _sent(w: Elem) -> str:
    outcome = {"ok": "acknowledged", "info": "timed out (info)", "fail": "failed"}
    return f"op {w.index}, {outcome.get(w.type, 'never completed')}"


def fenced_producer_read(
    k: int, v: int, w: Elem, fence: Elem, reads: list[Elem], slots: int, rule: str
) -> Finding:
    """`w`: the send of `v` by the fenced process; `fence`: the lowest-offset committed send to
    key k of a later process of the same slot; `reads`: the polls that returned `v` above it."""
    offsets = sorted({e.offset for e in reads if e.offset is not None})
    polls = sorted({e.index for e in reads})
    slot = int(w.process) % slots
    return Finding(
        "fenced-producer-read",
        k,
        tuple(sorted({w.index, fence.index, *polls})),
        f"value {v} of key {k}, sent by process {w.process} ({_sent(w)}), was returned to a "
        f"read_committed consumer at offset {', '.join(map(str, offsets))} (op "
        f"{', '.join(map(str, polls))}), above offset {fence.offset}, where process "
        f"{fence.process} wrote value {fence.value} in a committed transaction (op "
        f"{fence.index}, ok at {secs(fence.time)}). Processes {w.process} and {fence.process} "
        f"ran on worker slot {slot} (process mod {slots}) and so used one transactional.id; "
        f"process {fence.process} took the slot after process {w.process} retired, and its "
        f"InitProducerId, done before that write, fenced process {w.process}'s producer epoch. "
        f"Process {w.process}'s record sits above that write in the partition, so it was "
        "appended after the fence, and a read_committed consumer returned it, so its "
        f"transaction committed: a fenced producer's write became visible. Rule: {rule}",
        {
            "value": v,
            "offsets": offsets,
            "writer": w.index,
            "fence": fence.index,
            "fence_offset": fence.offset,
            "slot": slot,
            "rule": rule,
        },
    )
