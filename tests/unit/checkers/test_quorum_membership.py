"""Controller membership changes (checkers/families/quorum_membership.py): hand-written histories
that break each rule, and near misses that must not be reported."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from checkers.api import check
from checkers.families.metadata import check_metadata
from checkers.families.metadata_log.parse import parse_metadata_log
from checkers.families.observer_samples import observe_samples_from_ops
from checkers.families.quorum_membership import check_membership, membership_input
from history.columnar import to_table
from tests.unit.checkers.histories import H

D1, D2, D3, D3B = (
    "gh940hcaFEOlnD2jmr7ZYQ",
    "qOYfWzgAaG4lX3EmyVZfnw",
    "IfOnPmbE4PedNgnJMNm33g",
    "h8Ws7x",
)
VOTERS = [[1, D1], [2, D2], [3, D3]]


def step(h: H, f: str, node: str | None, type_: str = "ok", **out: Any) -> H:
    """One op of the process upgrade, as steps/quorum_steps.py records it."""
    inv = {"at_s": 1.0, "step": f, "node": node, "params": {}}
    h.lines.append(
        {"type": "invoke", "f": f, "process": "upgrade", "time": h._tick(), "node": node,
         "value": inv}
    )  # fmt: skip
    value = {**inv, **out} if type_ == "ok" else inv
    extra = {} if type_ == "ok" else {"error": "outcome unknown"}
    return h.complete("upgrade", f, type_, value, node=node, **extra)


def raft(node: str, state: str, leader: int, epoch: int, hw: int = 10) -> dict[str, Any]:
    return {"state": state, "leader": leader, "epoch": epoch, "high_watermark": hw}


def views(epoch: int, leader: int = 1) -> dict[str, Any]:
    return {str(i): {"state": "x", "leader": leader, "epoch": epoch} for i in (1, 2, 3)}


def removal(h: H, epoch: int = 4, leader: int = 1, **kw: Any) -> H:
    """c3 (id 3, directory D3) removed, acknowledged in `epoch`."""
    return step(
        h, "remove-controller", "c3", node_id=3, directory_id=D3, at_ack=views(epoch, leader),
        before={"leader": leader, "epoch": epoch, "voters": VOTERS}, leader=leader, epoch=epoch,
        voters=[[1, D1], [2, D2]], **kw,
    )  # fmt: skip


def healthy_start(h: H, epoch: int = 4) -> H:
    for n in (1, 2, 3):
        h.observe(f"c{n}", raft=raft(f"c{n}", "leader" if n == 1 else "follower", 1, epoch))
    return h


def findings(h: H, tmp: Path) -> list[Any]:
    h.write(tmp)
    return [f for f in check(tmp, write=False).findings if f.kind != "unseen"]


def kinds(h: H) -> list[str]:
    rows = to_table(h.history()).to_pylist()
    rows = [r for r in rows if r["row"] == "op"]
    samples = observe_samples_from_ops(rows).samples
    upgrade = [r for r in rows if r["process"] == "upgrade"]
    return [f.kind for f in check_membership(membership_input(upgrade, samples), samples)]


# removed-voter-led ------------------------------------------------------------------------------
def test_a_removed_voter_leading_a_later_epoch_is_reported(tmp_path):
    h = healthy_start(H())
    removal(h)
    h.observe("c3", raft=raft("c3", "leader", 3, 6))
    found = [f for f in findings(h, tmp_path) if f.kind == "removed-voter-led"]
    assert len(found) == 1
    f = found[0]
    assert "c3 said state=leader in epoch 6" in f.explanation and "at most 4" in f.explanation
    assert "KIP-853" in f.explanation
    assert len(f.ops) == 2  # the acknowledged removal and the sample


def test_a_removed_leader_still_saying_leader_in_its_epoch_is_not():
    # c3 led epoch 4 and committed its own removal; it resigns after the commit.
    h = healthy_start(H())
    removal(h, leader=3)
    h.observe("c3", raft=raft("c3", "leader", 3, 4))
    assert kinds(h) == []


def test_the_bound_includes_every_epoch_known_at_the_acknowledgement():
    # An observer sample before the ack already showed epoch 6: leading 6 proves nothing.
    h = healthy_start(H())
    h.observe("c2", raft=raft("c2", "follower", 3, 6))
    removal(h)
    h.observe("c3", raft=raft("c3", "leader", 3, 6))
    assert kinds(h) == []
    h.observe("c3", raft=raft("c3", "leader", 3, 7))
    assert kinds(h) == ["removed-voter-led"]


def test_a_removed_voter_may_lead_once_it_was_asked_to_be_added_again():
    h = healthy_start(H())
    removal(h)
    step(h, "add-controller", "c3", "info")
    h.observe("c3", raft=raft("c3", "leader", 3, 9))
    assert kinds(h) == []


def test_under_auto_join_a_new_replica_may_lead_once_re_provisioned_not_before():
    # KIP-1186: no add request; the wiped node (a new directory id) adds itself once it runs.
    h = healthy_start(H())
    step(h, "stop-controller", "c3", was_running=True)
    removal(h)
    h.observe("c3", raft=raft("c3", "leader", 3, 6))  # before the wipe: still the removed replica
    step(h, "reprovision-controller", "c3", wiped="/var/lib/kafka/data")
    step(h, "await-auto-join", "c3", node_id=3, directory_id=D3B, leader=3, epoch=9,
         voters=[[1, D1], [2, D2], [3, D3B]])  # fmt: skip
    h.observe("c3", raft=raft("c3", "leader", 3, 10))
    assert kinds(h) == ["removed-voter-led"]  # epoch 6 only, before the re-provisioning


def test_an_unacknowledged_removal_says_nothing_about_who_leads():
    h = healthy_start(H())
    step(h, "remove-controller", "c3", "info")
    h.observe("c3", raft=raft("c3", "leader", 3, 9))
    assert kinds(h) == []


def test_a_sample_begun_before_the_acknowledgement_is_not_judged():
    h = healthy_start(H())
    h.lines.append(
        {"type": "invoke", "f": "observe", "process": "observer", "time": h._tick(), "node": "c3",
         "value": None}
    )  # fmt: skip
    removal(h)
    value = {"roles": ["controller"], "raft": raft("c3", "leader", 3, 5)}
    h.complete("observer", "observe", "ok", value, node="c3")
    assert kinds(h) == []


# membership-change-lost ---------------------------------------------------------------------------
def test_a_removed_voter_back_in_the_final_voter_set_is_reported(tmp_path):
    h = healthy_start(H())
    removal(h)
    step(h, "describe-quorum", None, leader=1, epoch=5, voters=VOTERS)
    found = [f for f in findings(h, tmp_path) if f.kind == "membership-change-lost"]
    assert len(found) == 1
    assert "still holds (3, " + D3 + ")" in found[0].explanation


def test_an_added_voter_missing_from_the_final_voter_set_is_reported():
    h = healthy_start(H())
    removal(h)
    step(h, "reprovision-controller", "c3", wiped="/var/lib/kafka/data")
    step(h, "add-controller", "c3", node_id=3, directory_id=D3B, at_ack=views(4), leader=1,
         epoch=4, voters=[[1, D1], [2, D2], [3, D3B]])  # fmt: skip
    step(h, "describe-quorum", None, leader=2, epoch=6, voters=[[1, D1], [2, D2]])
    assert kinds(h) == ["membership-change-lost"]


def test_a_deposed_leaders_description_is_not_judged():
    h = healthy_start(H())
    removal(h, epoch=5)
    step(h, "describe-quorum", None, leader=2, epoch=4, voters=VOTERS)
    assert kinds(h) == []


def test_the_last_description_decides():
    h = healthy_start(H())
    removal(h)
    step(h, "describe-quorum", None, leader=1, epoch=5, voters=VOTERS)
    step(h, "describe-quorum", None, leader=1, epoch=5, voters=[[1, D1], [2, D2]])
    assert kinds(h) == []


def test_a_new_replica_of_the_removed_node_does_not_undo_its_removal():
    h = healthy_start(H())
    removal(h)
    step(h, "reprovision-controller", "c3", wiped="/var/lib/kafka/data")
    step(h, "add-controller", "c3", node_id=3, directory_id=D3B, at_ack=views(4), leader=1,
         epoch=4, voters=[[1, D1], [2, D2], [3, D3B]])  # fmt: skip
    step(h, "describe-quorum", None, leader=1, epoch=4, voters=[[1, D1], [2, D2], [3, D3B]])
    assert kinds(h) == []
    step(h, "describe-quorum", None, leader=1, epoch=4, voters=[[1, D1], [2, D2], [3, D3]])
    # The old replica is back and the new one gone: both changes were lost.
    assert kinds(h) == ["membership-change-lost", "membership-change-lost"]


def test_a_later_add_of_unknown_outcome_ends_a_removals_window():
    # kraft-combined: the same replica re-added; its add timed out, so it may be a voter again.
    h = healthy_start(H())
    removal(h)
    step(h, "add-controller", "c3", "info")
    step(h, "describe-quorum", None, leader=1, epoch=5, voters=VOTERS)
    assert kinds(h) == []


# The other KRaft rules across voter-set changes ---------------------------------------------------
def test_a_removed_voter_reporting_an_old_epochs_leader_is_no_split_brain():
    h = healthy_start(H())
    removal(h)
    h.observe("c2", raft=raft("c2", "leader", 2, 5))
    h.observe("c1", raft=raft("c1", "follower", 2, 5))
    h.observe("c3", raft=raft("c3", "observer", 1, 4))  # not told of epoch 5: not a voter
    rows = [r for r in to_table(h.history()).to_pylist() if r["row"] == "op"]
    assert check_metadata(observe_samples_from_ops(rows)) == []


def test_a_wiped_controller_starting_from_epoch_zero_is_no_epoch_regression():
    def run(wiped: bool) -> list[str]:
        h = healthy_start(H(), epoch=7)
        removal(h, epoch=7)
        if wiped:
            step(h, "reprovision-controller", "c3", wiped="/var/lib/kafka/data")
        h.observe("c3", raft=raft("c3", "unattached", -1, 0, hw=-1))
        rows = [r for r in to_table(h.history()).to_pylist() if r["row"] == "op"]
        return [f.kind for f in check_metadata(observe_samples_from_ops(rows))]

    assert run(wiped=True) == []
    assert run(wiped=False) == ["epoch-regression"]


def test_a_dynamic_quorums_control_records_are_read():
    text = (
        "Dumping /x/00000000000000000000.log\nLog starting offset: 0\n"
        "baseOffset: 0 lastOffset: 2 count: 3 baseSequence: -1 lastSequence: -1 producerId: -1 "
        "producerEpoch: -1 partitionLeaderEpoch: 4 isTransactional: false isControl: true\n"
        "| offset: 0 CreateTime: 17 keySize: 4 valueSize: 34 sequence: -1 headerKeys: [] "
        "controlType: LEADER_CHANGE(2)\n"
        "| offset: 1 CreateTime: 17 keySize: 4 valueSize: 5 sequence: -1 headerKeys: [] "
        'KRaftVersion {"version":0,"kRaftVersion":1}\n'
        "| offset: 2 CreateTime: 17 keySize: 4 valueSize: 166 sequence: -1 headerKeys: [] "
        'KRaftVoters {"version":0,"voters":[{"voterId":1}]}\n'
    )
    log = parse_metadata_log(text, "c1")
    assert [r.control for r in log.records.values()] == [True, True, True]
    assert log.records[2].type.startswith("CONTROL KRaftVoters")
    # Kafka 4.1+ prints the leader change as JSON too.
    text = text.replace(
        "controlType: LEADER_CHANGE(2)", 'LeaderChange: {"version":0,"leaderId":3,"voters":[]}'
    )
    log = parse_metadata_log(text, "c1")
    assert log.records[0].control and log.records[0].type.startswith("CONTROL LeaderChange:")
