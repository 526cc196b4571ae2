"""Cycles on hand-written histories, checked edge by edge."""

from collections import Counter
from itertools import pairwise

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.families import cycles as cycles_module
from checkers.families.cycles import DependencyGraph, OpInfo, find_cycles, search_cycles
from checkers.families.edges import Edge, EdgeArrays, EdgeSpill
from checkers.families.queue.check import check_queue_table
from checkers.scan.op_arrays import OpArrays
from checkers.scan.queue_ops import queue_ops_from_table
from history.columnar import to_table
from tests.unit.checkers.histories import H
from tests.unit.checkers.model import INJECTIONS, KEYS, action_lists, run_model


def cycles(h):
    """The cycles, found twice: from the spans the queue checks made, and from the edges."""
    table = to_table(h.history())
    queue, ops = check_queue_table(table), queue_ops_from_table(table)
    assert queue.back_spans is not None
    found = find_cycles(queue.edge_parts, ops, queue.back_spans)
    assert [f.to_dict() for f in found] == [f.to_dict() for f in find_cycles(queue.edges, ops)]
    return found


@pytest.mark.parametrize("kind", sorted(INJECTIONS))
@settings(max_examples=25)
@given(before=action_lists, after=action_lists, key=st.sampled_from(KEYS))
def test_the_checks_spans_are_the_spans_of_the_edges(kind, before, after, key):
    """The back spans the queue checks make, batch by batch from their own rows, are the ones
    the cycle search finds from the edges and a table of every op: same windows."""
    m = run_model(before, final_poll=False)
    INJECTIONS[kind](m, key)
    for a in after:
        m.apply(a)
    table = m.table()
    queue, ops = check_queue_table(table), queue_ops_from_table(table)
    with_spans = cycles_module._windows(queue.edge_parts, ops, queue.back_spans)
    assert with_spans == cycles_module._windows(queue.edge_parts, ops)


def by_kind(found):
    return {f.kind: f for f in found}


def test_two_transactions_reading_each_others_writes_are_g1c():
    h = (
        H()
        .invoke(0, "txn", [["send", 1, 10], ["poll"]])
        .invoke(1, "txn", [["send", 2, 20], ["poll"]])
        .complete(0, "txn", "ok", [["send", 1, [0, 10]], ["poll", {"2": [[0, 20]]}]])
        .complete(1, "txn", "ok", [["send", 2, [0, 20]], ["poll", {"1": [[0, 10]]}]])
    )
    found = by_kind(cycles(h))
    g1c = found["G1c"]
    assert set(g1c.ops) == {2, 3} and g1c.tolerated is None
    assert "op 2 sent value 10 to key 1, which op 3 polled (wr)" in g1c.explanation
    assert "op 3 sent value 20 to key 2, which op 2 polled (wr)" in g1c.explanation


def test_reading_a_write_that_started_after_the_read_finished_is_g1c_realtime():
    h = (
        H()
        .poll(1, {1: [(0, 10)]})  # ops 0-1: reads 10 ...
        .send(0, 1, 10, 0)  # ops 2-3: ... which is sent only afterwards
    )
    found = by_kind(cycles(h))
    assert "G1c" not in found and "G1c-process" not in found
    rt = found["G1c-realtime"]
    assert set(rt.ops) == {1, 3} and rt.tolerated is None
    assert "op 1 completed at 0.200 s, before op 3 was invoked at 0.300 s (realtime)" in (
        rt.explanation
    )
    assert "op 3 sent value 10 to key 1, which op 1 polled (wr)" in rt.explanation


def test_same_process_order_gives_g1c_process():
    h = H().poll(0, {1: [(0, 10)]}).send(0, 1, 10, 0)
    found = by_kind(cycles(h))
    assert {"G1c-process", "G1c-realtime"} <= set(found)
    assert found["G1c-process"].tolerated is None and found["G1c-realtime"].tolerated is None


def test_interleaved_transactions_are_g0_and_tolerated():
    h = (
        H()
        .invoke(0, "txn", [["send", 1, 10], ["send", 2, 21]])
        .invoke(1, "txn", [["send", 1, 11], ["send", 2, 20]])
        .complete(0, "txn", "ok", [["send", 1, [0, 10]], ["send", 2, [1, 21]]])
        .complete(1, "txn", "ok", [["send", 1, [1, 11]], ["send", 2, [0, 20]]])
    )
    found = by_kind(cycles(h))
    assert set(found) == {"G0"}
    assert found["G0"].tolerated and "ww" in found["G0"].explanation


