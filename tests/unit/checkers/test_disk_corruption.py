"""`corruption-served`, `corruption-detected` and `unreadable-record`
(checkers/families/disk/corruption.py) on hand-written histories: a disk corrupt step's start
and stop as nemesis/disk.py records them, the reads after it, and what the queue checker found
in them."""

from __future__ import annotations

import json
from pathlib import Path

from checkers.api import check
from checkers.core.findings import Finding
from checkers.families.disk.corruption import UNCHECKED_CRCS, judge
from history.columnar import op_rows, to_table
from tests.unit.checkers.histories import H

TOPIC = "kchaos-queue"
FLIP = {
    "path": f"data/{TOPIC}-1/00000000000000000000.log", "size": 104107, "among": 8,
    "preferred": "a partition of the run's topic it leads", "topic": TOPIC, "partition": 1,
    "offset": 29014, "mask": 16, "before": 1, "after": 17,
}  # fmt: skip
RECOVERY = [
    [["invalid-messages", "names-file"], "[2026-11-28 10:09:48,512] WARN Found invalid messages "
     f"in log segment /var/lib/kafka/data/{TOPIC}-1/00000000000000000000.log at byte offset "
     "28666. (org.apache.kafka.storage.internals.log.LogSegment)"],
    [["corrupt-record", "corrupted"], "org.apache.kafka.common.errors.CorruptRecordException: "
     "Record is corrupt (stored crc = 2678706856, computed crc = 271620855)"],
]  # fmt: skip


def start(what: dict | None = None, restart: bool = False, file_class: str = "log") -> dict:
    value = {"kind": "corrupt", "target": "one", "targets": ["n1"], "file_class": file_class,
             "how": "flip", "restart": restart, "age_s": 6.0, "effects": []}  # fmt: skip
    if what is not None:
        value["corrupted"] = {"n1": what}
    return value


def stop(said: dict | None = None) -> dict:
    return {"kind": "corrupt", "restarted": [], "kafka_said": said or {}, "effects": []}


def healthy_then_damaged() -> H:
    """Key 1 written and read back whole before the damage; after it, a poll reads offset 1's
    value at offset 1025 (a flipped offset delta): inconsistent offsets and a duplicate."""
    h = H().send(0, 1, 10, 0).send(0, 1, 11, 1).poll(2, {1: [(0, 10), (1, 11)]})
    return h.nemesis("start-disk", start(FLIP)).send(0, 1, 12, 2)


def run(h: H, tmp_path: Path, topic: str | None = TOPIC) -> Path:
    h.write(tmp_path)
    if topic is not None:
        (tmp_path / "plan.json").write_text(json.dumps({"generator": {"topic": topic}}))
    return tmp_path


def kinds(verdict) -> list[tuple[str, bool]]:
    return sorted(
        (f.kind, f.tolerated is None)
        for f in verdict.findings
        if f.kind.startswith(("corruption", "unreadable"))
    )


def test_a_record_served_at_another_offset_after_a_flip_is_named_and_tolerated_for_librdkafka(
    tmp_path,
):
    h = healthy_then_damaged().poll(3, {1: [(0, 10), (1025, 11), (2, 12)]})
    h.nemesis("stop-disk", stop())
    verdict = check(run(h, tmp_path), write=False)
    served = [f for f in verdict.findings if f.kind == "corruption-served"]
    assert {f.data["queue_kind"] for f in served} >= {"duplicate", "int-nonmonotonic-poll"}
    for f in served:
        assert f.ops[0] == 7 and 11 in f.ops and f.key == 1  # the start, and the poll after it
        assert f.tolerated == UNCHECKED_CRCS
        assert f.explanation.startswith(
            "after op 7 (disk corrupt at 0.800 s: bit flip at byte 29014 (1 -> 17) of "
            f"data/{TOPIC}-1/00000000000000000000.log on n1), op 11 read key 1"
        )
    # Each stands for the queue's finding of the same read (replaced: reported once), and
    # librdkafka promised no CRC check, so the run is valid.
    assert not [f for f in verdict.findings if f.kind in {"duplicate", "int-nonmonotonic-poll"}]
    assert verdict.status == "valid"
    assert not any("Kafka logged nothing about op 7" in n for n in verdict.notes)


