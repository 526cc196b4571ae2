"""What polls returned against what was sent, per key:

- `garbage-read`: a poll returned a value nobody sent to that key, nor to any other.
- `read-from-other-partition`: a poll of key k' returned a value that was sent to another key
  k, and to k' by nobody. Keys are partitions (the queue workload sends key k to partition k),
  so a record of partition k came back from a fetch of partition k'. Decided after the per-key
  forms, by `attribute_elsewhere`: a garbage read's value is looked up among every key's sends
  (each engine answers `sends_among` from its own form of the elements, context.ElementFacts),
  and a value some op sent to another key is this finding instead. Only where values are unique
  in the whole run (kchaos's histories; Jepsen's values are unique per key only, so a value
  equal to one sent to another key proves nothing there, and stays a garbage read).
- `precommitted-read`: an op polled a value it sent itself, in the same transaction.
- `G1a`: an ok poll returned the value of a failed send.
- `lost-write`: a send that certainly happened, at or below the highest offset any poll
  returned, was never returned by any poll.
- `unseen` (unknown, not a failure): acknowledged sends never polled: lost, or no consumer
  caught up before the run ended.
"""

from __future__ import annotations

import numpy as np

from checkers.core.findings import Finding, secs
from checkers.families.queue.context import ElementFacts, QueueContext
from checkers.families.queue.elem import FAIL, OK, Elem
from checkers.families.queue.key_log import KeyLog
from checkers.families.queue.logs import Logs, runs
from checkers.scan.npsets import sort_rows