def test_sequential_sends_and_reads_have_no_cycle():
    h = H().send(0, 1, 10, 0).poll(1, {1: [(0, 10)]}).send(0, 1, 11, 1).poll(1, {1: [(1, 11)]})
    assert cycles(h) == []


def test_a_cycle_through_a_ww_edge_is_g1c_and_tolerated():
    """Jepsen's example of unisolated writes: T1 sends to key 1, T2 sends after it to key 1 and
    to key 2 and commits, T1 polls T2's write of key 2 and commits: T1 <ww T2 <wr T1."""
    h = (
        H()
        .invoke(0, "txn", [["send", 1, 10], ["poll"]])  # op 0: T1
        .invoke(1, "txn", [["send", 1, 11], ["send", 2, 20]])  # op 1: T2
        .complete(1, "txn", "ok", [["send", 1, [1, 11]], ["send", 2, [0, 20]]])  # op 2
        .complete(0, "txn", "ok", [["send", 1, [0, 10]], ["poll", {"2": [[0, 20]]}]])  # op 3
    )
    found = by_kind(cycles(h))
    assert set(found) == {"G1c"}
    g1c = found["G1c"]
    assert set(g1c.ops) == {2, 3}
    assert g1c.tolerated is not None and "ww edge" in g1c.tolerated
    assert "op 3 sent value 10 to key 1, and op 2 sent 11, the next record" in g1c.explanation
    assert "op 2 sent value 20 to key 2, which op 3 polled (wr)" in g1c.explanation


def test_a_component_holding_a_wr_cycle_reports_only_that_one():
    """A polls C's write, B polls A's, C polls B's: a wr cycle of three, a failure. B's send to
    key 4 also lies just before A's, so A <wr B <ww A is a shorter cycle in the same component
    of the ww+wr graph; only the wr cycle is reported, not tolerated."""
    h = (
        H()
        .invoke(0, "txn", [["send", 1, 10], ["send", 4, 41], ["poll"]])  # op 0: A
        .invoke(1, "txn", [["send", 2, 20], ["send", 4, 40], ["poll"]])  # op 1: B
        .invoke(2, "txn", [["send", 3, 30], ["poll"]])  # op 2: C
        .complete(0, "txn", "ok",
                  [["send", 1, [0, 10]], ["send", 4, [1, 41]], ["poll", {"3": [[0, 30]]}]])
        .complete(1, "txn", "ok",
                  [["send", 2, [0, 20]], ["send", 4, [0, 40]], ["poll", {"1": [[0, 10]]}]])
        .complete(2, "txn", "ok", [["send", 3, [0, 30]], ["poll", {"2": [[0, 20]]}]])
    )  # fmt: skip
    found = cycles(h)
    assert [(f.kind, set(f.ops), f.tolerated) for f in found] == [("G1c", {3, 4, 5}, None)]
    assert "(ww)" not in found[0].explanation


def _late_send_after_a_poll(b_process: int) -> H:
    """Z sends to key 1 first and polls last; A sends to key 1 after Z and completes; then B
    sends to key 2, which Z polls: A then B (in real time), B <wr Z, Z <ww A. Correct Kafka: Z
    is one long transaction."""
    return (
        H()
        .invoke(2, "txn", [["send", 1, 10], ["poll"]])  # op 0: Z
        .send(0, 1, 11, 1)  # ops 1-2: A
        .send(b_process, 2, 20, 0)  # ops 3-4: B
        .complete(2, "txn", "ok", [["send", 1, [0, 10]], ["poll", {"2": [[0, 20]]}]])  # op 5
    )


def test_a_process_and_a_ww_edge_make_a_tolerated_g1c_process():
    found = by_kind(cycles(_late_send_after_a_poll(b_process=0)))
    assert set(found) == {"G1c-process", "G1c-realtime"}
    for f in found.values():
        assert set(f.ops) == {2, 4, 5} and f.tolerated is not None
        assert "op 4 sent value 20 to key 2, which op 5 polled (wr)" in f.explanation
        assert "op 5 sent value 10 to key 1, and op 2 sent 11" in f.explanation
    assert "op 2 and then op 4 ran on process 0 (process)" in found["G1c-process"].explanation
    assert "op 2 completed at 0.300 s, before op 4 was invoked at 0.400 s (realtime)" in (
        found["G1c-realtime"].explanation
    )


def test_realtime_and_a_ww_edge_make_a_tolerated_g1c_realtime():
    found = by_kind(cycles(_late_send_after_a_poll(b_process=1)))
    assert set(found) == {"G1c-realtime"}
    rt = found["G1c-realtime"]
    assert set(rt.ops) == {2, 4, 5} and rt.tolerated is not None
    assert "(ww)" in rt.explanation and "(realtime)" in rt.explanation


