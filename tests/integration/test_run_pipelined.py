"""`kchaos run --send-mode async --rate 0` on a real kraft-combined cluster: pipelined producers
record thousands of sends, each one operation on a lane's process, and the run checks VALID."""

from __future__ import annotations

import json
from collections import defaultdict

from history.columnar import read_ops
from history.reader import read_history
from tests.integration.runs import quiet_run

NAME = "kasync"
SUBNET = "10.213.161.0/24"
LANES = 500


def test_a_pipelined_run_is_well_formed_and_valid(docker_client, tmp_path):
    done = quiet_run(
        docker_client,
        NAME,
        SUBNET,
        16,
        tmp_path,
        time_limit=12,
        rate=0,
        concurrency=2,
        send_mode="async",
        in_flight=LANES,
        final_timeout=60,
    )
    assert done.left_behind == []
    result = done.result
    assert result.exit_code == 0, result.summary
    d = result.run_dir
    history = read_history(d)
    assert history.header["send_mode"] == "async" and history.header["in_flight"] == LANES
    assert not history.torn_last_line and not history.incomplete
    sends = [op for op in history.ops if op["f"] == "send"]
    oks = [op for op in sends if op["type"] == "ok"]
    assert len(oks) >= 2000, f"only {len(oks)} ok sends"
    # At most LANES in flight per producer, each producer on its own slot's processes.
    open_: dict[int, int] = defaultdict(int)
    for op in sends:
        q = op["producer"]
        assert (op["process"] % (2 * LANES)) // LANES == q % 2
        open_[q] += 1 if op["type"] == "invoke" else -1
        assert 0 <= open_[q] <= LANES
    run = json.loads((d / "run.json").read_text())
    assert run["final_reads"]["complete"] is True
    assert run["check"]["status"] == "valid", run["check"]
    producers = read_ops(d / "history.parquet", fs=["send"], columns=["producer"])
    assert producers.column("producer").null_count == 0


def test_pollers_poll_beside_pipelined_producers_and_the_run_is_valid(docker_client, tmp_path):
    # A new run's shape (issue 28): producer slots pipelined, the last slot a consumer polling
    # the same topic during the workload, not only the final reads afterwards.
    done = quiet_run(
        docker_client,
        NAME,
        SUBNET,
        17,
        tmp_path,
        time_limit=12,
        rate=0,
        concurrency=3,
        send_mode="async",
        in_flight=LANES,
        pollers=1,
        final_timeout=60,
    )
    assert done.left_behind == []
    result = done.result
    assert result.exit_code == 0, result.summary
    history = read_history(result.run_dir)
    every_poll = [op for op in history.ops if op["f"] == "poll"]
    # The last polls are the final reads', on a process of their own after the workload.
    final = every_poll[-1]["process"]
    polls = [op for op in every_poll if op["type"] == "ok" and op["process"] != final]
    read = [m for op in polls for m in op["value"] if m[0] == "poll" and m[1]]
    assert polls and read, "the poller read nothing during the workload"
    # The poller runs on slot 2's first lane's process ids; sends only on slots 0 and 1.
    assert {op["process"] % (3 * LANES) for op in polls} == {2 * LANES}
    sends = [op for op in history.ops if op["f"] == "send"]
    assert sends and all(op["process"] % (3 * LANES) < 2 * LANES for op in sends)
    run = json.loads((result.run_dir / "run.json").read_text())
    assert run["final_reads"]["complete"] is True
    assert run["check"]["status"] == "valid", run["check"]
