"""The disk package's corrupt and disk-full kinds on in-memory nodes with an in-memory layer
(fake_node.py): which file a seed picks and where, what the history records of it (the layer's
answer, the kill, what Kafka logged), what stop and heal undo, and what is refused before any
node is touched. The layer's own commands are tests/integration/test_disk_layer.py's."""

from __future__ import annotations

import json
import random

import pytest

from clusters.topology import build_topology
from history.effects import DOWN, KNOWN, RESTARTED, STALLED, op_effects
from nemesis import disk, disk_files, kafka_said
from nemesis.api import FaultContext, FaultStep
from nemesis.disk import CORRUPT, DISK_FULL, MENU, DiskNemesis
from nemesis.errors import NemesisError, NotApplied
from nemesis.heal import heal_cluster
from nemesis.items import ItemError, parse_items
from tests.unit.nemesis.fake_node import FakeNode

TOPO = build_topology("kraft-combined", cluster="x")
NAMES = [n.name for n in TOPO.nodes]
SEGMENT = "data/kchaos-queue-{p}/00000000000000000000.log"


def files(node: int) -> dict[str, bytearray]:
    """What a Kafka node's layer holds after a short run: segments of four partitions, their
    indexes and checkpoints, the log dir's checkpoints, the metadata log."""
    out: dict[str, bytearray] = {}
    for p in range(4):
        base = f"data/kchaos-queue-{p}/00000000000000000000"
        out[f"{base}.log"] = bytearray(b"%d" % (node * 10 + p) * 5000)
        out[f"{base}.index"] = bytearray(10_485_760 // 1024)  # preallocated, mostly zeros
        out[f"data/kchaos-queue-{p}/leader-epoch-checkpoint"] = bytearray(b"0\n1\n0 0\n")
        out[f"data/kchaos-queue-{p}/partition.metadata"] = bytearray(b"version: 0\ntopic_id: x\n")
    out["data/__consumer_offsets-0/00000000000000000000.log"] = bytearray(b"c" * 300)
    out["data/replication-offset-checkpoint"] = bytearray(b"0\n4\nkchaos-queue 0 17\n")
    out["data/meta.properties"] = bytearray(b"node.id=1\nversion=1\n")
    out["data/__cluster_metadata-0/00000000000000000000.log"] = bytearray(b"m" * 900)
    out["data/__cluster_metadata-0/quorum-state"] = bytearray(b'{"leaderId":1}')
    return out


def context(leaders: dict[int, str] | None = None) -> FaultContext:
    nodes = {n.name: FakeNode(n) for n in TOPO.nodes}
    for i, node in enumerate(nodes.values()):
        node.disk = {"powered": True, "pending": {}, "files": files(i + 1)}
    hints = {"topic": "kchaos-queue", "partition_leaders": leaders or {}}
    return FaultContext(topology=TOPO, nodes=nodes, hints=hints)


def corrupt(file_class: str, how: str, restart: int = 1, target: str = "one", seed: int = 7):
    params = {"file_class": file_class, "how": how, "restart": restart, "age_s": 6}
    return (
        FaultStep(0, "start", "disk", CORRUPT, target, seed, params),
        FaultStep(9, "stop", "disk", CORRUPT, target, seed, params),
    )


def agrees(action: str, kind: str, value: dict) -> tuple:
    """The written effects are JSON, declared by the menu and known."""
    json.dumps(value)
    written = op_effects(f"{action}-disk", value, NAMES)
    declared = MENU.effects_of(kind) if action == "start" else MENU.stop_effects
    assert {e.effect for e in written} <= set(declared) <= set(KNOWN)
    return written


def test_a_flip_with_restart_damages_one_bit_kills_the_jvm_and_the_stop_reads_what_kafka_said():
    ctx = context()
    nemesis = DiskNemesis()
    start, stop = corrupt("log", "flip")
    got = nemesis.start(ctx, start)
    (name,) = got["targets"]
    node = ctx.nodes[name]
    hit = got["corrupted"][name]
    assert hit["path"] in {SEGMENT.format(p=p) for p in range(4)}
    assert hit["topic"] == "kchaos-queue" and hit["among"] == 5  # with __consumer_offsets-0
    assert bin(hit["mask"]).count("1") == 1 and hit["after"] == hit["before"] ^ hit["mask"]
    assert node.disk["files"][hit["path"]][hit["offset"]] == hit["after"]
    # Stopped before the damage, killed after it: Kafka reads the file when it starts again.
    assert "stopped_after_s" in hit and not node.running
    (e,) = agrees("start", CORRUPT, got)
    assert (e.effect, e.nodes, e.done) == (DOWN, frozenset({name}), frozenset({name}))
    assert got["file_class"] == "log" and got["how"] == "flip" and got["restart"] is True

    # What the restarted broker logged, and what a follower logged meanwhile.
    other = next(n for n in NAMES if n != name)
    ctx.nodes[other].log_lines.append(
        "[2026-01-01 00:00:01,000] ERROR [ReplicaFetcher replicaId=2, leaderId=1, fetcherId=0] "
        "Found invalid messages during fetch for partition kchaos-queue-1 offset 5826"
    )
    node.log_lines += [
        "[2026-01-01 00:00:02,000] WARN Found invalid messages in log segment "
        f"/var/lib/kafka/{hit['path']} at byte offset 96962. (org.apache.kafka...LogSegment)",
        "org.apache.kafka.common.errors.CorruptRecordException: Record is corrupt (stored crc = "
        "4166549828, computed crc = 3407313231)",
        "\tat org.apache.kafka.common.record.DefaultRecordBatch.ensureValid(DefaultRecordBatch)",
    ]
    stopped = nemesis.stop(ctx, stop)
    assert stopped["restarted"] == [name] and node.running
    assert stopped["after_restart"] == {name: "started"}
    said = stopped["kafka_said"]
    assert said[name]["labels"] == ["corrupt-record", "corrupted", "invalid-messages", "names-file"]
    assert said[name]["count"] == 2  # the stack frame is not kept
    assert said[other]["labels"] == ["invalid-messages"]
    (r,) = agrees("stop", CORRUPT, stopped)
    assert r.effect == RESTARTED and r.nodes == frozenset({name})


def test_the_same_seed_picks_the_same_file_offset_and_mask_and_the_record_says_so():
    records = []
    for _ in range(2):
        ctx = context()
        got = DiskNemesis().start(ctx, corrupt("log", "flip", restart=0, seed=11)[0])
        records.append(json.dumps(got, sort_keys=True))
    assert records[0] == records[1]
    picked = {
        json.dumps(
            DiskNemesis().start(context(), corrupt("log", "flip", 0, seed=s)[0])["corrupted"]
        )
        for s in range(12)
    }
    assert len(picked) > 1  # the seed is what chooses


def test_a_pinned_flip_hits_its_byte_and_bit_on_whichever_file_the_seed_picks():
    # A batch's base offset (bytes 0-7, outside its CRC): bit 6 of byte 5 adds 4,194,304.
    for seed in range(6):
        ctx = context()
        start, _ = corrupt("log", "flip", restart=0, seed=seed)
        start.params.update(flip_byte=5, flip_bit=6)
        got = DiskNemesis().start(ctx, start)
        (name,) = got["targets"]
        hit = got["corrupted"][name]
        assert (hit["offset"], hit["mask"]) == (5, 64)
        assert ctx.nodes[name].disk["files"][hit["path"]][5] == hit["after"] == hit["before"] ^ 64
        assert (got["flip_byte"], got["flip_bit"]) == (5, 6)
    # Past the file's extent it wraps: still a byte of the file.
    start, _ = corrupt("log", "flip", restart=0)
    start.params.update(flip_byte=10**9, flip_bit=0)
    got = DiskNemesis().start(context(), start)
    (hit,) = got["corrupted"].values()
    assert hit["offset"] == 10**9 % hit["size"] and hit["mask"] == 1


def test_a_segment_of_a_partition_the_target_leads_is_preferred():
    ctx = context(leaders={0: "n1", 1: "n2", 2: "n2", 3: "n3"})
    for seed in range(10):
        got = DiskNemesis().start(ctx, corrupt("log", "truncate", 0, seed=seed)[0])
        (name,) = got["targets"]
        hit = got["corrupted"][name]
        led = {p for p, n in ctx.hints["partition_leaders"].items() if n == name}
        assert hit["partition"] in led, (seed, hit)
        assert hit["preferred"] == "a partition of the run's topic it leads"
        assert hit["size_after"] < hit["size_before"]


def test_an_index_is_flipped_where_its_entries_are_and_written_back_first():
    ctx = context()
    got = DiskNemesis().start(ctx, corrupt("index", "flip", restart=0)[0])
    (name,) = got["targets"]
    hit = got["corrupted"][name]
    # 10,000 log bytes: 4 entries of 8 bytes, far inside the preallocated zeros.
    assert hit["offset"] < 32 and hit["synced_first"]
    assert ["sync", f"/var/lib/kafka/{hit['path']}"] in ctx.nodes[name].commands
    assert got[EFFECTS_KEY] == [] and ctx.nodes[name].running  # no restart: nothing killed


EFFECTS_KEY = "effects"


def test_a_rollback_puts_back_the_copy_taken_age_s_before(monkeypatch):
    ctx = context()
    slept = []

    def meanwhile(seconds: float) -> None:
        slept.append(seconds)
        for node in ctx.nodes.values():  # Kafka rewrites the checkpoint meanwhile
            node.disk["files"]["data/replication-offset-checkpoint"] += b"kchaos-queue 1 40\n"

    monkeypatch.setattr(disk.time, "sleep", meanwhile)
    got = DiskNemesis().start(ctx, corrupt("replication-offset-checkpoint", "rollback")[0])
    (name,) = got["targets"]
    hit = got["corrupted"][name]
    assert slept == [6.0] and hit["changed"] is True
    assert hit["snapshot"] == hit["size_after"] < hit["size_before"]
    assert bytes(ctx.nodes[name].disk["files"]["data/replication-offset-checkpoint"]) == (
        b"0\n4\nkchaos-queue 0 17\n"
    )


def test_a_lost_answer_is_asked_again_but_a_flip_is_not_done_twice_its_byte_is_read():
    ctx = context()
    for node in ctx.nodes.values():
        # ping, asked again, answers at the third try; the flip's answer is lost once.
        node.disk["lose_answers"] = {"ping": 2, "corrupt": 1}
    got = DiskNemesis().start(ctx, corrupt("meta.properties", "flip", restart=0)[0])
    (name,) = got["targets"]
    hit = got["corrupted"][name]
    original = files(NAMES.index(name) + 1)["data/meta.properties"][hit["offset"]]
    assert "gave no answer" in hit["answer_lost"]
    assert hit["now"] == str(original ^ hit["mask"])  # flipped once, not twice


def test_a_class_the_target_lacks_is_recorded_and_touches_nothing():
    ctx = context()
    got = DiskNemesis().start(ctx, corrupt("producer-snapshot", "flip")[0])
    (name,) = got["targets"]
    assert "corrupted" not in got
    assert got["not_found"][name]["why"].startswith("no a partition's producer-state snapshot")
    assert ctx.nodes[name].running and got["effects"] == []


def test_corrupt_refuses_a_majority_at_check_and_plan_time():
    start, _ = corrupt("log", "flip", target="majority")
    with pytest.raises(NemesisError, match="one node or a minority, not 'majority'"):
        DiskNemesis().check(start)
    ctx = context()
    with pytest.raises(NotApplied, match="not 'all'"):
        DiskNemesis().start(ctx, corrupt("log", "flip", target="all")[0])
    assert all(n.running and not n.commands for n in ctx.nodes.values())
    with pytest.raises(ItemError, match="disk corrupt refuses target 'majority'"):
        parse_items(["disk:corrupt@majority"], "kraft-combined")
    parse_items(["disk:corrupt@minority", "disk:disk-full@all"], "kraft-combined")


@pytest.mark.parametrize(
    ("params", "said"),
    [
        ({"file_class": "logs", "how": "flip"}, "file_class must be one of log, index"),
        ({"file_class": "log", "how": "zero"}, "how must be one of flip, truncate, rollback"),
        ({"file_class": "log", "how": "flip", "restart": 2}, "restart must be 0 or 1"),
        ({"file_class": "log", "how": "flip", "age_s": 0}, "age_s must be 1 to 3600"),
        ({"file_class": "log", "how": "flip", "mask": 3}, "does not read mask"),
        ({"file_class": "log", "how": "flip", "flip_byte": 5}, "go together, with how flip"),
        ({"file_class": "log", "how": "truncate", "flip_byte": 5, "flip_bit": 6}, "with how flip"),
        ({"file_class": "log", "how": "flip", "flip_byte": -1, "flip_bit": 6}, "integer >= 0"),
        ({"file_class": "log", "how": "flip", "flip_byte": 5, "flip_bit": 8}, "must be 0 to 7"),
    ],
)
def test_a_corrupt_step_with_bad_parameters_is_refused_in_one_line(params, said):
    with pytest.raises(NemesisError, match=said):
        DiskNemesis().check(FaultStep(0, "start", "disk", CORRUPT, "one", 1, params))


def test_a_named_corrupt_is_drawn_at_one_or_a_minority_with_its_parameters():
    seen = set()
    rng = random.Random(3)
    for _ in range(40):
        start, stop = MENU.draw(rng, "kraft-combined", 10.0, 5.0, 15.0, (CORRUPT,))
        assert start.target in ("one", "minority") and start.params == stop.params
        assert DiskNemesis().check(start)["file_class"] in disk_files.CLASS_NAMES
        seen.add(start.params["how"])
    assert seen == {"flip", "truncate", "rollback"}
    # A bare package still draws only power losses: corrupt and disk-full are named.
    assert {s.kind for s in MENU.draw(random.Random(1), "kraft", 10.0, 5.0, 15.0)} == {"power-loss"}


def test_a_full_disk_fails_writes_under_the_log_dir_until_the_stop_heals_and_restarts():
    ctx = context()
    nemesis = DiskNemesis()
    start = FaultStep(0, "start", "disk", DISK_FULL, "minority", 3, {})
    got = nemesis.start(ctx, start)
    (name,) = got["targets"]
    node = ctx.nodes[name]
    assert got["full"][name] == [{"classes": "write", "errno": "ENOSPC", "prefix": "data"}]
    (e,) = agrees("start", DISK_FULL, got)
    assert (e.effect, e.done) == (STALLED, frozenset({name}))
    # Kafka halts a broker whose only log directory failed.
    node.log_lines.append(
        "[2026-01-01 00:00:03,000] ERROR Shutdown broker because all log dirs in "
        "/var/lib/kafka/data have failed (kafka.log.LogManager)"
    )
    node.kill()
    stopped = nemesis.stop(ctx, FaultStep(9, "stop", "disk", DISK_FULL, "minority", 3, {}))
    assert stopped["exited"] == [name] and stopped["restarted"] == [name]
    assert stopped["healed"] == {}  # its layer went with its JVM
    assert "storage" in stopped["kafka_said"][name]["labels"]
    assert node.running and not node.disk.get("failing")


def test_heal_clears_fail_rules_left_by_a_run_that_died_and_starts_exited_nodes():
    ctx = context()
    DiskNemesis().start(ctx, FaultStep(0, "start", "disk", DISK_FULL, "all", 3, {}))
    ctx.nodes["n3"].kill()  # halted on its full disk
    said = DiskNemesis().heal_all(ctx)  # a fresh instance, as `kchaos heal` has
    assert said == [
        "n1: cleared 1 disk fail rule(s)",
        "n2: cleared 1 disk fail rule(s)",
        "n3: started exited node",
    ]
    assert all(n.running and not n.disk.get("failing") for n in ctx.nodes.values())

    class Cluster:
        def info(self):
            from clusters.cluster import ClusterInfo

            return ClusterInfo(TOPO, "4.4.0", "fast", "cid")

        def nodes(self, info=None):
            return ctx.nodes

    DiskNemesis().start(ctx, FaultStep(0, "start", "disk", DISK_FULL, "one", 5, {}))
    assert any("cleared 1 disk fail rule(s)" in s for s in heal_cluster(Cluster()))  # type: ignore[arg-type]
    assert heal_cluster(Cluster()) == []  # type: ignore[arg-type]


def test_the_file_classes_name_what_a_kafka_node_holds():
    got = {
        p: disk_files.class_of(p)
        for p in (
            "data/kchaos-queue-3/00000000000000000000.log",
            "data/kchaos-queue-3/00000000000000005826.snapshot",
            "data/kchaos-queue-3/00000000000000000000.timeindex",
            "data/kchaos-queue-3/leader-epoch-checkpoint",
            "data/__cluster_metadata-0/00000000000000000000.log",
            "data/__cluster_metadata-0/00000000000000000000-0000000000.checkpoint",
            "data/__cluster_metadata-0/00000000000000000397.snapshot",
            "data/__cluster_metadata-0/quorum-state",
            "data/recovery-point-offset-checkpoint",
            "data/bootstrap.checkpoint",
            "data/meta.properties",
            "version-2/log.1",
        )
    }
    assert list(got.values()) == [
        "log",
        "producer-snapshot",
        None,
        "leader-epoch-checkpoint",
        "metadata-log",
        "metadata-snapshot",
        None,
        "quorum-state",
        "recovery-point-offset-checkpoint",
        None,
        "meta.properties",
        None,
    ]
    listed = disk_files.parse_listing("data/a-0/00000000000000000000.log\t10\t8\nnoise\n")
    assert listed == [disk_files.Listed("data/a-0/00000000000000000000.log", 10, 8)]


def test_kafka_said_keeps_detection_lines_with_their_labels():
    text = "\n".join(
        [
            "[2026-11-28 09:50:54,403] INFO [LogLoader partition=kchaos-queue-1] Recovering "
            "unflushed segment 0. 0 recovered for kchaos-queue-1.",
            "[2026-11-28 09:50:54,439] WARN [LogLoader partition=kchaos-queue-1, dir=/var/lib/"
            "kafka/data] Corruption found in segment 0, truncating to offset 5826",
            "\tnum.recovery.threads.per.data.dir = 2",
            "[2026-11-28 09:50:55,000] ERROR Error while reading checkpoint file /var/lib/kafka/"
            "data/replication-offset-checkpoint (kafka.server.LogDirFailureChannel)",
            "[2026-11-28 09:50:56,000] ERROR [Broker id=1] something else entirely",
        ]
    )
    got = kafka_said.scan(text, ("kchaos-queue-1/00000000000000000000.log",))
    assert [labels for labels, _ in got["lines"]] == [
        ["corrupted"],
        ["checkpoint", "storage"],
        ["error"],
    ]
    assert got["labels"] == ["checkpoint", "corrupted", "error", "storage"] and got["count"] == 3


def _plan_only(*args: str):
    from click.testing import CliRunner

    from harness.cli import main

    return CliRunner().invoke(main, ["run", "--plan-only", "--seed", "7", *args])


def test_a_plan_naming_corrupt_is_the_same_for_a_seed_and_a_majority_is_refused_in_one_line(
    tmp_path,
):
    from harness.exit_codes import BAD_INPUT_EXIT

    args = ("--nemesis", "disk:corrupt,disk:disk-full@minority", "--time-limit", "60")
    first, second = _plan_only(*args), _plan_only(*args)
    assert first.exit_code == 0, first.output
    assert first.output == second.output
    plan = json.loads(first.output)
    corrupt = [s for s in plan["faults"] if s["kind"] == CORRUPT]
    assert corrupt and all(s["target"] in ("one", "minority") for s in corrupt)
    assert set(corrupt[0]["params"]) == {"file_class", "how", "restart", "age_s"}
    assert plan["spec"]["disk_layer"] == "journal"

    refused = _plan_only("--nemesis", "disk:corrupt@majority")
    assert refused.exit_code == BAD_INPUT_EXIT and "Traceback" not in refused.output
    (line,) = [x for x in refused.stderr.splitlines() if x.strip()]
    assert "disk corrupt refuses target 'majority'" in line and "takes one, minority" in line

    # A stored plan edited to aim a corrupt step at all nodes is refused on replay, in one line.
    stored = tmp_path / "run"
    stored.mkdir()
    plan["faults"] = [{**s, "target": "all"} if s["kind"] == CORRUPT else s for s in plan["faults"]]
    (stored / "plan.json").write_text(json.dumps(plan))
    from click.testing import CliRunner

    from harness.cli import main

    replay = CliRunner().invoke(main, ["run", "--plan-only", "--replay", str(stored)])
    assert replay.exit_code == BAD_INPUT_EXIT and "Traceback" not in replay.output
    assert "disk corrupt hits one node or a minority, not 'all'" in replay.stderr


def test_a_fatal_fault_is_kept_with_the_exception_that_says_why():
    # n2's output on 4.4 after a flipped leader-epoch bit in n1's metadata log (docs/disk.md).
    text = "\n".join(
        [
            "[2026-11-28 11:20:40,212] ERROR Encountered fatal fault: Unexpected error in raft IO "
            "thread (org.apache.kafka.server.fault.ProcessTerminatingFaultHandler)",
            "org.apache.kafka.common.KafkaException: The leader requested truncation to offset "
            "16, which is below the current high watermark LogOffsetMetadata(offset=98)",
            "\tat org.apache.kafka.raft.KafkaRaftClient.handleFetchResponse(KafkaRaftClient)",
            "Caused by: java.io.IOException: the chain goes on past the frames",
            "[2026-11-28 11:20:41,000] INFO a line of no interest, which ends the chain",
            "java.lang.IllegalStateException: not after a kept line, so not kept",
        ]
    )
    got = kafka_said.scan(text)
    assert [labels for labels, _ in got["lines"]] == [["fatal"], ["error"], ["error"]]
    assert "requested truncation to offset 16" in got["lines"][1][1]


def test_a_stray_log_is_kafka_noticing_a_partition_metadata_it_cannot_match():
    # 4.4 after a flipped bit in the topic id of partition.metadata, restarted.
    line = (
        "[2026-11-28 11:42:23,876] WARN Log in /var/lib/kafka/data/kchaos-queue-0 marked stray "
        "and renamed to /var/lib/kafka/data/kchaos-queue-0.60c60b7662994db18f7e039c5321f777-stray "
        "(org.apache.kafka.storage.internals.log.LogManager)"
    )
    assert kafka_said.labels(line) == ["stray"]


def test_an_empty_listing_is_asked_again_and_then_refused():
    ctx = context()
    for node in ctx.nodes.values():
        node.disk["files"] = {}
    got = DiskNemesis().start(ctx, corrupt("log", "flip", restart=0)[0])
    (name,) = got["targets"]
    assert "nothing listed (exit code 0)" in got["failed"][name]["error"]
    assert sum(c[0] == "find" for c in ctx.nodes[name].commands) == 3


def test_kept_down_names_the_damage_that_killed_a_node_with_what_it_logged_since():
    ctx = context()
    nemesis = DiskNemesis()
    got = nemesis.start(ctx, corrupt("quorum-state", "truncate", seed=5)[0])
    (name,) = got["targets"]
    ctx.nodes[name].log_lines.append(
        "java.io.UncheckedIOException: Error while reading the Quorum status from the file "
        "/var/lib/kafka/data/__cluster_metadata-0/quorum-state"
    )
    record = nemesis.kept_down(ctx, name)
    assert record is not None
    assert {k: record[k] for k in ("fault", "kind", "seed", "file", "file_class", "how")} == {
        "fault": "disk", "kind": "corrupt", "seed": 5,
        "file": "data/__cluster_metadata-0/quorum-state", "file_class": "quorum-state",
        "how": "truncate",
    }  # fmt: skip
    assert record["kafka_said"]["labels"] == ["names-file"]
    json.dumps(record)
    # Another node, and a damage its node ran on through (restart 0), keep nothing down.
    assert nemesis.kept_down(ctx, next(n for n in NAMES if n != name)) is None
    running_on = DiskNemesis()
    (quiet,) = running_on.start(ctx, corrupt("log", "flip", restart=0, seed=11)[0])["targets"]
    assert running_on.kept_down(ctx, quiet) is None