def test_ww_and_wr_edges_one_way_are_no_cycle():
    """T2 is invoked first, yet T1's send lies before T2's and T2 polls it: edges go back in
    invocation time (a window is searched), all from T1 to T2 (no cycle)."""
    h = (
        H()
        .invoke(1, "txn", [["send", 1, 11], ["poll"]])  # op 0: T2
        .invoke(0, "txn", [["send", 1, 10], ["send", 2, 20]])  # op 1: T1
        .complete(0, "txn", "ok", [["send", 1, [0, 10]], ["send", 2, [0, 20]]])  # op 2
        .complete(1, "txn", "ok", [["send", 1, [1, 11]], ["poll", {"2": [[0, 20]]}]])  # op 3
    )
    table = to_table(h.history())
    queue, ops = check_queue_table(table), queue_ops_from_table(table)
    assert cycles_module._windows(queue.edge_parts, ops, queue.back_spans) != []
    assert cycles(h) == []


@st.composite
def random_graphs(draw):
    """Ops with random, possibly overlapping intervals on a few processes, random edges."""
    n = draw(st.integers(2, 8))
    ops = []
    for i in range(n):
        start = draw(st.integers(0, 20))
        done = draw(st.none() | st.integers(start, start + 10))
        ops.append(OpInfo(i, str(draw(st.integers(0, 2))), "ok" if done else "info", start, done))
    pairs = st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)).filter(lambda p: p[0] != p[1])
    edges = [
        Edge(rel, a, b, 0, 1, 2)
        for rel, (a, b) in draw(st.lists(st.tuples(st.sampled_from(["ww", "wr"]), pairs)))
    ]
    return edges, ops


def _kinds(found):
    return Counter((f.kind, f.tolerated is None) for f in found)


@settings(max_examples=300)
@given(random_graphs())
def test_searching_only_the_windows_finds_what_searching_everything_finds(graph):
    edges, ops = graph
    everything = search_cycles(DependencyGraph(edges, ops))
    # One finding per strongly connected component and kind (failing or tolerated), whether the
    # windows and the components found by scipy narrow the search or not.
    assert _kinds(find_cycles(edges, ops)) == _kinds(everything)
    by_id = {o.index: o for o in ops}
    for f in find_cycles(edges, ops):
        for step in f.data["steps"]:
            a, b = by_id[step["from"]], by_id[step["to"]]
            if step["rels"] == ["process"]:  # possibly over ops off the cycle: still in order
                assert a.process == b.process and a.index < b.index
            elif step["rels"] == ["realtime"]:
                assert a.complete_time is not None and a.complete_time < b.invoke_time


@settings(max_examples=200, deadline=None)
@given(random_graphs(), st.sampled_from([1, 2, 3]), st.sampled_from([1, 2, 5]))
def test_ops_and_edges_in_slices_and_parts_change_nothing(tmp_path_factory, graph, size, part):
    """The ops read a slice at a time (process order carried across slices), and the edges a
    part at a time from disk (as a streamed check's: edges.EdgeSpill), searched a group of
    windows at a time: the same windows and cycles."""
    edges, ops = graph
    # Every ww edge, then every wr edge: the order a check makes them in, which the spill keeps
    # (the order decides which of several equally short cycles networkx meets first).
    arrays = EdgeArrays.from_edges([e for rel in ("ww", "wr") for e in edges if e.rel == rel])
    whole = find_cycles(arrays, ops)
    ordered = OpArrays.from_infos(sorted(ops, key=lambda o: o.index))
    windows = cycles_module._windows([arrays], ordered)
    spill = EdgeSpill(tmp_path_factory.mktemp("edges"))
    is_ww = arrays.rel == 0
    for lo in range(0, len(arrays), part):  # ww and wr apart, as a check writes them
        piece = arrays.take(slice(lo, lo + part))
        spill.add(piece.take(is_ww[lo : lo + part]), piece.take(~is_ww[lo : lo + part]))
    spilled = spill.finish(part)
    saved = cycles_module._SLICE, cycles_module.WINDOW_GROUP_OPS
    cycles_module._SLICE, cycles_module.WINDOW_GROUP_OPS = size, size
    try:
        sliced = find_cycles(spilled, ops)
        assert cycles_module._windows(spilled, ordered) == windows
    finally:
        cycles_module._SLICE, cycles_module.WINDOW_GROUP_OPS = saved
    assert [f.to_dict() for f in sliced] == [f.to_dict() for f in whole]


