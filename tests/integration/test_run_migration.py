"""`kchaos run --topology migration`: the ZooKeeper-to-KRaft migration carried out step by step
while the queue workload runs and the kill nemesis strikes, then checked.

Seed 1 with a 240 s limit and 30 s intervals kills one node at 30 s, the KRaft quorum leader at
90 s (during dual write), the active controller at 150 s (while controllers are finalized) and
the quorum leader again at 210 s, each for 30 s. The migration either reaches POST_MIGRATION or
records which step could not complete and why; either way the run is valid and every
acknowledged send is read back.
"""

from __future__ import annotations

import json

import pytest

from history.format import MIGRATION
from history.reader import read_history
from steps.migration import STEPS
from tests.integration.runs import quiet_run

NAME = "mig2"
SUBNET = "10.213.121.0/24"
SEED = 1


@pytest.fixture(scope="module")
def finished_run(docker_client, tmp_path_factory):
    done = quiet_run(
        docker_client,
        NAME,
        SUBNET,
        SEED,
        tmp_path_factory.mktemp("results"),
        topology="migration",
        time_limit=240,
        nemesis=["kill"],
        nemesis_interval=30,
        rate=20,
        final_timeout=120,
    )
    assert done.left_behind == [], f"the run left {done.left_behind}"
    return done.result, done.plan


def migration_ops(result) -> list[dict]:
    history = read_history(result.run_dir / "history.jsonl")
    return [op for op in history.ops if op["process"] == MIGRATION]


def test_every_planned_step_is_an_operation_with_a_completion(finished_run):
    result, plan = finished_run
    ops = migration_ops(result)
    invokes = [op for op in ops if op["type"] == "invoke"]
    done = [op for op in ops if op["type"] != "invoke"]
    assert [op["f"] for op in invokes] == [s.step for s in plan.steps_of("migration")]
    assert [op["f"] for op in done] == [s.step for s in plan.steps_of("migration")]
    assert sorted({s.step for s in plan.steps_of("migration")}, key=STEPS.index) == list(STEPS)


def test_the_migration_finalized_or_a_step_recorded_why_not(finished_run):
    result, _ = finished_run
    done = [op for op in migration_ops(result) if op["type"] != "invoke"]
    summary = json.loads((result.run_dir / "migration.json").read_text())
    if all(op["type"] == "ok" for op in done):
        assert done[-1]["value"]["zk_migration_state"] == "POST_MIGRATION"
        assert summary["completed"] is True
        # The committed metadata log went through KIP-866's states in order: PRE_MIGRATION (2),
        # MIGRATION (1), POST_MIGRATION (3) are Kafka's record values.
        text = (result.run_dir / "metadata" / "c1.txt").read_text()
        states = [int(x) for x in _migration_records(text)]
        assert [s for i, s in enumerate(states) if i == 0 or states[i - 1] != s] == [2, 1, 3]
    else:
        first = next(op for op in done if op["type"] != "ok")
        assert first["error"], first
        later = done[done.index(first) + 1 :]
        assert all(op["type"] == "fail" and "not attempted" in op["error"] for op in later)
        assert summary["completed"] is False and summary["ended"]


def _migration_records(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        if '"type":"ZK_MIGRATION_STATE_RECORD"' in line.replace(" ", ""):
            tail = line.split('"zkMigrationState":', 1)[1]
            out.append(tail.split("}", 1)[0].split(",", 1)[0].strip())
    return out


def test_valid_and_every_acknowledged_send_was_read_back(finished_run):
    result, _ = finished_run
    verdict = json.loads((result.run_dir / "results.json").read_text())
    assert verdict["status"] == "valid", verdict
    assert any(n.startswith("migration: ") for n in verdict["notes"])
    final = result.summary["final_reads"]
    assert final["complete"] and final["read_acknowledged"] == final["acknowledged"] > 0
    assert result.exit_code == 0
