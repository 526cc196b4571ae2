"""Ctrl-C during `kchaos run`: faults healed, logs collected, history kept, exit code 130."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusters.docker_lifecycle import DockerCluster
from history.reader import read_history
from tests.integration.run_process import interrupted_run

NAME = "run-it-int"
SUBNET = "10.213.60.0/24"


def _ok_sends(results: Path) -> int:
    histories = list(results.glob("queue/*/history.jsonl"))
    if not histories:
        return 0
    return histories[0].read_text().count('"type":"ok","f":"send"')


# Slow (`make nightly`): make test must stay under 45 min (session 19 rehearsal: 46).
@pytest.mark.slow
def test_sigint_heals_collects_keeps_the_history_and_exits_nonzero(docker_client, tmp_path):
    dc = DockerCluster(docker_client, NAME)
    dc.remove()
    # About Ctrl-C, not the send mode: sync sends, as before pipelined became the default.
    args = ["--time-limit", "300", "--timing", "fast", "--seed", "3", "--send-mode", "sync"]
    args += ["--cluster", NAME, "--subnet", SUBNET, "--results-dir", str(tmp_path)]
    try:
        # Interrupt in the middle of the workload, once clients are observed writing.
        code, out = interrupted_run(args, "acknowledged sends", lambda: _ok_sends(tmp_path) >= 20)
    finally:
        dc.remove()
    assert code == 130, out
    assert "interrupted" in out
    run_dir = next(tmp_path.glob("queue/*-3"))
    history = read_history(run_dir)
    assert sum(op["f"] == "send" and op["type"] == "ok" for op in history.ops) >= 20
    assert (run_dir / "history.parquet").is_file()
    assert (run_dir / "logs" / "n1" / "stdout.log").is_file()
    summary = json.loads((run_dir / "run.json").read_text())
    assert summary["exit_code"] == 130
    assert json.loads((run_dir / "results.json").read_text())["status"] == "not checked"
    assert not dc.exists(), "the interrupted run left its cluster behind"
