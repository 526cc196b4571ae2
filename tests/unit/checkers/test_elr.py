"""KIP-966's ELR rules (checkers/families/elr/) on hand-written metadata logs: Kafka's own
sequence of records for the system test's scenario (two clean stops, an unclean kill of the
leader, the clean two back: one elected from the ELR) must raise nothing, and each rule has a
log that breaks it, plus near misses Kafka writes that must stay silent (a fence's partition
change before its fence record, the last known leader, an unclean election the topic allows)."""

from __future__ import annotations

import json
from typing import Any

from checkers.families.elr.check import check_elr
from checkers.families.metadata_log.check import MetadataLogRead
from checkers.families.metadata_log.parse import parse_metadata_log
from checkers.families.observer_samples import Sample
from tests.unit.checkers.metalogs import BASE_MS, CLUSTER, dump_batches, rec

T = "cLeQx89bSOu6lgtiqv6AmA"
TOPIC = "kchaos-queue"
GEN = {"topic": TOPIC, "min_insync_replicas": 2}
E = 2  # the controllers' Raft epoch: one leader wrote the whole log


def change(**data: Any) -> dict[str, Any]:
    return {"type": "PARTITION_CHANGE_RECORD", "version": 2,
            "data": {"partitionId": 0, "topicId": T, **data}}  # fmt: skip


def fence(b: int, how: int = 1) -> dict[str, Any]:
    return rec("BROKER_REGISTRATION_CHANGE_RECORD", brokerId=b, brokerEpoch=b, fenced=how)


def shutdown(b: int) -> dict[str, Any]:
    return rec("BROKER_REGISTRATION_CHANGE_RECORD", brokerId=b, brokerEpoch=b,
               inControlledShutdown=1)  # fmt: skip


def register(b: int, fenced: bool = True) -> dict[str, Any]:
    return rec("REGISTER_BROKER_RECORD", brokerId=b, brokerEpoch=10 + b, fenced=fenced)


def start(elr: bool = True) -> list[tuple[int, list[Any]]]:
    """Bootstrap, three brokers registered and unfenced, the topic with min ISR 2, partition 0
    on brokers 1-3 led by 1."""
    feats = [rec("FEATURE_LEVEL_RECORD", name="metadata.version", featureLevel=27)]
    if elr:
        feats.append(rec("FEATURE_LEVEL_RECORD", name="eligible.leader.replicas.version",
                         featureLevel=1))  # fmt: skip
    return [
        (E, ["LEADER_CHANGE(2)"]),
        (E, feats),
        (E, [register(1), register(2), register(3)]),
        (E, [fence(1, -1), fence(2, -1), fence(3, -1)]),
        (
            E,
            [
                rec("TOPIC_RECORD", name=TOPIC, topicId=T),
                rec("CONFIG_RECORD", resourceType=2, resourceName=TOPIC,
                    name="min.insync.replicas", value="2"),
                {"type": "PARTITION_RECORD", "version": 2,
                 "data": {"partitionId": 0, "topicId": T, "replicas": [1, 2, 3],
                          "isr": [1, 2, 3], "leader": 1, "leaderEpoch": 0,
                          "partitionEpoch": 0}},
            ],
        ),
    ]  # fmt: skip


def judge(batches, times=None, samples=(), sends=(), faults=()):
    text = dump_batches(batches, times=times)
    logs = {n: parse_metadata_log(text, n) for n in ("n1", "n2", "n3")}
    read = MetadataLogRead(directory=None, voters=logs)  # type: ignore[arg-type]
    return check_elr(read, CLUSTER, GEN, list(samples), list(sends), list(faults))


def kinds(result) -> list[str]:
    return sorted(f.kind for f in result.findings)


# Kafka's own records for eligible_leader_replicas_test's shape (PartitionChangeBuilder, read for
# each step): 3 replicas, min ISR 2; brokers 3 and 2 stop cleanly, leader 1 is killed, 2 comes
# back and is elected from the ELR, 1 comes back after its unclean shutdown.
def system_test_shape() -> list[tuple[int, list[Any]]]:
    return [*start(),
        # 3 shuts down cleanly: out of the ISR (still at min ISR: no ELR), then fenced.
        (E, [shutdown(3), change(isr=[1, 2])]),
        (E, [fence(3)]),
        # 2 shuts down cleanly: the ISR drops below min ISR, so 2 goes into the ELR.
        (E, [shutdown(2), change(isr=[1], eligibleLeaderReplicas=[2])]),
        (E, [fence(2)]),
        # 1, the leader, is killed: its session expires; the partition changes come before the
        # fence record (handleBrokerFenced). No acceptable leader: the last known leader is kept.
        (E, [change(leader=-1, isr=[], eligibleLeaderReplicas=[2, 1], lastKnownElr=[1]),
             fence(1)]),
        # 2 comes back (clean shutdown file: no shutdown records), is unfenced, and elected
        # from the ELR, its ISR itself; 1 stays in the ELR.
        (E, [register(2)]),
        (E, [fence(2, -1), change(leader=2, isr=[2], eligibleLeaderReplicas=[1],
                                  lastKnownElr=[])]),
        # 1 comes back after an unclean shutdown: out of the ELR, registered anew, fenced.
        (E, [change(eligibleLeaderReplicas=[]), register(1)]),
        (E, [fence(1, -1)]),
        # 1 catches up; the leader's AlterPartition puts it back; at min ISR again.
        (E, [change(isr=[2, 1])]),
    ]  # fmt: skip


