"""`kchaos run --upgrade-to` and `--downgrade-to`: a rolling software change and the feature
levels that follow it, carried out step by step while the queue workload runs and the kill
nemesis strikes, then checked.

The upgrade goes 3.8 -> 3.9 (Kafka documents every 3.3+ -> 3.9 KRaft path) and then finalizes
metadata.version 3.9-IV0 (21). The run must be valid and every step acknowledged: on these
releases each step should succeed. The downgrade is in test_run_downgrade.py (nightly).
"""

from __future__ import annotations

import pytest

from history.format import OBSERVER, UPGRADE
from history.reader import read_history
from steps.upgrade import FEATURES, ROLL
from tests.integration.runs import quiet_run

SEED = 3


def _run(docker_client, tmp_path_factory, name, subnet, **fields):
    done = quiet_run(
        docker_client,
        name,
        subnet,
        SEED,
        tmp_path_factory.mktemp("results"),
        time_limit=120,
        nemesis=["kill"],
        nemesis_interval=10,
        rate=20,
        **fields,
    )
    assert done.left_behind == [], f"the run left {done.left_behind}"
    return done.result, done.plan


@pytest.fixture(scope="module")
def upgraded(docker_client, tmp_path_factory):
    return _run(
        docker_client, tmp_path_factory, "upg1", "10.213.131.0/24", version="3.8", upgrade_to="3.9"
    )


def _ops(result, process):
    return [
        op for op in read_history(result.run_dir / "history.jsonl").ops if op["process"] == process
    ]


def _last_samples(result):
    """Each node's last observe sample that carried its features."""
    last = {}
    for op in _ops(result, OBSERVER):
        if op["type"] == "ok" and (op.get("value") or {}).get("features"):
            last[op["node"]] = op["value"]
    return last


def test_the_upgrade_rolls_every_node_and_finalizes_the_new_metadata_version(upgraded):
    result, plan = upgraded
    done = [op for op in _ops(result, UPGRADE) if op["type"] != "invoke"]
    assert [op["f"] for op in done if op["f"] == ROLL] == [
        s.step for s in plan.steps_of("upgrade") if s.step == ROLL
    ]
    rolls = [op for op in done if op["f"] == ROLL]
    # A roll waits (bounded) for the node to come back on the new release, whatever is killed.
    assert all(op["type"] == "ok" for op in rolls), [op.get("error") for op in rolls]
    assert {op["value"]["version"] for op in rolls} == {"3.9.2"}
    # A step the time limit came before is recorded `fail` with "not attempted" (on a loaded
    # box the rolls can take that long): it never reached Kafka.
    feats = [
        op for op in done
        if op["f"] == FEATURES and not (op.get("error") or "").startswith("not attempted")
    ]  # fmt: skip
    # The plan kills every node around the feature steps: a request in flight then may end
    # unknown (info), but Kafka never refuses it on these releases (fail).
    assert feats and all(op["type"] in ("ok", "info") for op in feats), feats
    mv = [
        op
        for op in feats
        if "metadata.version" in op["value"]["params"].get("levels", {})
        and not op["value"]["params"]["dry_run"]
    ]
    assert mv and mv[0]["value"]["params"]["levels"] == {"metadata.version": 21}
    last = _last_samples(result)
    assert set(last) == {"n1", "n2", "n3"}
    assert {v["version"] for v in last.values()} == {"3.9.2"}
    finalized = {v["features"]["finalized"]["metadata.version"] for v in last.values()}
    assert (
        finalized == ({21} if mv[0]["type"] == "ok" else finalized & {20, 21})
        and len(finalized) == 1
    )


def test_the_upgraded_run_is_valid_and_reads_back_every_acknowledged_send(upgraded):
    result, _ = upgraded
    assert result.summary["check"]["status"] == "valid", result.summary["check"]
    final = result.summary["final_reads"]
    assert final["complete"] and final["read_acknowledged"] == final["acknowledged"]
    assert result.exit_code == 0
