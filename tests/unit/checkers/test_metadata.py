"""KRaft safety rules on hand-written observer samples."""

from checkers.table_check import check_table
from history.columnar import to_table
from tests.unit.checkers.histories import H


def leader(epoch, hw=10, node_id=1):
    return {
        "raft": {"state": "leader", "leader": node_id, "epoch": epoch, "high_watermark": hw},
        "active_controller_count": 1,
    }


def follower(epoch, leader_id, hw=10):
    return {"raft": {"state": "follower", "leader": leader_id, "epoch": epoch,
                     "high_watermark": hw}}  # fmt: skip


def findings(h):
    return check_table(to_table(h.history()))


def kinds(h):
    return sorted(f.kind for f in findings(h))


def test_healthy_failover_is_clean():
    h = (
        H()
        .observe("n1", **leader(1, node_id=1))
        .observe("n2", **follower(1, 1))
        .observe("n1", **leader(1, node_id=1, hw=12))
        .nemesis("start-partition", {"grudge": {"n1": ["n2", "n3"]}})
        .observe("n2", **leader(2, node_id=2, hw=12))
        .observe("n3", **follower(2, 2, hw=12))
        .observe("n2", **leader(2, node_id=2, hw=15))
    )
    assert findings(h) == []


def test_two_leaders_in_one_epoch_is_split_brain_citing_both_samples():
    h = H().observe("n1", **leader(3, node_id=1)).observe("n2", **leader(3, node_id=2))
    (f,) = findings(h)
    assert f.kind == "split-brain" and f.ops == (1, 3)
    assert "2 nodes were Raft leader in epoch 3" in f.explanation
    assert "KIP-631" in f.explanation and "KIP-631" in f.data["rule"]


def test_disagreeing_on_the_leader_of_an_epoch_is_split_brain():
    h = H().observe("n2", **follower(4, 1)).observe("n3", **follower(4, 2))
    (f,) = findings(h)
    assert f.kind == "split-brain" and "disagree on the leader of epoch 4" in f.explanation


def test_overlapping_active_controllers_beyond_tolerance():
    h = H()
    for _ in range(20):  # 20 rounds, 0.4 s each: 8 s of both claiming to be active
        h.observe("n1", **leader(5, node_id=1)).observe("n2", **leader(6, node_id=2))
    found = [f for f in findings(h) if f.kind == "multiple-active-controllers"]
    assert len(found) == 1
    assert "n1 and n2 were both active controller" in found[0].explanation
    assert found[0].data["overlap_s"] > 2


def test_a_deposed_leader_noticing_late_is_within_tolerance():
    h = H().observe("n1", **leader(5, node_id=1))
    for _ in range(2):  # about a second of overlap
        h.observe("n2", **leader(6, node_id=2)).observe("n1", **leader(5, node_id=1))
    h.observe("n1", **follower(6, 2))
    assert findings(h) == []


def test_epoch_and_high_watermark_going_back():
    h = H().observe("n1", **follower(7, 2, hw=40)).observe("n1", **follower(6, 2, hw=30))
    assert kinds(h) == ["epoch-regression", "high-watermark-regression"]


def test_high_watermark_may_restart_lower_after_the_node_was_killed():
    h = (
        H()
        .observe("n1", **follower(7, 2, hw=40))
        .nemesis("kill", {"nodes": ["n1"]})
        .observe("n1", **follower(7, 2, hw=0))
    )
    assert findings(h) == []
    # ... but killing does not excuse losing the persisted epoch.
    h.observe("n1", **follower(6, 2, hw=41))
    assert "epoch-regression" in kinds(h)


def test_a_power_loss_excuses_no_lost_epoch_but_a_corruption_does():
    # KRaft fsyncs quorum-state and its log: a node that lost power restarts with its epoch.
    # The record names dropped files, `.deleted` ones among them, which is no erased disk.
    dropped = {"n1": {"files": {"data/t-0/00000000000000000000.log.deleted": 10}, "names": []}}
    lost = {"kind": "power-loss", "targets": ["n1"], "dropped": dropped}
    h = (
        H()
        .observe("n1", **follower(7, 2, hw=40))
        .nemesis("start-disk", lost)
        .observe("n1", **follower(6, 2, hw=41))
    )
    assert kinds(h) == ["epoch-regression"]
    corrupt = {"kind": "corrupt", "targets": ["n1"], "file": "__cluster_metadata-0/quorum-state"}
    h = (
        H()
        .observe("n1", **follower(7, 2, hw=40))
        .nemesis("start-disk", corrupt)
        .observe("n1", **follower(6, 2, hw=41))
    )
    assert findings(h) == []


