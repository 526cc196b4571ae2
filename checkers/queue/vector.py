"""The per-key queue checks as array passes over many keys at once.

Same semantics as `per_key.check_key` (the reference, kept for tests and explanations): every
rule there is one sort/diff/searchsorted pass here over all elements, sorted once by
(key, index, seq). Python objects are made only for the rows a finding quotes, with the
wording from `describe`, so findings are identical to the reference's.

Pairs (key, value) and (key, offset) become single int64s through dense ids: `kid * NV + vid`
with NV the number of distinct values; lookups go through `npsets.IdIndex`, a table indexed by
the id (or by vid, when the pair space is too large), not a binary search.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from concurrent.futures import Executor
from functools import cached_property

import numpy as np

from checkers.edges import WR_CODE, WW_CODE, EdgeArrays
from checkers.findings import Finding
from checkers.npsets import IdIndex, dense_ids, member, sort_rows
from checkers.queue import describe
from checkers.queue.arrays import ElemArrays
from checkers.queue.context import QueueContext, build_context
from checkers.queue.elem import FAIL, INFO, OK, Elem
from checkers.queue.fencing import fenced_reads_arrays
from history.format import UNDECLARED


def _take(rows: np.ndarray, j: np.ndarray) -> np.ndarray:
    """rows[j], -1 where j is -1."""
    if len(rows) == 0:
        return np.full(len(j), -1, dtype=np.int64)
    return np.where(j >= 0, rows[np.maximum(j, 0)], -1)


def _runs(*cols: np.ndarray) -> np.ndarray:
    """Start positions of runs of equal rows in the columns `cols`."""
    if len(cols[0]) == 0:
        return np.zeros(0, dtype=np.int64)
    change = np.zeros(len(cols[0]) - 1, dtype=bool)
    for x in cols:
        change |= x[1:] != x[:-1]
    return np.flatnonzero(np.r_[True, change])


class _Logs:
    """The version order of every key at once: offsets holding a value, ranked per key."""

    def __init__(self, a: ElemArrays, ctx: QueueContext) -> None:
        n = len(a)
        self.a = a
        self.kid = np.zeros(n, dtype=np.int64)
        if n:
            self.kid[1:] = np.cumsum(a.key[1:] != a.key[:-1])
        self.keys = a.key[_runs(a.key)]
        self.vals_u, vid = dense_ids(a.value, a.has_val)
        self.offs_u, oid = dense_ids(a.offset, a.has_off)
        nv, no = max(len(self.vals_u), 1), max(len(self.offs_u), 1)
        self.nv = nv
        nk = max(len(self.keys), 1)
        self.kv_space, self.ko_space = nk * nv, nk * no
        self.oid = np.where(a.has_off, oid, -1)
        self.kv = np.where(a.has_val, self.kid * nv + vid, -1)
        self.ko = np.where(a.has_off, self.kid * no + oid, -1)
        self.is_ok, self.is_info, self.is_fail = (a.is_type(t) for t in (OK, INFO, FAIL))
        self.poll, self.send = a.is_kind("poll"), a.is_kind("send")
        happened = np.fromiter(ctx.committed_info, dtype=np.int64, count=len(ctx.committed_info))
        self.committed = self.is_ok | (self.is_info & member(a.index, happened))

        # writer: the first send of each (key, value), in op order.
        ws = np.flatnonzero(self.send & a.has_val)
        ws = ws[np.argsort(self.kv[ws], kind="stable")]
        first = _runs(self.kv[ws])
        self.w_kv, self.w_row = self.kv[ws][first], ws[first]
        self.w_index = self.kv_index(self.w_kv)

        # at: distinct (key, offset, value) shown by a poll or a send that certainly happened.
        shown = np.flatnonzero(a.has_off & a.has_val & (self.poll | self.committed))
        shown = shown[sort_rows(self.ko[shown], self.kv[shown])]  # ties: row order
        self.shown = shown
        s_ko, s_kv = self.ko[shown], self.kv[shown]
        new_t = np.r_[True, (s_ko[1:] != s_ko[:-1]) | (s_kv[1:] != s_kv[:-1])] if len(shown) else []
        t_start = np.flatnonzero(new_t)
        self.t_start = t_start  # triple t is shown[t_start[t]:t_start[t+1]]
        self.t_ko, self.t_kv = s_ko[t_start], s_kv[t_start]
        g_first_t = _runs(self.t_ko)
        self.g_ko = self.t_ko[g_first_t]
        self.g_first_t = g_first_t
        self.t_group = np.cumsum(np.r_[True, self.t_ko[1:] != self.t_ko[:-1]])[: len(t_start)] - 1
        self.g_kid = self.kid[shown[t_start[g_first_t]]] if len(shown) else np.zeros(0, np.int64)
        self.g_off = a.offset[shown[t_start[g_first_t]]] if len(shown) else np.zeros(0, np.int64)
        self.k_first_g = np.searchsorted(self.g_kid, np.arange(len(self.keys)))
        self.g_rank = np.arange(len(self.g_ko)) - self.k_first_g[self.g_kid]
        self.t_rank = self.g_rank[self.t_group]

        # first/last rank of each (key, value).
        by_kv = np.argsort(self.t_kv, kind="stable")
        starts = _runs(self.t_kv[by_kv])
        self.f_kv = self.t_kv[by_kv][starts]
        self.f_first = (
            np.minimum.reduceat(self.t_rank[by_kv], starts) if len(starts) else np.zeros(0, int)
        )
        self.f_last = (
            np.maximum.reduceat(self.t_rank[by_kv], starts) if len(starts) else np.zeros(0, int)
        )
        self.f_places = np.diff(np.r_[starts, len(by_kv)])
        self.by_kv, self.f_starts = by_kv, starts

        # pos of every element: its offset's rank, else its value's first rank, else -1.
        rank = _take(self.g_rank, IdIndex(self.g_ko, self.ko_space, no).find(self.ko))
        self.f_of = self.kv_index(self.f_kv).find(self.kv)  # each row's (key, value): f index
        first_rank = _take(self.f_first, self.f_of)
        self.pos = np.where(rank >= 0, rank, first_rank)

    @cached_property
    def polls(self) -> np.ndarray:
        """Rows of polled values (read, edge and fencing rules all start from them)."""
        return np.flatnonzero(self.poll & self.a.has_val)

    @cached_property
    def poll_writer(self) -> np.ndarray:
        """The writer row of each of `polls`, -1 for a value nobody sent to the key."""
        return self.writer(self.kv[self.polls])

    def kv_index(self, kv: np.ndarray) -> IdIndex:
        return IdIndex(kv, self.kv_space, self.nv)

    def writer(self, kv: np.ndarray) -> np.ndarray:
        return _take(self.w_row, self.w_index.find(kv))

    def group_values(self, g: int) -> list[int]:
        end = self.g_first_t[g + 1] if g + 1 < len(self.g_first_t) else len(self.t_kv)
        return [int(v) for v in self.a.value[self.shown[self.t_start[self.g_first_t[g] : end]]]]

    def shown_by(self, t: int) -> list[int]:
        """Ops that showed triple t, deduplicated, in op order."""
        end = self.t_start[t + 1] if t + 1 < len(self.t_start) else len(self.shown)
        ops = self.a.index[np.sort(self.shown[self.t_start[t] : end])]
        return list(dict.fromkeys(int(i) for i in ops))


class _Skipped(Sequence[tuple[int, list[int]]]):
    """Records between two ranks of a key, built only as far as a finding quotes them."""

    def __init__(self, logs: _Logs, g0: int, count: int) -> None:
        self.logs, self.g0, self.count = logs, g0, count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i):  # type: ignore[no-untyped-def]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.count))]
        g = self.g0 + i
        return (int(self.logs.g_off[g]), self.logs.group_values(g))


class _KeyView:
    """describe.LogView for one key, answered from the arrays."""

    def __init__(self, logs: _Logs, kid: int, rows: dict[int, int]) -> None:
        self.logs, self.kid, self.key = logs, kid, int(logs.keys[kid])
        self.rows = rows  # id(Elem) -> element row

    def pos(self, e: Elem) -> int | None:
        p = int(self.logs.pos[self.rows[id(e)]])
        return None if p < 0 else p

    def between(self, r1: int, r2: int) -> _Skipped:
        return _Skipped(self.logs, int(self.logs.k_first_g[self.kid]) + r1 + 1, r2 - r1 - 1)


def vector_context(
    a: ElemArrays,
    resets: list[tuple[str, int, str, list[int] | None]],
    slots: int | None = None,
    after_abort: str = UNDECLARED,
) -> QueueContext:
    """Cross-key facts (which info sends happened) from the arrays of every element."""
    info = np.flatnonzero(a.is_kind("send") & a.is_type(INFO) & a.has_val)
    sends = list(zip(*(x[info].tolist() for x in (a.index, a.key, a.value)), strict=True))
    if not sends:
        return build_context([], [], resets, slots, after_abort)
    # Info sends are few and polls many: the polls are looked up among the info values.
    polls = np.flatnonzero(a.is_kind("poll") & a.has_val)
    polls = polls[member(a.value[polls], a.value[info])]
    polled = zip(a.key[polls].tolist(), a.value[polls].tolist(), strict=True)
    return build_context(sends, polled, resets, slots, after_abort)


# Elements per call of check_arrays: whole keys at a time, so that its temporaries stay small
# (reused memory, caches) however long the history; every rule is decided within one key. A
# batch's temporaries (about 250 bytes an element) must fit one of glibc's 64 MB per-thread
# heaps: a batch that overflows into a second heap frees it whole, and the next batch faults
# it in again (2^18: 34k faults at 1M ops, 2^17: 20k).
CHUNK = 1 << 17


def workers() -> int:
    """Threads for batches of keys: numpy and Arrow release the GIL in the passes that cost."""
    return max(1, min(4, os.cpu_count() or 1))


def check_by_keys(
    a: ElemArrays, ctx: QueueContext, pool: Executor | None = None
) -> tuple[list[Finding], list[EdgeArrays], np.ndarray]:
    """check_arrays over runs of whole keys of about CHUNK elements each (in `pool`, when
    given); the same findings, and the same edges in the same order (ww edges of every key,
    then wr edges, keys ascending) in parts that EdgeArrays.concat would join."""
    starts = _runs(a.key)
    # Batches of about CHUNK, as many as make every thread's share equal: at 1M ops, five
    # batches on two threads left one thread idle for a fifth of the checks.
    share = CHUNK * (workers() if pool is not None else 1)
    size = max(1, -(-len(a) // (-(-len(a) // share) * (share // CHUNK)))) if len(a) else 1
    bounds, lo = [], 0
    while True:  # one step per run: the first key starting `size` rows or more after lo
        at = int(np.searchsorted(starts, lo + size))
        if at >= len(starts):
            break
        bounds.append((lo, int(starts[at])))
        lo = int(starts[at])
    bounds.append((lo, len(a)))

    def one(bound: tuple[int, int]) -> tuple[list[Finding], EdgeArrays, EdgeArrays, np.ndarray]:
        return _check(a.slice(*bound), ctx)

    if len(bounds) == 1 or pool is None:
        results = [one(b) for b in bounds]
    else:
        results = list(pool.map(one, bounds))
    findings = [f for r in results for f in r[0]]
    spans = np.concatenate([r[3] for r in results], axis=1)
    return findings, [r[1] for r in results] + [r[2] for r in results], spans


def check_arrays(a: ElemArrays, ctx: QueueContext) -> tuple[list[Finding], EdgeArrays]:
    """Every queue anomaly of every key in `a`, and the ww/wr edges."""
    findings, ww, wr, _ = _check(a, ctx)
    return findings, EdgeArrays.concat([ww, wr])


def _check(
    a: ElemArrays, ctx: QueueContext
) -> tuple[list[Finding], EdgeArrays, EdgeArrays, np.ndarray]:
    """(findings, ww edges, wr edges, back spans): the edges kept apart, as the caller keeps
    them in parts (a join would copy millions of edges for nothing); the spans as
    `_back_spans` gives them."""
    if len(a) == 0:
        return [], EdgeArrays.empty(), EdgeArrays.empty(), np.zeros((2, 0), dtype=np.int64)
    logs = _Logs(a, ctx)
    findings: list[Finding] = []
    findings += _offset_anomalies(logs)
    findings += _read_anomalies(logs)
    for kind in ("poll", "send"):
        findings += _internal_order(logs, kind)
        findings += _process_order(logs, kind, ctx)
    findings += fenced_reads_arrays(logs, ctx.slots)
    return findings, *_edges(logs)


def _back_spans(a: ElemArrays, pairs: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
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


def _offset_anomalies(logs: _Logs) -> list[Finding]:
    out = []
    nvals = np.bincount(logs.t_group, minlength=len(logs.g_ko)) if len(logs.t_group) else []
    for g in np.flatnonzero(np.asarray(nvals) > 1):
        k = int(logs.keys[logs.g_kid[g]])
        ts = range(logs.g_first_t[g], logs.g_first_t[g] + int(nvals[g]))
        # Values in order of first appearance, as the reference's dict holds them.
        firsts = sorted(ts, key=lambda t: _first_row(logs, t))
        vals = {int(logs.a.value[logs.shown[logs.t_start[t]]]): logs.shown_by(t) for t in firsts}
        out.append(describe.inconsistent_offsets(k, int(logs.g_off[g]), vals))
    for f in np.flatnonzero(logs.f_places > 1):
        ts = logs.by_kv[logs.f_starts[f] : logs.f_starts[f] + logs.f_places[f]]
        ts = sorted(ts, key=lambda t: logs.t_rank[t])
        t0 = ts[0]
        kid = int(logs.g_kid[logs.t_group[t0]])
        v = int(logs.a.value[logs.shown[logs.t_start[t0]]])
        places = [(int(logs.g_off[logs.t_group[t]]), logs.shown_by(t)) for t in ts]
        out.append(describe.duplicate(int(logs.keys[kid]), v, places))
    return out


def _first_row(logs: _Logs, t: int) -> int:
    end = logs.t_start[t + 1] if t + 1 < len(logs.t_start) else len(logs.shown)
    return int(logs.shown[logs.t_start[t] : end].min())


def _read_anomalies(logs: _Logs) -> list[Finding]:
    a, out = logs.a, []
    polls, w = logs.polls, logs.poll_writer
    wc = np.maximum(w, 0)
    garbage = w < 0
    pre = ~garbage & (a.index[wc] == a.index[polls])
    g1a = ~garbage & ~pre & logs.is_fail[wc] & logs.is_ok[polls]
    for i in polls[garbage]:
        out.append(describe.garbage_read(int(a.key[i]), a.elem(i)))
    for i in polls[pre]:
        out.append(describe.precommitted_read(int(a.key[i]), a.elem(i)))
    for i, wi in zip(polls[g1a], w[g1a], strict=True):
        out.append(describe.g1a(int(a.key[i]), a.elem(i), a.elem(wi)))

    read_kv = logs.kv_index(logs.kv[polls])
    # The poll that read highest in each key (earliest op among ties): the lost-write bound.
    nk = len(logs.keys)
    q = polls[a.has_off[polls]]
    q = q[sort_rows(logs.kid[q], -logs.oid[q], a.index[q])]
    firsts = q[_runs(logs.kid[q])]
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
            describe.lost_write(
                int(logs.keys[kid]),
                int(a.value[wi]),
                a.elem(wi),
                a.elem(int(bound_row[kid])),
                int(logs.g_off[g]),
            )
        )

    sends = np.flatnonzero(logs.send & logs.is_ok & a.has_val)
    unseen = sends[~read_kv.contains(logs.kv[sends])]
    starts = _runs(logs.kid[unseen])
    for s, e in zip(starts, np.r_[starts[1:], len(unseen)][: len(starts)], strict=True):
        rows = unseen[s:e]
        kid = int(logs.kid[rows[0]])
        b = int(bound_row[kid])
        out.append(
            describe.unseen(
                int(logs.keys[kid]),
                [a.elem(i) for i in rows[:8]],
                a.value[rows].tolist(),
                a.elem(b) if b >= 0 else None,
            )
        )
    return out


def _flagged(logs: _Logs, first: np.ndarray, second: np.ndarray, skip: bool) -> np.ndarray:
    """Which pairs (first[j] then second[j]) are not adjacent in their key's log."""
    pa, pb = logs.pos[first], logs.pos[second]
    d = pb - pa
    bad = d < 1
    if skip:
        bad |= d > 1
    return (pa >= 0) & (pb >= 0) & bad


