"""The durability family on hand-written runs: lost acknowledged writes judged against Kafka's
durability model after power losses, each rule shown to fire and not to fire on its near miss
(docs/checkers.md, "Durability")."""

from __future__ import annotations

from checkers.api import check
from checkers.core.verdict import INVALID, UNKNOWN, VALID
from tests.unit.checkers.datalogs import B
from tests.unit.checkers.durability_runs import (
    NODES,
    data,
    heal,
    history,
    ms_at,
    open_power_loss,
    partition_log,
    power_loss,
    write_run,
)

DOC = "lost-write-power-loss-documented"
FSYNC = "lost-write-despite-fsync"
FEW = "lost-write-too-few-power-losses"


def _kinds(v):
    """The kinds found, less the write cycles Kafka allows (tolerated G0)."""
    return sorted(f.kind for f in _found(v))


def _found(v):
    return [f for f in v.findings if not f.kind.startswith("G0")]


def _reused(h, nodes=("n1", "n2", "n3"), **loss):
    """Value 1 acknowledged at offset 0 and read; the nodes lose power; value 2 is then
    acknowledged at offset 0 too, and the final reads read it."""
    h.send(0, 0, 1, 0).poll(1, {0: [(0, 1)]})
    power_loss(h, nodes, **loss)
    h.send(0, 0, 2, 0)
    heal(h).poll(9, {0: [(0, 2)]})
    return h


def test_a_coordinated_power_loss_under_the_default_flush_is_documented(tmp_path):
    run = write_run(tmp_path, _reused(history()), {n: [data(2)] for n in ("n1", "n2", "n3")})
    v = check(run, write=False)
    assert v.status == VALID, v.summary()
    (f,) = _found(v)
    assert f.kind == DOC and f.tolerated and f.data["values"] == [1]
    assert f.data["lost_power"] == ["n1", "n2", "n3"]
    # The queue saw it as an offset holding two values and a send going back, the data logs as
    # an acknowledged offset holding another value: all follow from it, and the finding says so.
    assert sorted(c["kind"] for c in f.data["consequences"]) == [
        "acked-offset-holds-other-write", "inconsistent-offsets", "nonmonotonic-send"
    ]  # fmt: skip
    assert "op 1" in f.explanation and "power-loss@all" in f.explanation


def test_the_same_loss_with_flush_on_every_message_fails(tmp_path):
    h = _reused(history(durability={"flush_messages": 1}))
    run = write_run(tmp_path, h, {n: [data(2)] for n in ("n1", "n2", "n3")})
    v = check(run, write=False)
    assert v.status == INVALID
    assert _kinds(v) == [
        "acked-offset-holds-other-write", "inconsistent-offsets", FSYNC, "nonmonotonic-send"
    ]  # fmt: skip
    (f,) = [f for f in _found(v) if f.kind == FSYNC]
    assert f.tolerated is None and "flush.messages=1" in f.explanation


def _lost(h, nodes=("n1", "n2", "n3"), **loss):
    """Values 1 and 2 acknowledged at offsets 0 and 1; the nodes lose power; the final reads
    read 3 and 4 there: the queue calls 1 and 2 lost writes."""
    h.send(0, 0, 1, 0).send(0, 0, 2, 1)
    power_loss(h, nodes, **loss)
    h.send(1, 0, 3, 0).send(1, 0, 4, 1)
    return heal(h).poll(9, {0: [(0, 3), (1, 4)]})


def test_lost_writes_the_queue_found_are_judged_without_data_logs(tmp_path):
    v = check(write_run(tmp_path, _lost(history())), write=False)
    assert v.status == VALID, v.summary()
    (f,) = _found(v)
    assert f.kind == DOC and f.data["values"] == [1, 2] and f.data["seen"] == {"lost-write": 2}
    assert {c["kind"] for c in f.data["consequences"]} == {"inconsistent-offsets"}


