"""The share checks beside finality (checkers/families/share/): at-least-once against the drain,
lock exclusivity, delivery counts, one poll's order, read_committed and start offsets, over
hand-written share runs that break each rule and generated ones that keep KIP-932's states."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.api import check
from checkers.families.share import at_least_once, committed, counts, locks, ordering
from checkers.families.share import start_offsets as starts
from checkers.families.share.checks import check_share_run
from history.columnar import op_rows, to_table
from tests.unit.checkers.histories import SEC
from tests.unit.checkers.test_share_finality import REFUSED, S

SHARE = {"group": "g", "topic": "kchaos-share", "lock_ms": 2000, "delivery_limit": 5}


class R(S):
    """S with a share run's header, sends, the drain and the offsets."""

    def __init__(self, **share: Any) -> None:
        super().__init__(share={**SHARE, **share})

    def sent(self, k: int, offset: int, v: int | None = None, p: int = 0) -> R:
        self.send(p, k, 100 + offset if v is None else v, offset)
        return self

    def offsets(self, p: int, start: dict[int, int | None], lag: dict[int, int | None]) -> R:
        out = {
            str(k): None if s is None else {"start": s, "lag": lag.get(k)} for k, s in start.items()
        }
        self.op(p, "share-offsets", {"group": "g"}, "ok", {"group": "g", "offsets": out})
        return self

    def wait(self, seconds: float) -> R:
        self.clock += int(seconds * SEC)
        return self

    def drain(
        self, p: int, lag: dict[int, int], start: dict[int, int], got: list[list[int]] = ()
    ) -> R:
        """The final drain: subscribe, deliver and accept `got`, go quiet for 7 s, offsets."""
        self.offsets(p, start, lag).subscribe(p)
        if got:
            self.deliver(p, [list(r) for r in got])
            self.ack(p, [[r[0], r[1], "accept"] for r in got])
        self.wait(7).heard(p, [])
        return self.offsets(p, start, lag)


def judge(h: S) -> tuple[list[Any], dict[str, int]]:
    t = to_table(h.history())
    rows = op_rows(t).to_pylist()
    return check_share_run(rows, h.header)


def kinds(h: S) -> list[str]:
    return sorted(f.kind for f in judge(h)[0])


# -- at-least-once --------------------------------------------------------------------------
def test_a_record_never_delivered_on_a_drained_partition_is_found():
    h = R().sent(0, 0).sent(0, 1).subscribe(2)
    h.deliver(2, [[0, 0, 100, 1]]).ack(2, [[0, 0, "accept"]])
    h.drain(9, {0: 0}, {0: 2})
    [f], stats = judge(h)
    assert f.kind == at_least_once.NEVER_DELIVERED_KIND and f.data["offsets"] == [1]
    assert "offsets 1 were never handed to any consumer" in f.explanation
    assert stats["share_settled_by_ack"] == 1 and stats["share_drained_keys"] == 1


def test_a_consumer_that_stops_handing_records_over_is_named():
    # Kafka 4.2.2's run 20261128T104956-13, no faults: process 4, the one consumer holding
    # partition 1, renewed offset 11 by commitSync (ok) and left offset 10 unacknowledged; its
    # client never handed 11 back, and every later poll returned nothing while partition 1's
    # records were acquired for it until archived at the limit, so the drain found it empty.
    h = R().sent(1, 10).sent(1, 11).sent(1, 13).subscribe(4)
    h.deliver(4, [[1, 10, 110, 1], [1, 11, 111, 1]]).ack(4, [[1, 11, "renew"]])
    h.wait(3.5).ack(4, [[1, 10, "accept"]], REFUSED)
    for _ in range(3):
        h.wait(0.5).heard(4, [])
    h.drain(9, {1: 0}, {1: 14})
    found, _ = judge(h)
    assert sorted(f.kind for f in found) == [
        at_least_once.ARCHIVED_EARLY_KIND,
        at_least_once.NEVER_DELIVERED_KIND,
    ]
    [never] = [f for f in found if f.kind == at_least_once.NEVER_DELIVERED_KIND]
    assert never.data["offsets"] == [13] and never.tolerated is None
    assert never.explanation.endswith(
        "; process 4, the last consumer handed partition 1 before the drain (op 9 at 1.000 s), "
        "was handed nothing by its 3 later polls (5.600 s to 7.000 s), after its RENEW of "
        "partition 1 offset 11 (op 10, answered ok), which no later poll handed back"
    )
    # As 4.4.0's client does: the renewed record is handed back, accepted, and the consumer
    # goes on; nothing to find.
    h = R().sent(1, 10).sent(1, 11).sent(1, 13).subscribe(4)
    h.deliver(4, [[1, 10, 110, 1], [1, 11, 111, 1]]).ack(4, [[1, 11, "renew"]])
    h.ack(4, [[1, 10, "accept"]]).deliver(4, [[1, 11, 111, 1]]).ack(4, [[1, 11, "accept"]])
    h.deliver(4, [[1, 13, 113, 1]]).ack(4, [[1, 13, "accept"]])
    h.drain(9, {1: 0}, {1: 14})
    assert judge(h)[0] == []


