"""The vectorised queue checks must find exactly what the per-key reference finds: same
findings (kind, key, ops, wording, data), same edges. A difference either way is a defect."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.families.queue.check import check_queue_table
from history.columnar import header_of, to_table
from history.format import AFTER_ABORT_RULES, after_abort_rule
from tests.unit.checkers.histories import mixed_anomalies
from tests.unit.checkers.model import CONCURRENCY, INJECTIONS, KEYS, action_lists, run_model


def assert_same(table):
    """Under every rule for polls after an abort (the history's own, by default, first)."""
    for rule in (
        None,
        *sorted(set(AFTER_ABORT_RULES) - {after_abort_rule(header_of(table.schema))}),
    ):
        ref = check_queue_table(table, reference=True, slots=CONCURRENCY, after_abort=rule)
        fast = check_queue_table(table, slots=CONCURRENCY, after_abort=rule)
        assert [f.to_dict() for f in fast.findings] == [f.to_dict() for f in ref.findings], rule
        assert fast.edges.sorted_rows() == ref.edges.sorted_rows()
        assert fast.subscribe == ref.subscribe
        if rule is None:
            own = ref
    return own


@settings(max_examples=300)
@given(action_lists, st.booleans())
def test_same_as_reference_on_correct_histories(acts, final_poll):
    assert_same(run_model(acts, final_poll=final_poll).table())


@pytest.mark.parametrize("kind", sorted(INJECTIONS))
@settings(max_examples=40)
@given(before=action_lists, after=action_lists, key=st.sampled_from(KEYS), final=st.booleans())
def test_same_as_reference_on_each_injected_bug(kind, before, after, key, final):
    m = run_model(before, final_poll=False)
    INJECTIONS[kind](m, key)
    for a in after:
        m.apply(a)
    if final:
        m.final_poll()
    assert_same(m.table())


@settings(max_examples=100)
@given(st.lists(st.sampled_from(sorted(INJECTIONS)), min_size=2, max_size=4), action_lists)
def test_same_as_reference_with_several_bugs_at_once(kinds, acts):
    m = run_model(acts, final_poll=False)
    for i, kind in enumerate(kinds):
        INJECTIONS[kind](m, KEYS[i % len(KEYS)])
    m.final_poll()
    assert_same(m.table())


def test_same_as_reference_on_a_history_with_every_kind():
    h = (
        mixed_anomalies()
        .poll(5, {1: [(0, 10), (0, 99), (2, 10)]})
        .send(6, 1, 13, 3)
        .send(6, 1, 14, 1)
    )
    ref = assert_same(to_table(h.history()))
    assert {f.kind for f in ref.findings} >= {
        "G1a", "poll-skip", "int-nonmonotonic-poll", "precommitted-read", "unseen", "duplicate",
        "inconsistent-offsets", "garbage-read", "nonmonotonic-send", "lost-write",
    }  # fmt: skip


@settings(max_examples=60)
@given(st.lists(st.sampled_from(sorted(INJECTIONS)), min_size=1, max_size=3), action_lists)
def test_key_by_key_chunks_change_nothing(kinds, acts):
    """check_by_keys with one key per chunk: the same findings and edges, edges in one order."""
    from checkers.families.queue import vector

    m = run_model(acts, final_poll=False)
    for i, kind in enumerate(kinds):
        INJECTIONS[kind](m, KEYS[i % len(KEYS)])
    m.final_poll()
    table = m.table()
    whole = check_queue_table(table, slots=CONCURRENCY)
    saved, vector.CHUNK = vector.CHUNK, 1
    try:
        chunked = check_queue_table(table, slots=CONCURRENCY)
    finally:
        vector.CHUNK = saved
    assert [f.to_dict() for f in chunked.findings] == [f.to_dict() for f in whole.findings]
    assert [e.tolist() for e in vars(chunked.edges).values()] == [
        e.tolist() for e in vars(whole.edges).values()
    ]
    assert_same(table)