def test_one_power_loss_with_elr_on_fails(tmp_path):
    h = _lost(history(durability={"elr": True}), nodes=("n1",), target="one")
    v = check(write_run(tmp_path, h), write=False)
    assert v.status == INVALID
    assert set(_kinds(v)) == {FEW, "inconsistent-offsets"}
    (f,) = [f for f in _found(v) if f.kind == FEW]
    assert "only 1 of" in f.explanation and "ELR on" in f.explanation
    assert "MinISR-1 tolerance" in f.explanation or "at least one in sync replica" in f.explanation


def test_elr_read_from_the_committed_log_when_the_header_does_not_say(tmp_path):
    h = _lost(history(), nodes=("n1",), target="one")
    run = write_run(tmp_path, h, metadata=partition_log(elr=1))
    assert FEW in _kinds(check(run, write=False))


def test_one_power_loss_without_elr_and_no_isr_in_the_history_is_documented(tmp_path):
    # KIP-966's last replica standing: without ELR one unclean shutdown can lose committed data.
    h = _lost(history(durability={"elr": False}), nodes=("n1",), target="one")
    v = check(write_run(tmp_path, h), write=False)
    assert v.status == VALID and _kinds(v) == [DOC]
    assert "last replica standing cannot be ruled out" in _found(v)[0].explanation


def _standing(tmp_path, isr_at_loss):
    h = history(durability={"elr": False})
    h.send(0, 0, 1, 0).send(0, 0, 2, 1)
    shrink = ms_at(h)
    h.nemesis("start-partition", {"grudge": {"n1": ["n2", "n3"]}})
    power_loss(h, ["n1"], target="one")
    h.send(1, 0, 3, 0).send(1, 0, 4, 1)
    heal(h).poll(9, {0: [(0, 3), (1, 4)]})
    log = partition_log([(shrink, isr_at_loss), (ms_at(h) + 5000, [1, 2, 3])])
    return check(write_run(tmp_path, h, metadata=log), write=False)


def test_without_elr_the_last_replica_standing_losing_power_is_documented(tmp_path):
    v = _standing(tmp_path, [1])
    assert v.status == VALID, v.summary()
    assert _kinds(v) == [DOC] and "the last replica standing" in _found(v)[0].explanation


def test_without_elr_one_power_loss_while_another_isr_member_stayed_fails(tmp_path):
    v = _standing(tmp_path, [1, 2])
    assert v.status == INVALID
    (f,) = [f for f in _found(v) if f.kind == FEW]
    assert "held a replica that never lost power" in f.explanation


def test_two_power_losses_of_three_replicas_with_min_isr_two_are_documented(tmp_path):
    h = _lost(history(durability={"elr": True}), nodes=("n1", "n2"), target="majority")
    v = check(write_run(tmp_path, h), write=False)
    assert v.status == VALID and _kinds(v) == [DOC]
    # With min.insync.replicas 3 two are fewer than it: a failure with ELR on.
    h = _lost(history(durability={"elr": True, "min_insync_replicas": 3}),
              nodes=("n1", "n2"), target="majority")  # fmt: skip
    assert FEW in _kinds(check(write_run(tmp_path / "3", h), write=False))


def test_unclean_elections_allowed_make_any_power_loss_documented(tmp_path):
    h = _lost(history(durability={"elr": True, "unclean_leader_election": True}),
              nodes=("n1",), target="one")  # fmt: skip
    assert _kinds(check(write_run(tmp_path, h), write=False)) == [DOC]
    # The same from a committed ConfigRecord of the topic.
    h = _lost(history(durability={"elr": True}), nodes=("n1",), target="one")
    run = write_run(tmp_path / "config", h, metadata=partition_log(elr=1, unclean=True))
    assert _kinds(check(run, write=False)) == [DOC]


def test_a_loss_seen_before_the_power_loss_fails(tmp_path):
    h = history()
    h.send(0, 0, 1, 0).send(0, 0, 2, 1).poll(1, {0: [(1, 2)]})  # 1 missing before any loss
    power_loss(h, ["n1", "n2", "n3"])
    v = check(write_run(tmp_path, heal(h)), write=False)
    assert v.status == INVALID
    (f,) = _found(v)
    assert f.kind == FEW and "no power loss came after it was sent" in f.explanation


