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


def test_a_record_accepted_with_success_and_acquired_again_is_found():
    h = S().subscribe(2).subscribe(3)
    h.deliver(2, [[0, 7, 101, 1]]).ack(2, [[0, 7, "accept"]])
    h.deliver(3, [[0, 7, 101, 2]])
    [f], stats = findings(h)
    assert f.kind == KIND and f.key == 0 and f.ops == (6, 7, 9)
    assert f.explanation == (
        "partition 0 offset 7 (value 101): process 2 sent ACCEPT of its delivery to process 2 "
        "by op 5 (delivery count 1) in op 6 and heard it succeed in op 7 at 0.800 s (commit); "
        "a poll of process 3 invoked at 0.900 s was handed it again with delivery count 2 (op 9)"
    )
    assert f.data["acked_count"] == 1 and f.data["count"] == 2
    assert stats["share_final_acks"] == 1


def test_a_reject_heard_by_the_callback_of_a_carried_acknowledgement_is_final_too():
    h = S().subscribe(2, "implicit").subscribe(3)
    h.deliver(2, [[0, 7, 101, 1]]).deliver(2, [], carried=[[0, 7, "reject"]])
    h.heard(2, [[0, [7], "ok"]])
    h.deliver(3, [[0, 7, 101, 2]])
    [f], _ = findings(h)
    assert "sent REJECT" in f.explanation and "(callback)" in f.explanation


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
    # Without delivery counts nothing can be told apart.
    h = S().subscribe(2).subscribe(3)
    h.deliver(2, [[0, 7, 101, None]]).ack(2, [[0, 7, "accept"]]).deliver(3, [[0, 7, 101, 3]])
    found, stats = findings(h)
    assert found == [] and stats["share_uncounted_after_final"] == 1


def test_the_registry_judges_a_share_run_and_its_parquet_rows(tmp_path):
    h = S().subscribe(2).subscribe(3)
    h.deliver(2, [[0, 7, 101, 1]]).ack(2, [[0, 7, "accept"]]).deliver(3, [[0, 7, 101, 2]])
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
    makes it terminal, after which only stale copies (counts at or below) are handed over."""
    h = S()
    for p in (2, 3, 4):
        h.subscribe(p)
    count = {o: 0 for o in range(4)}
    done: set[int] = set()
    for consumer, offset, kind, succeeds, stale in steps:
        p = 2 + consumer
        if offset in done:
            if stale:
                h.deliver(p, [[0, offset, 100 + offset, max(1, count[offset])]])
            continue
        count[offset] += 1
        h.deliver(p, [[0, offset, 100 + offset, count[offset]]])
        if kind is None:
            continue  # left to its lock
        h.ack(p, [[0, offset, kind]], "ok" if succeeds else REFUSED)
        if succeeds and kind in ("accept", "reject"):
            done.add(offset)
    assert findings(h)[0] == []


@settings(max_examples=50)
@given(st.integers(1, 5), st.sampled_from(["accept", "reject"]), st.integers(2, 4))
def test_one_acquisition_after_a_final_acknowledgement_is_one_finding(count, kind, p):
    h = S().subscribe(2).subscribe(p)
    h.deliver(2, [[0, 3, 103, count]]).ack(2, [[0, 3, kind]])
    h.deliver(p, [[0, 3, 103, count + 1]])
    [f], _ = findings(h)
    assert f.data["type"] == kind and f.data["delivered_to"] == p