def test_settled_records_and_an_undrained_partition():
    # Accepted (ok, unheard, or an ambiguous error), rejected, at the limit, or retained.
    h = R().sent(0, 0).sent(0, 1).sent(0, 2).sent(0, 3).sent(0, 4).subscribe(2)
    h.deliver(2, [[0, 0, 100, 1]]).ack(2, [[0, 0, "accept"]], "TimeoutException: t")
    h.deliver(2, [[0, 1, 101, 1]]).ack(2, [[0, 1, "reject"]], heard=True)
    h.deliver(2, [[0, 2, 102, 5]]).ack(2, [[0, 2, "release"]])
    h.deliver(2, [[0, 3, 103, 1]]).deliver(2, [], carried=[[0, 3, "accept"]])
    h.poll(7, {0: [(5, 105)]})  # the final log read starts above offset 4: retention
    h.drain(9, {0: 0}, {0: 5})
    found, stats = judge(h)
    assert found == [] and stats["share_removed_by_retention"] == 1
    assert stats["share_archived_at_limit"] == 1 and stats["share_settled_by_ack"] == 3
    # A delivered record refused and never settled: archived before the limit, tolerated.
    h = R().sent(0, 0).subscribe(2)
    h.deliver(2, [[0, 0, 100, 1]]).ack(2, [[0, 0, "accept"]], REFUSED)
    h.drain(9, {0: 0}, {0: 1})
    [f] = judge(h)[0]
    assert f.kind == at_least_once.ARCHIVED_EARLY_KIND and f.tolerated
    # The drain left a lag: unknown, not a failure.
    h = R().sent(0, 0).subscribe(2).drain(9, {0: 1}, {0: 0})
    [f] = judge(h)[0]
    assert f.kind == at_least_once.UNSETTLED_KIND and f.unknown
    # No drain at all, or one that did not stay quiet long enough: unknown too.
    h = R().sent(0, 0).subscribe(2).offsets(9, {0: 0}, {0: 0})
    assert [f.unknown for f in judge(h)[0]] == [True]


# -- lock exclusivity -----------------------------------------------------------------------
def test_a_second_consumer_handed_a_record_inside_the_first_ones_lock_is_found():
    h = R().sent(0, 7).subscribe(2).subscribe(3)
    h.deliver(2, [[0, 7, 107, 1]]).deliver(3, [[0, 7, 107, 2]]).heard(2, [])
    [f] = [f for f in judge(h)[0] if f.kind == locks.OVERLAP_KIND]
    assert f.data["holder"] == 2 and f.data["other"] == 3 and f.ops == (7, 9)


def test_what_is_not_a_lock_overlap():
    # After the lock: 2 s from the send, less the margin.
    h = R().sent(0, 7).subscribe(2).subscribe(3).deliver(2, [[0, 7, 107, 1]])
    h.wait(2).deliver(3, [[0, 7, 107, 2]]).heard(2, [])
    assert locks.OVERLAP_KIND not in kinds(h)
    # The holder closed (its last op) before.
    h = R().sent(0, 7).subscribe(2).subscribe(3).deliver(2, [[0, 7, 107, 1]])
    h.deliver(3, [[0, 7, 107, 2]])
    assert locks.OVERLAP_KIND not in kinds(h)
    # The holder released it first; the same consumer again; a count not above (a stale copy).
    h = R().sent(0, 7).subscribe(2).subscribe(3).deliver(2, [[0, 7, 107, 1]])
    h.ack(2, [[0, 7, "release"]]).deliver(3, [[0, 7, 107, 2]]).heard(2, [])
    assert locks.OVERLAP_KIND not in kinds(h)
    h = R().sent(0, 7).subscribe(2).deliver(2, [[0, 7, 107, 1], [0, 7, 107, 2]])
    assert locks.OVERLAP_KIND not in kinds(h)
    h = R().sent(0, 7).subscribe(2).subscribe(3)
    h.deliver(3, [[0, 7, 107, 2]]).deliver(2, [[0, 7, 107, 2]]).heard(3, [])
    assert locks.OVERLAP_KIND not in kinds(h)
    # Inside a fault window: a leader change ends the attempt and may lose counts.
    h = R().sent(0, 7).subscribe(2).subscribe(3).deliver(2, [[0, 7, 107, 1]])
    h.op("nemesis", "start-kill", {}, "ok", {"targets": ["n1"]})
    h.deliver(3, [[0, 7, 107, 2]]).heard(2, [])
    found, stats = judge(h)
    assert locks.OVERLAP_KIND not in {f.kind for f in found}
    assert stats["share_lock_pairs_excused_by_faults"] == 1