def test_a_power_loss_whose_start_never_completed_may_have_hit_every_node(tmp_path):
    h = history()
    h.send(0, 0, 1, 0).send(0, 0, 2, 1)
    open_power_loss(h)
    h.poll(9, {0: [(1, 2)]})
    v = check(write_run(tmp_path, h), write=False)
    assert v.status == VALID and _kinds(v) == [DOC]
    assert "its targets are not known" in _found(v)[0].explanation


def test_another_disk_fault_in_the_window_leaves_the_queue_finding(tmp_path):
    h = history(durability={"elr": True})
    h.send(0, 0, 1, 0).send(0, 0, 2, 1)
    power_loss(h, ["n1"], target="one")
    power_loss(h, ["n2"], target="one", kind="corrupt")
    heal(h).poll(9, {0: [(1, 2)]})
    v = check(write_run(tmp_path, h), write=False)
    assert _kinds(v) == ["lost-write", "unseen"]  # as the queue said them
    assert any("an effect no checker knows" in n for n in v.notes)


def test_lost_offsets_in_the_record_are_quoted(tmp_path):
    h = _lost(history(), lost_offsets={"n1": {"kchaos-queue-0": [0, 1]}})
    (f,) = _found(check(write_run(tmp_path, h), write=False))
    assert "n1: 120 bytes of kchaos-queue-0's segments" in f.explanation
    assert "offsets 0..1 lost" in f.explanation


def _never_read(h):
    h.send(0, 0, 1, 0).send(0, 0, 2, 1)
    power_loss(h, ["n1", "n2", "n3"])
    return heal(h).poll(9, {})


def test_unseen_writes_in_no_final_log_are_judged_lost(tmp_path):
    run = write_run(tmp_path, _never_read(history()), {n: [] for n in ("n1", "n2", "n3")})
    v = check(run, write=False)
    assert v.status == VALID, v.summary()
    assert _kinds(v) == [DOC] and _found(v)[0].data["seen"] == {"unseen": 2}


def test_unseen_writes_a_final_log_holds_stay_unseen(tmp_path):
    logs = {"n1": [data(1)], "n2": [data(1)], "n3": [data(1)]}
    v = check(write_run(tmp_path, _never_read(history()), logs), write=False)
    assert v.status == UNKNOWN
    assert _kinds(v) == [DOC, "unseen"]
    (u,) = [f for f in _found(v) if f.kind == "unseen"]
    assert u.data["values"] == [1] and u.unknown and u.ops == (1,)


def test_unseen_writes_are_not_judged_when_a_brokers_log_is_missing(tmp_path):
    run = write_run(tmp_path, _never_read(history()), {"n1": [], "n2": []})
    v = check(run, write=False)
    assert _kinds(v) == ["unseen"] and v.status == UNKNOWN
    assert any("no data log of n3" in n for n in v.notes)


def test_a_run_without_power_loss_is_not_judged_here(tmp_path):
    h = history()
    h.send(0, 0, 1, 0).send(0, 0, 2, 1).poll(1, {0: [(1, 2)]})
    v = check(write_run(tmp_path, heal(h)), write=False)
    assert _kinds(v) == ["lost-write", "unseen"]  # as the queue said them
    assert not any(n.startswith("durability: 1 power") for n in v.notes)


# -- every replica's final log (replicas.py) ------------------------------------------------

MISSING = "replica-missing-committed-records"
DIVERGED = "replica-divergence"
NOT_SERVED = "committed-record-not-served"


def _final(tmp_path, logs, checkpoints, isr=(1, 2, 3), reads=None, acked=(5, 6), info=()):
    """Sends of `acked` (ok, offsets 0, 1, ...) and `info` (timed out); a heal; the final
    reads return `reads` (default: the acked ones); the committed ISR ends as `isr`."""
    h = history()
    for o, v in enumerate(acked):
        h.send(0, 0, v, o)
    for v in info:
        h.send(1, 0, v, None, "info")
    heal(h).poll(9, {0: reads if reads is not None else list(enumerate(acked))})
    log = partition_log([(ms_at(h) - 5000, list(isr))])
    return check(write_run(tmp_path, h, logs, checkpoints, log), write=False)


