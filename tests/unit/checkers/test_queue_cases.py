"""Hand-written histories for each queue anomaly and for the semantics easy to get wrong."""

import pytest

from checkers.families.queue.check import check_queue
from tests.unit.checkers.histories import H


def run(tmp_path, h):
    return check_queue(h.write(tmp_path))


def kinds(result, *, failing_only=False):
    return sorted(
        {
            f.kind
            for f in result.findings
            if not failing_only or (f.tolerated is None and not f.unknown)
        }
    )


def only(result, kind):
    found = [f for f in result.findings if f.kind == kind]
    assert len(found) == 1, result.findings
    return found[0]


def test_correct_history_has_no_findings(tmp_path):
    h = (
        H()
        .assign(1, [1])
        .send(0, 1, 10, 0)
        .send(0, 1, 11, 1)
        .poll(1, {1: [(0, 10)]})
        .poll(1, {1: [(1, 11)]})
    )
    assert run(tmp_path, h).findings == []


def test_transaction_markers_leave_gaps_that_are_not_skips(tmp_path):
    # Offsets 1 and 3 are commit markers: no poll can return them.
    h = (
        H()
        .assign(1, [1])
        .txn(0, [["send", 1, 10]], [["send", 1, [0, 10]]])
        .txn(0, [["send", 1, 11]], [["send", 1, [2, 11]]])
        .txn(0, [["send", 1, 12]], [["send", 1, [4, 12]]])
        .poll(1, {1: [(0, 10), (2, 11)]})
        .poll(1, {1: [(4, 12)]})
    )
    assert run(tmp_path, h).findings == []


def test_lost_write_cites_the_send_and_the_poll_that_read_past_it(tmp_path):
    h = (
        H()
        .send(0, 3, 10, 41)
        .send(0, 3, 17, 42)
        .send(0, 3, 18, 43)
        .poll(1, {3: [(41, 10)]})
        .poll(2, {3: [(43, 18)]})
    )
    r = run(tmp_path, h)
    lost = only(r, "lost-write")
    assert lost.key == 3 and lost.ops == (3, 9)
    assert "send of value 17 to key 3 was acknowledged at offset 42 (op 3" in lost.explanation
    assert "read up to offset 43 (op 9)" in lost.explanation
    assert lost.tolerated is None and not lost.unknown
    # Never polled at all: unseen says so, and it is an unknown, not a failure.
    unseen = only(r, "unseen")
    assert unseen.unknown and unseen.data["values"] == [17]


def test_sends_past_the_last_poll_are_unseen_not_lost(tmp_path):
    h = H().send(0, 1, 10, 0).send(0, 1, 11, 1).poll(1, {1: [(0, 10)]})
    r = run(tmp_path, h)
    assert kinds(r) == ["unseen"]
    assert kinds(r, failing_only=True) == []


def test_committed_info_send_without_offset_cannot_be_proven_lost(tmp_path):
    h = (
        H()
        .txn(0, [["send", 1, 10], ["send", 2, 20]], None, "info")
        .send(5, 2, 21, 1)
        .send(5, 1, 11, 1)
        .poll(1, {1: [(0, 10), (1, 11)]})
        .poll(2, {2: [(1, 21)]})
    )
    # The poll of 10 proves the info txn committed, but nothing says where 20 went: with no
    # offset it has no place in key 2's version order, so it cannot be proven lost.
    assert "lost-write" not in kinds(run(tmp_path, h))


def test_info_send_with_known_offset_is_lost_only_if_its_op_was_seen(tmp_path, tmp_path_factory):
    # An info txn whose completion still reports offsets (the client learnt them, then timed
    # out committing). Seen on key 1, so its send to key 2 at offset 0 happened.
    def history(read_key1):
        h = H().txn(
            0,
            [["send", 1, 10], ["send", 2, 20]],
            [["send", 1, [0, 10]], ["send", 2, [0, 20]]],
            "info",
        )
        h.send(5, 2, 21, 1)
        if read_key1:
            h.poll(1, {1: [(0, 10)]})
        return h.poll(2, {2: [(1, 21)]})

    assert "lost-write" in kinds(run(tmp_path, history(True)))
    other = tmp_path_factory.mktemp("unseen-info")
    assert "lost-write" not in kinds(run(other, history(False)))