def test_the_system_tests_shape_as_kafka_records_it_raises_nothing():
    result = judge(system_test_shape())
    assert result.findings == [] and result.checked
    assert any("eligible.leader.replicas.version committed as 1" in n for n in result.notes)
    rows = result.stats["committed"]["changes"]
    assert [r["elr"] for r in rows] == [[], [], [2], [2, 1], [1], [], []]
    assert rows[4]["leader"] == 2 and rows[4]["isr"] == [2]


def test_an_isr_member_in_the_elr_is_found():
    bad = [*start(), (E, [change(isr=[1, 2], eligibleLeaderReplicas=[2])])]
    result = judge(bad)
    assert kinds(result) == ["elr-isr-overlap"]
    f = result.findings[0]
    assert f.data["brokers"] == [2] and "Eligible Leader Replicas" in f.explanation


def test_a_fenced_broker_elected_is_found_and_named():
    bad = [
        *start(),
        (E, [change(isr=[1, 2]), fence(3)]),
        (E, [fence(2)]),  # 2 fenced, still in the ISR (its partition change not made)
        (E, [change(leader=2)]),
    ]
    result = judge(bad)
    assert "ineligible-leader-elected" in kinds(result)
    (f,) = [f for f in result.findings if f.kind == "ineligible-leader-elected"]
    assert f.data["standing"] == "fenced" and f.data["leader"] == 2


def test_an_unregistered_broker_elected_is_found():
    bad = [
        *start(),
        (E, [change(isr=[1, 2]), rec("UNREGISTER_BROKER_RECORD", brokerId=2, brokerEpoch=2)]),
        (E, [change(leader=2)]),
    ]
    result = judge(bad)
    assert [f.data["standing"] for f in result.findings
            if f.kind == "ineligible-leader-elected"] == ["unregistered"]  # fmt: skip


def test_the_elr_chosen_while_an_isr_member_could_lead_is_out_of_order():
    bad = [
        *start(),
        (E, [shutdown(3), change(isr=[1, 2])]),
        (E, [fence(3)]),
        (E, [change(isr=[1], eligibleLeaderReplicas=[2])]),
        (E, [change(eligibleLeaderReplicas=[2, 3])]),
        (E, [fence(3, -1)]),  # 3 back
        # 1 is still in the ISR and unfenced, yet 3 is elected from the ELR.
        (E, [change(leader=3, isr=[3], eligibleLeaderReplicas=[2])]),
    ]
    result = judge(bad)
    assert kinds(result) == ["leader-election-order"]
    assert "the ISR held broker(s) [1]" in result.findings[0].explanation


def test_the_leader_fenced_in_the_same_batch_is_no_candidate():
    # handleBrokerFenced: the fenced broker's partition changes precede its fence record; the
    # controller already excluded it. Not a skipped ISR member.
    ok = [
        *start(),
        (E, [shutdown(2), change(isr=[1, 3])]),
        (E, [fence(2)]),
        (E, [change(leader=3, isr=[3], eligibleLeaderReplicas=[1]), fence(1)]),
    ]
    assert judge(ok).findings == []


def test_an_unclean_election_is_found_unless_the_topic_allows_it():
    bad = [
        *start(elr=False),
        (E, [change(isr=[1]), fence(2), fence(3)]),  # as 3.9 keeps the last ISR member
        (E, [change(leader=-1), fence(1)]),
        (E, [fence(3, -1), change(leader=3, isr=[3], leaderRecoveryState=1)]),
    ]
    result = judge(bad)
    assert kinds(result) == ["unclean-leader-election"]
    allowed = [*bad[:-1],
        (E, [rec("CONFIG_RECORD", resourceType=2, resourceName=TOPIC,
                 name="unclean.leader.election.enable", value="true")]),
        bad[-1],
    ]  # fmt: skip
    assert judge(allowed).findings == []


def test_the_last_known_leader_is_elected_when_isr_and_elr_are_empty():
    ok = [
        *start(),
        (E, [change(isr=[1], eligibleLeaderReplicas=[]), fence(2), fence(3)]),
        # 1 killed, then back after an unclean shutdown: no ISR, no ELR; 1 is the last leader.
        (E, [change(leader=-1, isr=[], lastKnownElr=[1]), fence(1)]),
        (E, [register(1)]),
        (E, [fence(1, -1), change(leader=1, isr=[1], lastKnownElr=[], leaderRecoveryState=1)]),
    ]
    assert judge(ok).findings == []
    # The same while 2, in the ELR, was unfenced: the ELR comes first.
    bad = [
        *start(),
        (E, [change(isr=[1], eligibleLeaderReplicas=[2]), fence(3)]),
        (E, [change(leader=-1, isr=[], lastKnownElr=[1]), fence(1)]),
        (E, [fence(1, -1), change(leader=1, isr=[1], lastKnownElr=[], leaderRecoveryState=1)]),
    ]
    assert kinds(judge(bad)) == ["leader-election-order"]


