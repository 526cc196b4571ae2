"""A power loss's `lost_offsets` (nemesis/disk.py): which pending files are segments, how each
segment's walk and the drop's answer make one [first, last] per partition, and what the record
says when the walk cannot be made. The walk itself is test_kafka_batches.py's (tests/unit/clusters).
"""

from __future__ import annotations

from clusters.topology import build_topology
from nemesis.api import FaultContext, FaultStep
from nemesis.disk import LOST_OFFSETS, POWER_LOSS, DiskNemesis, lost_offsets, pending_segments
from tests.unit.nemesis.fake_node import FakeNode

S0 = "data/kchaos-queue-5/00000000000000000000.log"
S1 = "data/kchaos-queue-5/00000000000000000120.log"
META = "data/__cluster_metadata-0/00000000000000000000.log"


def dropped(*paths: str, kept: int = 0) -> list[dict]:
    return [{"path": p, "bytes": 10, "written": 10, "size_after": kept} for p in paths]


def test_pending_segments_are_the_partitions_log_files_with_bytes_past_their_durable_length():
    status = {
        "files": [
            {"path": S0, "size": 500, "durable_size": 100},
            {"path": S1, "size": 100, "durable_size": 100},  # truncated back: nothing pending
            {"path": S0.replace(".log", ".index"), "size": 9, "durable_size": 0},
            {"path": "data/kchaos-queue-5/leader-epoch-checkpoint", "size": 9, "durable_size": 0},
            {"path": "data/kchaos-queue-5/00000000000000000000.log.deleted", "size": 9,
             "durable_size": 0},
            {"path": META, "size": 70, "durable_size": 0},
            {"path": "data/bootstrap.checkpoint", "size": 249, "durable_size": 0},
        ]
    }  # fmt: skip
    assert pending_segments(status) == {S0: 100, META: 0}


def test_one_range_per_partition_from_its_first_lossy_segment_to_its_last():
    walked = [
        {"path": S1, "from": 0, "size": 300, "batches": 4, "lost": 4, "first": 120, "last": 140},
        {"path": S0, "from": 100, "size": 500, "batches": 9, "lost": 7, "first": 30, "last": 119},
        {"path": META, "from": 0, "size": 70, "batches": 1, "lost": 1, "first": 7, "last": 7},
    ]
    assert lost_offsets(walked, dropped(S0, S1, META)) == {
        "__cluster_metadata-0": [7, 7],
        "kchaos-queue-5": [30, 140],
    }


def test_a_segment_the_drop_did_not_touch_lost_nothing():
    walked = [{"path": S0, "from": 0, "size": 50, "batches": 1, "lost": 1, "first": 0, "last": 3}]
    assert lost_offsets(walked, dropped(META)) == {}
    nothing = [{"path": S0, "from": 50, "size": 50, "batches": 1, "lost": 0}]
    assert lost_offsets(nothing, dropped(S0)) == {}


def test_bounds_it_cannot_tell_are_null():
    # Written back between the walk and the drop: the first lost batch is later than walked.
    walked = [{"path": S0, "from": 100, "size": 500, "batches": 9, "lost": 7, "first": 30,
               "last": 119}]  # fmt: skip
    assert lost_offsets(walked, dropped(S0, kept=200)) == {"kchaos-queue-5": [None, 119]}
    # The walk stopped at a header that is no batch's: past it, unknown.
    stopped = {"path": S0, "from": 100, "size": 500, "batches": 3, "lost": 1, "first": 30,
               "last": 31, "error": "no batch header at byte 160", "walked_to": 160}  # fmt: skip
    assert lost_offsets([stopped], dropped(S0, kept=100)) == {"kchaos-queue-5": [30, None]}
    before = {**stopped, "walked_to": 90, "lost": 0}
    del before["first"], before["last"]
    assert lost_offsets([before], dropped(S0, kept=100)) == {"kchaos-queue-5": [None, None]}
    # Unreadable, or no walk at all (only the dropped file's name).
    assert lost_offsets([{"path": S0, "from": 0, "error": "EIO"}], dropped(S0)) == {
        "kchaos-queue-5": [None, None]
    }
    assert lost_offsets([{"path": S0}], dropped(S0)) == {"kchaos-queue-5": [None, None]}


TOPO = build_topology("kraft-combined", cluster="x")


def _context() -> FaultContext:
    nodes = {n.name: FakeNode(n) for n in TOPO.nodes}
    for node in nodes.values():
        node.disk = {"powered": True, "pending": {S0: 400, "data/meta.properties": 5}}
    nodes["n1"].disk["batches"] = {
        S0: {"size": 400, "batches": 5, "lost": 5, "first": 0, "last": 11}
    }
    return FaultContext(topology=TOPO, nodes=nodes)


