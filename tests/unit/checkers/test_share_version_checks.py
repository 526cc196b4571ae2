"""The share checks on a run whose share groups were off for a while (Kafka 4.1's share.version
0: formatted so, or set by a feature step): the consumers' polls the brokers refused then with
UnsupportedVersionException acquired nothing, so they are no anomaly and leave at-least-once
whole; such a refusal while share groups were on stays unknown."""

from __future__ import annotations

from typing import Any

from checkers.families.share import at_least_once
from checkers.families.share.run import FAULT_TAIL_NS, off_windows, read_run
from history.columnar import op_rows, to_table
from history.share import read_share
from tests.unit.checkers.histories import SEC
from tests.unit.checkers.test_share_checks import R, judge

OFF = "UnsupportedVersionException: The cluster does not support the share group protocol."


def feature_step(h: R, level: int, type_: str = "ok", dry_run: bool = False) -> R:
    """One `features` op of the upgrade process setting share.version (docs/history.md)."""
    params = {"action": "upgrade" if level else "downgrade", "feature": "share.version"}
    params |= {"level": level, "dry_run": dry_run, "levels": {"share.version": level}}
    out = {"params": params, "output": f"share.version was upgraded to {level}."}
    h.op("upgrade", "features", {"params": params}, type_, out if type_ == "ok" else None)
    return h


def refused_poll(h: R, p: int) -> R:
    h.op(p, "share-poll", {"acks": []}, "info", {"acks": []}, error=OFF)
    return h


def enabled_by_a_step(*, never: bool = False) -> R:
    """Formatted off; two sends; a consumer refused twice; the step; both records delivered and
    accepted (the second never, when `never`); the drain."""
    h = R(share_version=0).sent(0, 0).sent(0, 1).subscribe(2)
    refused_poll(h, 2).subscribe(3)
    refused_poll(h, 3).wait(1)
    feature_step(h, 1).wait(1).subscribe(4)
    h.deliver(4, [[0, 0, 100, 1]]).ack(4, [[0, 0, "accept"]])
    if not never:
        h.deliver(4, [[0, 1, 101, 1]]).ack(4, [[0, 1, "accept"]])
    return h.wait(12).drain(9, {0: 0}, {0: 2})


def test_polls_refused_before_the_step_turned_share_groups_on_are_no_anomaly():
    found, stats = judge(enabled_by_a_step())
    assert found == []
    assert stats["share_polls_refused_while_off"] == 2 and stats["share_settled_by_ack"] == 2


def test_at_least_once_counts_from_when_share_groups_work():
    # The refused polls acquired nothing: a record never delivered is still a failure.
    [f] = judge(enabled_by_a_step(never=True))[0]
    assert f.kind == at_least_once.NEVER_DELIVERED_KIND and f.data["offsets"] == [1]
    assert not f.unknown


def _run(h: R) -> Any:
    return read_run(op_rows(to_table(h.history())).to_pylist(), h.header)


def test_a_refusal_while_share_groups_were_on_stays_unknown():
    # Formatted on (no share_version 0 in the header), no step: the poll's acquisitions are
    # unknown, so a record never delivered is unknown too.
    h = R().sent(0, 0).sent(0, 1).subscribe(2)
    refused_poll(h, 2).subscribe(4)
    h.deliver(4, [[0, 0, 100, 1]]).ack(4, [[0, 0, "accept"]]).wait(12).drain(9, {0: 0}, {0: 2})
    [f] = judge(h)[0]
    assert f.kind == at_least_once.UNSETTLED_KIND and f.unknown
    # Any other error of a poll while share groups were off stays unknown as well.
    h = R(share_version=0).subscribe(2)
    h.op(2, "share-poll", {"acks": []}, "info", {"acks": []}, error="TimeoutException: t")
    run = _run(h)
    assert run.unknown_polls and not run.refused_off_polls


def test_share_groups_are_off_from_a_step_that_set_0_until_one_that_set_more_completed_ok():
    h = R().subscribe(2).wait(1)
    feature_step(h, 1, dry_run=True)  # a dry run changes nothing
    feature_step(h, 0).wait(1)  # off from its invocation
    off_from = h.clock
    feature_step(h, 1, type_="info")  # maybe on: still counted off
    feature_step(h, 1).wait(1)  # on once it completed ok, plus the tail
    on_at = h.clock - SEC
    refused_poll(h, 2)
    run = _run(h)
    [(start, end)] = run.off
    assert start < off_from and end == on_at + FAULT_TAIL_NS
    assert run.refused_off_polls and not run.unknown_polls
    # A step that set 0 and failed changed nothing; one that set 0 last leaves it off to the end.
    h = R().subscribe(2)
    feature_step(h, 0, type_="fail")
    assert _run(h).off == []
    h = feature_step(R(share_version=0), 1).wait(1)
    feature_step(h, 0)
    assert len(_run(h).off) == 2 and _run(h).off[1][1] == 2**63 - 1


def test_off_windows_read_the_ops_as_the_history_reader_gives_them():
    h = feature_step(R(share_version=0), 1)
    ops = sorted(h.history().ops, key=lambda o: o["index"])
    assert off_windows(ops, h.header["share"]) == [(0, ops[-1]["time"] + FAULT_TAIL_NS)]
    assert read_share(ops).deliveries == []