def test_the_same_served_record_fails_the_run_when_the_reader_checked_crcs(tmp_path):
    h = H(client="java").send(0, 1, 10, 0).send(0, 1, 11, 1)
    # A flipped value digit: 11 reads as 19, which no send wrote (a byte the CRC covers).
    h.nemesis("start-disk", start(FLIP)).poll(3, {1: [(0, 10), (1, 19)]})
    verdict = check(run(h, tmp_path), write=False)
    served = [f for f in verdict.findings if f.kind == "corruption-served"]
    assert served and all(f.tolerated is None for f in served)
    assert verdict.status == "invalid" and {f.kind for f in verdict.failures} == {
        "corruption-served"
    }


def test_a_damage_kafka_logged_is_information_and_a_quiet_one_is_a_note(tmp_path):
    h = H().send(0, 0, 10, 0)
    h.nemesis("start-disk", start(FLIP, restart=True))
    h.nemesis("stop-disk", stop({"n1": {"lines": RECOVERY, "count": 2, "labels": []},
                                  "n2": {"lines": [[["error"], "ERROR unrelated"]]}}))  # fmt: skip
    quiet = dict(FLIP, path=f"data/{TOPIC}-0/00000000000000000000.log", partition=0)
    h.nemesis("start-disk", start(quiet)).nemesis("stop-disk", stop())
    h.poll(2, {0: [(0, 10)]})  # nothing wrong read: the poll is fine
    verdict = check(run(h, tmp_path), write=False)
    assert kinds(verdict) == [("corruption-detected", False)]
    (f,) = [f for f in verdict.findings if f.kind == "corruption-detected"]
    assert f.ops == (3, 5) and f.data["kafka_said"] == {"n1": [RECOVERY[0][1], RECOVERY[1][1]]}
    assert "ERROR unrelated" not in f.explanation
    assert verdict.status == "valid" and verdict.stats["disk_damages"] == 2
    assert verdict.stats["disk_damages_detected"] == 1
    (note,) = [n for n in verdict.notes if n.startswith("disk: Kafka logged nothing")]
    assert note.startswith("disk: Kafka logged nothing about op 7 (disk corrupt at 0.800 s")
    assert "restart 0" in note


def test_unreadable_records_are_served_corruption_after_a_damage_and_garbage_elsewhere(tmp_path):
    h = H().send(0, 1, 10, 0).send(0, 2, 20, 0)
    h.poll(2, {}, unreadable=[[2, 0, "value b'2#'"]])  # before any damage: garbage
    h.nemesis("start-disk", start(FLIP))
    h.poll(3, {}, unreadable=[[1, 0, "value b'1\\x30'"], [2, 0, "value b'2#'"]])
    verdict = check(run(h, tmp_path), write=False)
    assert kinds(verdict) == [
        ("corruption-served", False),
        ("unreadable-record", True),
        ("unreadable-record", True),
    ]
    served = next(f for f in verdict.findings if f.kind == "corruption-served")
    assert served.ops == (7, 9) and served.data["records"] == [[1, 0, "value b'1\\x30'"]]
    assert "partition 1 offset 0: value b'1\\x30'" in served.explanation
    assert verdict.stats["unreadable_records"] == 3 and verdict.status == "invalid"


def test_a_file_of_the_whole_log_dir_touches_every_partition_and_another_topic_none():
    checkpoint = {"path": "data/replication-offset-checkpoint", "size": 288, "offset": 3,
                  "mask": 1, "before": 10, "after": 11}  # fmt: skip
    other = dict(FLIP, topic="other", path="data/other-1/00000000000000000000.log")
    h = H().nemesis("start-disk", start(checkpoint, file_class="replication-offset-checkpoint"))
    h.nemesis("start-disk", start(other))
    table = to_table(h.history())
    disk = op_rows(table, ["start-disk", "stop-disk"]).to_pylist()
    late = Finding("garbage-read", 5, (2, 4), "op 4 read 99 from key 5")
    got = judge(disk, [late], [], TOPIC, None)
    (f,) = got.findings
    assert got.replaces == [late]
    assert f.kind == "corruption-served" and f.ops[0] == 1  # the checkpoint, not the other topic
    assert "data/replication-offset-checkpoint on n1" in f.explanation
    assert got.stats == {"disk_damages": 2}  # none detected, no unreadable record