def test_an_in_sync_replica_missing_committed_records_fails(tmp_path):
    logs = {"n1": [data(5, 6, 7, 8)], "n2": [data(5, 6)], "n3": [data(5, 6, 7, 8)]}
    v = _final(tmp_path, logs, {"n1": 4, "n3": 4}, info=(7, 8))
    assert v.status == INVALID
    (f,) = _found(v)
    assert f.kind == MISSING and f.data["broker"] == "n2" and f.data["offsets"] == [2, 3]
    assert "data/n1.txt:" in f.explanation and "n1's high-watermark checkpoint 4" in f.explanation


def test_a_follower_outside_the_final_isr_owes_nothing(tmp_path):
    logs = {"n1": [data(5, 6, 7, 8)], "n2": [data(5, 6)], "n3": [data(5, 6, 7, 8)]}
    v = _final(tmp_path, logs, {"n1": 4, "n3": 4}, isr=(1, 3), info=(7, 8))
    assert _found(v) == [] and v.status == VALID


def test_records_above_the_committed_bound_are_not_judged(tmp_path):
    logs = {"n1": [data(5, 6, 7)], "n2": [data(5, 6, 9)], "n3": [data(5, 6)]}
    v = _final(tmp_path, logs, {"n1": 2, "n2": 2, "n3": 2}, info=(7, 9))
    assert _found(v) == [] and v.status == VALID


def test_in_sync_replicas_holding_different_committed_records_fail(tmp_path):
    logs = {"n1": [data(5, 6)], "n2": [data(5, 9)], "n3": [data(5, 6)]}
    v = _final(tmp_path, logs, {"n1": 2, "n2": 2, "n3": 2}, info=(9,))
    assert v.status == INVALID
    pairs = sorted(tuple(f.data["brokers"]) for f in _found(v) if f.kind == DIVERGED)
    assert pairs == [("n1", "n2"), ("n2", "n3")]
    f = next(f for f in _found(v) if f.kind == DIVERGED)
    assert "at offset 1 n1 holds value 6" in f.explanation and "n2 holds value 9" in f.explanation


def test_a_committed_record_the_final_reads_skipped_fails(tmp_path):
    logs = {n: [data(5, 6), data(9), data(7)] for n in ("n1", "n2", "n3")}
    reads = [(0, 5), (1, 6), (3, 7)]
    v = _final(tmp_path, logs, {"n1": 4}, reads=reads, acked=(5, 6), info=(9, 7))
    assert v.status == INVALID
    (f,) = _found(v)
    assert f.kind == NOT_SERVED and f.data["values"] == [9] and f.data["offsets"] == [2]


def test_a_committed_record_past_where_the_final_reads_ended_is_not_judged(tmp_path):
    logs = {n: [data(5, 6), data(9)] for n in ("n1", "n2", "n3")}
    v = _final(tmp_path, logs, {"n1": 3}, reads=[(0, 5), (1, 6)], info=(9,))
    assert NOT_SERVED not in _kinds(v)
    # Nor a transactional record (read_committed hides an aborted one).
    txn = {n: [data(5, 6), B(7, 0, values=(9,)), data(7)] for n in ("n1", "n2", "n3")}
    v = _final(tmp_path / "txn", txn, {"n1": 4}, reads=[(0, 5), (1, 6), (3, 7)], info=(9, 7))
    assert NOT_SERVED not in _kinds(v)


def test_replicas_are_not_compared_without_a_committed_isr(tmp_path):
    h = history().send(0, 0, 5, 0)
    heal(h).poll(9, {0: [(0, 5)]})
    logs = {"n1": [data(5)], "n2": [data(7)], "n3": [data(5)]}
    v = check(write_run(tmp_path, h, logs, {"n1": 1}), write=False)
    assert DIVERGED not in _kinds(v)
    assert any("replicas not compared" in n for n in v.notes)


