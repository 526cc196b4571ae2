"""Cycles on hand-written histories, checked edge by edge."""

from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.cycles import DependencyGraph, OpInfo, find_cycles, search_cycles
from checkers.queue.check import check_queue_table
from checkers.queue.per_key import Edge
from checkers.queue_ops import queue_ops_from_table
from history.columnar import to_table
from tests.unit.checkers.histories import H


def cycles(h):
    table = to_table(h.history())
    return find_cycles(check_queue_table(table).edges, queue_ops_from_table(table))


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
    assert set(rt.ops) == {1, 3}
    assert "op 1 completed at 0.200 s, before op 3 was invoked at 0.300 s (realtime)" in (
        rt.explanation
    )
    assert "op 3 sent value 10 to key 1, which op 1 polled (wr)" in rt.explanation


def test_same_process_order_gives_g1c_process():
    h = H().poll(0, {1: [(0, 10)]}).send(0, 1, 10, 0)
    assert {"G1c-process", "G1c-realtime"} <= set(by_kind(cycles(h)))


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


@settings(max_examples=300)
@given(random_graphs())
def test_searching_only_the_windows_finds_what_searching_everything_finds(graph):
    edges, ops = graph
    everything = search_cycles(DependencyGraph(edges, ops))
    assert {f.kind for f in find_cycles(edges, ops)} == {f.kind for f in everything}