def test_aborted_read_is_g1a(tmp_path):
    h = H().send(0, 1, 10, None, "fail").poll(1, {1: [(0, 10)]})
    g1a = only(run(tmp_path, h), "G1a")
    assert g1a.ops == (1, 3)
    assert "the send of 10 (op 1) failed" in g1a.explanation


def test_info_send_read_later_is_not_g1a(tmp_path):
    h = H().send(0, 1, 10, None, "info").poll(1, {1: [(0, 10)]})
    assert run(tmp_path, h).findings == []


def test_precommitted_read(tmp_path):
    h = H().txn(
        0,
        [["send", 1, 10], ["poll"]],
        [["send", 1, [0, 10]], ["poll", {"1": [[0, 10]]}]],
    )
    assert kinds(run(tmp_path, h)) == ["precommitted-read"]


def test_duplicate_and_inconsistent_offsets(tmp_path):
    h = (
        H()
        .send(0, 1, 10, 0)
        .send(0, 1, 11, 1)
        .poll(1, {1: [(0, 10), (1, 12)]})  # offset 1: 11 by the send, 12 by the poll
        .send(0, 1, 12, 2)
        .poll(2, {1: [(0, 10), (1, 11), (2, 12), (3, 10)]})  # 10 twice
    )
    r = run(tmp_path, h)
    inc = only(r, "inconsistent-offsets")
    assert inc.data == {"offset": 1, "values": [11, 12]}
    dup = [f for f in r.findings if f.kind == "duplicate"]
    assert {tuple(f.data["offsets"]) for f in dup} == {(0, 3), (1, 2)}


@pytest.mark.parametrize(("via", "tolerated"), [("assign", False), ("subscribe", True)])
def test_poll_skip_is_tolerated_only_with_subscribe(tmp_path, via, tolerated):
    h = (
        H()
        .assign(1, [1], f=via)
        .send(0, 1, 10, 0)
        .send(0, 1, 11, 1)
        .send(0, 1, 12, 2)
        .poll(1, {1: [(0, 10)]})
        .poll(1, {1: [(2, 12)]})
        .poll(2, {1: [(0, 10), (1, 11), (2, 12)]})
    )
    skip = only(run(tmp_path, h), "poll-skip")
    assert skip.ops == (9, 11)
    assert "skipping 1 record(s) in between: offsets 1 (value 11)" in skip.explanation
    assert (skip.tolerated is not None) == tolerated


def test_nonmonotonic_poll(tmp_path):
    h = (
        H()
        .send(0, 1, 10, 0)
        .send(0, 1, 11, 1)
        .poll(1, {1: [(0, 10), (1, 11)]})
        .poll(1, {1: [(1, 11)]})
    )
    nm = only(run(tmp_path, h), "nonmonotonic-poll")
    assert nm.ops == (5, 7) and "the same place" in nm.explanation


def test_reassigning_or_crashing_forgets_the_position(tmp_path):
    h = (
        H()
        .send(0, 1, 10, 0)
        .send(0, 1, 11, 1)
        .send(0, 1, 12, 2)
        .poll(1, {1: [(0, 10), (1, 11), (2, 12)]})
        .assign(1, [2])
        .assign(1, [1, 2])
        .poll(1, {1: [(0, 10)]})  # seeking to the beginning after reassignment is fine
        .crash(1)
        .poll(1, {1: [(2, 12)]})  # a fresh client may start from a committed offset
    )
    assert run(tmp_path, h).findings == []