def test_a_read_failing_its_crc_after_a_damage_is_detection_by_the_client():
    h = H().nemesis("start-disk", start(FLIP))
    h.poll(2, {}, type_="info")
    h.lines[-1]["error"] = (
        "kafka: Record batch for partition kchaos-queue-1 at offset 1732 is invalid, cause: "
        "Record is corrupt (stored crc = 1, computed crc = 2)"
    )
    table = to_table(h.history())
    got = judge(
        op_rows(table, ["start-disk", "stop-disk"]).to_pylist(),
        [],
        op_rows(table, ["poll", "txn"]).to_pylist(),
        TOPIC,
        "java",
    )
    (f,) = got.findings
    assert (f.kind, f.ops, f.data["client_errors"]) == ("corruption-detected", (1, 3), [3])
    assert got.stats["disk_damages_detected"] == 1


def test_a_history_without_disk_steps_says_nothing(tmp_path):
    h = H().send(0, 1, 10, 0).poll(2, {1: [(0, 10)]})
    verdict = check(run(h, tmp_path, topic=None), write=False)
    assert kinds(verdict) == [] and verdict.status == "valid"
    assert "disk_damages" not in verdict.stats


def test_under_crc_checks_a_value_served_at_another_offset_is_a_damaged_base_offset():
    h = H(client="java").send(0, 1, 10, 0).send(0, 1, 11, 1)
    h.nemesis("start-disk", start(FLIP)).poll(3, {1: [(4194304, 10), (1, 11)]})
    table = to_table(h.history())
    queue = [
        Finding("int-nonmonotonic-poll", 1, (7,), "op 7 polled key 1 at offset 4194304 then 1"),
        Finding("garbage-read", 1, (9,), "op 9 read 99 from key 1"),
    ]
    got = judge(op_rows(table, ["start-disk"]).to_pylist(), queue, [], TOPIC, "java")
    offsets, garbage = got.findings
    assert "only their offsets differ" in offsets.tolerated
    assert garbage.tolerated is None  # a value no send wrote: the CRC covers it


def test_a_flipped_value_digit_is_one_damage_not_a_lost_write_and_a_garbage_read(tmp_path):
    # 11, acknowledged at offset 1, read back as 19 after the damage (librdkafka: no CRC check).
    h = H().send(0, 1, 10, 0).send(0, 1, 11, 1)
    h.nemesis("start-disk", start(FLIP)).poll(3, {1: [(0, 10), (1, 19)]})
    verdict = check(run(h, tmp_path), write=False)
    served = [f for f in verdict.findings if f.kind == "corruption-served"]
    assert {f.data["queue_kind"] for f in served} >= {"garbage-read", "lost-write"}
    assert verdict.status == "valid" and not verdict.failures
    lost = next(f for f in served if f.data["queue_kind"] == "lost-write")
    assert (
        "the record acknowledged at offset 1 of key 1 (value 11) was read back" in lost.explanation
    )


QUORUM_STATE = {"path": "data/__cluster_metadata-0/quorum-state", "size": 153,
                "among": 1, "preferred": "any", "offset": 56, "mask": 16, "before": 44,
                "after": 60}  # fmt: skip
REFUSED = [
    [["fatal", "names-file"], "[2026-11-28 10:09:48,512] ERROR Encountered fatal fault: Error "
     "while reading the Quorum status from the file /var/lib/kafka/data/__cluster_metadata-0/"
     "quorum-state (org.apache.kafka.server.fault.ProcessTerminatingFaultHandler)"],
    [["error"], "com.fasterxml.jackson.core.JsonParseException: Unexpected character ('<')"],
]  # fmt: skip