def test_an_acknowledgement_accepted_after_another_consumer_got_the_record_is_found():
    # B (3) holds a later acquisition and has not settled it: A's (4) stale ACCEPT answered ok
    # was applied by a broker that let a non-holder acknowledge.
    h = R().sent(0, 25).subscribe(3).subscribe(4).wait(3)
    h.deliver(3, [[0, 25, 125, 2]])
    h.deliver(4, [[0, 25, 125, 1]]).ack(4, [[0, 25, "accept"]]).heard(3, [])
    [f] = [f for f in judge(h)[0] if f.kind == locks.ACK_AFTER_KIND]
    assert f.data["acked_by"] == 4 and f.data["other"] == 3 and f.data["other_count"] == 2
    assert f.tolerated is None
    # B's ACCEPT was refused (not final): the same failure.
    h = R().sent(0, 25).subscribe(3).subscribe(4).wait(3)
    h.deliver(3, [[0, 25, 125, 2]]).ack(3, [[0, 25, "accept"]], REFUSED)
    h.deliver(4, [[0, 25, 125, 1]]).ack(4, [[0, 25, "accept"]])
    assert locks.ACK_AFTER_KIND in kinds(h)
    # B settled it only after A's acknowledgement was sent: A's ok came first, a failure.
    h = R().sent(0, 25).subscribe(3).subscribe(4).wait(3)
    h.deliver(3, [[0, 25, 125, 2]]).deliver(4, [[0, 25, 125, 1]])
    h.ack(4, [[0, 25, "release"]]).ack(3, [[0, 25, "accept"]])
    assert locks.ACK_AFTER_KIND in kinds(h)
    # B only released it: not final, a failure.
    h = R().sent(0, 25).subscribe(3).subscribe(4).wait(3)
    h.deliver(3, [[0, 25, 125, 2]]).ack(3, [[0, 25, "release"]])
    h.deliver(4, [[0, 25, 125, 1]]).ack(4, [[0, 25, "accept"]])
    assert locks.ACK_AFTER_KIND in kinds(h)
    # Refused, as the KIP says: nothing.
    h = R().sent(0, 25).subscribe(3).subscribe(4).wait(3)
    h.deliver(3, [[0, 25, 125, 2]]).ack(3, [[0, 25, "accept"]])
    h.deliver(4, [[0, 25, 125, 1]]).ack(4, [[0, 25, "accept"]], REFUSED)
    assert locks.ACK_AFTER_KIND not in kinds(h)
    assert locks.ACK_AFTER_FINAL_KIND not in kinds(h)


def test_an_ok_acknowledgement_of_a_record_already_final_is_tolerated():
    # Kafka 4.1.2's run 20261128T104241-12, no faults, partition 0 offsets 6 and 7: process 3
    # (implicit mode) was handed both with count 2 and accepted them on its next poll (the
    # callback said ok only 3.7 s later, at its next poll after a stay-away); process 4, back
    # from a stay-away, was handed its prefetched copies with count 1, 1.3 s after process 3
    # sent its ACCEPT, and its ACCEPT of 6 and RELEASE of 7 were answered ok. The start offset
    # had passed them: SharePartition.acknowledge skipped the batch and answered ok.
    h = R().sent(0, 6, 15).sent(0, 7, 1000019).subscribe(3, "implicit").subscribe(4).wait(3)
    h.deliver(3, [[0, 6, 15, 2], [0, 7, 1000019, 2]])
    h.deliver(3, [], carried=[[0, 6, "accept"], [0, 7, "accept"]]).wait(1.3)
    h.deliver(4, [[0, 6, 15, 1], [0, 7, 1000019, 1]])
    h.deliver(4, [], carried=[[0, 6, "accept"], [0, 7, "release"]])
    h.heard(4, [[0, [6, 7], "ok"]]).wait(2.3).heard(3, [[0, [6, 7], "ok"]])
    found, _ = judge(h)
    assert locks.ACK_AFTER_KIND not in {f.kind for f in found}
    after = [f for f in found if f.kind == locks.ACK_AFTER_FINAL_KIND]
    assert [(f.data["offset"], f.data["type"]) for f in after] == [(6, "accept"), (7, "release")]
    assert all(f.tolerated and f.data["final_by"] == 3 for f in after)
    assert "a prefetched copy" in after[0].explanation
    assert valid(h)


