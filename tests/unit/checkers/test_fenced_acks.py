"""`fenced-producer-ack` (checkers/families/fenced_acks.py): a retired process's transactional send
or commit acknowledged after a later process of its slot committed, from the history alone."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.api import check
from checkers.families.fenced_acks import (
    ACK_FS,
    fenced_acks,
    hijacked_acks,
    hijacks_of,
    zombie_commits,
)
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


# Hijacks (nemesis/client.py): the harness's producer takes a slot's transactional id over.


def hijack(h: H, slot: int = 1) -> H:
    fenced = [{"effect": "fenced", "nodes": [], "by": "InitProducerId"}]
    value = {"kind": "hijack", "victim": f"kchaos-r-slot{slot}", "slot": slot, "effects": fenced}
    return h.op("nemesis", "start-client", {"kind": "hijack"}, "ok", value)


def hijacked(h: H) -> tuple[list, int]:
    table = to_table(h.history())
    hijacks = hijacks_of(op_rows(table, None, ["nemesis"]).to_pylist())
    return hijacked_acks(rows(h), hijacks, SLOTS), len(hijacks)


def test_a_zombies_commit_begun_after_the_hijack_is_found():
    # Process 1 (slot 1) had a send acknowledged before the hijack: its InitProducerId came
    # first. Its transaction begun after the hijack completed was acknowledged.
    h = hijack(H().send(1, 0, 10, 0)).op(1, "txn", send_inv(0, 11), "ok", send_ok(0, 1, 11))
    [f], hijacks = hijacked(h)
    assert hijacks == 1 and f.kind == "hijacked-producer-ack"
    assert f.ops == (3, 5)
    assert f.explanation.startswith(
        "op 5 (txn) of process 1, invoked at 0.500 s, was acknowledged (ok) at 0.600 s, after "
        "the harness's producer took its transactional.id kchaos-r-slot1 over (op 3: "
        "InitProducerId done at 0.400 s)."
    )
    assert "KIP-98" in f.explanation
    assert (f.data["slot"], f.data["transactional_id"]) == (1, "kchaos-r-slot1")


def test_what_a_hijack_does_not_make_a_zombie_ack():
    # Invoked before the hijack completed: its commit may have reached the coordinator first.
    h = H().send(1, 0, 10, 0).invoke(1, "txn", send_inv(0, 11))
    h = hijack(h).complete(1, "txn", "ok", send_ok(0, 1, 11))
    assert hijacked(h) == ([], 1)
    # The zombie's transaction failed or is unknown: nothing acknowledged.
    for outcome in ("fail", "info"):
        h = hijack(H().send(1, 0, 10, 0)).op(1, "txn", send_inv(0, 11), outcome, send_inv(0, 11))
        assert hijacked(h) == ([], 1)
    # Process 5 replaced the zombie after the hijack: its own InitProducerId fenced the hijacker.
    h = hijack(H().send(1, 0, 10, 0)).send(5, 0, 12, 2)
    assert hijacked(h) == ([], 1)
    # A process of another slot is not the victim.
    h = hijack(H().send(2, 0, 10, 0)).send(2, 0, 12, 2)
    assert hijacked(h) == ([], 1)
    # A failed hijack (InitProducerId not done) fences nobody the history can show.
    h = H().send(1, 0, 10, 0).op("nemesis", "start-client", {}, "fail", {"kind": "hijack"})
    assert hijacked(h.send(1, 0, 11, 1)) == ([], 0)


def test_the_registry_judges_a_hijacked_run(tmp_path):
    h = hijack(H().send(1, 0, 10, 0)).send(1, 0, 11, 1).poll(9, {0: [(0, 10), (1, 11)]})
    verdict = _run(tmp_path / "a", h, concurrency=SLOTS)
    assert [f.kind for f in verdict.failures] == ["hijacked-producer-ack"]
    assert verdict.stats["hijacks"] == 1


@settings(max_examples=200)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.booleans(), st.sampled_from(["ok", "info", "hijack"])),
        max_size=30,
    )
)
def test_a_harness_that_retires_fenced_processes_is_never_flagged(ops):
    """As kchaos's workers do: after a hijack of its slot, the slot's process gets an
    error (info) on its next op and retires; its replacement re-initializes. Nothing is late."""
    h, current, fenced = H(), list(range(SLOTS)), set()
    for i, (slot, txn, outcome) in enumerate(ops):
        if outcome == "hijack":
            hijack(h, slot)
            fenced.add(slot)
            continue
        p, v = current[slot], 100 + i
        if slot in fenced:
            outcome = "info"  # Kafka refuses the fenced producer
            fenced.discard(slot)
        if txn:
            out = send_ok(slot, i, v) if outcome == "ok" else send_inv(slot, v)
            h.op(p, "txn", send_inv(slot, v), outcome, out)
        else:
            h.send(p, slot, v, i if outcome == "ok" else None, outcome)
        if outcome == "info":
            current[slot] += SLOTS
    assert hijacked(h)[0] == []


# Zombie commits (nemesis/client.py pause-commit): a transaction the client held before its
# commit past transaction.timeout.ms and the coordinator's check interval.

S = 1_000_000_000
TIMEOUTS = {
    "transaction.timeout.ms": 15000,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 10000,
}


def held_txn(
    h: H, type_: str = "ok", held_ms: int = 30000, first_ack: int | None = 1 * S, f: str = "txn"
) -> H:
    """Process 1's transaction of one send, its commit asked at 2 s and held `held_ms`."""
    held = {"point": "commit", "asked": 2 * S, "ms": held_ms, "first_ack": first_ack, **TIMEOUTS}
    out = send_ok(0, 0, 10) if type_ == "ok" else send_inv(0, 10)
    return h.op(1, f, send_inv(0, 10), type_, out, commit_held=held)


