"""Elle-style dependency cycles over queue operations: G0 and G1c, with -process and -realtime.

Edges between operations (as in Jepsen's Kafka checker, no rw edges):
- ww: A sent v1 to key k, B sent v2, and v2 directly follows v1 in k's log (offset order).
- wr: A sent v to k and B polled it.
- process: A and then B ran on the same process.
- realtime: A completed (ok or fail) before B was invoked.

Which cycles are anomalies in Kafka (kinds as Elle names them: G0 is a cycle of ww edges, G1c
one of ww and wr edges with at least one wr; their -process variants allow process edges too
and need one, their -realtime variants allow process and realtime edges and need a realtime
one):
- G0, G0-process, G0-realtime: Kafka does not isolate writes, and a transaction's sends to
  different partitions happen at different times; Jepsen tolerates all of them. They are
  reported, tolerated.
- G1c, G1c-process, G1c-realtime over wr edges (plus process/realtime) only: failures. Every
  such edge A -> B implies that A's commit (or its send becoming visible) precedes B's commit
  in real time, under read_committed, so such a cycle cannot happen.
- The same kinds over cycles that need a ww edge: expected, reported tolerated. A ww edge
  orders two sends in a partition, not their transactions' commits: T1 sends v1 to k, T2 sends
  v2 after it to k and commits, T1 polls T2's write of another key and commits (T1 <ww T2 <wr
  T1). Jepsen tolerates G1c whenever it infers ww edges; here only the cycles that need one
  are tolerated.
  Both are searched, the wr-only one first; a component of the graph with ww edges that holds
  a reported wr-only cycle of the same kind is not reported again (the failure says it all),
  any other component gets its shortest cycle found, which then needs a ww edge.

Search: strongly connected components first, then in each component one short cycle holding
the edge types the anomaly needs. Realtime order goes through a chain of time nodes (op ->
its completion time -> later times -> ops invoked after), linear in the history, collapsed back
to single realtime edges when a cycle is explained.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import networkx as nx
import numpy as np
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import connected_components

from checkers.core.findings import Finding, secs
from checkers.families.edges import Edge, EdgeArrays, SpilledEdges
from checkers.scan.npsets import member, runs_within, sort_rows, unique_sorted
from checkers.scan.op_arrays import OpArrays, OpInfo

WW, WR, PROCESS, REALTIME = "ww", "wr", "process", "realtime"


@dataclass(frozen=True)
class Spec:
    kind: str
    allowed: frozenset[str]
    required: tuple[str, ...]
    tolerated: str | None
    # Searched before this spec, on a subgraph of its graph: a component of this spec's graph
    # that holds a cycle `narrower` reported is not reported again.
    narrower: Spec | None = None


_G0_REASON = (
    "Kafka does not isolate writes: transactions' sends interleave, and one transaction's "
    "sends to different partitions happen at different times (Jepsen tolerates G0)"
)
_WW_REASON = (
    "the cycle needs a ww edge, which orders two transactions' sends, not their commits: a "
    "transaction's send can land before another's in a partition although it commits after "
    "that one, having polled its writes meanwhile (Kafka does not isolate writes; Jepsen "
    "tolerates G1c when it infers ww edges)"
)
_G1C = Spec("G1c", frozenset({WR}), (WR,), None)
_G1C_PROCESS = Spec("G1c-process", frozenset({WR, PROCESS}), (WR, PROCESS), None)
_G1C_REALTIME = Spec("G1c-realtime", frozenset({WR, PROCESS, REALTIME}), (WR, REALTIME), None)
SPECS = (
    Spec("G0", frozenset({WW}), (WW,), _G0_REASON),
    Spec("G0-process", frozenset({WW, PROCESS}), (PROCESS,), _G0_REASON),
    Spec("G0-realtime", frozenset({WW, PROCESS, REALTIME}), (REALTIME,), _G0_REASON),
    _G1C,
    _G1C_PROCESS,
    _G1C_REALTIME,
    # The same kinds with ww edges allowed too, searched where the narrower spec reported
    # nothing. Every cycle found there needs a ww edge: a cycle of the required types over the
    # narrower spec's edges alone would lie inside one of its components, where the search
    # finds a cycle (it does in every component holding an edge of each required type).
    Spec("G1c", frozenset({WW, WR}), (WR,), _WW_REASON, _G1C),
    Spec("G1c-process", frozenset({WW, WR, PROCESS}), (WR, PROCESS), _WW_REASON, _G1C_PROCESS),
    Spec(
        "G1c-realtime",
        frozenset({WW, WR, PROCESS, REALTIME}),
        (WR, REALTIME),
        _WW_REASON,
        _G1C_REALTIME,
    ),
)


def op_infos(cols: dict[str, list[Any]]) -> list[OpInfo]:
    """From queue op rows as columns (index, invoke_index, type, process, time)."""
    index, inv, typ, proc, time = (
        cols["index"], cols["invoke_index"], cols["type"], cols["process"], cols["time"],
    )  # fmt: skip
    times = dict(zip(index, time, strict=True))
    completed = {inv[i] for i in range(len(index)) if typ[i] != "invoke"}
    out = []
    for i in range(len(index)):
        if typ[i] == "invoke":
            if index[i] not in completed:
                out.append(OpInfo(index[i], str(proc[i]), "info", time[i], None))
            continue
        done = None if typ[i] == "info" else time[i]
        out.append(OpInfo(index[i], str(proc[i]), str(typ[i]), times[inv[i]], done))
    return out


class DependencyGraph:
    def __init__(self, edges: Iterable[Edge], ops: list[OpInfo]) -> None:
        self.ops = {o.index: o for o in ops}
        self.data: dict[tuple[int, int, str], Edge] = {}
        self.base = nx.DiGraph()
        for e in edges:
            self.data.setdefault((e.src, e.dst, e.rel), e)
            self._link(self.base, e.src, e.dst, e.rel)
        for a, b in self._process_pairs():
            self._link(self.base, a, b, PROCESS)

    @staticmethod
    def _link(g: nx.DiGraph, a: Any, b: Any, rel: str) -> None:
        if g.has_edge(a, b):
            g[a][b]["rels"].add(rel)
        else:
            g.add_edge(a, b, rels={rel})

    def _process_pairs(self) -> list[tuple[int, int]]:
        by_process: dict[str, list[int]] = {}
        for o in sorted(self.ops.values(), key=lambda o: o.index):
            by_process.setdefault(o.process, []).append(o.index)
        return [(a, b) for ixs in by_process.values() for a, b in pairwise(ixs)]

    def restricted(self, allowed: frozenset[str]) -> nx.DiGraph:
        g = nx.DiGraph()
        for a, b, d in self.base.edges(data=True):
            rels = d["rels"] & allowed
            if rels:
                g.add_edge(a, b, rels=set(rels))
        if REALTIME in allowed:
            self._add_time_chain(g)
        return g

    def _add_time_chain(self, g: nx.DiGraph) -> None:
        """Reachability a ~> b through time nodes iff a completed before b was invoked."""
        done = sorted({o.complete_time for o in self.ops.values() if o.complete_time is not None})
        for t1, t2 in pairwise(done):
            g.add_edge(("t", t1), ("t", t2), rels={REALTIME})
        for o in self.ops.values():
            if o.complete_time is not None:
                g.add_edge(o.index, ("t", o.complete_time), rels={REALTIME})
            i = bisect_left(done, o.invoke_time) - 1  # the latest completion strictly before
            if i >= 0:
                g.add_edge(("t", done[i]), o.index, rels={REALTIME})


def _collapse(g: nx.DiGraph, walk: list[Any]) -> list[tuple[int, int, set[str]]]:
    """A closed walk (first == last) as op-to-op steps, time-node runs becoming realtime."""
    # Rotate so that the walk starts at an op.
    start = next(i for i, n in enumerate(walk[:-1]) if not isinstance(n, tuple))
    walk = walk[start:-1] + walk[: start + 1]
    steps, prev, through_time = [], walk[0], False
    for a, b in pairwise(walk):
        if isinstance(b, tuple):
            through_time = True
            continue
        rels = {REALTIME} if through_time else set(g[a][b]["rels"])
        steps.append((prev, b, rels))
        prev, through_time = b, False
    return steps


def _find_cycle(g: nx.DiGraph, scc: set[Any], spec: Spec, tries: int = 8) -> list | None:
    sub = g.subgraph(scc)
    best = None
    candidates = {rel: [] for rel in spec.required}
    for a, b, d in sub.edges(data=True):
        for rel in spec.required:
            if rel in d["rels"] and len(candidates[rel]) < tries:
                candidates[rel].append((a, b))
    first, *others = spec.required
    for a, b in candidates[first]:
        walk = [a, *nx.shortest_path(sub, b, a)]
        steps = _collapse(sub, walk)
        have = set().union(*(s[2] for s in steps))
        for rel in others:
            if rel in have:
                continue
            # Detour through an edge of the missing type: a -> b ~> c -> d ~> a.
            if not candidates[rel]:
                return None
            c, d = candidates[rel][0]
            walk = [a, *nx.shortest_path(sub, b, c), *nx.shortest_path(sub, d, a)]
            steps = _collapse(sub, walk)
        complete = all(any(rel in s[2] for s in steps) for rel in spec.required)
        if complete and (best is None or len(steps) < len(best)):
            best = steps
    return best


def _explain_step(graph: DependencyGraph, a: int, b: int, rels: set[str]) -> str:
    for rel in (WR, WW, PROCESS, REALTIME):
        if rel not in rels:
            continue
        e = graph.data.get((a, b, rel))
        if rel == WR and e is not None:
            return f"op {a} sent value {e.value} to key {e.key}, which op {b} polled (wr)"
        if rel == WW and e is not None:
            return (
                f"op {a} sent value {e.value} to key {e.key}, and op {b} sent {e.value2}, "
                "the next record of that partition (ww)"
            )
        if rel == PROCESS:
            return f"op {a} and then op {b} ran on process {graph.ops[a].process} (process)"
        if rel == REALTIME:
            oa, ob = graph.ops[a], graph.ops[b]
            return (
                f"op {a} completed at {secs(oa.complete_time)}, before op {b} was invoked "
                f"at {secs(ob.invoke_time)} (realtime)"
            )
    raise AssertionError(f"no explanation for {a}->{b} {rels}")


_SLICE = 1 << 20


def _lookup(table: np.ndarray, ix: np.ndarray, missing: int) -> np.ndarray:
    """table[ix], `missing` where ix is outside the table."""
    if len(ix) == 0 or (int(ix.min()) >= 0 and int(ix.max()) < len(table)):
        return table[ix]  # the usual case: one gather, not three passes
    inside = (ix >= 0) & (ix < len(table))
    return np.where(inside, table[np.where(inside, ix, 0)], missing)


def _windows(
    parts: Sequence[EdgeArrays], ops: OpArrays, back_spans: np.ndarray | None = None
) -> list[tuple[int, int]]:
    """Invocation-time intervals that hold every cycle, merged; usually none.

    Give each op the potential "its invocation time" (a time node: its time). Process and
    realtime edges go strictly forward, so a cycle needs edges that do not: to cross any time x
    inside the cycle's span and come back, some edge must go from after x to at or before x.
    Every cycle therefore lies inside the merged windows [potential(dst), potential(src)] of
    such edges, and only those windows are searched. All of it is array passes: a history of
    millions of ops usually has no window at all, and then no graph is ever built.
    """
    if back_spans is None:
        los, his = _back_edges(parts, ops)
    else:
        los, his = [back_spans[0]], [back_spans[1]]
    _op_spans(ops, los, his)
    if not los:
        return []
    lo, hi = np.concatenate(los), np.concatenate(his)
    if len(lo) == 0:
        return []
    order = np.lexsort((hi, lo))
    lo, hi = lo[order], hi[order]
    reach = np.maximum.accumulate(hi)
    starts = np.flatnonzero(np.r_[True, lo[1:] > reach[:-1]])
    ends = np.r_[starts[1:], len(lo)] - 1
    return list(zip(lo[starts].tolist(), reach[ends].tolist(), strict=True))


def _op_spans(ops: OpArrays, los: list[np.ndarray], his: list[np.ndarray]) -> None:
    """The (lo, hi) spans the ops alone give, appended to `los` and `his`: an op completed at
    or before its invocation time (op -> its completion's time node goes back in time), and
    two ops of one process in a row whose later one was invoked at or before the earlier.

    Ops are kept in index order (OpArrays): then a slice at a time, each slice's ops ordered
    by (process, index) with a stable radix sort by process code alone, and each process's
    last op carried to the next slice; no temporary is as long as the history (at 100M ops a
    sort of every op at once was 2 GB of them). Ops in another order are sorted whole."""
    n = len(ops)
    in_order = _in_index_order(ops)
    procs = len(ops.proc_names)
    if not in_order:
        run = sort_rows(ops.proc, ops.index)
        slices = [(ops.proc[run], ops.invoke_time[run], ops.complete_time[run])]
    else:
        slices = (
            (ops.proc[lo : lo + _SLICE], ops.invoke_time[lo : lo + _SLICE],
             ops.complete_time[lo : lo + _SLICE])
            for lo in range(0, n, _SLICE)
        )  # fmt: skip
    last = np.zeros(max(procs, 1), dtype=np.int64)  # each process's last invocation time
    seen = np.zeros(max(procs, 1), dtype=bool)
    for proc, t, done in slices:
        early = (done >= 0) & (done <= t)
        los.append(done[early])
        his.append(t[early])
        if in_order:
            run = np.argsort(proc.astype(np.int16) if procs < 1 << 15 else proc, kind="stable")
            p, t = proc[run], t[run]
        else:
            p = proc
        first = np.r_[True, p[1:] != p[:-1]] if len(p) else np.zeros(0, dtype=bool)
        back = ~first[1:] & (t[1:] <= t[:-1])
        los.append(t[1:][back])
        his.append(t[:-1][back])
        # Across slices: each process's last op before, then its first op here.
        starts = np.flatnonzero(first)
        fp, ft = p[starts], t[starts]
        cross = seen[fp] & (ft <= last[fp])
        los.append(ft[cross])
        his.append(last[fp][cross])
        ends = np.r_[starts[1:] - 1, len(p) - 1] if len(p) else starts
        last[p[ends]] = t[ends]
        seen[p[ends]] = True


def _in_index_order(ops: OpArrays) -> bool:
    """Are the ops in ascending index order (as OpArrays keeps them)? A slice at a time."""
    x, n = ops.index, len(ops) - 1  # pairs (i, i + 1) for i < n
    return all(
        bool(np.all(x[lo + 1 : min(lo + _SLICE, n) + 1] > x[lo : min(lo + _SLICE, n)]))
        for lo in range(0, max(n, 0), _SLICE)
    )


def _back_edges(parts: Sequence[EdgeArrays], ops: OpArrays) -> tuple[list[Any], list[Any]]:
    """(lo, hi) parts: the invocation times of each edge's ends, where the edge goes from an op
    invoked at hi to one invoked at lo <= hi."""
    # History indices are dense, so a direct table maps an op index to its invocation time:
    # one gather per edge end instead of a binary search. Edges go in slices, so that the
    # temporaries are small and reused rather than fresh memory for every one of millions.
    unknown = np.iinfo(np.int64).min
    inv_of = np.full(int(ops.index.max()) + 1 if len(ops) else 1, unknown, dtype=np.int64)
    inv_of[ops.index] = ops.invoke_time
    los, his = [], []
    for edges in parts:
        for lo in range(0, len(edges), _SLICE):
            a = _lookup(inv_of, edges.src[lo : lo + _SLICE], unknown)
            b = _lookup(inv_of, edges.dst[lo : lo + _SLICE], unknown)
            back = (a != unknown) & (b != unknown) & (b <= a)
            los.append(b[back])
            his.append(a[back])
    return los, his


def find_cycles(
    edges: EdgeArrays | Sequence[EdgeArrays] | Iterable[Edge],
    ops: OpArrays | list[OpInfo],
    back_spans: np.ndarray | None = None,
) -> list[Finding]:
    """Cycles among queue ops; edges as arrays, or in parts (QueueResult.edge_parts: a streamed
    check's are on disk, SpilledEdges), and ops as arrays (objects are accepted, for tests).
    `back_spans`: QueueResult.back_spans, when the checks made them (else they are found here
    from the edges)."""
    parts: Sequence[EdgeArrays]
    if isinstance(edges, EdgeArrays):
        parts = [edges]
    elif isinstance(edges, SpilledEdges):
        parts = edges
    else:
        items = list(edges)
        parts = items if all(isinstance(e, EdgeArrays) for e in items) else []
        parts = parts or [EdgeArrays.from_edges(items)]
    if not isinstance(ops, OpArrays):
        ops = OpArrays.from_infos(ops)
    windows = _windows(parts, ops, back_spans)
    if not windows:
        return []
    lo, hi = (np.array(x, dtype=np.int64) for x in zip(*windows, strict=True))
    rows_of = _row_finder(ops)
    # Edges held in memory are searched all at once. Edges on disk (a streamed check's: the
    # history was too big to hold) are searched a group of windows at a time, each group's
    # edges read from the parts anew: in a real history most ops lie in some window (73-99% in
    # kchaos's runs: a poll invoked before the send it reads goes back in time), and the edges
    # of every window at once would be nearly all of them.
    groups = [(0, len(lo))]
    if isinstance(parts, SpilledEdges):
        groups = _window_groups(ops, lo, hi, WINDOW_GROUP_OPS)
    findings = []
    for g0, g1 in groups:
        findings += _search_windows(parts, ops, lo[g0:g1], hi[g0:g1], rows_of)
    return sorted(findings, key=Finding.sort_key)


# Ops in the windows one group of a streamed check's cycle search holds at once (their edges
# are read from disk for each group): about 1 GB of edges and ops.
WINDOW_GROUP_OPS = 1 << 24


def _window_of(lo: np.ndarray, hi: np.ndarray, t: np.ndarray) -> np.ndarray:
    """The window each invocation time lies in, -1 for none (windows [lo, hi], ascending and
    disjoint)."""
    w = np.searchsorted(lo, t, side="right") - 1
    return np.where((w >= 0) & (t <= hi[np.maximum(w, 0)]), w, -1)


def _window_groups(
    ops: OpArrays, lo: np.ndarray, hi: np.ndarray, most: int
) -> list[tuple[int, int]]:
    """Runs of consecutive windows holding at most `most` ops each (a window holding more is
    a run alone), as (first, end) window numbers; the ops counted a slice at a time."""
    counts = np.zeros(len(lo), dtype=np.int64)
    for s0 in range(0, len(ops), _SLICE):
        w = _window_of(lo, hi, ops.invoke_time[s0 : s0 + _SLICE])
        counts += np.bincount(w[w >= 0], minlength=len(lo))
    return runs_within(counts, most)


def _search_windows(
    parts: Sequence[EdgeArrays],
    ops: OpArrays,
    lo: np.ndarray,
    hi: np.ndarray,
    rows_of: Callable[[np.ndarray], np.ndarray],
) -> list[Finding]:
    """The cycles inside the windows [lo, hi] (ascending, disjoint)."""
    # The ops inside a window, a slice at a time, then each edge with both ends in one window:
    # one pass over the edges, however many windows, a part at a time (a streamed check's
    # edges are read from disk part by part, and only those inside a window are kept).
    op_rows, op_w = [], []
    for s0 in range(0, len(ops), _SLICE):
        w = _window_of(lo, hi, ops.invoke_time[s0 : s0 + _SLICE])
        inside = np.flatnonzero(w >= 0)
        op_rows.append(inside + s0)
        op_w.append(w[inside])
    rows_in = np.concatenate(op_rows) if op_rows else np.zeros(0, dtype=np.int64)
    rows_w = np.concatenate(op_w) if op_w else np.zeros(0, dtype=np.int64)

    def end_window(ix: np.ndarray) -> np.ndarray:
        rows = rows_of(ix)
        return np.where(rows >= 0, _window_of(lo, hi, ops.invoke_time[np.maximum(rows, 0)]), -1)

    kept, kept_w = [], []
    for part in parts:
        ws, wd = end_window(part.src), end_window(part.dst)
        inside = np.flatnonzero((ws >= 0) & (ws == wd))
        kept.append(part.take(inside))
        kept_w.append(ws[inside])
    ew = np.concatenate(kept_w) if kept_w else np.zeros(0, dtype=np.int64)
    by_window = np.argsort(ew, kind="stable")
    edges, ew = EdgeArrays.concat(kept).take(by_window), ew[by_window]
    e_bounds = np.searchsorted(ew, np.arange(len(lo) + 1))
    by_op = np.lexsort((ops.index[rows_in], rows_w))  # by window, then index
    op_rows_sorted, op_windows = rows_in[by_op], rows_w[by_op]
    o_bounds = np.searchsorted(op_windows, np.arange(len(lo) + 1))
    findings = []
    for i in range(len(lo)):
        rows = op_rows_sorted[o_bounds[i] : o_bounds[i + 1]]
        local = edges.take(slice(e_bounds[i], e_bounds[i + 1]))
        rows = _in_cycles(local, ops, rows)
        if len(rows) < 2:
            continue
        local = local.take(np.flatnonzero(member(local.src, ops.index[rows])))
        local = local.take(np.flatnonzero(member(local.dst, ops.index[rows])))
        findings += search_cycles(DependencyGraph(local.to_edges(), ops.infos(rows)))
    return findings


def _row_finder(ops: OpArrays) -> Callable[[np.ndarray], np.ndarray]:
    """A function giving the row of each op index it is given, -1 for none: ops are kept in
    index order (OpArrays), so a binary search, with no sort of millions of indices per call."""
    if len(ops) == 0:
        return lambda ix: np.full(len(ix), -1, dtype=np.int64)
    if _in_index_order(ops):
        order, s = None, ops.index
    else:
        order = np.argsort(ops.index, kind="stable")
        s = ops.index[order]

    def rows_of(ix: np.ndarray) -> np.ndarray:
        pos = np.minimum(np.searchsorted(s, ix), len(s) - 1)
        return np.where(s[pos] == ix, pos if order is None else order[pos], -1)

    return rows_of


def _in_cycles(edges: EdgeArrays, ops: OpArrays, rows: np.ndarray) -> np.ndarray:
    """The ops of `rows` that share a strongly connected component with another op in the
    widest graph, every edge type at once (scipy, on arrays: linear, no Python per op).

    Every spec's graph is a subgraph of that one, so each of its components lies inside one of
    the widest graph's: only the ops kept here can lie on a cycle of any spec (a cycle needing
    both ww and wr edges lies in no component of the ww or the wr graph alone). Searching just
    them finds the same components: any op on a path between two ops of a component is itself
    in it, so nothing a cycle needs is dropped; dropped ops between two kept ops of one process
    leave the edge "a and then c ran on process p", true, and reachability through time is
    unchanged. networkx then builds graphs of only these ops (a real concurrent history can
    have windows of millions of ops with few or no cycles)."""
    m = len(rows)
    if m < 2:
        return rows[:0]
    ix = ops.index[rows]
    inv, done = ops.invoke_time[rows], ops.complete_time[rows]
    # Process order: rows are in index order, so a stable sort by process code alone.
    by_proc = np.argsort(ops.proc[rows], kind="stable")
    same = ops.proc[rows][by_proc[1:]] == ops.proc[rows][by_proc[:-1]]
    p_src, p_dst = by_proc[:-1][same], by_proc[1:][same]
    # Realtime through time nodes m + j, one per distinct completion time (as _add_time_chain).
    times = unique_sorted(done[done >= 0])
    has = np.flatnonzero(done >= 0)
    before = np.searchsorted(times, inv, side="left") - 1
    after = np.flatnonzero(before >= 0)
    t_src = np.r_[has, m + np.arange(len(times) - 1), m + before[after]]
    t_dst = np.r_[m + np.searchsorted(times, done[has]), m + np.arange(1, len(times)), after]
    src = np.r_[np.searchsorted(ix, edges.src), p_src, t_src]
    dst = np.r_[np.searchsorted(ix, edges.dst), p_dst, t_dst]
    n = m + len(times)
    # int32: duplicate edges are summed, and 256 parallel edges in int8 would wrap to 0.
    graph = csr_matrix((np.ones(len(src), dtype=np.int32), (src, dst)), shape=(n, n))
    _, labels = connected_components(graph, directed=True, connection="strong")
    op_labels = labels[:m]
    return rows[np.bincount(op_labels, minlength=n)[op_labels] >= 2]


def search_cycles(graph: DependencyGraph) -> list[Finding]:
    findings = []
    on_cycles: dict[Spec, set[int]] = {}  # ops on the cycles each spec reported
    for spec in SPECS:
        g = graph.restricted(spec.allowed)
        reported = on_cycles.setdefault(spec, set())
        # Components of the narrower spec lie inside this spec's: one shared op means the
        # component holds a reported cycle (one without ww, the stronger finding).
        held = on_cycles[spec.narrower] if spec.narrower is not None else set()
        for scc in nx.strongly_connected_components(g):
            if sum(1 for n in scc if not isinstance(n, tuple)) < 2 or not held.isdisjoint(scc):
                continue
            steps = _find_cycle(g, scc, spec)
            if steps is None:
                continue
            texts = [_explain_step(graph, a, b, rels) for a, b, rels in steps]
            cycle = [steps[0][0]] + [b for _, b, _ in steps]
            reported.update(cycle)
            findings.append(
                Finding(
                    spec.kind,
                    None,
                    tuple(cycle[:-1]),
                    f"cycle {' -> '.join(f'op {i}' for i in cycle)}: " + "; ".join(texts),
                    {"steps": [{"from": a, "to": b, "rels": sorted(r)} for a, b, r in steps]},
                    tolerated=spec.tolerated,
                )
            )
    return findings
