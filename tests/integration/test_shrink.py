"""`kchaos shrink`'s real path: each try a `kchaos run --replay` process of the plan the shrink
wrote into its candidate's folder, on a real cluster of the shrink's name and subnet.

The run's finding here is written by hand, so the replay does not reproduce it, and the shrink
must say so (exit 2) after one real, checked replay that left no cluster behind; the shrink of
a real failure is test_shrink_real.py's."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from clusters.docker_lifecycle import DockerCluster
from harness.plan import build_plan
from harness.spec import RunSpec, validate
from tests.integration.run_process import REPO

CLUSTER, SUBNET = "kchaos-shrink-test", "10.213.216.0/24"


@pytest.mark.slow
def test_a_try_is_a_real_replay_of_the_candidates_plan(docker_client, tmp_path):
    spec = RunSpec.of(
        nemesis=["kill:one", "pause:one"],
        time_limit=12.0,
        nemesis_interval=3.0,
        timing="fast",
        final_timeout=60.0,
    )
    run_dir = tmp_path / "results" / "queue" / "20261128T000000-5"
    run_dir.mkdir(parents=True)
    (run_dir / "plan.json").write_text(build_plan(validate(spec), 5).to_json())
    injected = {"kind": "lost-write", "explanation": "written by hand: no replay finds it"}
    (run_dir / "results.json").write_text(json.dumps({"status": "invalid", "findings": [injected]}))
    DockerCluster(docker_client, CLUSTER).remove()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "harness.cli", "shrink", str(run_dir), "--tries", "1",
             "--no-progress", "--cluster", CLUSTER, "--subnet", SUBNET],
            cwd=REPO, capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        left = DockerCluster(docker_client, CLUSTER).containers()
    finally:
        DockerCluster(docker_client, CLUSTER).remove()
    assert done.returncode == 2, done.stdout + done.stderr
    assert "original reproduced in 0 of 1 replays" in done.stdout
    (directory,) = run_dir.parent.glob("shrink-*")
    record = json.loads((directory / "shrink.json").read_text())
    (attempt,) = record["original"]["runs"]
    assert attempt["status"] == "valid" and attempt["kinds"] == []
    replayed = directory / attempt["run_dir"]
    assert json.loads((replayed / "run.json").read_text())["replay_of"] == str(
        directory / "original"
    )
    assert (replayed / "results.json").is_file() and (replayed / "history.parquet").is_file()
    assert (directory / "shrink.html").is_file() and not left