def valid(h: R) -> bool:
    """No finding of the run fails it."""
    return all(f.tolerated is not None or f.unknown for f in judge(h)[0])


# -- counts, order, read_committed, start offsets ----------------------------------------------
def test_delivery_counts_above_the_limit_or_below_one_are_found():
    h = R(delivery_limit=3).sent(0, 1).sent(0, 2).subscribe(2)
    h.deliver(2, [[0, 1, 101, 4], [0, 2, 102, 0]])
    found = [f for f in judge(h)[0] if f.kind.startswith("share-delivery-count")]
    assert sorted(f.kind for f in found) == [counts.ABOVE_LIMIT_KIND, counts.INVALID_KIND]
    h = R(delivery_limit=3).sent(0, 1).subscribe(2).deliver(2, [[0, 1, 101, 3], [0, 1, 101, 1]])
    assert [k for k in kinds(h) if k.startswith("share-delivery-count")] == []


def test_one_poll_returning_a_partition_out_of_offset_order_is_found():
    h = R().sent(0, 0).sent(0, 1).subscribe(2)
    h.deliver(2, [[0, 0, 100, 1], [0, 1, 101, 1], [0, 0, 100, 2], [0, 1, 101, 2], [1, 0, 9, 1]])
    [f] = [f for f in judge(h)[0] if f.kind == ordering.KIND]
    assert f.key == 0 and f.data["counts"] == [1, 1, 2, 2]
    h = (
        R()
        .sent(0, 0)
        .sent(0, 1)
        .subscribe(2)
        .deliver(2, [[0, 1, 101, 1]])
        .deliver(2, [[0, 0, 100, 1]])
    )
    assert ordering.KIND not in kinds(h)


def test_under_read_committed_an_aborted_transactions_record_is_not_delivered():
    def run(isolation: str | None) -> R:
        h = R(isolation_level=isolation) if isolation else R()
        h.subscribe(2)
        h.invoke(0, "txn", [["send", 0, 5], ["send", 0, 6]])
        h.deliver(2, [[0, 0, 5, 1]])
        h.complete(0, "txn", "fail", [["send", 0, 5], ["send", 0, 6]])
        h.deliver(2, [[0, 1, 6, 1]])
        h.txn(1, [["send", 0, 7]], [["send", 0, [2, 7]]])
        h.deliver(2, [[0, 2, 7, 1]])
        return h

    found = [f for f in judge(run("read_committed"))[0] if f.kind in committed.RULES]
    assert [f.kind for f in found] == [committed.OPEN_KIND, committed.ABORTED_KIND]
    assert [f.data["value"] for f in found] == [5, 6]
    assert [k for k in kinds(run(None)) if k in committed.RULES] == []


def test_a_start_offset_that_moves_back_is_found():
    h = R().offsets(9, {0: 5, 1: None}, {0: 0}).offsets(9, {0: 4, 1: 3}, {0: 0})
    [f] = judge(h)[0]
    assert f.kind == starts.KIND and f.data == {"before": 5, "after": 4}
    h = R().offsets(9, {0: 5}, {0: 0}).offsets(9, {0: 5}, {0: 0}).offsets(9, {0: 9}, {0: 0})
    assert judge(h)[0] == []


def test_the_registry_runs_every_share_rule(tmp_path):
    h = R().sent(0, 0).sent(0, 1).subscribe(2)
    h.deliver(2, [[0, 0, 100, 1]]).ack(2, [[0, 0, "accept"]]).drain(9, {0: 0}, {0: 2})
    h.write(tmp_path)
    verdict = check(tmp_path, write=False)
    assert [f.kind for f in verdict.failures] == [at_least_once.NEVER_DELIVERED_KIND]
    assert verdict.stats["share_sent"] == 2