def test_a_durability_header_that_cannot_be_read_judges_nothing(tmp_path):
    for bad, said in (("fsync", "not an object"), ({"flush_messages": "1"}, "flush_messages")):
        h = _lost(history(durability=bad))
        v = check(write_run(tmp_path / str(len(said)), h), write=False)
        assert "lost-write" in _kinds(v) and DOC not in _kinds(v)
        assert any(n.startswith("durability: lost writes not judged") and said in n
                   for n in v.notes)  # fmt: skip


def test_the_plans_min_isr_stands_when_the_header_declares_none(tmp_path):
    # Two of three replicas lost power; the plan's min.insync.replicas 3 makes that too few.
    h = _lost(history(), nodes=("n1", "n2"), target="majority")
    run = write_run(tmp_path, h, metadata=partition_log(elr=1), plan={"min_insync_replicas": 3})
    assert FEW in _kinds(check(run, write=False))


def _read_before_reuse(h):
    """Values 1 and 5 at offsets 0 and 1, read; every node loses power; value 2 is acknowledged
    at offset 0 again, and the final reads read nothing: the queue calls 2 a lost write, since a
    poll (before 2 was sent) read past its offset."""
    h.send(0, 0, 1, 0).send(0, 0, 5, 1).poll(1, {0: [(0, 1), (1, 5)]})
    power_loss(h, ["n1", "n2", "n3"])
    h.send(0, 0, 2, 0)
    return heal(h).poll(9, {})


def test_a_lost_write_read_past_before_it_was_sent_follows_from_the_documented_loss(tmp_path):
    run = write_run(tmp_path, _read_before_reuse(history()), {n: [data(2)] for n in NODES})
    v = check(run, write=False)
    assert v.status in (VALID, UNKNOWN), v.summary()
    assert "lost-write" not in _kinds(v)
    (f,) = [f for f in _found(v) if f.kind == DOC]
    assert f.data["values"] == [1, 5]
    assert "lost-write" in {c["kind"] for c in f.data["consequences"]}


def test_without_data_logs_such_a_lost_write_stays_as_the_queue_said_it(tmp_path):
    v = check(write_run(tmp_path, _read_before_reuse(history())), write=False)
    assert "lost-write" in _kinds(v) and DOC not in _kinds(v)


def test_a_documented_loss_and_the_unseen_writes_that_remain_on_one_key(tmp_path):
    h = history()
    h.send(0, 0, 1, 0).poll(1, {0: [(0, 1)]}).send(0, 0, 4, 1)
    power_loss(h, NODES)
    h.send(0, 0, 2, 0).send(0, 0, 3, 1)
    heal(h).poll(9, {})
    v = check(write_run(tmp_path, h, {n: [data(2, 3)] for n in NODES}), write=False)
    assert v.status == UNKNOWN, v.summary()
    assert _kinds(v) == [DOC, "unseen"]
    doc, unseen = sorted(_found(v), key=lambda f: f.kind)
    assert doc.data["values"] == [1, 4] and unseen.data["values"] == [2, 3]
    assert {c["kind"] for c in doc.data["consequences"]} >= {"inconsistent-offsets"}


# -- records polled and then gone, without a power loss (polled.py) ---------------------------

GONE = "lost-committed-record"


def _polled_then(tmp_path, logs, reads, info=(), **header):
    """Values 5 and 6 acknowledged at offsets 0 and 1 and `info` (timed out); a consumer polls
    every one of them during the run; a heal; the final reads return `reads`."""
    h = history(**header)
    h.send(0, 0, 5, 0).send(0, 0, 6, 1)
    for v in info:
        h.send(1, 0, v, None, "info")
    h.poll(2, {0: [(0, 5), (1, 6), *((2 + i, v) for i, v in enumerate(info))]})
    heal(h).poll(9, {0: reads})
    return check(write_run(tmp_path, h, logs, {"n1": len(reads)}), write=False)