def test_a_broker_sample_with_an_isr_member_in_its_elr_is_found():
    value = {"partitions": [{"topic": TOPIC, "partition": 0, "error": 0, "leader": 1,
                             "leader_epoch": 4, "isr": [1, 2], "elr": [2],
                             "last_known_elr": []}]}  # fmt: skip
    good = {"partitions": [{**value["partitions"][0], "elr": [3]}]}
    samples = [Sample(7, "n1", 0, 10, good), Sample(9, "n2", 20, 30, value)]
    result = check_elr(None, {}, None, samples, (), [])
    assert kinds(result) == ["elr-isr-overlap"] and result.findings[0].ops == (9,)
    assert result.stats["sampled"]["views"] == 2


# The high watermark while the ISR is below min ISR -----------------------------------------------
def _times(n: int, shrink_at: int, grow_at: int) -> list[int]:
    """Batch times (ms): 100 ms apart, the second-to-last batch at `shrink_at`, the last at
    `grow_at`."""
    return [BASE_MS + 100 * i for i in range(n - 2)] + [shrink_at, grow_at]


def _send(index: int, invoke_ms: int, ack_ms: int, key: int = 0, offset: int = 5):
    value = [["send", key, [offset, 1000 + index]]]
    return {"index": index, "invoke_index": index - 1, "type": "ok", "f": "send", "process": 0,
            "node": "n1", "wall": ack_ms / 1000, "invoke_wall": invoke_ms / 1000,
            "value_json": json.dumps(value)}  # fmt: skip


def _partition_fault(index: int, start_ms: int, end_ms: int) -> list[dict[str, Any]]:
    effects = [{"effect": "cut", "nodes": ["n1", "n2"], "links": [["n1", "n2"]]}]
    value = {"kind": "isolate-one", "effects": effects}
    rows = []
    for i, (f, t, ms) in enumerate(
        (("start-partition", "invoke", start_ms), ("start-partition", "ok", start_ms + 50),
         ("stop-partition", "invoke", end_ms), ("stop-partition", "ok", end_ms + 50))
    ):  # fmt: skip
        rows.append({"index": index + i, "invoke_index": None if t == "invoke" else index + i - 1,
                     "type": t, "f": f, "process": "nemesis", "node": None, "wall": ms / 1000,
                     "time": ms * 1_000_000, "value_json": json.dumps(value)})  # fmt: skip
    return rows


def _low(shrink_at: int, grow_at: int):
    batches = [
        *start(),
        (E, [change(isr=[1], eligibleLeaderReplicas=[2]), fence(2), fence(3)]),
        (E, [fence(2, -1), change(isr=[1, 2], eligibleLeaderReplicas=[])]),
    ]
    return batches, _times(len(batches), shrink_at, grow_at)


def test_an_ack_while_the_committed_isr_was_below_min_isr_is_found():
    shrink, grow = BASE_MS + 10_000, BASE_MS + 30_000
    batches, times = _low(shrink, grow)
    inside = _send(41, shrink + 5_000, shrink + 5_200)
    result = judge(batches, times, sends=[inside])
    assert kinds(result) == ["hw-advanced-below-min-isr"]
    f = result.findings[0]
    assert f.ops == (41,) and f.data["isr"] == [1] and f.data["min_isr"] == 2


def test_acks_at_the_edges_or_under_a_partition_are_not_judged():
    shrink, grow = BASE_MS + 10_000, BASE_MS + 30_000
    batches, times = _low(shrink, grow)
    sends = [
        _send(11, shrink - 100, shrink + 1_000),  # invoked before the shrink
        _send(13, shrink + 500, shrink + 900),  # within the lag a leader may take to learn it
        _send(15, grow - 1_000, grow - 500),  # a pending expansion's acks, clocks apart
        _send(17, shrink + 5_000, shrink + 5_200, key=1),  # another partition
        _send(19, grow + 100, grow + 300),  # after the ISR grew again
    ]
    assert judge(batches, times, sends=sends).findings == []
    # A cut link during the stretch: a deposed leader may acknowledge with its old ISR.
    faults = _partition_fault(100, shrink + 2_000, shrink + 20_000)
    late = _send(21, shrink + 8_000, shrink + 8_300)
    assert judge(batches, times, sends=[late], faults=faults).findings == []


def test_no_elr_feature_no_elr_note_and_nothing_judged_wrongly():
    result = judge([*start(elr=False), (E, [change(isr=[1, 2]), fence(3)])])
    assert result.findings == []
    assert any("no committed eligible.leader.replicas.version" in n for n in result.notes)