# Each G1c kind: the edge types of its graph without ww, and the types a cycle must hold.
G1C_KINDS = {
    "G1c": ({"wr"}, {"wr"}),
    "G1c-process": ({"wr", "process"}, {"wr", "process"}),
    "G1c-realtime": ({"wr", "process", "realtime"}, {"wr", "realtime"}),
}


def _components_with(edges, ops, allowed, required):
    """Op sets of the components, over direct op-to-op edges of the `allowed` types (realtime:
    a completed before b was invoked; no time nodes), holding an edge of each `required` type."""
    g = nx.DiGraph()
    typed = [(e.src, e.dst, e.rel) for e in edges]
    by_process = {}
    for o in sorted(ops, key=lambda o: o.index):
        by_process.setdefault(o.process, []).append(o.index)
    typed += [(a, b, "process") for ixs in by_process.values() for a, b in pairwise(ixs)]
    typed += [
        (a.index, b.index, "realtime")
        for a in ops
        for b in ops
        if a.complete_time is not None and a.complete_time < b.invoke_time
    ]
    for a, b, rel in typed:
        if rel in allowed:
            g.add_edge(a, b)
            g[a][b].setdefault("rels", set()).add(rel)
    out = []
    for scc in nx.strongly_connected_components(g):
        rels = set().union(*(d["rels"] for _, _, d in g.subgraph(scc).edges(data=True)))
        if len(scc) > 1 and required <= rels:
            out.append(scc)
    return out


@settings(max_examples=300)
@given(random_graphs())
def test_g1c_cycles_needing_ww_are_found_tolerated_where_no_wr_cycle_is(graph):
    """Against an oracle of components: each component of the graph without ww edges that can
    hold a G1c cycle gives one finding, not tolerated; each component of the graph with ww
    edges that can hold one and holds none of those gives one finding, tolerated."""
    edges, ops = graph
    found = find_cycles(edges, ops)
    expected = Counter()
    for kind, (allowed, required) in G1C_KINDS.items():
        narrow = _components_with(edges, ops, allowed, required)
        wide = _components_with(edges, ops, allowed | {"ww"}, required)
        expected[kind, True] += len(narrow)
        expected[kind, False] += sum(1 for c in wide if not any(n <= c for n in narrow))
    got = _kinds(f for f in found if f.kind in G1C_KINDS)
    assert +got == +expected
    for f in found:
        if f.kind not in G1C_KINDS:
            continue
        rels = [set(step["rels"]) for step in f.data["steps"]]
        assert all(any(r in step for step in rels) for r in G1C_KINDS[f.kind][1])
        # A tolerated cycle needs a ww step; a failing one has none.
        assert any(step == {"ww"} for step in rels) == (f.tolerated is not None)


def test_a_large_window_gives_networkx_only_the_ops_on_cycles(monkeypatch):
    """Long concurrent polls make every write go back in invocation time, so the whole history
    is one window; networkx must see only the two ops of the one cycle in it (concurrent, on two
    processes: G1c alone, no process or realtime variant)."""
    n = 3000
    # Op 2i+1 sends value i to key 0, invoked at 10i+5; op 2i is a poll invoked at 10i that
    # completes long after and returns the value op 2(i+50)+1 sent meanwhile: no cycle ...
    ops, edges = [], []
    for i in range(n):
        ops.append(OpInfo(2 * i, f"r{i % 7}", "ok", 10 * i, 10 * i + 1000))
        ops.append(OpInfo(2 * i + 1, f"w{i % 5}", "ok", 10 * i + 5, 10 * i + 6))
        if i + 50 < n:
            edges.append(Edge("wr", 2 * (i + 50) + 1, 2 * i, 0, i + 50, None))
    # ... except the last two ops, which read each other's writes (G1c), and nothing invoked
    # after them closes a cycle through any other op.
    a, b = 2 * n - 2, 2 * n - 1
    edges += [Edge("wr", b, a, 1, 0, None), Edge("wr", a, b, 2, 99, None)]
    parts = [EdgeArrays.from_edges(edges)]
    assert len(cycles_module._windows(parts, OpArrays.from_infos(ops))) == 1
    seen = []
    real = cycles_module.DependencyGraph

    def spy(edges, ops):
        seen.append(len(ops))
        return real(edges, ops)

    monkeypatch.setattr(cycles_module, "DependencyGraph", spy)
    found = find_cycles(edges, ops)
    assert seen == [2]
    assert [(f.kind, set(f.ops)) for f in found] == [("G1c", {a, b})]
