"""sample_kafka's reading of Jolokia's answers: the node's software version and JVM start."""

from __future__ import annotations

import clusters.jmx as jmx
from clusters.jmx import sample_kafka

# The two app-info MBeans a 3.9 node registers, as a Jolokia pattern read returns them.
APP_INFO = {
    "kafka.server:type=app-info,id=1": {"StartTimeMs": 1, "Version": "3.9.2", "CommitId": "x"},
    "kafka.server:type=app-info": {"start-time-ms": 1, "commit-id": "x", "version": "3.9.2"},
}


def fake_reads(monkeypatch, answers: dict) -> list[dict]:
    asked: list[dict] = []

    def read_many(self, reads):
        asked.append(reads)
        return {name: answers.get(name) for name in reads}

    monkeypatch.setattr(jmx.Jolokia, "read_many", read_many)
    return asked


def test_version_and_start_come_with_the_sample_in_one_request(monkeypatch):
    asked = fake_reads(monkeypatch, {"app_info": APP_INFO, "runtime": {"StartTime": 1795505851055}})
    got = sample_kafka("10.0.0.1", frozenset({"controller"}))
    assert len(asked) == 1
    assert got["version"] == "3.9.2" and got["started_ms"] == 1795505851055


def test_either_app_info_naming_gives_the_version(monkeypatch):
    for name, attrs in APP_INFO.items():
        fake_reads(monkeypatch, {"app_info": {name: attrs}})
        assert sample_kafka("10.0.0.1", frozenset({"broker"}))["version"] == "3.9.2"


def test_a_node_that_reports_neither_has_nulls(monkeypatch):
    fake_reads(monkeypatch, {})
    got = sample_kafka("10.0.0.1", frozenset({"broker"}))
    assert got["version"] is None and got["started_ms"] is None


def scripted_reads(monkeypatch, rounds: list[dict]) -> list[dict]:
    """Each request answers from the next round's values, as a node moving between reads would."""
    asked: list[dict] = []

    def read_many(self, reads):
        answers = rounds[min(len(asked), len(rounds) - 1)]
        asked.append(reads)
        return {name: answers.get(name) for name in reads}

    monkeypatch.setattr(jmx.Jolokia, "read_many", read_many)
    return asked


def raft_round(state, leader, epoch, before, after) -> dict:
    return {
        "epoch_before": {"current-epoch": float(before)},
        "raft": {
            "current-state": state,
            "current-leader": float(leader),
            "current-epoch": float(epoch),
            "high-watermark": 514.0,
            "log-end-offset": 515.0,
        },
        "epoch_after": {"current-epoch": float(after)},
    }


def test_the_raft_view_is_read_between_two_reads_of_the_epoch_in_one_request(monkeypatch):
    asked = scripted_reads(monkeypatch, [raft_round("follower", 3001, 7, 7, 7)])
    got = sample_kafka("10.0.0.1", frozenset({"controller"}))
    names = list(asked[0])
    assert len(asked) == 1
    assert names[0] == "epoch_before" and names[-1] == "epoch_after"
    assert got["raft"] == {
        "state": "follower",
        "leader": 3001,
        "epoch": 7,
        "high_watermark": 514,
        "log_end_offset": 515,
    }


def test_a_read_that_straddles_an_epoch_change_is_read_again(monkeypatch):
    # CI run queue/20261124T210151-1: broker b3 moved from following 3003 in epoch 6 to epoch 7
    # (led by 3001) while its gauges were read, and reported leader 3003 for epoch 7.
    torn = raft_round("observer", 3003, 7, 6, 7)
    settled = raft_round("unattached", -1, 7, 7, 7)
    asked = scripted_reads(monkeypatch, [torn, settled])
    got = sample_kafka("10.0.0.1", frozenset({"broker"}))
    assert len(asked) == 2
    assert set(asked[1]) == {"epoch_before", "raft", "epoch_after"}
    assert got["raft"]["state"] == "unattached" and got["raft"]["leader"] == -1


def test_a_raft_view_that_never_holds_still_is_left_out(monkeypatch):
    rounds = [raft_round("candidate", -1, e + 1, e, e + 1) for e in range(5, 9)]
    asked = scripted_reads(monkeypatch, rounds)
    got = sample_kafka("10.0.0.1", frozenset({"controller"}))
    assert got["raft"] is None
    assert len(asked) == 1 + jmx.RAFT_REREADS
