"""Lease liveness (checkers/families/metadata_log/liveness.py) over a real kraft-combined run whose
faults hold long enough to be judged: a kill of the active controller (its broker is fenced only
after the next leader's fresh lease runs out) and a partition cutting one node off from both other
controllers, 12 s each. At fast timing a fence is owed 3 s + 3 s after the later of the fault and
the new epoch, so both obligations are judged; none may be broken, and no healthy broker fenced.

Seed 6 gives, at 12 s intervals: kill active-controller 12-24 s, partition random-halves 36-48 s.
"""

from __future__ import annotations

import json

import pytest

from tests.integration.runs import quiet_run

NAME = "lease-it"
SUBNET = "10.213.140.0/24"
SEED = 6


@pytest.fixture(scope="module")
def finished_run(docker_client, tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    done = quiet_run(
        docker_client,
        NAME,
        SUBNET,
        SEED,
        results,
        time_limit=50,
        nemesis=["partition", "kill"],
        nemesis_interval=12,
        rate=30,
    )
    assert done.left_behind == [], f"the run left {done.left_behind}"
    yield done.result, done.plan


def test_the_plan_kills_the_active_controller_and_partitions_one_node_off(finished_run):
    _, plan = finished_run
    starts = [(s.at_s, s.fault, s.kind) for s in plan.faults if s.action == "start"]
    assert starts == [(12, "kill", "active-controller"), (36, "partition", "random-halves")]


def test_the_real_faults_are_judged_and_every_fence_owed_was_committed_in_time(finished_run):
    result, _ = finished_run
    results = json.loads((result.run_dir / "results.json").read_text())
    kinds = ("dead-broker-not-fenced", "spurious-fence")
    assert [f for f in results["findings"] if f["kind"] in kinds] == []
    stats = results["stats"]
    assert stats["lease_obligations"] > 0, stats
    assert stats["lease_obligations_met"] == stats["lease_obligations"], stats
    assert stats["lease_fences_judged"] > 0, stats
