"""`fenced-producer-ack` (checkers/families/fenced_acks.py): a retired process's transactional send
or commit acknowledged after a later process of its slot committed, from the history alone."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.api import check
from checkers.families.fenced_acks import ACK_FS, fenced_acks
from history.columnar import op_rows, to_table
from history.format import TXN_ID_PER_SLOT
from tests.unit.checkers.histories import H

SLOTS = 4


def rows(h: H):
    return op_rows(to_table(h.history()), list(ACK_FS)).to_pylist()


def send_inv(k, v):
    return [["send", k, v]]


def send_ok(k, o, v):
    return [["send", k, [o, v]]]


def zombie(outcome="ok", successor_value=None):
    """Process 1's send is in flight while process 5 (slot 1 too, its successor) commits a
    transaction; then process 1's send completes."""
    h = H().invoke(1, "send", send_inv(0, 10))
    inv = [["poll"]] if successor_value is None else send_inv(1, successor_value)
    out = [["poll", {}]] if successor_value is None else send_ok(1, 0, successor_value)
    h.op(5, "txn", inv, "ok", out)
    h.complete(1, "send", outcome, send_ok(0, 0, 10) if outcome == "ok" else send_inv(0, 10))
    return h


def test_an_acknowledgement_after_the_successors_commit_is_found():
    h = zombie(successor_value=50)
    [f], n = fenced_acks(rows(h), SLOTS)
    assert n == 2
    assert f.kind == "fenced-producer-ack"
    assert f.ops == (2, 3)
    assert f.explanation.startswith(
        "op 3 (send) of process 1 was acknowledged (ok) at 0.400 s, after process 5's "
        "transaction committed at 0.300 s (op 2, txn). Both ran on worker slot 1 (process mod 4)"
    )
    assert "KIP-98" in f.explanation
    assert (f.data["process"], f.data["fence_process"], f.data["slot"]) == (1, 5, 1)


def test_what_is_not_an_acknowledgement_after_a_fence():
    # The successor's transaction wrote nothing: no proof it went through the coordinator.
    assert fenced_acks(rows(zombie(successor_value=None)), SLOTS)[0] == []
    # The zombie's send failed or timed out: nothing acknowledged.
    for outcome in ("fail", "info"):
        assert fenced_acks(rows(zombie(outcome, successor_value=50)), SLOTS)[0] == []
    # Acknowledged before the successor's commit.
    h = H().send(1, 0, 10, 0).op(5, "txn", send_inv(1, 50), "ok", send_ok(1, 0, 50))
    assert fenced_acks(rows(h), SLOTS)[0] == []
    # Another slot's process (2) is no successor of process 1.
    h = H().invoke(1, "send", send_inv(0, 10)).send(2, 1, 50, 0)
    h.complete(1, "send", "ok", send_ok(0, 0, 10))
    assert fenced_acks(rows(h), SLOTS)[0] == []
    # An earlier process of the slot (1 for 5) fences nothing.
    h = H().invoke(5, "send", send_inv(0, 10)).send(1, 1, 50, 0)
    h.complete(5, "send", "ok", send_ok(0, 0, 10))
    assert fenced_acks(rows(h), SLOTS)[0] == []


def _run(tmp_path, h, **generator):
    tmp_path.mkdir()
    h.write(tmp_path)
    gen = {"workload": "queue", "txn": True, "transactional_id": TXN_ID_PER_SLOT}
    (tmp_path / "plan.json").write_text(json.dumps({"generator": {**gen, **generator}}))
    return check(tmp_path, write=False)


def test_the_registry_judges_runs_with_per_slot_ids_only(tmp_path):
    h = zombie(successor_value=50).poll(9, {0: [(0, 10)], 1: [(0, 50)]})
    verdict = _run(tmp_path / "a", h, concurrency=SLOTS)
    assert [f.kind for f in verdict.failures] == ["fenced-producer-ack"]
    assert verdict.stats["transactional_acks"] == 2
    # Without transactions (or per-slot ids) the rule does not run.
    others = [{"concurrency": SLOTS, "txn": False}, {"concurrency": SLOTS, "transactional_id": "x"}]
    for i, gen in enumerate(others):
        verdict = _run(tmp_path / f"b{i}", h, **gen)
        assert verdict.failures == [] and "transactional_acks" not in verdict.stats


@settings(max_examples=200)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.booleans(), st.sampled_from(["ok", "info"])), max_size=30
    )
)
def test_slots_run_one_process_at_a_time_so_nothing_is_found(ops):
    """kchaos's workers: each slot runs its processes one after another, a process retiring
    after an info; however their ops interleave across slots, no acknowledgement is late."""
    h, current = H(), list(range(SLOTS))
    for i, (slot, txn, outcome) in enumerate(ops):
        p, v = current[slot], 100 + i
        if txn:
            out = send_ok(slot, i, v) if outcome == "ok" else send_inv(slot, v)
            h.op(p, "txn", send_inv(slot, v), outcome, out)
        else:
            h.send(p, slot, v, i if outcome == "ok" else None, outcome)
        if outcome == "info":
            current[slot] += SLOTS
    assert fenced_acks(rows(h), SLOTS)[0] == []