# -- generated runs that keep KIP-932's states: nothing fails ------------------------------------
@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2),  # consumer
            st.integers(0, 3),  # record
            st.sampled_from(["accept", "reject", "release", None]),
            st.booleans(),  # answered ok (else refused: the lock was gone)
            st.integers(0, 3),  # tenths of a lock waited before
            st.booleans(),  # the start offsets asked after this step
        ),
        max_size=30,
    ),
    st.booleans(),  # a stale copy handed to another consumer after the lock, refused
    st.booleans(),  # read_committed, the records sent by committed transactions
)
def test_a_share_group_that_keeps_its_states_fails_no_rule(steps, stale, txn):
    """One partition, four records sent at the start; each step, a consumer acquires a record
    that is available (its count up by one, within the limit), then acknowledges it or lets its
    lock expire (the clock moves past it); the drain then accepts whatever is left."""
    h = R(isolation_level="read_committed") if txn else R()
    if txn:
        h.txn(
            0, [["send", 0, 100], ["send", 0, 101]], [["send", 0, [0, 100]], ["send", 0, [1, 101]]]
        )
        h.txn(
            0, [["send", 0, 102], ["send", 0, 103]], [["send", 0, [2, 102]], ["send", 0, [3, 103]]]
        )
        h.txn(1, [["send", 0, 104]], [["send", 0, 104]], "fail")  # aborted: never delivered
    else:
        h.sent(0, 0).sent(0, 1).sent(0, 2).sent(0, 3)
    for p in (2, 3, 4):
        h.subscribe(p)
    count = {o: 0 for o in range(4)}
    done: set[int] = set()
    for consumer, offset, kind, ok, waited, ask in steps:
        if ask:  # the start offset: the first record still in delivery
            first = min((o for o in range(4) if o not in done and count[o] < 5), default=4)
            h.offsets(8, {0: first}, {0: 4 - first})
        h.wait(waited * 0.2)
        if offset in done or count[offset] == 5:
            continue
        p = 2 + consumer
        count[offset] += 1
        h.deliver(p, [[0, offset, 100 + offset, count[offset]]])
        if kind is not None and ok:
            h.ack(p, [[0, offset, kind]])
            done |= {offset} if kind != "release" else set()
        else:
            if kind is not None:
                h.ack(p, [[0, offset, kind]], REFUSED)
            h.wait(2.5)  # the lock expires
    if stale:
        h.deliver(4, [[0, 0, 100, max(1, count[0])]]).ack(4, [[0, 0, "accept"]], REFUSED)
    left = [o for o in range(4) if o not in done and count[o] < 5]
    h.drain(9, {0: 0}, {0: 4}, [[0, o, 100 + o, count[o] + 1] for o in left])
    found = judge(h)[0]
    assert [f.kind for f in found if not f.tolerated and not f.unknown] == []


def _client_pause(h: R, action: str, slot: int = 2) -> R:
    """A client:pause step of a share consumer's slot: its effects name no node (nemesis/
    client.py), so no share-partition leader or coordinator moved."""
    if action == "start":
        stopped = [{"effect": "stopped", "nodes": [], "by": f"SIGSTOP of slot {slot}'s client"}]
        value = {"kind": "pause", "slot": slot, "effects": stopped}
    else:
        resumed = [{"effect": "resumed", "nodes": [], "by": f"slot {slot}'s client let go"}]
        value = {"kind": "pause", "slot": slot, "effects": resumed}
    return h.op("nemesis", f"{action}-client", {"kind": "pause"}, "ok", value)  # type: ignore[return-value]


def test_a_consumer_paused_past_its_lock_has_its_late_acknowledgement_judged():
    # Consumer 2 is handed the record, then stopped (client:pause) past the 2 s lock; consumer
    # 3 is handed a later acquisition; consumer 2, continued, sends its ACCEPT.
    def paused(outcome: Any = None) -> R:
        h = R().sent(0, 7).subscribe(2).subscribe(3).deliver(2, [[0, 7, 107, 1]])
        _client_pause(h, "start").wait(3)
        h.deliver(3, [[0, 7, 107, 2]])
        _client_pause(h, "stop")
        args = () if outcome is None else (outcome,)
        return h.ack(2, [[0, 7, "accept"]], *args)  # type: ignore[return-value]

    # Answered ok: the broker applied a zombie's acknowledgement. A client fault moves no
    # leader, so it excuses nothing.
    found, stats = judge(paused())
    [f] = [f for f in found if f.kind == locks.ACK_AFTER_KIND]
    assert f.data["acked_by"] == 2 and f.data["other"] == 3
    assert stats["share_lock_pairs_excused_by_faults"] == 0
    # Refused (InvalidRecordStateException), as KIP-932 says: nothing.
    assert locks.ACK_AFTER_KIND not in kinds(paused(REFUSED))
