"""`kchaos run --send-mode async --rate 0` on a real kraft-combined cluster, in a new run's shape
(issue 28): two producer slots pipelined, each send one operation on a lane's process, and the
last slot a consumer polling the same topic during the workload, not only the final reads
afterwards; the run checks VALID. One run holds both, for CI's time."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from history.columnar import read_ops
from history.reader import read_history
from tests.integration.runs import quiet_run

NAME = "kasync"
SUBNET = "10.213.161.0/24"
LANES = 500
SLOTS = 3  # two producers, one poller


@pytest.fixture(scope="module")
def finished(docker_client, tmp_path_factory):
    done = quiet_run(
        docker_client,
        NAME,
        SUBNET,
        17,
        tmp_path_factory.mktemp("results"),
        time_limit=12,
        rate=0,
        concurrency=SLOTS,
        send_mode="async",
        in_flight=LANES,
        pollers=1,
        final_timeout=60,
    )
    assert done.left_behind == []
    assert done.result.exit_code == 0, done.result.summary
    return done.result, read_history(done.result.run_dir)


def test_a_pipelined_run_is_well_formed_and_valid(finished):
    result, history = finished
    d = result.run_dir
    assert history.header["send_mode"] == "async" and history.header["in_flight"] == LANES
    assert not history.torn_last_line and not history.incomplete
    sends = [op for op in history.ops if op["f"] == "send"]
    oks = [op for op in sends if op["type"] == "ok"]
    assert len(oks) >= 2000, f"only {len(oks)} ok sends"
    # At most LANES in flight per producer, each producer on one producer slot's processes.
    open_: dict[int, int] = defaultdict(int)
    slot_of: dict[int, int] = {}
    for op in sends:
        q = op["producer"]
        slot = (op["process"] % (SLOTS * LANES)) // LANES
        assert slot < SLOTS - 1 and slot_of.setdefault(q, slot) == slot, op
        open_[q] += 1 if op["type"] == "invoke" else -1
        assert 0 <= open_[q] <= LANES
    run = json.loads((d / "run.json").read_text())
    assert run["final_reads"]["complete"] is True
    assert run["check"]["status"] == "valid", run["check"]
    producers = read_ops(d / "history.parquet", fs=["send"], columns=["producer"])
    assert producers.column("producer").null_count == 0


def test_pollers_poll_beside_pipelined_producers(finished):
    _, history = finished
    every_poll = [op for op in history.ops if op["f"] == "poll"]
    # The last polls are the final reads', on a process of their own after the workload.
    final = every_poll[-1]["process"]
    polls = [op for op in every_poll if op["type"] == "ok" and op["process"] != final]
    read = [m for op in polls for m in op["value"] if m[0] == "poll" and m[1]]
    assert polls and read, "the poller read nothing during the workload"
    # The poller runs on the last slot's first lane's process ids.
    assert {op["process"] % (SLOTS * LANES) for op in polls} == {(SLOTS - 1) * LANES}