def test_a_record_polled_and_then_in_no_final_log_is_a_lost_committed_record(tmp_path):
    logs = {n: [data(5)] for n in NODES}
    v = _polled_then(tmp_path, logs, [(0, 5)])
    assert v.status == INVALID
    (f,) = [f for f in _found(v) if f.kind == GONE]
    assert f.key == 0 and f.data["values"] == [6] and f.data["offsets"] == [1]
    assert f.ops == (5,) and f.tolerated is None  # the poll that was given it
    assert "Only committed messages are ever given out to the consumer" in f.explanation


def test_a_timed_out_send_a_consumer_read_was_committed_too(tmp_path):
    logs = {n: [data(5, 6)] for n in NODES}
    v = _polled_then(tmp_path, logs, [(0, 5), (1, 6)], info=(7,))
    (f,) = [f for f in _found(v) if f.kind == GONE]
    assert f.data["values"] == [7] and v.status == INVALID


def test_a_polled_record_one_replica_still_holds_is_not_lost(tmp_path):
    # Held by a replica outside the ISR only, and not served by the final reads: that the
    # final reads skipped it is judged elsewhere; it is not gone.
    logs = {"n1": [data(5)], "n2": [data(5, 6)], "n3": [data(5)]}
    v = _polled_then(tmp_path, logs, [(0, 5)])
    assert GONE not in _kinds(v)


def test_with_unclean_elections_allowed_the_loss_is_documented(tmp_path):
    logs = {n: [data(5)] for n in NODES}
    durability = {"replication": 3, "min_insync_replicas": 2, "flush_messages": None,
                  "unclean_leader_election": True, "elr": None}  # fmt: skip
    v = _polled_then(tmp_path, logs, [(0, 5)], durability=durability)
    (f,) = [f for f in _found(v) if f.kind == GONE]
    assert f.tolerated.startswith("unclean leader elections were allowed")


def test_without_every_brokers_log_nothing_is_looked_for(tmp_path):
    logs = {"n1": [data(5)], "n2": [data(5)]}
    v = _polled_then(tmp_path, logs, [(0, 5)])
    assert GONE not in _kinds(v)
    assert "durability: records polled during the run not looked for: no data log of n3" in (
        v.notes
    )


def test_a_power_loss_run_keeps_the_lost_write_judgement(tmp_path):
    h = history()
    h.send(0, 0, 5, 0).send(0, 0, 6, 1).poll(2, {0: [(0, 5), (1, 6)]})
    power_loss(h, NODES)
    heal(h).poll(9, {0: [(0, 5)]})
    v = check(write_run(tmp_path, h, {n: [data(5)] for n in NODES}, {"n1": 1}), write=False)
    assert GONE not in _kinds(v) and DOC in _kinds(v)


# -- a lost write first seen lost before the power loss (seen.py) ------------------------------


def _seen_then_lost(tmp_path, first_poll):
    """Values 1, 2, 3 acknowledged at offsets 0, 1, 2; a poll returns `first_poll`; every node
    loses power; value 4 is acknowledged at offset 3 and the final reads return 1, 3 and 4 (so
    the queue's lost-write of value 2 cites the final read, after the power loss)."""
    h = history()
    h.send(0, 0, 1, 0).send(0, 0, 2, 1).send(0, 0, 3, 2).poll(1, {0: first_poll})
    power_loss(h, NODES)
    h.send(0, 0, 4, 3)
    heal(h).poll(9, {0: [(0, 1), (2, 3), (3, 4)]})
    return check(write_run(tmp_path, h), write=False)


def test_a_write_a_poll_read_across_before_the_power_loss_is_not_the_power_losss(tmp_path):
    # The poll read offsets 0 and 2 one after the other, after value 2 was acknowledged at 1:
    # it was gone before any power loss, which cannot explain it (KIP-966's loss happens at
    # the unclean shutdown).
    v = _seen_then_lost(tmp_path, [(0, 1), (2, 3)])
    (f,) = [f for f in _found(v) if f.kind in (DOC, FSYNC, FEW)]
    assert f.kind == FEW and f.data["values"] == [2]
    assert "no power loss came after it was sent and before it was missed" in f.explanation
    assert v.status == INVALID


