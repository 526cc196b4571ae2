"""`redelivered-after-final-ack` (checkers/families/share/finality.py): a record whose ACCEPT or
REJECT a consumer was told succeeded is acquired again, from the share workload's ops alone
(docs/history.md, "The share workload")."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.api import check
from checkers.families.share.finality import (
    KIND,
    SHARE_OP_FS,
    check_share,
    redelivered_after_final,
)
from history.columnar import op_rows, to_table
from history.share import read_share
from tests.unit.checkers.histories import H

SUB = {"group": "g", "topic": "kchaos-share", "ack_mode": "explicit"}
REFUSED = "InvalidRecordStateException: The record state is invalid."


class S(H):
    """H with the share ops: a consumer subscribes, is handed records, acknowledges them."""

    def subscribe(self, p: int, mode: str = "explicit") -> S:
        self.op(p, "share-subscribe", {**SUB, "ack_mode": mode}, "ok", {**SUB, "ack_mode": mode})
        return self

    def deliver(self, p: int, records: list[list[int]], carried: list[list[Any]] = ()) -> S:
        """A poll handing `records` ([key, offset, value, count]) over, carrying `carried`."""
        acks = [list(a) for a in carried]
        self.op(
            p,
            "share-poll",
            {"acks": acks},
            "ok",
            {"acks": acks, "records": records, "handed": self.clock, "lock_ms": 2000, "acked": []},
        )
        return self

    def ack(self, p: int, acks: list[list[Any]], outcome: str = "ok", heard: bool = True) -> S:
        """A commitSync of `acks`, answered `outcome` for their partition (one partition)."""
        key = acks[0][0]
        acked = [[key, sorted(a[1] for a in acks), outcome]] if heard else []
        self.op(
            p,
            "share-ack",
            {"acks": acks},
            "ok",
            {"acks": acks, "commit": {str(key): outcome}, "committed": self.clock, "acked": acked},
        )
        return self

    def heard(self, p: int, acked: list[list[Any]]) -> S:
        """An empty poll during which the callback reported `acked`."""
        self.op(
            p,
            "share-poll",
            {"acks": []},
            "ok",
            {"acks": [], "records": [], "handed": self.clock, "lock_ms": 2000, "acked": acked},
        )
        return self


def findings(h: H) -> tuple[list[Any], dict[str, int]]:
    return redelivered_after_final(read_share(h.history().ops))


def test_a_record_accepted_with_success_and_acquired_by_a_later_consumer_is_found():
    h = S().subscribe(2)
    h.deliver(2, [[0, 7, 101, 1]]).ack(2, [[0, 7, "accept"]])
    h.subscribe(3).deliver(3, [[0, 7, 101, 2]])
    [f], stats = findings(h)
    assert f.kind == KIND and f.key == 0 and f.ops == (4, 5, 9)
    assert f.explanation == (
        "partition 0 offset 7 (value 101): process 2 sent ACCEPT of its delivery to process 2 "
        "by op 3 (delivery count 1) in op 4 and heard it succeed in op 5 at 0.600 s (commit); "
        "process 3, subscribed at 0.700 s (after that: its client held no acquisition from "
        "before), was handed it again with delivery count 2 by a poll invoked at 0.900 s (op 9): "
        "a new acquisition of a final record"
    )
    assert f.data["acked_count"] == 1 and f.data["count"] == 2
    assert stats["share_final_acks"] == 1


def test_a_reject_heard_by_the_callback_of_a_carried_acknowledgement_is_final_too():
    h = S().subscribe(2, "implicit")
    h.deliver(2, [[0, 7, 101, 1]]).deliver(2, [], carried=[[0, 7, "reject"]])
    h.heard(2, [[0, [7], "ok"]])
    h.subscribe(3).deliver(3, [[0, 7, 101, 2]])
    [f], _ = findings(h)
    assert "sent REJECT" in f.explanation and "(callback)" in f.explanation


def test_a_later_consumer_is_judged_whatever_the_count():
    # Counts may go down (lost increments at a failover): a consumer that did not exist when
    # the record became final acquired it anew, whatever count it was given.
    h = S().subscribe(2).deliver(2, [[0, 7, 101, 3]]).ack(2, [[0, 7, "accept"]])
    h.subscribe(4).deliver(4, [[0, 7, 101, 2]])
    [f], _ = findings(h)
    assert f.data["delivered_to"] == 4 and f.data["count"] == 2


def run_4232(drain_handed: list[list[int]]) -> S:
    """Run 20261128T172427-4232 (Kafka 4.4.0, one consumer, no faults), cut to three records of
    partition 0: process 2 is handed a copy whose lock had already expired (count 2; its client
    had meanwhile acquired the records again, count 3, into its fetch buffer), commits RENEW of
    offset 0, ACCEPT of 1 and REJECT of 8 (answered ok: the broker applied them to the count-3
    acquisition, which process 2 held), is handed that buffered count-3 copy eleven seconds
    later, and its acknowledgements of it are refused. Then the final reads' drain (process 4)
    subscribes and is handed `drain_handed`."""
    h = S().subscribe(2)
    h.deliver(2, [[0, 0, 2, 2], [0, 1, 1000003, 2], [0, 8, 1000016, 2]])
    h.ack(2, [[0, 0, "renew"], [0, 1, "accept"], [0, 8, "reject"]])
    h.deliver(2, [[0, 0, 2, 2]])  # the renewed record, handed back (Kafka 4.4.0)
    h.ack(2, [[0, 0, "accept"]], REFUSED)
    h.deliver(2, [[0, 0, 2, 3], [0, 1, 1000003, 3], [0, 8, 1000016, 3]])
    h.ack(2, [[0, 0, "accept"], [0, 1, "accept"], [0, 8, "renew"]], REFUSED)
    h.subscribe(4).deliver(4, drain_handed)
    return h


def test_a_copy_acquired_before_the_acknowledgement_and_handed_later_is_counted_not_found():
    # The drain is handed offset 0 alone (count 4): 1 and 8 stayed final, so the count-3 copies
    # of them process 2 was handed after the ok were acquired before the acknowledgement.
    found, stats = findings(run_4232([[0, 0, 2, 4]]))
    assert found == []
    assert stats["share_higher_after_final"] == 2 and stats["share_final_acks"] == 2


def test_the_same_run_with_a_final_record_handed_to_the_drain_is_found():
    # Had the broker let the ACCEPT of offset 1 go, the drain would be handed it.
    [f], stats = findings(run_4232([[0, 0, 2, 4], [0, 1, 1000003, 4]]))
    assert f.data["offset"] == 1 and f.data["type"] == "accept" and f.data["delivered_to"] == 4
    assert "process 4, subscribed at" in f.explanation
    assert stats["share_higher_after_final"] == 2


def test_what_is_not_a_redelivery_after_a_final_acknowledgement():
    # Refused: the lock had expired, the record goes on.
    h = S().subscribe(2).subscribe(3)
    h.deliver(2, [[0, 7, 101, 1]]).ack(2, [[0, 7, "accept"]], REFUSED)
    h.deliver(3, [[0, 7, 101, 2]])
    assert findings(h)[0] == []
    # Released, renewed: the record may come back.
    for kind in ("release", "renew"):
        h = S().subscribe(2).subscribe(3)
        h.deliver(2, [[0, 7, 101, 1]]).ack(2, [[0, 7, kind]])
        h.deliver(3, [[0, 7, 101, 2]])
        assert findings(h)[0] == []
    # Handed over by a poll invoked before the success was heard.
    h = S().subscribe(2).subscribe(3).deliver(2, [[0, 7, 101, 1]])
    h.invoke(3, "share-poll", {"acks": []})
    h.ack(2, [[0, 7, "accept"]])
    h.complete(
        3,
        "share-poll",
        "ok",
        {"acks": [], "records": [[0, 7, 101, 2]], "handed": 1, "lock_ms": 2000, "acked": []},
    )
    assert findings(h)[0] == []
    # Another record of the partition.
    h = S().subscribe(2).subscribe(3)
    h.deliver(2, [[0, 7, 101, 1]]).ack(2, [[0, 7, "accept"]]).deliver(3, [[0, 8, 102, 1]])
    assert findings(h)[0] == []


def test_a_stale_copy_handed_over_late_is_counted_not_found():
    # Process 3 was handed a copy with the acknowledged delivery's count or below: acquired
    # before the acceptance, handed over after it (seen on Kafka 4.4.0).
    h = S().subscribe(2).subscribe(3)
    h.deliver(2, [[0, 7, 101, 2]]).ack(2, [[0, 7, "accept"]])
    h.deliver(3, [[0, 7, 101, 1]]).deliver(2, [[0, 7, 101, 2]])
    found, stats = findings(h)
    assert found == [] and stats["share_stale_after_final"] == 2
    # A higher count to a consumer subscribed before the ok: possibly acquired before it too.
    h = S().subscribe(2).subscribe(3)
    h.deliver(2, [[0, 7, 101, 1]]).ack(2, [[0, 7, "accept"]]).deliver(3, [[0, 7, 101, 2]])
    found, stats = findings(h)
    assert found == [] and stats["share_higher_after_final"] == 1
    # Without delivery counts nothing can be told apart.
    h = S().subscribe(2).subscribe(3)
    h.deliver(2, [[0, 7, 101, None]]).ack(2, [[0, 7, "accept"]]).deliver(3, [[0, 7, 101, 3]])
    found, stats = findings(h)
    assert found == [] and stats["share_uncounted_after_final"] == 1


def test_the_registry_judges_a_share_run_and_its_parquet_rows(tmp_path):
    h = S().subscribe(2)
    h.deliver(2, [[0, 7, 101, 1]]).ack(2, [[0, 7, "accept"]])
    h.subscribe(3).deliver(3, [[0, 7, 101, 2]])
    rows = op_rows(to_table(h.history()), list(SHARE_OP_FS)).to_pylist()
    assert [f.kind for f in check_share(rows)[0]] == [KIND]
    h.write(tmp_path)
    verdict = check(tmp_path, write=False)
    assert [f.kind for f in verdict.failures] == [KIND]
    assert verdict.stats["share_final_acks"] == 1


# Generated share groups that keep KIP-932's states: nothing is found --------------------------
@settings(max_examples=150)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 2),  # consumer
            st.integers(0, 3),  # offset
            st.sampled_from(["accept", "reject", "release", "renew", None]),
            st.booleans(),  # the acknowledgement succeeds (the lock held)
            st.booleans(),  # a stale copy is handed over too
        ),
        max_size=40,
    )
)
def test_a_share_partition_that_keeps_its_states_gives_nothing(steps):
    """One partition, four records: a record available is acquired (its count up by one) and
    handed to a consumer; the consumer acknowledges it or lets it go; an ok accept or reject
    makes it terminal, after which only copies acquired before are handed over (to the consumers
    subscribed from the start: stale counts, or one above from a buffered acquisition); a drain
    subscribed at the end is handed what is not terminal."""
    h = S()
    for p in (2, 3, 4):
        h.subscribe(p)
    count = {o: 0 for o in range(4)}
    done: set[int] = set()
    for consumer, offset, kind, succeeds, stale in steps:
        p = 2 + consumer
        if offset in done:
            if stale:
                h.deliver(p, [[0, offset, 100 + offset, max(1, count[offset]) + consumer % 2]])
            continue
        count[offset] += 1
        h.deliver(p, [[0, offset, 100 + offset, count[offset]]])
        if kind is None:
            continue  # left to its lock
        h.ack(p, [[0, offset, kind]], "ok" if succeeds else REFUSED)
        if succeeds and kind in ("accept", "reject"):
            done.add(offset)
    h.subscribe(9)
    h.deliver(9, [[0, o, 100 + o, count[o] + 1] for o in range(4) if o not in done])
    assert findings(h)[0] == []


@settings(max_examples=50)
@given(st.integers(1, 5), st.sampled_from(["accept", "reject"]), st.integers(3, 9))
def test_one_acquisition_after_a_final_acknowledgement_is_one_finding(count, kind, p):
    h = S().subscribe(2)
    h.deliver(2, [[0, 3, 103, count]]).ack(2, [[0, 3, kind]])
    h.subscribe(p).deliver(p, [[0, 3, 103, count + 1]])
    [f], _ = findings(h)
    assert f.data["type"] == kind and f.data["delivered_to"] == p
