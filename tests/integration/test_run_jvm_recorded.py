"""`kchaos run --client java --send-mode async` on a real kraft-combined cluster: the JVM records
its producers' sends into binary side files, the harness builds history.parquet from them at the
end (no merged history.jsonl: `kchaos history` derives it), and the run is well-formed and checks
VALID (docs/history.md, "Sends recorded in the JVM")."""

from __future__ import annotations

import json
from collections import defaultdict

from history.format import JSONL_NAME, JVM_SENDS_DIR, JVM_SENDS_FIELD
from history.reader import read_history
from tests.integration.runs import quiet_run

NAME = "kjrec"
SUBNET = "10.213.178.0/24"
LANES = 2000
CONCURRENCY = 2


def test_a_jvm_recorded_run_is_built_well_formed_and_valid(docker_client, tmp_path):
    done = quiet_run(
        docker_client,
        NAME,
        SUBNET,
        18,
        tmp_path,
        version="4.4",
        client="java",
        time_limit=15,
        # Paced, so that the history stays a few hundred thousand ops: unpaced, the JVM
        # records half a million sends a second.
        rate=5000,
        concurrency=CONCURRENCY,
        send_mode="async",
        in_flight=LANES,
        final_timeout=90,
    )
    assert done.left_behind == []
    result = done.result
    assert result.exit_code == 0, result.summary
    d = result.run_dir
    assert not (d / JVM_SENDS_DIR).exists() and not (d / JSONL_NAME).exists()
    history = read_history(d)  # derived from history.parquet
    assert history.header["send_recorder"] == "jvm"
    # The slots' sends, then the final reads' polls, both written by the JVM.
    assert history.header[JVM_SENDS_FIELD] == {"files": ["slot0.ops", "slot1.ops", "final.ops"]}
    assert not history.torn_last_line and not history.incomplete
    times = [op["time"] for op in history.ops]
    assert times == sorted(times)
    sends = [op for op in history.ops if op["f"] == "send"]
    oks = [op for op in sends if op["type"] == "ok"]
    # Paced at 5,000/s for 15 s, less the JVM's cold start; a busy box's latency (p50 of
    # 0.5 s seen under load 11) bounds it lower.
    assert len(oks) >= 5_000, f"only {len(oks)} ok sends"
    # At most LANES in flight per producer, each producer on its own slot's processes, and a
    # producer's values in its invocation order (one thread invokes and sends).
    open_: dict[int, int] = defaultdict(int)
    last_value: dict[int, int] = {}
    for op in sends:
        q = op["producer"]
        assert (op["process"] % (CONCURRENCY * LANES)) // LANES == q % CONCURRENCY
        if op["type"] == "invoke":
            open_[q] += 1
            value = op["value"][0][2]
            assert value == last_value.get(q, q * 10**9) + 1
            last_value[q] = value
        else:
            open_[q] -= 1
        assert 0 <= open_[q] <= LANES
    # The nemesis-free run's other processes (the observer, the final reads) interleave with
    # the sends by time, and the final reads' processes are above every lane's.
    polls = [op for op in history.ops if op["f"] == "poll"]
    assert polls and min(op["process"] for op in polls) > max(op["process"] for op in sends)
    # The final reads (recorded in the JVM) come after every send.
    assert min(op["index"] for op in polls) > max(op["index"] for op in sends)
    read = {v for op in polls if op["type"] == "ok" for rs in op["value"][0][1].values()
            for _, v in rs}  # fmt: skip
    assert {op["value"][0][2][1] for op in oks} <= read
    run = json.loads((d / "run.json").read_text())
    assert run["final_reads"]["complete"] is True
    assert run["final_reads"]["acknowledged"] == len(oks)
    assert run["ops"]["ok"] >= len(oks)
    assert run["check"]["status"] == "valid", run["check"]
