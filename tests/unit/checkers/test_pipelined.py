"""Pipelined histories: one idempotent producer's acknowledged sends to a partition keep its send
order (producer-nonmonotonic-send), what is not an anomaly, and the engines agreeing on both."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from checkers.api import check
from checkers.families.queue.check import check_queue, check_queue_table
from checkers.families.queue.rules.producer_order import RULE
from checkers.scan.load import load
from checkers.table_check import check_table
from history.columnar import to_table
from history.format import AFTER_ABORT_RULES
from tests.unit.checkers.histories import PIPELINED, H
from tests.unit.checkers.pipelined import READER, action_lists, run_pipelined

KIND = "producer-nonmonotonic-send"
Q = 3  # a producer id


def failing(findings):
    return [f for f in findings if f.tolerated is None and not f.unknown]


def engines_agree(table):
    """Reference and local engines: the same findings and edges, under every abort rule."""
    for rule in (None, *AFTER_ABORT_RULES):
        ref = check_queue_table(table, reference=True, after_abort=rule)
        fast = check_queue_table(table, after_abort=rule)
        assert [f.to_dict() for f in fast.findings] == [f.to_dict() for f in ref.findings]
        assert fast.edges.sorted_rows() == ref.edges.sorted_rows()
    return check_table(table)


def read_all(h, reads):
    return h.assign(READER, sorted(reads)).poll(READER, reads)


def reordered(header=PIPELINED, second_producer=Q):
    """Producer Q sends 10 then 11 to key 0 on two lanes, both in flight; 11 is acknowledged
    first, at offset 0, and 10 at offset 1."""
    h = H(**header)
    h.invoke_send(0, Q, 0, 10).invoke_send(1, second_producer, 0, 11)
    h.complete_send(1, second_producer, 0, 11, 0).complete_send(0, Q, 0, 10, 1)
    return read_all(h, {0: [(0, 11), (1, 10)]})


def test_a_reordered_pair_is_found_with_both_ops_and_the_rule():
    findings = engines_agree(to_table(reordered().history()))
    assert [f.kind for f in findings] == [KIND]
    f = findings[0]
    assert f.key == 0 and f.ops == (3, 2) and f.tolerated is None and not f.unknown
    assert f.data == {
        "producer": Q,
        "values": [10, 11],
        "offsets": [1, 0],
        "invoked": [0, 1],
        "processes": ["0", "1"],
        "rule": RULE,
    }
    for words in ("producer 3", "invoked at index 0 on process 0", "op 3 at offset 1",
                  "op 2 at offset 0", "enable.idempotence", "original produce order"):  # fmt: skip
        assert words in f.explanation


def test_a_stored_history_is_judged_by_every_engine(tmp_path, spark):
    path = reordered().write(tmp_path)
    verdict = check(tmp_path, write=False)
    assert [f.kind for f in failing(verdict.findings)] == [KIND]
    local = check_queue(path)
    assert [f.to_dict() for f in check_queue(path, reference=True).findings] == [
        f.to_dict() for f in local.findings
    ]
    assert [f.to_dict() for f in check_queue(path, spark=spark).findings] == [
        f.to_dict() for f in local.findings
    ]
    assert [f.kind for f in local.findings] == [KIND]


def test_sends_of_different_producers_may_land_in_any_order():
    assert engines_agree(to_table(reordered(second_producer=Q + 2).history())) == []


@pytest.mark.parametrize("header", [{}, {**PIPELINED, "idempotence": False}])
def test_no_claim_without_idempotent_producers_declared(header):
    assert engines_agree(to_table(reordered(header=header).history())) == []


def test_an_info_or_fail_send_between_changes_nothing():
    """Between two acknowledged sends in order: an info send (it landed, later) and a failed
    one; neither is compared, and the two acknowledged ones are in order."""
    h = H(**PIPELINED)
    h.invoke_send(0, Q, 0, 10).invoke_send(1, Q, 0, 11).invoke_send(2, Q, 0, 12)
    h.invoke_send(3, Q, 0, 13)
    h.complete_send(1, Q, 0, 11, None, "info").complete_send(2, Q, 0, 12, None, "fail")
    h.complete_send(3, Q, 0, 13, 2).complete_send(0, Q, 0, 10, 0)
    read_all(h, {0: [(0, 10), (2, 13), (3, 11)]})
    assert engines_agree(to_table(h.history())) == []
    # ... and with the acknowledged two reversed around them, the pair is still found.
    h = H(**PIPELINED)
    h.invoke_send(0, Q, 0, 10).invoke_send(1, Q, 0, 11).invoke_send(2, Q, 0, 12)
    h.invoke_send(3, Q, 0, 13)
    h.complete_send(1, Q, 0, 11, None, "info").complete_send(2, Q, 0, 12, None, "fail")
    h.complete_send(3, Q, 0, 13, 0).complete_send(0, Q, 0, 10, 1)
    read_all(h, {0: [(0, 13), (1, 10)]})
    findings = engines_agree(to_table(h.history()))
    assert [(f.kind, f.ops) for f in failing(findings)] == [(KIND, (7, 6))]


def test_an_ack_without_offset_and_gaps_are_not_anomalies():
    h = H(**PIPELINED)
    h.invoke_send(0, Q, 0, 10).invoke_send(1, Q, 0, 11).invoke_send(2, Q, 0, 12)
    h.complete_send(1, Q, 0, 11, None).complete_send(2, Q, 0, 12, 5)
    h.complete_send(0, Q, 0, 10, 0)
    read_all(h, {0: [(0, 10), (1, 1), (2, 2), (3, 3), (4, 11), (5, 12)]})
    findings = engines_agree(to_table(h.history()))
    assert KIND not in {f.kind for f in findings}


def test_equal_offsets_are_inconsistent_offsets_not_a_reordering():
    h = H(**PIPELINED)
    h.invoke_send(0, Q, 0, 10).invoke_send(1, Q, 0, 11)
    h.complete_send(1, Q, 0, 11, 0).complete_send(0, Q, 0, 10, 0)
    read_all(h, {0: [(0, 10)]})
    kinds = {f.kind for f in engines_agree(to_table(h.history()))}
    assert "inconsistent-offsets" in kinds and KIND not in kinds


def test_a_lanes_own_reordering_is_nonmonotonic_send_once():
    """Two successive sends of one lane: nonmonotonic-send's pair, reported by it alone."""
    h = H(**PIPELINED)
    h.invoke_send(0, Q, 0, 10).complete_send(0, Q, 0, 10, 1)
    h.invoke_send(0, Q, 0, 11).complete_send(0, Q, 0, 11, 0)
    read_all(h, {0: [(0, 11), (1, 10)]})
    findings = failing(engines_agree(to_table(h.history())))
    assert [(f.kind, f.ops) for f in findings] == [("nonmonotonic-send", (1, 3))]


