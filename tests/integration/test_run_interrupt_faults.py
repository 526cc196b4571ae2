"""Ctrl-C while a real fault is on: the run heals it before it exits, and heal_cluster then finds
nothing. The cluster is kept (--keep-cluster) so that the test can look, then removed."""

from __future__ import annotations

import json
from pathlib import Path

from clusters.docker_lifecycle import DockerCluster
from nemesis.heal import heal_cluster
from tests.integration.run_process import interrupted_run

NAME = "e2e-int-faults"
SUBNET = "10.213.75.0/24"


def _paused_now(results: Path) -> bool:
    """True once the history says a pause started (its ok is written after the SIGSTOP)."""
    return any(
        '"type":"ok","f":"start-pause"' in h.read_text() for h in results.glob("*/*/*.jsonl")
    )


def test_sigint_during_a_pause_heals_it(docker_client, tmp_path):
    dc = DockerCluster(docker_client, NAME)
    dc.remove()
    # About Ctrl-C during a fault, not the send mode: sync sends, as before.
    args = ["--time-limit", "300", "--timing", "fast", "--send-mode", "sync"]
    # The pause is on from 30 s to 60 s: the interrupt comes well inside it.
    args += ["--nemesis", "pause", "--nemesis-interval", "30", "--seed", "1", "--keep-cluster"]
    args += ["--cluster", NAME, "--subnet", SUBNET, "--results-dir", str(tmp_path)]
    try:
        code, out = interrupted_run(args, "a pause to be on", lambda: _paused_now(tmp_path))
        left = heal_cluster(dc)
        nodes = dc.nodes()
        states = {n: (h.is_running(), h.is_paused_by_signal()) for n, h in nodes.items()}
    finally:
        dc.remove()
    assert code == 130, out
    assert left == [], f"the interrupted run left faults: {left}"
    assert all(running and not paused for running, paused in states.values()), states
    run_dir = next(tmp_path.glob("queue/*-1"))
    healed = json.loads((run_dir / "nemesis.json").read_text())["healed"]
    assert any("SIGCONT" in a for h in healed for a in h.get("actions", [])), healed
