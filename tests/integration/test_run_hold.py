"""A running `kchaos run` holds its cluster: `cluster down` refuses it, `cluster down --force`
removes it, and the run ends with one clear error (exit 252), its history and run.json kept."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from clusters.docker_lifecycle import DockerCluster
from clusters.hold import hold_path
from harness.exit_codes import BAD_INPUT_EXIT, CLUSTER_REMOVED_EXIT
from tests.integration.kafka_io import wait_until
from tests.integration.run_process import REPO, kchaos_process

NAME = "hold-it"
SUBNET = "10.213.143.0/24"


def _kchaos(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _flat(text: str) -> str:
    return " ".join(text.split())  # rich wraps lines at the terminal's width


def _ok_ops(results: Path) -> int:
    histories = list(results.glob("queue/*/history.jsonl"))
    return histories[0].read_text().count('"type":"ok"') if histories else 0


# Slow (`make nightly`): make test must stay under 45 min (session 19 rehearsal: 46).
@pytest.mark.slow
def test_cluster_down_refuses_a_busy_cluster_and_a_forced_one_ends_the_run_clearly(
    docker_client, tmp_path
):
    dc = DockerCluster(docker_client, NAME)
    dc.remove()
    args = ["run", "--cluster", NAME, "--subnet", SUBNET, "--timing", "fast"]
    args += ["--time-limit", "30", "--seed", "5", "--results-dir", str(tmp_path)]
    args += ["--send-mode", "sync"]  # about the hold, not the send mode
    run = kchaos_process(args)
    try:
        wait_until(
            "the run's clients acknowledged",
            lambda: _ok_ops(tmp_path) >= 5 or run.poll() is not None,
            timeout=120,
        )
        assert run.poll() is None, run.communicate()[0]
        refused = _kchaos("cluster", "down", "--name", NAME)
        assert refused.returncode == BAD_INPUT_EXIT, refused.stdout + refused.stderr
        said = _flat(refused.stderr)
        assert f"cluster '{NAME}' is in use by pid {run.pid} (kchaos run, run directory" in said
        assert "add --force to remove it anyway" in said
        assert dc.exists(), "a refused cluster down removed something"
        forced = _kchaos("cluster", "down", "--name", NAME, "--force")
        assert forced.returncode == 0, forced.stdout + forced.stderr
        assert "going ahead (--force)" in _flat(forced.stdout + forced.stderr)
        out, _ = run.communicate(timeout=90)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        dc.remove()
    assert run.returncode == CLUSTER_REMOVED_EXIT, out
    assert f"error: cluster '{NAME}' was removed while the run was using it (" in _flat(out)
    assert "kchaos cluster down --force" in _flat(out)
    assert "Traceback" not in out
    run_dir = next(tmp_path.glob("queue/*-5"))
    assert (run_dir / "history.jsonl").read_text().count('"type":"ok"') >= 5
    summary = json.loads((run_dir / "run.json").read_text())
    assert summary["exit_code"] == CLUSTER_REMOVED_EXIT
    assert summary["cluster_removed"]["history_kept"] is True
    assert json.loads((run_dir / "results.json").read_text())["status"] == "not checked"
    assert not dc.containers() and not dc.networks(), "the run left its cluster behind"
    assert not hold_path(NAME).exists(), "the run left its hold file behind"