def _describe_pairs(
    logs: _Logs, kind: str, first: np.ndarray, second: np.ndarray, internal: bool
) -> list[Finding]:
    out = []
    for i, j in zip(first.tolist(), second.tolist(), strict=True):
        ea, eb = logs.a.elem(i), logs.a.elem(j)
        view = _KeyView(logs, int(logs.kid[i]), {id(ea): i, id(eb): j})
        pair = describe.internal_pair if internal else describe.process_pair
        found = pair(view, kind, ea, eb)
        if found is not None:
            out.append(found)
    return out


def _internal_order(logs: _Logs, kind: str) -> list[Finding]:
    a = logs.a
    rows = np.flatnonzero((logs.poll if kind == "poll" else logs.send) & a.has_val)
    x, y = rows[:-1], rows[1:]
    same = (logs.kid[x] == logs.kid[y]) & (a.index[x] == a.index[y])
    if kind == "poll":
        same &= ~a.rebalanced[x] & ~a.rebalanced[y]  # a rebalance may move the position
    bad = same & _flagged(logs, x, y, skip=True)
    return _describe_pairs(logs, kind, x[bad], y[bad], internal=True)


def _process_order(logs: _Logs, kind: str, ctx: QueueContext) -> list[Finding]:
    a = logs.a
    rows = np.flatnonzero((logs.poll if kind == "poll" else logs.send) & a.has_val)
    starts = _runs(logs.kid[rows], a.index[rows])
    op_first = rows[starts]
    op_last = rows[np.r_[starts[1:] - 1, len(rows) - 1]] if len(rows) else rows
    ok = logs.is_ok[op_first]
    if kind == "send":
        # A failed send never happened: it neither moves nor is compared.
        keep = ok | logs.is_info[op_first]
        op_first, op_last, ok = op_first[keep], op_last[keep], ok[keep]
    order = sort_rows(logs.kid[op_first], a.proc[op_first], a.index[op_first])
    if kind == "poll":
        i, j = _poll_pairs(logs, op_first[order], ok[order], ctx)
        p, c = order[i], order[j]
    else:
        p, c = order[:-1], order[1:]
        same = (logs.kid[op_first[p]] == logs.kid[op_first[c]]) & (
            a.proc[op_first[p]] == a.proc[op_first[c]]
        )
        p, c = p[same], c[same]
    x, y = op_last[p], op_first[c]
    bad = _flagged(logs, x, y, skip=kind == "poll")
    x, y = x[bad], y[bad]
    # Resets are rare: consult them only for the pairs that would be reported.
    keep = [
        not ctx.reset_between(
            str(a.proc_names[a.proc[i]]), int(a.key[i]), int(a.index[i]), int(a.index[j]), kind
        )
        for i, j in zip(x.tolist(), y.tolist(), strict=True)
    ]
    keep_arr = np.array(keep, dtype=bool)
    return _describe_pairs(logs, kind, x[keep_arr], y[keep_arr], internal=False)


def _poll_pairs(
    logs: _Logs, first: np.ndarray, ok: np.ndarray, ctx: QueueContext
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
    starts = _runs(logs.kid[first], a.proc[first])
    group_start = np.repeat(starts, np.diff(np.r_[starts, n]))
    valid = ref >= group_start
    valid[valid] &= ok[ref[valid]]
    return ref[valid], at[valid]


def _edges(logs: _Logs) -> tuple[EdgeArrays, EdgeArrays, np.ndarray]:
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
    first = _runs(logs.kid[polls], a.index[w], a.index[polls])
    polls, w = polls[first], w[first]
    wr = EdgeArrays(
        np.full(len(w), WR_CODE, dtype=np.int8),
        a.index[w],
        a.index[polls],
        a.key[polls],
        a.value[polls],
        np.zeros(len(w), dtype=np.int64),
    )
    return ww, wr, _back_spans(a, [(w1, w2), (w, polls)])
