"""`kchaos run` on a ZooKeeper-mode cluster whose active controller is killed: the run is valid
and the controller-epoch rule judged a real failover (a new election in a higher epoch), not
nothing.

Seed 2 with a 20 s limit and 8 s intervals plans exactly one fault: kill the active controller
(the broker /controller names) at 8 s, restart it at 16 s. The ZooKeeper session of the killed
broker expires after 4 s (timing fast), so another broker is elected in the next epoch.
"""

from __future__ import annotations

import json

import pytest

from tests.integration.runs import quiet_run

NAME = "zk1"
SUBNET = "10.213.100.0/24"
SEED = 2


@pytest.fixture(scope="module")
def finished_run(docker_client, tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    done = quiet_run(
        docker_client,
        NAME,
        SUBNET,
        SEED,
        results,
        topology="zk",
        time_limit=20,
        nemesis=["kill"],
        rate=40,
    )
    assert done.left_behind == [], f"the run left {done.left_behind}"
    yield done.result, done.plan


def test_the_plan_kills_the_active_controller(finished_run):
    _, plan = finished_run
    assert [(s.action, s.fault, s.kind) for s in plan.faults] == [
        ("start", "kill", "active-controller"),
        ("stop", "kill", "active-controller"),
    ]


def test_the_kill_hit_the_broker_zookeeper_named(finished_run):
    result, _ = finished_run
    timeline = json.loads((result.run_dir / "nemesis.json").read_text())["timeline"]
    kill = next(t for t in timeline if t["f"] == "start-kill")
    assert kill["type"] == "ok", kill
    assert "/controller" in kill["value"]["resolved_by"]
    assert kill["value"]["targets"][0].startswith("b")


def test_valid_and_the_controller_epoch_rule_saw_the_failover(finished_run):
    result, _ = finished_run
    verdict = json.loads((result.run_dir / "results.json").read_text())
    assert verdict["status"] == "valid", verdict
    zk = verdict["stats"]["zk_controller"]
    assert zk["failovers"] >= 1, zk
    assert zk["epochs"] == sorted(set(zk["epochs"])) and len(zk["epochs"]) >= 2
    assert zk["requests_accepted"] > 0
    assert any(n.startswith("controller epochs: ") for n in verdict["notes"])
    html = (result.run_dir / "report.html").read_text()
    assert "ZooKeeper mode: each broker" in html
