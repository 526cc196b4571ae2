"""A hand-made hang, judged: a real Kafka 4.4 cluster stops answering its clients while every
broker and controller is up, connected and unfaulted, and `no-progress` says so.

No nemesis runs. Once the clients have made progress, the test, behind kchaos's back, drops the
host's packets to the brokers' client port inside every node (the cluster's own traffic between
nodes is untouched: the quorum and replication stay healthy), and lifts the block after longer
than the progress bound. The history records no fault, so the whole stall lies in a healthy
stretch: it is what a real hang of a healthy cluster looks like to kchaos. The run's safety
verdict stays VALID; its liveness block says `hang`; with `--liveness fail` the run fails.

Slow (the nightly's, about two minutes); the rules themselves are unit-tested on hand-written
histories (tests/unit/checkers/test_liveness*.py)."""

from __future__ import annotations

import ipaddress
import json
import threading
from pathlib import Path
from typing import Any

import pytest

from clusters.docker_lifecycle import DockerCluster
from clusters.topology import BROKER_PORT
from history.reader import read_history
from tests.integration.kafka_io import wait_until
from tests.integration.runs import quiet_run

NAME = "hang-it"
SUBNET = "10.213.217.0/24"
# Longer than the fast timing's progress bound (34 s, checkers/families/liveness/bounds.py).
BLOCK_S = 45.0


def _ok_sends(results: Path) -> int:
    found = list(results.glob("queue/*/history.jsonl"))
    if not found:
        return 0
    text = found[0].read_text()
    return sum(1 for line in text.splitlines() if '"f":"send"' in line and '"type":"ok"' in line)


def _rule(gateway: str, flag: str) -> list[str]:
    return ["iptables", flag, "INPUT", "-s", gateway, "-p", "tcp", "--dport", str(BROKER_PORT),
            "-j", "DROP"]  # fmt: skip


class Blocker:
    """Cuts the host off from the brokers' client port once the run has made progress."""

    def __init__(self, docker_client: Any, results: Path) -> None:
        self.dc = DockerCluster(docker_client, NAME)
        self.results = results
        self.blocked: list[Any] = []
        self.gateway = ""
        self.done = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            wait_until("20 ok sends", lambda: _ok_sends(self.results) >= 20 or None, timeout=180)
            net = self.dc.networks()[0]
            net.reload()
            ipam = net.attrs["IPAM"]["Config"][0]
            # Docker gives the host the subnet's first address unless told otherwise.
            first = str(next(ipaddress.ip_network(ipam["Subnet"]).hosts()))
            self.gateway = ipam.get("Gateway") or first
            for c in self.dc.containers(all=False):
                res = c.exec_run(_rule(self.gateway, "-I"), user="root")
                assert res.exit_code == 0, res.output
                self.blocked.append(c)
            self.done.wait(BLOCK_S)
        except BaseException as exc:  # reported by the test, not lost in the thread
            self.error = exc
        finally:
            self.lift()

    def lift(self) -> None:
        while self.blocked:
            c = self.blocked.pop()
            c.exec_run(_rule(self.gateway, "-D"), user="root")


@pytest.mark.slow
def test_a_healthy_cluster_that_stops_answering_is_judged_hang(docker_client, tmp_path):
    blocker = Blocker(docker_client, tmp_path)
    thread = threading.Thread(target=blocker.run, daemon=True)
    thread.start()
    try:
        done = quiet_run(
            docker_client,
            NAME,
            SUBNET,
            11,
            tmp_path,
            version="4.4",
            topology="kraft-combined",
            nemesis=[],
            time_limit=75,
            rate=20,
            liveness="fail",
        )
    finally:
        blocker.done.set()
        thread.join(timeout=60)
    assert blocker.error is None, blocker.error
    d = done.result.run_dir
    history = read_history(d)
    assert not [op for op in history.ops if op["process"] == "nemesis" and op["f"] != "heal"]
    results = json.loads((d / "results.json").read_text())
    block = results["liveness"]
    assert block["status"] == "hang", block
    assert block["counts"].get("no-progress", 0) >= 1, block
    stuck = [f for f in results["findings"] if f["kind"] == "no-progress"]
    assert any(f.get("ops") for f in stuck), stuck
    # Safety is untouched: every finding is a liveness one, and the run fails for liveness only.
    assert {f["kind"] for f in results["findings"] if not f.get("tolerated")} <= {
        "no-progress",
        "slow-recovery",
    }, results["findings"]
    assert done.result.exit_code != 0