def test_the_record_has_each_nodes_lost_offsets_read_before_its_drop():
    ctx = _context()
    got = DiskNemesis().start(ctx, FaultStep(0, "start", "disk", POWER_LOSS, "all", 7, {}))
    assert got["dropped"]["n1"][LOST_OFFSETS] == {"kchaos-queue-5": [0, 11]}
    commands = [c[1:2] if c[1] == "batches" else c[4:] for c in ctx.nodes["n1"].commands]
    assert commands == [["ping"], ["status"], ["batches"], ["drop"]]
    # The walk's own answer for n2 and n3: no such file there, so bounds unknown.
    assert got["dropped"]["n2"][LOST_OFFSETS] == {"kchaos-queue-5": [None, None]}
    assert set(got["offsets_read_s"]) == {"n1", "n2", "n3"}
    assert "offsets_unread" not in got


def test_a_walk_that_cannot_be_made_leaves_the_drop_and_says_so():
    ctx = _context()
    node = ctx.nodes["n2"]
    real = node.exec

    def no_program(cmd, timeout=None):
        if cmd[1] == "batches":
            from clusters.capabilities import ExecResult

            return ExecResult(127, "", "kchaos-disk: not found")
        return real(cmd, timeout)

    node.exec = no_program  # type: ignore[method-assign]
    got = DiskNemesis().start(ctx, FaultStep(0, "start", "disk", POWER_LOSS, "all", 7, {}))
    assert "n2: the disk layer gave no answer" in got["offsets_unread"]["n2"]
    assert got["dropped"]["n2"]["files"] == {S0: 400, "data/meta.properties": 5}
    assert got["dropped"]["n2"][LOST_OFFSETS] == {"kchaos-queue-5": [None, None]}
    assert not node.running


def test_a_drop_whose_answer_docker_lost_is_recorded_from_the_status_before_it():
    # Seen in a 3.9.2 run: the layer dropped (ctl exited 0) and the exec printed nothing.
    ctx = _context()
    ctx.nodes["n1"].disk["lose_answers"] = {"drop": 1}
    got = DiskNemesis().start(ctx, FaultStep(0, "start", "disk", POWER_LOSS, "all", 7, {}))
    n1 = got["dropped"]["n1"]
    assert "drop_failed" not in got
    assert "gave no answer" in n1["answer_lost"]
    assert n1["files"] == {S0: 400, "data/meta.properties": 5}
    assert n1["bytes"] == 405
    assert n1[LOST_OFFSETS] == {"kchaos-queue-5": [0, 11]}
    # Dropped once: the status after it said the power was off, so the drop was not asked again.
    verbs = [c[4] for c in ctx.nodes["n1"].commands if c[1] == "ctl"]
    assert verbs == ["ping", "status", "drop", "status"]
    assert not ctx.nodes["n1"].running


def test_a_drop_whose_command_never_reached_the_layer_is_asked_once_more():
    ctx = _context()
    node = ctx.nodes["n1"]
    real = node.exec
    swallowed = []

    def lose_first_drop(cmd, timeout=None):
        if cmd[1] == "ctl" and cmd[4] == "drop" and not swallowed:
            from clusters.capabilities import ExecResult

            swallowed.append(cmd)
            return ExecResult(0, "", "")  # nothing done, nothing printed
        return real(cmd, timeout)

    node.exec = lose_first_drop  # type: ignore[method-assign]
    got = DiskNemesis().start(ctx, FaultStep(0, "start", "disk", POWER_LOSS, "all", 7, {}))
    assert "answer_lost" not in got["dropped"]["n1"]
    assert got["dropped"]["n1"]["files"] == {S0: 400, "data/meta.properties": 5}
    assert node.disk["powered"] is False


def test_a_status_or_walk_whose_output_docker_lost_is_read_again():
    # Seen in 3.9.2 runs of power-loss@majority and @all: "gave no answer (it printed 'nothing')".
    ctx = _context()
    ctx.nodes["n1"].disk["lose_answers"] = {"status": 1, "batches": 2}
    got = DiskNemesis().start(ctx, FaultStep(0, "start", "disk", POWER_LOSS, "all", 7, {}))
    assert "offsets_unread" not in got
    assert got["dropped"]["n1"][LOST_OFFSETS] == {"kchaos-queue-5": [0, 11]}