def kept_down(record: dict) -> dict:
    return {"nodes": {"n1": record},
            "effects": [{"effect": "down", "nodes": ["n1"], "done": ["n1"]}]}  # fmt: skip


def test_a_node_that_could_not_start_on_its_damaged_file_is_detection_with_kafkas_words(
    tmp_path,
):
    h = H().send(0, 0, 10, 0)
    h.nemesis("start-disk", start(QUORUM_STATE, restart=True, file_class="quorum-state"))
    h.nemesis("stop-disk", stop({"n1": {"lines": REFUSED[:1], "count": 1, "labels": ["fatal"]}}))
    said = {"lines": REFUSED + REFUSED, "count": 4, "labels": ["error", "fatal"]}
    record = {"fault": "disk", "kind": "corrupt", "file": QUORUM_STATE["path"], "kafka_said": said}
    h.nemesis("kept-down", kept_down(record))
    h.poll(2, {0: [(0, 10)]})
    verdict = check(run(h, tmp_path), write=False)
    # One finding for the damage, of the kind that says what happened: not also "detected".
    assert kinds(verdict) == [("corruption-refused-start", False)]
    (f,) = verdict.findings
    assert f.ops == (3, 5, 7) and f.data["kept_down"] == 7 and f.key is None
    assert "Error while reading the Quorum status from the file" in f.explanation
    assert "n1 could not start again (op 7" in f.explanation
    assert f.data["kafka_said"] == {"n1": [REFUSED[0][1]]}  # each restart's refusal quoted once
    assert verdict.status == "valid" and verdict.stats["disk_nodes_kept_down"] == 1


def test_a_node_kept_down_by_another_lasting_fault_leaves_a_damage_that_restarted_alone(
    tmp_path,
):
    h = H().send(0, 0, 10, 0)
    h.nemesis("start-disk", start(QUORUM_STATE, restart=True, file_class="quorum-state"))
    h.nemesis("stop-disk", stop({"n1": {"lines": REFUSED[:1], "count": 1, "labels": ["fatal"]}}))
    h.nemesis("kept-down", kept_down({"fault": "other", "kind": "something-else"}))
    verdict = check(run(h, tmp_path), write=False)
    assert kinds(verdict) == [("corruption-detected", False)]
    assert "disk_nodes_kept_down" not in verdict.stats


def test_a_log_kafka_set_aside_as_stray_is_kafka_noticing_the_damage(tmp_path):
    # A 3.9.2 run: a bit of partition.metadata's topic id flipped, the node restarted.
    meta = {"path": f"data/{TOPIC}-2/partition.metadata", "size": 43, "among": 13,
            "topic": TOPIC, "partition": 2, "offset": 27, "mask": 32, "before": 99,
            "after": 67}  # fmt: skip
    stray = [
        [["stray"], "[2026-11-28 14:43:14,207] INFO Found stray log dir Log(dir=/var/lib/kafka/"
         f"data/{TOPIC}-2, topicId=kCy-02CZQeC1KNY2ixPwAA, topic={TOPIC}, partition=2): the "
         "topicId kCy-02CZQeC1KNY2ixPwAA does not exist in the metadata image"],
        [["stray"], f"[2026-11-28 14:43:14,222] WARN Log in /var/lib/kafka/data/{TOPIC}-2 marked "
         f"stray and renamed to /var/lib/kafka/data/{TOPIC}-2.0febfc74-stray"],
    ]  # fmt: skip
    h = H().send(0, 2, 10, 0)
    h.nemesis("start-disk", start(meta, restart=True, file_class="partition.metadata"))
    h.nemesis("stop-disk", stop({"n1": {"lines": stray, "count": 2, "labels": ["stray"]}}))
    h.poll(2, {2: [(0, 10)]})
    verdict = check(run(h, tmp_path), write=False)
    assert kinds(verdict) == [("corruption-detected", False)]
    assert not [n for n in verdict.notes if n.startswith("disk: Kafka logged nothing")]
