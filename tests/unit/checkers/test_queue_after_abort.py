"""Where a consumer stands after a transaction that polled and then aborted: the poll-skip rule
follows what the history's writer says it does (history.format.CONSUMER_AFTER_ABORT).

The shapes are those of issue 10's false alarm: process 3 polls key 0 up to offset 67, then runs
a transaction [poll, send, send] that aborts ("sends not delivered in time"), then polls key 0
again. Offset 68 is a transaction marker, so 69 follows 67 in the log."""

from __future__ import annotations

import pytest

from checkers.families.queue.check import check_queue_table
from history.columnar import to_table
from history.format import CONSUMER_AFTER_ABORT, JEPSEN, REWIND, UNDECLARED
from tests.unit.checkers.histories import H

SENDS = [["send", 6, 6001], ["send", 5, 5001]]


def log(h: H) -> H:
    """Key 0 holds values 65, 67, 69, 71, 73 at those offsets (markers between), written by
    process 0; process 3 assigns itself key 0."""
    for o in (65, 67, 69, 71, 73):
        h.send(0, 0, 1000 + o, o)
    return h.assign(3, [0])


def kinds(h: H, rule: str | None = None) -> list[str]:
    table = to_table(h.history())
    both = [check_queue_table(table, reference=r, after_abort=rule) for r in (True, False)]
    assert [f.to_dict() for f in both[0].findings] == [f.to_dict() for f in both[1].findings]
    return [f.kind for f in both[0].findings if f.tolerated is None and not f.unknown]


def skips(h: H, rule: str | None = None) -> list[str]:
    """Just the process-order findings (69 never read is a lost write besides)."""
    return [k for k in kinds(h, rule) if k in ("poll-skip", "nonmonotonic-poll")]


def polled(*offsets: int) -> list[list[int]]:
    return [[o, 1000 + o] for o in offsets]


def test_the_ci_false_alarm_shape_is_clean_when_the_client_rewinds():
    """kchaos's client now records the aborted poll and rewinds: the next poll re-reads 69."""
    h = log(H(**{CONSUMER_AFTER_ABORT: REWIND})).poll(3, {0: [(65, 1065), (67, 1067)]})
    h.txn(3, [["poll"], *SENDS], [["poll", {"0": polled(69)}], *SENDS], "fail")
    h.poll(3, {0: [(69, 1069), (71, 1071)]})
    assert kinds(h) == []


def test_a_skip_after_a_rewound_abort_is_still_a_poll_skip():
    """Rewound to after 67, the next poll must start at 69: starting at 71 skipped it."""
    h = log(H(**{CONSUMER_AFTER_ABORT: REWIND})).poll(3, {0: [(65, 1065), (67, 1067)]})
    h.txn(3, [["poll"], *SENDS], [["poll", {"0": polled(69)}], *SENDS], "fail")
    h.poll(3, {0: [(71, 1071)]})
    assert kinds(h) == ["poll-skip"]


def test_the_aborted_transactions_own_poll_is_compared_too():
    """Its poll started where the last committed poll ended: starting at 71 skipped 69."""
    h = log(H(**{CONSUMER_AFTER_ABORT: REWIND})).poll(3, {0: [(65, 1065), (67, 1067)]})
    h.txn(3, [["poll"], *SENDS], [["poll", {"0": polled(71)}], *SENDS], "fail")
    assert skips(h) == ["poll-skip"]


def test_older_histories_that_recorded_no_poll_result_forget_the_position():
    """The CI history itself: the fail op holds its invocation, so its poll's reads are not
    in the history, and nothing can be said of where the consumer stood afterwards."""
    h = log(H()).poll(3, {0: [(65, 1065), (67, 1067)]})
    h.txn(3, [["poll"], *SENDS], [["poll"], *SENDS], "fail")
    h.poll(3, {0: [(71, 1071)]})
    assert skips(h) == []
    # Without the aborted transaction in between, the same skip is found.
    h = log(H()).poll(3, {0: [(65, 1065), (67, 1067)]}).poll(3, {0: [(71, 1071)]})
    assert skips(h) == ["poll-skip"]


def test_the_old_rule_reported_the_ci_false_alarm():
    """Read with REWIND's rule, the CI history's unrecorded poll looks like a skip: why the
    rule must follow the writer, and why older histories get UNDECLARED."""
    h = log(H()).poll(3, {0: [(65, 1065), (67, 1067)]})
    h.txn(3, [["poll"], *SENDS], [["poll"], *SENDS], "fail")
    h.poll(3, {0: [(71, 1071)]})
    assert skips(h, REWIND) == ["poll-skip"]
    assert skips(h, UNDECLARED) == []


@pytest.mark.parametrize(("rule", "expected"), [(JEPSEN, ["poll-skip"]), (REWIND, [])])
def test_an_info_poll_keeps_the_position_only_in_jepsen_histories(rule, expected):
    """Jepsen's poll-skip+nonmonotonic-cases never moves a position on :info; kchaos retires a
    process after info, and an info whose abort failed leaves the position unknown."""
    h = log(H()).poll(3, {0: [(65, 1065), (67, 1067)]})
    h.poll(3, {0: [(69, 1069)]}, "info")
    h.poll(3, {0: [(71, 1071)]})
    assert kinds(h, rule) == expected


def test_jepsen_histories_get_jepsens_rule_from_their_header():
    h = log(H(run="jepsen:history.edn")).poll(3, {0: [(65, 1065), (67, 1067)]})
    h.poll(3, {0: [(69, 1069)]}, "info")
    h.poll(3, {0: [(71, 1071)]})
    assert kinds(h) == ["poll-skip"]


def test_an_unrecorded_poll_forgets_the_consumers_position_but_not_the_producers():
    """Undeclared histories forget where a consumer stood after a failed op; the process's
    sends keep their order, as in Jepsen's nonmonotonic-send-cases."""
    h = H().send(0, 0, 1005, 5)
    h.txn(0, [["poll"], ["send", 1, 2001]], [["poll"], ["send", 1, 2001]], "fail")
    h.send(0, 0, 1003, 3)
    assert kinds(h, UNDECLARED) == ["nonmonotonic-send"]