def zombies(h: H):
    table = to_table(h.history())
    return zombie_commits(rows(h), op_rows(table, None, ["nemesis"]).to_pylist())


def test_a_commit_held_past_the_transactions_timeout_that_succeeds_is_found():
    [f], judged, skipped = zombies(held_txn(H()))
    assert (judged, skipped) == (1, 0)
    assert f.kind == "zombie-commit" and f.ops == (1, 1)
    assert f.explanation.startswith(
        "op 1 (txn) of process 1 committed (ok) at 0.200 s, yet its first send was "
        "acknowledged at 1.000 s and the client, held before its commit, called "
        "commitTransaction no earlier than 32.000 s: 31.0 s later, past the 25 s of "
        "transaction.timeout.ms and the coordinator's check interval (+ 2 s)."
    )
    assert "proactively aborts it" in f.explanation
    # With --txn a send op is a transaction of its own, committed the same way.
    [f] = zombies(held_txn(H(), f="send"))[0]
    assert f.explanation.startswith("op 1 (send) of process 1 committed (ok)")


def test_an_unheld_commit_asked_past_the_timeout_that_succeeds_is_found():
    # A run with client faults records every commit (ms 0): a SIGSTOP or a network cut between
    # the sends and the commit delays it as a hold would.
    h = H()
    held = {"point": "commit", "asked": 30 * S, "ms": 0, "first_ack": 1 * S, **TIMEOUTS}
    h.op(1, "txn", send_inv(0, 10), "ok", send_ok(0, 0, 10), commit_held=held)
    [f], judged, _ = zombies(h)
    assert judged == 1
    assert "not held, asked for commitTransaction no earlier than 30.000 s: 29.0 s later" in (
        f.explanation
    )
    within = {**held, "asked": 27 * S}  # 26 s after the first acknowledgement: within 25 + 2
    assert zombies(
        H().op(1, "txn", send_inv(0, 10), "ok", send_ok(0, 0, 10), commit_held=within)
    ) == ([], 0, 0)


def test_what_a_held_commit_does_not_make_a_zombie_commit():
    # Refused (fenced) or unknown: Kafka kept its promise, or the history cannot tell.
    for outcome in ("fail", "info"):
        assert zombies(held_txn(H(), outcome)) == ([], 1, 0)
    # Held, but not provably past the timeout and the check: called 26 s after the first
    # acknowledgement, within the 25 s + 2 s bound.
    assert zombies(held_txn(H(), held_ms=25000)) == ([], 0, 0)
    # No send was acknowledged: the transaction may have begun at the coordinator only later.
    assert zombies(held_txn(H(), first_ack=None)) == ([], 0, 0)
    # A transaction whose commit was not held says nothing.
    assert zombies(H().op(1, "txn", send_inv(0, 10), "ok", send_ok(0, 0, 10))) == ([], 0, 0)


def test_a_fault_of_another_package_during_the_hold_leaves_the_commit_unjudged():
    # A coordinator that moved may take the commit before its first check for expired ones.
    h = H().nemesis("start-kill", {"kind": "one"})  # from 0.2 s, never stopped
    assert zombies(held_txn(h)) == ([], 0, 1)
    # Stopped before the first acknowledgement: the coordinator had settled by then.
    h = H().nemesis("start-kill", {"kind": "one"}).nemesis("stop-kill", {"kind": "one"})
    [f], judged, _ = zombies(held_txn(h))
    assert judged == 1 and f.kind == "zombie-commit"
    # A fault that acts on no node (the hold itself, nemesis/client.py) is no such fault.
    stalled = [{"effect": "stalled", "nodes": [], "side": "client", "by": "held before commit"}]
    h = H().nemesis("start-client", {"kind": "pause-commit", "slot": 1, "effects": stalled})
    assert len(zombies(held_txn(h))[0]) == 1


def test_the_registry_judges_held_commits(tmp_path):
    h = held_txn(H()).poll(9, {0: [(0, 10)]})
    verdict = _run(tmp_path / "a", h, concurrency=SLOTS)
    assert [f.kind for f in verdict.failures] == ["zombie-commit"]
    assert verdict.stats["held_commits_judged"] == 1
    verdict = _run(tmp_path / "b", held_txn(H(), "info"), concurrency=SLOTS)
    assert verdict.failures == [] and verdict.stats["held_commits_judged"] == 1
