"""Metadata-log rules: for each, a hand-written log that must fire and a near miss that must not."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from checkers.families.metadata_log.check import check_logs, check_run_metadata
from checkers.families.metadata_log.committed import majority_bound
from checkers.families.metadata_log.parse import MetadataLogError, parse_metadata_log
from tests.unit.checkers.metalogs import BASE_MS, CLUSTER, dump, healthy, rec

DATA = Path(__file__).parent / "data"
T = "cLeQx89bSOu6lgtiqv6AmA"


def logs_of(**entries):
    return {n: parse_metadata_log(dump(e), n) for n, e in entries.items()}


def kinds(result):
    return sorted(f.kind for f in result.findings)


def test_real_excerpt_parses():
    log = parse_metadata_log((DATA / "metadata_n1_head.txt").read_text(), "n1")
    assert log.records[0].control and log.records[0].text == "LEADER_CHANGE(2)"
    assert log.records[2].type == "FEATURE_LEVEL_RECORD"
    assert log.records[5].data["brokerEpoch"] == 5 and log.records[5].epoch == 2
    assert log.notes == []


def test_truncated_file_keeps_complete_records_and_says_so():
    text = dump(healthy())
    cut = text[: text.rindex("| offset: 8") + 30]  # mid-line, no newline
    log = parse_metadata_log(cut, "n1")
    assert log.last_offset == 7
    assert any("cut short" in n for n in log.notes)
    assert any("truncated" in n for n in log.notes)


def test_odd_line_is_one_clear_error():
    text = dump(healthy()).replace("| offset: 3", "|| garbage 3", 1)
    with pytest.raises(MetadataLogError, match=r"n1\.txt:\d+: not a DumpLogSegments line"):
        parse_metadata_log(text, "n1")


def test_unreadable_log_is_unknown_not_invalid(tmp_path):
    (tmp_path / "metadata").mkdir()
    (tmp_path / "metadata" / "n1.txt").write_text(
        dump(healthy()).replace("payload: {", "payload: {{")
    )
    result = check_run_metadata(tmp_path, [], None, set())
    assert [f.kind for f in result.findings] == ["metadata-log-unreadable"]
    assert result.findings[0].unknown


def test_healthy_logs_of_different_lengths_agree():
    h = healthy()
    result = check_logs(logs_of(n1=h, n2=h[:-2], n3=h[:5]), CLUSTER)
    assert result.findings == [] and result.checked


def test_divergence_below_commit_fires_and_cites_both_records():
    h = healthy()
    other = [*h[:3], (2, rec("REGISTER_BROKER_RECORD", brokerId=2, brokerEpoch=99)), *h[4:]]
    result = check_logs(logs_of(n1=h, n2=h, n3=other), CLUSTER)
    [f] = [f for f in result.findings if f.kind == "metadata-divergence"]
    assert f.data["offset"] == 3
    assert any("n3.txt" in c and 'brokerEpoch":99' in c for c in f.data["records"])
    assert any("n1.txt" in c for c in f.data["records"])
    assert "KIP-631" in f.explanation and not f.unknown


def test_uncommitted_tail_of_a_deposed_leader_is_not_divergence():
    h = healthy(epoch=2)
    # n3 led epoch 2 and wrote two entries nobody else got; n1 and n2 moved on in epoch 3.
    n3 = [*h[:6], (2, rec("NO_OP_RECORD")), (2, rec("NO_OP_RECORD"))]
    n12 = [*h[:6], (3, "LEADER_CHANGE(2)"), (3, rec("NO_OP_RECORD"))]
    result = check_logs(logs_of(n1=n12, n2=n12, n3=n3), CLUSTER)
    assert result.findings == []
    assert any("has not caught up" in n for n in result.notes)


def test_older_epoch_on_a_majority_is_not_counted_as_committed():
    # Raft figure 8: entries of epoch 2 on a majority, but the newest epoch is 3 and only one
    # log has it, so nothing of epoch 3 is on a majority and nothing is proven.
    h = healthy()
    logs = logs_of(n1=h, n2=h[:4], n3=[*h[:2], (3, "LEADER_CHANGE(2)")])
    assert majority_bound(logs, 3).last == -1
    result = check_logs(logs, CLUSTER)
    assert kinds(result) == ["metadata-log-unknown"] and result.findings[0].unknown
    # An observed high watermark proves the first four committed: n3 differs from offset 2 on
    # and never agrees again: a follower that has not caught up, noted, not a failure.
    result = check_logs(logs, CLUSTER, high_watermark=4)
    assert result.findings == [] and result.checked
    assert any("n1 and n3 differ from committed offset 2" in n for n in result.notes)


def test_broker_epoch_regression():
    h = healthy()
    again = rec("REGISTER_BROKER_RECORD", brokerId=1, brokerEpoch=1, fenced=True)
    result = check_logs(logs_of(n1=[*h, (2, again)], n2=[*h, (2, again)]), CLUSTER)
    [f] = result.findings
    assert f.kind == "broker-epoch-regression" and f.data["broker"] == 1
    assert "offset 2" in f.explanation and "offset 9" in f.explanation


def test_broker_epoch_growing_is_fine():
    h = healthy()
    again = rec("REGISTER_BROKER_RECORD", brokerId=1, brokerEpoch=9, fenced=True)
    assert check_logs(logs_of(n1=[*h, (2, again)], n2=[*h, (2, again)]), CLUSTER).findings == []


def _partition(epoch, leader=2):
    return rec("PARTITION_RECORD", partitionId=0, topicId=T, replicas=[1, 2], isr=[1, 2],
               leader=leader, leaderEpoch=epoch, partitionEpoch=epoch)  # fmt: skip


def test_leader_epoch_going_back_after_changes():
    change = rec("PARTITION_CHANGE_RECORD", partitionId=0, topicId=T, leader=2, isr=[2])
    # Epoch 0, two leader changes (so at least 2), then a record claiming epoch 1.
    h = [*healthy(), (2, change), (2, change), (2, _partition(1))]
    result = check_logs(logs_of(n1=h, n2=h), CLUSTER)
    [f] = result.findings
    assert f.kind == "leader-epoch-regression" and "at 2 or more" in f.explanation


def test_leader_epoch_isr_only_change_does_not_bump():
    isr_only = rec("PARTITION_CHANGE_RECORD", partitionId=0, topicId=T, isr=[1])
    h = [*healthy(), (2, isr_only), (2, _partition(0, leader=1))]
    assert check_logs(logs_of(n1=h, n2=h), CLUSTER).findings == []


def test_feature_level_differs_at_same_epoch():
    h = healthy()
    other = [
        h[0],
        (2, rec("FEATURE_LEVEL_RECORD", name="metadata.version", featureLevel=20)),
        *h[2:],
    ]
    result = check_logs(logs_of(n1=h, n2=h, n3=other), CLUSTER)
    assert kinds(result) == ["feature-level-divergence", "metadata-divergence"]
    f = next(f for f in result.findings if f.kind == "feature-level-divergence")
    assert "n3: metadata.version=20" in f.explanation and "KIP-584" in f.explanation


def _lease_case(invoke_after_ms, corroborated=()):
    fence = rec("BROKER_REGISTRATION_CHANGE_RECORD", brokerId=1, brokerEpoch=2, fenced=1)
    h = [*healthy(), (2, fence), (2, rec("NO_OP_RECORD"))]
    fence_ms = BASE_MS + 100 * (len(h) - 2)
    inv = (fence_ms + invoke_after_ms) / 1000
    sends = [{"index": 7, "node": "n1", "invoke_wall": inv, "wall": inv + 0.05, "f": "send"}]
    return check_logs(logs_of(n1=h, n2=h), CLUSTER, sends=sends, corroborated_ops=set(corroborated))


def test_a_late_send_attributed_only_by_the_leader_map_is_a_note_not_a_finding():
    # fast timing: 3 s session timeout + 2 s tolerance.
    result = _lease_case(5_500)
    assert result.findings == []
    assert any("lease: 1 acknowledged sends (ops 7)" in n for n in result.notes)


def test_lease_violation_corroborated_by_a_queue_failure_is_a_failure():
    [f] = _lease_case(5_500, corroborated=[7]).findings
    assert f.kind == "lease-violation" and not f.unknown and f.ops == (7,)
    assert "fenced" in f.explanation and "n1.txt" in f.data["records"][0]


def test_lease_near_miss_within_timeout_and_tolerance():
    result = _lease_case(4_900)
    assert result.findings == [] and not any(n.startswith("lease") for n in result.notes)


def test_lease_ends_when_the_broker_is_unfenced():
    fence = rec("BROKER_REGISTRATION_CHANGE_RECORD", brokerId=1, brokerEpoch=2, fenced=1)
    unfence = rec("BROKER_REGISTRATION_CHANGE_RECORD", brokerId=1, brokerEpoch=2, fenced=-1)
    h = [*healthy(), (2, fence), (2, unfence), (2, rec("NO_OP_RECORD"))]
    inv = (BASE_MS + 100 * 9 + 60_000) / 1000
    sends = [{"index": 7, "node": "n1", "invoke_wall": inv, "wall": inv + 0.1, "f": "send"}]
    assert check_logs(logs_of(n1=h, n2=h), CLUSTER, sends=sends).findings == []


@settings(max_examples=40, deadline=None)
@given(st.lists(st.sampled_from([0, 1, 2]), min_size=3, max_size=3), st.integers(0, 8))
def test_prefixes_of_one_log_never_alarm(cut, extra):
    """Controllers that lag behind one healthy log (any prefix each) never produce a failure."""
    h = [*healthy(), *[(2, rec("NO_OP_RECORD"))] * extra]
    logs = logs_of(**{f"n{i + 1}": h[: len(h) - c] for i, c in enumerate(cut)})
    result = check_logs(logs, CLUSTER)
    assert all(f.unknown for f in result.findings)


def test_run_directory_with_sample_metadata(tmp_path):
    (tmp_path / "metadata").mkdir()
    for n in ("n1", "n2", "n3"):
        (tmp_path / "metadata" / f"{n}.txt").write_text(dump(healthy()))
    (tmp_path / "cluster.json").write_text(json.dumps(CLUSTER))
    result = check_run_metadata(tmp_path, [], None, set())
    assert result.checked and result.findings == []
    assert "committed up to offset 8" in result.notes[0]


def test_check_reports_metadata_log_findings_of_a_run(tmp_path):
    from checkers.api import check
    from tests.unit.checkers.histories import H

    fence = rec("BROKER_REGISTRATION_CHANGE_RECORD", brokerId=1, brokerEpoch=2, fenced=1)
    h = [*healthy(), (2, fence), (2, rec("NO_OP_RECORD"))]
    (tmp_path / "metadata").mkdir()
    for n in ("n1", "n2"):
        (tmp_path / "metadata" / f"{n}.txt").write_text(dump(h))
    (tmp_path / "cluster.json").write_text(json.dumps(CLUSTER))
    hist = H().send(0, 0, 1, 0).poll(1, {0: [(0, 1)]})
    late = (BASE_MS + 900 + 10_000) / 1000
    hist.lines[0].update(node="n1", wall=late)
    hist.lines[1].update(node="n1", wall=late + 0.01)
    hist.write(tmp_path)
    verdict = check(tmp_path, engine="pandas")
    # Attributed by the leader map only: not proof, so a note and a valid verdict.
    assert verdict.findings == [] and verdict.status == "valid"
    assert any(n.startswith("lease: 1 acknowledged sends") for n in verdict.notes)
    assert any("committed up to offset 10" in n for n in verdict.notes)