KINDS = (
    "garbage-read",
    "precommitted-read",
    "G1a",
    "lost-write",
    "unseen",
    "read-from-other-partition",
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


def _sent(w: Elem) -> str:
    if w.type == OK:
        return f"acknowledged at offset {w.offset} (op {w.index}, ok at {secs(w.time)})"
    outcome = {"info": "timed out (info)", "fail": "failed"}.get(w.type, "never completed")
    return f"in op {w.index}, which {outcome}"


def read_from_other_partition(
    k: int, poll: int, offset: int | None, v: int, sent_key: int, w: Elem
) -> Finding:
    """Op `poll` read `v` from key `k` at `offset`; `w`, the send of `v`, went to `sent_key`."""
    at = f"at offset {offset}" if offset is not None else "(offset unknown)"
    return Finding(
        "read-from-other-partition",
        k,
        tuple(sorted({w.index, poll})),
        f"op {poll} polled value {v} from key {k} (partition {k}) {at}, but value {v} was "
        f"sent to key {sent_key} (partition {sent_key}), {_sent(w)}, and no operation sent it "
        f"to key {k}: a record of partition {sent_key} was returned by a fetch of partition "
        f"{k}. Every value is sent once in the run, so that send is the record read",
        {
            "value": v,
            "offset": offset,
            "sent_key": sent_key,
            "sent_offset": w.offset,
            "writer": w.index,
            "reader": poll,
        },
    )


def attribute_elsewhere(findings: list[Finding], facts: ElementFacts) -> list[Finding]:
    """`findings` (every key's, in Finding.sort_key order) with each `garbage-read` whose value
    some op sent to another key made a `read-from-other-partition`, in the same order. For
    histories whose values are unique in the run; `facts` answers from the engine's own form
    of the elements, so every engine attributes the same sends."""
    garbage = [f for f in findings if f.kind == "garbage-read" and f.data.get("value") is not None]
    if not garbage:
        return findings
    sent: dict[int, list[tuple[int, Elem]]] = {}
    for key, w in facts.sends_among(sorted({f.data["value"] for f in garbage})):
        if w.value is not None:
            sent.setdefault(w.value, []).append((key, w))
    out = []
    for f in findings:
        elsewhere = (
            [(w.index, key, w) for key, w in sent.get(f.data.get("value"), ()) if key != f.key]
            if f.kind == "garbage-read" and f.key is not None
            else []
        )
        if elsewhere:
            # The value's first send (kchaos sends each value once; ties by key).
            _, key, w = min(elsewhere, key=lambda t: (t[0], t[1], t[2].seq))
            # Never tolerated (queue/policy.py), as the garbage read it replaces.
            f = read_from_other_partition(
                f.key, f.ops[0], f.data["offset"], f.data["value"], key, w
            )
        out.append(f)
    return sorted(out, key=Finding.sort_key)


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


# -- the reference, one key ------------------------------------------------------------------


def reference(log: KeyLog, ctx: QueueContext) -> list[Finding]:
    k, out = log.key, []
    polls = [e for e in log.elems if e.kind == "poll" and e.value is not None]
    read_values = {e.value for e in polls}
    for e in polls:
        w = log.writer.get(e.value)
        if w is None:
            out.append(garbage_read(k, e))
        elif w.index == e.index:
            out.append(precommitted_read(k, e))
        elif w.type == FAIL and e.type == OK:
            out.append(g1a(k, e, w))

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
            if w is None or not log.committed(w):
                continue
            out.append(lost_write(k, v, w, bound_elem, log.offsets[last]))

    # unseen: acknowledged, never polled. Lost, or consumers never caught up: we cannot tell.
    never = [
        e
        for e in log.elems
        if e.kind == "send" and e.type == OK and e.value not in read_values and e.value is not None
    ]
    if never:
        out.append(unseen(k, never[:8], [e.value for e in never], bound_elem))
    return out


# -- the same over the arrays of many keys -------------------------------------------------


def vectorised(logs: Logs, ctx: QueueContext) -> list[Finding]:
    a, out = logs.a, []
    polls, w = logs.polls, logs.poll_writer
    wc = np.maximum(w, 0)
    garbage = w < 0
    pre = ~garbage & (a.index[wc] == a.index[polls])
    aborted = ~garbage & ~pre & logs.is_fail[wc] & logs.is_ok[polls]
    for i in polls[garbage]:
        out.append(garbage_read(int(a.key[i]), a.elem(i)))
    for i in polls[pre]:
        out.append(precommitted_read(int(a.key[i]), a.elem(i)))
    for i, wi in zip(polls[aborted], w[aborted], strict=True):
        out.append(g1a(int(a.key[i]), a.elem(i), a.elem(wi)))

    read_kv = logs.kv_index(logs.kv[polls])
    # The poll that read highest in each key (earliest op among ties): the lost-write bound.
    nk = len(logs.keys)
    q = polls[a.has_off[polls]]
    q = q[sort_rows(logs.kid[q], -logs.oid[q], a.index[q])]
    firsts = q[runs(logs.kid[q])]
    bound_row = np.full(nk, -1, dtype=np.int64)
    bound_row[logs.kid[firsts]] = firsts
    bound_rank = np.full(nk, -1, dtype=np.int64)
    bound_rank[logs.kid[firsts]] = logs.pos[firsts]

    f_kid = logs.f_kv // logs.nv
    w = logs.writer(logs.f_kv)
    lost = (
        (bound_row[f_kid] >= 0)
        & (logs.f_last <= bound_rank[f_kid])
        & ~read_kv.contains(logs.f_kv)
        & (w >= 0)
        & logs.committed[np.maximum(w, 0)]
    )
    for f in np.flatnonzero(lost):
        kid = int(f_kid[f])
        g = int(logs.k_first_g[kid] + logs.f_last[f])
        wi = int(w[f])
        out.append(
            lost_write(
                int(logs.keys[kid]),
                int(a.value[wi]),
                a.elem(wi),
                a.elem(int(bound_row[kid])),
                int(logs.g_off[g]),
            )
        )

    sends = np.flatnonzero(logs.send & logs.is_ok & a.has_val)
    never = sends[~read_kv.contains(logs.kv[sends])]
    starts = runs(logs.kid[never])
    for s, e in zip(starts, np.r_[starts[1:], len(never)][: len(starts)], strict=True):
        rows = never[s:e]
        kid = int(logs.kid[rows[0]])
        b = int(bound_row[kid])
        out.append(
            unseen(
                int(logs.keys[kid]),
                [a.elem(i) for i in rows[:8]],
                a.value[rows].tolist(),
                a.elem(b) if b >= 0 else None,
            )
        )
    return out