def test_histories_without_producers_decode_no_producer_column(tmp_path):
    sync = H().send(0, 0, 10, 0).poll(1, {0: [(0, 10)]}).write(_d(tmp_path, "sync"))
    assert load(sync, [], [], elements=True).elements.producer is None
    piped = reordered().write(_d(tmp_path, "piped"))
    arrays = load(piped, [], [], elements=True).elements
    assert arrays.producer is not None and sorted(arrays.producer.tolist()) == [-1, -1, Q, Q]


def _d(tmp, name):
    out = tmp / name
    out.mkdir()
    return out


# -- generated pipelined histories -----------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(action_lists, st.booleans())
def test_a_correct_pipelined_history_yields_no_finding(acts, report):
    m = run_pipelined(acts, report)
    m.final_poll()
    assert engines_agree(m.table()) == []


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(action_lists, st.booleans(), st.integers(0, 1000))
def test_one_swapped_pair_is_exactly_one_finding_naming_both_ops(acts, report, pick):
    m = run_pipelined(acts, report)
    pairs = m.swappable()
    assume(pairs)
    a, b = pairs[pick % len(pairs)]
    m.swap(a, b)
    m.final_poll()
    findings = engines_agree(m.table())
    # One lane's successive sends are nonmonotonic-send's pair (it compares them already).
    kind = "nonmonotonic-send" if a.lane == b.lane else KIND
    assert [(f.kind, f.ops) for f in failing(findings)] == [(kind, (a.completion, b.completion))]
    # Anything else: the ww cycle the swap makes with the pair's process or realtime order,
    # which Kafka's lack of write isolation allows.
    assert {f.kind for f in findings if f not in failing(findings)} <= {"G0-process", "G0-realtime"}


@settings(
    max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(action_lists, st.integers(0, 1000))
def test_spark_agrees_on_generated_pipelined_histories(tmp_path_factory, spark, acts, pick):
    m = run_pipelined(acts)
    pairs = m.swappable()
    if pairs:
        m.swap(*pairs[pick % len(pairs)])
    m.final_poll()
    path = m.h.write(tmp_path_factory.mktemp("piped"))
    ref = check_queue(path, reference=True)
    assert [f.to_dict() for f in check_queue(path, spark=spark).findings] == [
        f.to_dict() for f in ref.findings
    ]
    assert [f.to_dict() for f in check_queue(path).findings] == [f.to_dict() for f in ref.findings]


def test_slots_are_never_read_from_lane_process_ids(tmp_path):
    """fenced-producer-read's `process mod concurrency` names no slot for a lane: a pipelined
    plan with lanes is not judged, even one claiming transactions; pipelined transactions
    (`txn_sends`) run one process per slot and are judged."""
    import json

    from checkers.families.queue.rules.fencing import run_slots
    from history.format import TXN_ID_PER_SLOT

    plan = {"workload": "queue", "txn": True, "transactional_id": TXN_ID_PER_SLOT,
            "concurrency": 2, "send_mode": "async", "in_flight": 5}  # fmt: skip
    (tmp_path / "plan.json").write_text(json.dumps({"generator": plan}))
    slots, note = run_slots(tmp_path)
    assert slots is None and note is not None and "lanes" in note
    plan = {**plan, "txn_sends": 5}
    (tmp_path / "plan.json").write_text(json.dumps({"generator": plan}))
    assert run_slots(tmp_path) == (2, None)
