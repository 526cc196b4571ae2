"""A run survives the death of its client host: SIGABRT (what a librdkafka assertion does) sent
to the child process that hosts the Kafka clients while a partition is in place. The `kchaos run`
process heals the fault, keeps and checks what was recorded, tears the cluster down, writes
run.json with "crashed", and exits 253."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from clusters.docker_lifecycle import DockerCluster
from clusters.hold import hold_path
from harness.exit_codes import CRASHED_RUN_EXIT
from tests.integration.kafka_io import wait_until
from tests.integration.run_process import client_host, kchaos_process

NAME = "crash-it"
SUBNET = "10.213.146.0/24"


def _partition_in_place(results: Path) -> bool:
    """The last fault step the history shows is an acknowledged partition start."""
    histories = list(results.glob("queue/*/history.jsonl"))
    if not histories:
        return False
    steps = []
    for line in histories[0].read_text().splitlines():
        if '"process":"nemesis"' in line and '"type":"ok"' in line:
            op = json.loads(line)
            if op["f"] in ("start-partition", "stop-partition"):
                steps.append(op["f"])
    return bool(steps) and steps[-1] == "start-partition"


def test_sigabrt_of_the_client_host_mid_fault_still_heals_checks_and_tears_down(
    docker_client, tmp_path
):
    dc = DockerCluster(docker_client, NAME)
    dc.remove()
    args = ["run", "--cluster", NAME, "--subnet", SUBNET, "--timing", "fast", "--seed", "3"]
    args += ["--nemesis", "partition", "--nemesis-interval", "10", "--time-limit", "60"]
    args += ["--results-dir", str(tmp_path)]
    # About the client host's crash, not the send mode: Jepsen's sync sends, as before.
    args += ["--send-mode", "sync"]
    run = kchaos_process(args)
    try:
        wait_until(
            "a partition in place",
            lambda: _partition_in_place(tmp_path) or run.poll() is not None,
            timeout=300,
        )
        assert run.poll() is None, run.communicate()[0]
        os.kill(client_host(run.pid), signal.SIGABRT)
        out, _ = run.communicate(timeout=600)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        dc.remove()
    assert run.returncode == CRASHED_RUN_EXIT, out
    flat = " ".join(out.split())
    assert "the client host died of SIGABRT during workload" in flat
    assert "Traceback" not in out
    run_dir = next(tmp_path.glob("queue/*-3"))
    summary = json.loads((run_dir / "run.json").read_text())
    assert summary["exit_code"] == CRASHED_RUN_EXIT
    crashed = summary["crashed"]
    assert crashed["signal"] == "SIGABRT" and crashed["where"] == "workload"
    assert crashed["python_stack"], "no Python stack of the thread that took the signal"
    # The partition the dead child left was undone by the supervisor, as `kchaos heal` does.
    assert any("removed iptables chain" in h for h in summary["healed"]), summary["healed"]
    # What was recorded was kept and judged: a verdict, not "not checked".
    assert summary["ops"].get("ok", 0) > 0
    assert (run_dir / "history.parquet").is_file()
    results = json.loads((run_dir / "results.json").read_text())
    assert results["status"] in ("valid", "unknown"), results
    assert summary["check"]["status"] == results["status"]
    # Logs and metadata were collected before the teardown; nothing is left behind.
    assert list(run_dir.glob("logs/*")) and (run_dir / "cluster.json").is_file()
    assert (run_dir / "report.html").is_file()
    assert not dc.containers() and not dc.networks(), "the crashed run left its cluster"
    assert not hold_path(NAME).exists(), "the crashed run left its hold file"
