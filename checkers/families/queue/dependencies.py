"""The ww and wr dependency edges of each key, for the cycle search (checkers/families/cycles.py):
not an anomaly, so not a rule, but made the same way, a reference form and a vectorised one.

- ww: the writer of each value in a key's log precedes the writer of the value at the next
  offset that holds one (every value there, when an offset holds several).
- wr: the writer of a value precedes each op that polled it, once per (writer, reader).
"""

from __future__ import annotations

import numpy as np

from checkers.families.edges import WR_CODE, WW_CODE, Edge, EdgeArrays
from checkers.families.queue.arrays import ElemArrays
from checkers.families.queue.key_log import KeyLog
from checkers.families.queue.logs import Logs, runs
from checkers.scan.npsets import sort_rows


def reference(log: KeyLog) -> list[Edge]:
    k, out = log.key, []
    for r in range(1, len(log.offsets)):
        for v1 in log.values_at(r - 1):
            for v2 in log.values_at(r):
                w1, w2 = log.writer.get(v1), log.writer.get(v2)
                if w1 is not None and w2 is not None and w1.index != w2.index:
                    out.append(Edge("ww", w1.index, w2.index, k, v1, v2))
    seen: set[tuple[int, int]] = set()
    for e in log.elems:
        if e.kind != "poll" or e.value is None:
            continue
        w = log.writer.get(e.value)
        if w is None or w.index == e.index or (w.index, e.index) in seen:
            continue
        seen.add((w.index, e.index))
        out.append(Edge("wr", w.index, e.index, k, e.value))
    return out


def vectorised(logs: Logs) -> tuple[EdgeArrays, EdgeArrays, np.ndarray]:
    """(ww edges, wr edges, back spans): the edges kept apart, as the caller keeps them in
    parts (a join would copy millions of edges for nothing); the spans as `back_spans` gives
    them."""
    a = logs.a
    # ww: every value at one offset -> every value at the next offset of the same key.
    g_prev_same = np.r_[False, logs.g_kid[1:] == logs.g_kid[:-1]] if len(logs.g_kid) else []
    g_prev_same = np.asarray(g_prev_same, dtype=bool)
    nvals = np.bincount(logs.t_group, minlength=len(logs.g_ko)) if len(logs.t_group) else []
    nvals = np.asarray(nvals, dtype=np.int64)
    tg = logs.t_group
    rep = np.where(g_prev_same[tg], nvals[np.maximum(tg - 1, 0)], 0) if len(tg) else tg
    later = np.repeat(np.arange(len(tg)), rep)
    within = np.arange(len(later)) - np.repeat(np.cumsum(rep) - rep, rep)
    earlier = logs.g_first_t[tg[later] - 1] + within if len(later) else later
    w1, w2 = logs.writer(logs.t_kv[earlier]), logs.writer(logs.t_kv[later])
    keep = (w1 >= 0) & (w2 >= 0)
    keep &= a.index[np.maximum(w1, 0)] != a.index[np.maximum(w2, 0)]
    w1, w2, earlier, later = w1[keep], w2[keep], earlier[keep], later[keep]
    ww = EdgeArrays(
        np.full(len(w1), WW_CODE, dtype=np.int8),
        a.index[w1],
        a.index[w2],
        a.key[w1],
        a.value[logs.shown[logs.t_start[earlier]]],
        a.value[logs.shown[logs.t_start[later]]],
    )
    # wr: writer -> each op that polled its value, once per (writer, reader).
    polls, w = logs.polls, logs.poll_writer
    keep = (w >= 0) & (a.index[np.maximum(w, 0)] != a.index[polls])
    polls, w = polls[keep], w[keep]
    order = sort_rows(logs.kid[polls], a.index[w], a.index[polls])  # ties: row order
    polls, w = polls[order], w[order]
    first = runs(logs.kid[polls], a.index[w], a.index[polls])
    polls, w = polls[first], w[first]
    wr = EdgeArrays(
        np.full(len(w), WR_CODE, dtype=np.int8),
        a.index[w],
        a.index[polls],
        a.key[polls],
        a.value[polls],
        np.zeros(len(w), dtype=np.int64),
    )
    return ww, wr, back_spans(a, [(w1, w2), (w, polls)])


def back_spans(a: ElemArrays, pairs: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """[lo, hi] columns: for each edge (element rows src -> dst) from an op invoked at hi to an
    op invoked at lo <= hi, the span the cycle search must look in (cycles._windows). Made
    here, where the edges' ends are rows of one batch of keys: their invocation times are read
    from the batch's own small arrays, not from a table over the whole history (at 10M ops,
    27M random reads of a 160 MB table cost more than the rest of the search)."""
    spans = []
    for src, dst in pairs:
        hi, lo = a.invoke_time[src], a.invoke_time[dst]
        back = lo <= hi
        spans.append(np.stack([lo[back], hi[back]]))
    return np.concatenate(spans, axis=1)
