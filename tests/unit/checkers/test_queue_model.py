"""Generated histories: a correct model yields no finding; every injected bug is found by name."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.table_check import check_table
from tests.unit.checkers.model import CONCURRENCY, INJECTIONS, KEYS, action_lists, run_model


@given(action_lists)
def test_a_correct_kafka_yields_no_finding(acts):
    assert check_table(run_model(acts).table(), slots=CONCURRENCY) == []


@settings(max_examples=500)
@given(action_lists)
def test_without_final_polls_only_unseen_may_be_reported(acts):
    findings = check_table(run_model(acts, final_poll=False).table(), slots=CONCURRENCY)
    assert {f.kind for f in findings} <= {"unseen"}
    assert all(f.unknown for f in findings)


@pytest.mark.parametrize("kind", sorted(INJECTIONS))
@settings(max_examples=40)
@given(before=action_lists, after=action_lists, key=st.sampled_from(KEYS))
def test_each_injected_bug_is_found_and_named(kind, before, after, key):
    m = run_model(before, final_poll=False)
    INJECTIONS[kind](m, key)
    if kind != "unseen":  # unseen needs nobody to read past the hidden record: then it's lost
        for a in after:
            m.apply(a)
        m.final_poll()
    findings = check_table(m.table(), slots=CONCURRENCY)
    found = [f for f in findings if f.kind == kind]
    assert found, kind
    if kind == "unseen":
        # Without final polls other sends go unseen too; none of it is proof of a loss.
        assert any(f.key == key for f in found)
        assert all(f.unknown for f in findings)
    elif found[0].key is not None:  # cycles span keys
        assert all(f.key == key for f in found)