def test_another_record_at_its_offset_before_the_power_loss_is_seen_too(tmp_path):
    v = _seen_then_lost(tmp_path, [(0, 1), (1, 3)])
    assert FEW in _kinds(v) and DOC not in _kinds(v)


def test_a_poll_that_only_returned_a_higher_offset_proves_nothing_before_the_power_loss(tmp_path):
    # The consumer may have been past offset 1 already: the power loss stays the explanation.
    v = _seen_then_lost(tmp_path, [(2, 3)])
    (f,) = [f for f in _found(v) if f.kind in (DOC, FSYNC, FEW)]
    assert f.kind == DOC and f.data["values"] == [2]


# -- ZooKeeper mode: each replica held to its own checkpoint (replicas.compare_own_bounds) -----

ZK_CLUSTER = {
    "topology": "zk",
    "nodes": [{"name": f"n{i}", "roles": ["broker"], "node_id": i} for i in (1, 2, 3)]
    + [{"name": "zk1", "roles": ["zookeeper"], "node_id": 0}],
}


def _zk_final(tmp_path, logs, checkpoints, reads, acked=(5, 6), info=()):
    import json

    h = history()
    for o, v in enumerate(acked):
        h.send(0, 0, v, o)
    for v in info:
        h.send(1, 0, v, None, "info")
    heal(h).poll(9, {0: reads})
    run = write_run(tmp_path, h, logs, checkpoints)
    (run / "cluster.json").write_text(json.dumps(ZK_CLUSTER))
    return check(run, write=False)


def test_zk_mode_replicas_agreeing_below_their_own_checkpoints_raise_nothing(tmp_path):
    # n3 lags (its checkpoint 1): it owes nothing above it, and n1's tail above 2 is not judged.
    logs = {"n1": [data(5, 6, 7)], "n2": [data(5, 6)], "n3": [data(5)]}
    v = _zk_final(tmp_path, logs, {"n1": 2, "n2": 2, "n3": 1}, [(0, 5), (1, 6)], info=(7,))
    # (The ZooKeeper controller check has no broker logs here to read: its own unknown.)
    assert [f for f in _found(v) if f.kind != "zk-controller-epochs-unknown"] == []
    assert any("1 partitions' replicas compared below their own" in n for n in v.notes)


def test_zk_mode_replicas_differing_below_both_checkpoints_diverge(tmp_path):
    logs = {"n1": [data(5, 6)], "n2": [data(5, 9)], "n3": [data(5, 6)]}
    v = _zk_final(tmp_path, logs, {"n1": 2, "n2": 2, "n3": 2}, [(0, 5), (1, 6)], info=(9,))
    assert v.status == INVALID
    pairs = sorted(tuple(f.data["brokers"]) for f in _found(v) if f.kind == DIVERGED)
    assert pairs == [("n1", "n2"), ("n2", "n3")]
    assert "ZooKeeper mode" in next(f for f in _found(v) if f.kind == DIVERGED).explanation


def test_zk_mode_a_replica_lacking_what_its_own_checkpoint_claims_is_missing_records(tmp_path):
    logs = {"n1": [data(5, 6, 7)], "n2": [data(5)], "n3": [data(5, 6, 7)]}
    v = _zk_final(tmp_path, logs, {"n1": 3, "n2": 3, "n3": 3}, [(0, 5), (1, 6), (2, 7)], info=(7,))
    (f,) = [f for f in _found(v) if f.kind == MISSING]
    assert f.data["broker"] == "n2" and f.data["offsets"] == [1, 2]


def test_zk_mode_a_committed_record_the_final_reads_skipped_is_not_served(tmp_path):
    logs = {n: [data(5, 6), data(9), data(7)] for n in ("n1", "n2", "n3")}
    v = _zk_final(tmp_path, logs, {"n1": 4, "n2": 4}, [(0, 5), (1, 6), (3, 7)], info=(9, 7))
    (f,) = [f for f in _found(v) if f.kind == NOT_SERVED]
    assert f.data["values"] == [9] and f.data["offsets"] == [2]