def test_internal_poll_skip_and_nonmonotonic(tmp_path):
    h = (
        H()
        .send(0, 1, 10, 0)
        .send(0, 1, 11, 1)
        .send(0, 1, 12, 2)
        .poll(1, {1: [(0, 10), (2, 12)]})
        .poll(2, {1: [(1, 11), (0, 10)]})
        .poll(3, {1: [(0, 10), (2, 12)]}, rebalance_log=[{"keys": [1]}])
        .poll(4, {1: [(0, 10), (1, 11), (2, 12)]})
    )
    r = run(tmp_path, h)
    assert only(r, "int-poll-skip").ops == (7,)
    assert only(r, "int-nonmonotonic-poll").ops == (9,)


def test_internal_send_order(tmp_path):
    h = (
        H()
        .txn(0, [["send", 1, 10], ["send", 1, 11]], [["send", 1, [0, 10]], ["send", 1, [2, 11]]])
        .send(2, 1, 12, 1)
        .txn(0, [["send", 1, 13], ["send", 1, 14]], [["send", 1, [4, 13]], ["send", 1, [3, 14]]])
        .poll(1, {1: [(0, 10), (1, 12), (2, 11), (3, 14), (4, 13)]})
    )
    r = run(tmp_path, h)
    skip = only(r, "int-send-skip")
    assert skip.tolerated is not None  # other producers interleave
    nm = only(r, "int-nonmonotonic-send")
    assert nm.ops == (5,) and nm.tolerated is None


def test_nonmonotonic_send(tmp_path):
    h = H().send(0, 1, 10, 1).send(0, 1, 11, 0).poll(1, {1: [(0, 11), (1, 10)]})
    nm = only(run(tmp_path, h), "nonmonotonic-send")
    assert nm.ops == (1, 3)


def test_garbage_read(tmp_path):
    h = H().send(0, 1, 10, 0).poll(1, {1: [(0, 10), (1, 99)]})
    g = only(run(tmp_path, h), "garbage-read")
    assert "no operation ever sent 99 to key 1" in g.explanation


@pytest.mark.parametrize("resume_at", [1, 2])
def test_after_an_aborted_poll_the_consumer_may_resume_or_rewind(tmp_path, resume_at):
    h = (
        H()
        .assign(1, [1])
        .send(0, 1, 10, 0)
        .send(0, 1, 11, 1)
        .send(0, 1, 12, 2)
        .poll(1, {1: [(0, 10)]})
        .txn(1, [["poll"], ["send", 2, 20]], [["poll", {"1": [[1, 11]]}], ["send", 2, 20]], "fail")
        .poll(1, {1: [(o, v) for o, v in [(1, 11), (2, 12)] if o >= resume_at]})
        .poll(2, {2: []})
    )
    assert run(tmp_path, h).findings == []


@pytest.mark.parametrize("engine", ["reference", "local"])
def test_an_info_send_counts_only_when_its_own_key_returned_it(tmp_path, engine):
    """Jepsen's values are unique per key only: value 1 read from key 0 says nothing of the
    info transaction that sent 1 to key 1 (must-have-committed? is per key). Counting it made a
    false lost-write (offset 1 of key 1) and a false poll-skip (offsets 0 then 3)."""
    h = (
        H()
        .send(0, 0, 1, 0)
        .send(2, 1, 3, 0)
        .txn(1, [["send", 1, 1], ["send", 1, 2]], [["send", 1, [1, 1]], ["send", 1, 2]], "info")
        .send(2, 1, 4, 3)
        .assign(3, [0, 1])
        .poll(3, {0: [(0, 1)], 1: [(0, 3)]})
        .poll(3, {1: [(3, 4)]})
    )
    result = check_queue(h.write(tmp_path), reference=engine == "reference")
    assert kinds(result, failing_only=True) == []
    # Read from its own key, the same send proves the transaction happened.
    h.poll(5, {1: [(1, 1)]})
    (tmp_path / "2").mkdir()
    result = check_queue(h.write(tmp_path / "2"), reference=engine == "reference")
    assert "poll-skip" in kinds(result, failing_only=True)
