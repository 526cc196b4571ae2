"""The client host dies mid power loss, whole: `kchaos run` and its client host are frozen and
SIGKILLed (as a machine that loses power takes both) while a node of a run on the disk layer has
lost power. Nothing of the run heals anything; `kchaos heal` must. Beside the node the run
powered off, the test leaves the other states a death mid-fault can leave: a node stopped with
its layer dropped but not yet killed (a power loss cut short), and a layer failing writes
(a full disk). After `kchaos heal` every node runs on a powered layer with no fail rule and
none is stopped; after `cluster down` nothing of the cluster or its layer is on the host.

Slow (the nightly's, about a minute): `make test` keeps test_run_crash.py's client host killed
mid-fault; this one adds the disk layer's states."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from clusters.disk_layer import DiskLayerError, ask
from clusters.docker_lifecycle import DockerCluster
from tests.integration.kafka_io import wait_until
from tests.integration.run_process import REPO, client_host, kchaos_process

NAME = "host-killed-it"
SUBNET = "10.213.215.0/24"


def _powered_off(results: Path) -> list[str]:
    """The nodes of an acknowledged power loss the history shows, while no stop followed it."""
    histories = list(results.glob("queue/*/history.jsonl"))
    if not histories:
        return []
    last: dict = {}
    for line in histories[0].read_text().splitlines():
        if '"process":"nemesis"' in line and '"type":"ok"' in line:
            op = json.loads(line)
            if op["f"] in ("start-disk", "stop-disk"):
                last = op
    return last["value"]["targets"] if last.get("f") == "start-disk" else []


def _kchaos(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "harness.cli", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    return done.stdout


def _layer_answers(node) -> bool:
    try:
        return ask(node, "status", timeout=10)["ok"]
    except DiskLayerError:
        return False


@pytest.mark.slow
def test_the_client_host_killed_mid_power_loss_is_healed_and_torn_down_without_a_trace(
    docker_client, tmp_path
):
    dc = DockerCluster(docker_client, NAME)
    dc.remove()
    # The power loss at 2 s holds until 22 s: the run is killed in between.
    args = ["run", "--cluster", NAME, "--subnet", SUBNET, "--timing", "fast", "--seed", "5"]
    args += ["--nemesis", "disk:power-loss@one", "--nemesis-interval", "20"]
    args += ["--nemesis-quiet", "2", "--time-limit", "30", "--results-dir", str(tmp_path)]
    run = kchaos_process(args)
    try:
        wait_until(
            "a power loss in effect",
            lambda: bool(_powered_off(tmp_path)) or run.poll() is not None,
            timeout=300,
        )
        assert run.poll() is None, run.communicate()[0]
        # Both processes at once, as a host losing power takes them: frozen first, so that
        # neither sees the other die (the client host would heal when the supervisor goes).
        child = client_host(run.pid)
        for pid in (run.pid, child):
            os.kill(pid, signal.SIGSTOP)
        for pid in (child, run.pid):
            os.kill(pid, signal.SIGKILL)
        run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
    try:
        (off,) = _powered_off(tmp_path)
        nodes = dc.nodes()
        assert not nodes[off].is_running(), "the powered-off node is down until healed"
        cut_short, full = sorted(n for n in nodes if n != off)
        nodes[cut_short].pause()
        wait_until("a stopped JVM", nodes[cut_short].is_paused_by_signal, timeout=30)
        assert ask(nodes[cut_short], "drop", timeout=60)["powered"] is False
        # Under a path Kafka never writes: a full data directory makes the broker exit, and its
        # restart, on a new layer, would hide whether heal removes a rule.
        assert ask(nodes[full], "fail", "write", "ENOSPC", "kchaos-it")["ok"]

        said = _kchaos("heal", "--name", NAME)
        flat = " ".join(said.split())
        # Its JVM, let go on a disk without power, is killed unless it exited first on EIO.
        assert f"{cut_short}: sent SIGCONT" in flat, said
        assert f"{full}: cleared 1 disk fail rule(s)" in flat, said
        for name in (off, cut_short):
            assert f"{name}: started exited node" in flat, said
        for name, node in nodes.items():
            assert node.is_running() and not node.is_paused_by_signal(), name
            wait_until(f"{name}'s layer", lambda node=node: _layer_answers(node), timeout=60)
            status = ask(node, "status", timeout=10)
            assert status["powered"] and status["failing"] == [], (name, status)
        assert "no fault was in place" in _kchaos("heal", "--name", NAME)

        volumes = {
            m["Name"]
            for c in dc.containers()
            for m in c.attrs.get("Mounts", [])
            if m.get("Type") == "volume"
        }
        _kchaos("cluster", "down", "--name", NAME)
        assert not dc.containers() and not dc.networks(), "cluster down left its cluster"
        names = {v.name for v in docker_client.volumes.list()}
        assert not volumes & names, f"cluster down left volumes {volumes & names}"
        mounts = Path("/proc/mounts").read_text()
        assert "kchaos-disk" not in mounts, "a disk layer is mounted on the host"
    finally:
        dc.remove()
