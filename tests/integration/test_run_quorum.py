"""`kchaos run --quorum dynamic` on Kafka 3.9: a controller removed from the voter set and added
back (KIP-853) while the partition nemesis strikes, then checked.

kraft-combined keeps it to three nodes: the removed node keeps its disk (it holds its partitions
too), so the same replica is added back. Seed 2 with a 75 s limit removes n2 from 14.6 s (just
as a bridge partition heals) and adds it back from 32.1 s (as a majorities ring heals), and the
removed voter runs through that ring; partitions go on every other 8 s after. The steps end ok,
the final description of the quorum names the replica again, and the run is valid with both
changes judged by the quorum-membership checker.
"""

from __future__ import annotations

import json

import pytest

from history.format import UPGRADE
from history.reader import read_history
from steps.quorum_steps import ADD, DESCRIBE, REMOVE
from tests.integration.runs import quiet_run

NAME = "quorum1"
SUBNET = "10.213.185.0/24"
SEED = 2


@pytest.fixture(scope="module")
def finished_run(docker_client, tmp_path_factory):
    done = quiet_run(
        docker_client,
        NAME,
        SUBNET,
        SEED,
        tmp_path_factory.mktemp("results"),
        topology="kraft-combined",
        version="3.9",
        quorum="dynamic",
        time_limit=75,
        nemesis=["partition"],
        rate=20,
    )
    assert done.left_behind == [], f"the run left {done.left_behind}"
    return done.result


def test_the_controller_was_removed_and_added_back_ok(finished_run):
    history = read_history(finished_run.run_dir / "history.jsonl")
    done = [op for op in history.ops if op["process"] == UPGRADE and op["type"] != "invoke"]
    assert [(op["f"], op["type"]) for op in done] == [
        (REMOVE, "ok"),
        (ADD, "ok"),
        (DESCRIBE, "ok"),
    ], [op.get("error") for op in done]
    removed, added, final = (op["value"] for op in done)
    replica = [removed["node_id"], removed["directory_id"]]
    assert replica not in removed["voters"] and replica in removed["before"]["voters"]
    assert [added["node_id"], added["directory_id"]] == replica  # the same replica, same disk
    assert replica in added["voters"] and replica in final["voters"] and final["agreed"]


def test_the_run_is_valid_and_both_changes_were_judged(finished_run):
    assert finished_run.summary["check"]["status"] == "valid", finished_run.summary["check"]
    results = json.loads((finished_run.run_dir / "results.json").read_text())
    assert results["stats"]["membership_changes"] == 2