def _deposed_while_stopped(h, stopped="n1", rounds=20):
    """n1 leads epoch 5; while `stopped` is frozen, n2 leads epoch 6 for `rounds` × 0.4 s; n1
    then resumes and its first sample still shows the old epoch (Kafka's gauges lag)."""
    h.observe("n1", **leader(5, node_id=1)).observe("n1", **leader(5, node_id=1))
    h.nemesis("start-pause", {"kind": "one", "frozen": [stopped], "signal": "SIGSTOP"})
    for _ in range(rounds):
        h.observe("n2", **leader(6, node_id=2)).observe("n3", **follower(6, 2))
    return h


def _active_findings(h):
    return [f for f in findings(h) if f.kind == "multiple-active-controllers"]


def test_a_leader_stopped_by_sigstop_is_not_active_while_stopped():
    # The CI run that taught this: n2 paused 16 s while active, n3 elected; n2's first sample
    # after SIGCONT still said active in its old epoch, which joined its two samples into one run.
    h = _deposed_while_stopped(H())
    h.nemesis("stop-pause", {"kind": "one", "resumed": ["n1"], "signal": "SIGCONT"})
    h.observe("n1", **leader(5, node_id=1)).observe("n2", **leader(6, node_id=2))
    h.observe("n1", **follower(6, 2))
    assert _active_findings(h) == []


def test_the_real_pause_nemesis_and_a_heal_resume_too():
    h = H()
    h.observe("n1", **leader(5, node_id=1)).observe("n1", **leader(5, node_id=1))
    h.nemesis("start-pause", {"kind": "one", "signal": "SIGSTOP", "stopped_after_s": {"n1": 0.1}})
    for _ in range(20):
        h.observe("n2", **leader(6, node_id=2))
    h.nemesis("heal", {"by": "pause", "actions": ["n1: sent SIGCONT to stopped JVM"]})
    h.observe("n1", **leader(5, node_id=1)).observe("n1", **follower(6, 2))
    assert _active_findings(h) == []


def test_pausing_another_node_excuses_nothing():
    h = _deposed_while_stopped(H(), stopped="n3")
    h.nemesis("stop-pause", {"kind": "one", "resumed": ["n3"], "signal": "SIGCONT"})
    h.observe("n1", **leader(5, node_id=1))
    (f,) = _active_findings(h)
    assert "n1 and n2 were both active controller" in f.explanation
    assert "SIGSTOP" not in f.explanation and f.data["overlap_s"] > 2


def test_a_resumed_leader_must_still_notice_within_the_tolerance():
    h = _deposed_while_stopped(H())
    h.nemesis("stop-pause", {"kind": "one", "resumed": ["n1"], "signal": "SIGCONT"})
    for _ in range(10):  # 4 s after SIGCONT with both still claiming to be active
        h.observe("n1", **leader(5, node_id=1)).observe("n2", **leader(6, node_id=2))
    (f,) = _active_findings(h)
    assert 3.5 < f.data["overlap_s"] < 4.5
    assert "possibly stopped by SIGSTOP do not count" in f.explanation


def test_a_pause_of_unknown_outcome_may_have_stopped_any_node_until_resumed():
    h = H()
    h.observe("n1", **leader(5, node_id=1)).observe("n1", **leader(5, node_id=1))
    h.op("nemesis", "start-pause", {"kind": "one"}, "info", "timed out")
    for _ in range(20):
        h.observe("n2", **leader(6, node_id=2))
    h.op("nemesis", "stop-pause", {"kind": "one"}, "fail", "docker unreachable")
    h.observe("n1", **leader(5, node_id=1))
    assert _active_findings(h) == []  # never resumed for sure: stopped to the end
    h.nemesis("stop-pause", {"kind": "one", "resumed": ["n1"], "signal": "SIGCONT"})
    for _ in range(10):
        h.observe("n1", **leader(5, node_id=1)).observe("n2", **leader(6, node_id=2))
    assert len(_active_findings(h)) == 1
