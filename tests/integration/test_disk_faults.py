"""The disk package's corrupt and disk-full kinds for real: one 24 s run on Kafka 4.4 (three
nodes on the disk layer) with a full disk on one node, then a bit of an offset index flipped on
another whose JVM is killed after it (plan.json's parameters set, as editing a stored plan and
replaying it does), checked as `kchaos run` checks it; and, on the cluster it kept, `kchaos
heal` clearing fail rules that a run which died would have left."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from clusters.disk_layer import ask
from clusters.docker_lifecycle import DockerCluster
from harness.plan import Plan
from history.reader import read_history
from nemesis.heal import heal_cluster
from tests.integration.runs import Finished, quiet_run

NAME, SUBNET = "disk-faults-it", "10.213.205.0/24"
# An offset index, flipped where its entries are, then the node crash-restarted. What Kafka does
# with a damaged segment depends on which byte the run's sizes let the seed pick (in this test's
# runs: a base offset no check covers, served; a flip that kept 4.4 from starting, "Split
# operation is only permitted for segments with overflow"; docs/disk.md), while the index of a
# segment recovery scans is rebuilt whatever the byte, so the run goes on to be judged.
FLIP_AN_INDEX = {"file_class": "index", "how": "flip", "restart": 1}


def _aim(plan: Plan) -> None:
    """The corrupt step flips a bit of an index and crash-restarts its node; one window each."""
    seen: set[tuple[str, str]] = set()
    steps = []
    for s in plan.faults:
        if (s.kind, s.action) in seen:
            continue  # a later window of a kind: the time limit leaves room for one each
        seen.add((s.kind, s.action))
        if s.kind == "corrupt":
            s = dataclasses.replace(s, params={**s.params, **FLIP_AN_INDEX})
        steps.append(s)
    plan.faults = steps


def _heal_after_a_death(dc: DockerCluster) -> dict[str, Any]:
    """What `kchaos heal` finds after a run died mid disk-full: a fail rule on every node (on a
    path Kafka never writes, so that no broker halts meanwhile), cleared by a heal that knows
    nothing of the run."""
    nodes = dc.nodes(dc.info())
    for node in nodes.values():
        ask(node, "fail", "write", "ENOSPC", "data/kchaos-never-written")
    said = heal_cluster(dc)
    return {
        "said": said,
        "failing": {n: ask(node, "status")["failing"] for n, node in nodes.items()},
    }


@pytest.fixture(scope="module")
def done(docker_client, tmp_path_factory) -> Finished:
    # disk-full 4-8 s, corrupt 12-16 s; each stop waits for the node it starts (the full disk's
    # stop takes ~10 s), so the corrupt steps run late: 24 s leaves room for both.
    return quiet_run(
        docker_client,
        NAME,
        SUBNET,
        3,
        tmp_path_factory.mktemp("disk-faults"),
        version="4.4",
        time_limit=24,
        nemesis=["disk:corrupt@one", "disk:disk-full@one"],
        nemesis_interval=4,
        keep_cluster=True,
        inspect=_heal_after_a_death,
        plan_edit=_aim,
    )


def _nemesis_ops(done: Finished, f: str) -> list[dict[str, Any]]:
    return [
        op["value"]
        for op in read_history(done.result.run_dir).ops
        if op["process"] == "nemesis" and op["type"] == "ok" and op["f"] == f
    ]


def _of_kind(values: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (value,) = [v for v in values if v["kind"] == kind]
    return value


def test_a_flipped_index_bit_is_recorded_the_node_restarted_and_the_damage_judged(done):
    assert done.result.exit_code == 0, done.result.summary
    start = _of_kind(_nemesis_ops(done, "start-disk"), "corrupt")
    (node,) = start["targets"]
    hit = start["corrupted"][node]
    assert hit["path"].endswith(".index") and hit["synced_first"]
    assert hit["after"] == hit["before"] ^ hit["mask"]
    assert start["effects"][0]["effect"] == "down" and start["effects"][0]["done"] == [node]
    stop = _of_kind(_nemesis_ops(done, "stop-disk"), "corrupt")
    assert stop["restarted"] == [node] and stop["after_restart"] == {node: "started"}
    assert "kafka_said" in stop
    # Judged either way: what Kafka logged about it, or a note that it logged nothing.
    results = json.loads((done.result.run_dir / "results.json").read_text())
    detected = [f for f in results["findings"] if f["kind"] == "corruption-detected"]
    noted = [n for n in results["notes"] if n.startswith("disk: Kafka logged nothing")]
    assert [f["data"]["file"] for f in detected] == [hit["path"]] or len(noted) == 1
    assert results["status"] == "valid", results["findings"][:3]


def test_a_full_disk_halts_the_broker_and_the_stop_starts_it_again(done):
    start = _of_kind(_nemesis_ops(done, "start-disk"), "disk-full")
    (node,) = start["targets"]
    assert start["full"][node] == [{"classes": "write", "errno": "ENOSPC", "prefix": "data"}]
    assert start["effects"][0]["effect"] == "stalled"
    stop = _of_kind(_nemesis_ops(done, "stop-disk"), "disk-full")
    # Kafka 4.4: "Shutdown broker because all log dirs in /var/lib/kafka/data have failed".
    assert stop["exited"] == [node] and node in stop["restarted"]
    assert {"storage", "fatal"} <= set(stop["kafka_said"][node]["labels"])


def test_heal_clears_the_fail_rules_a_dead_run_left_on_every_layered_node(done):
    healed = done.inspected
    assert sorted(healed["said"]) == [f"n{i}: cleared 1 disk fail rule(s)" for i in (1, 2, 3)]
    assert healed["failing"] == {"n1": [], "n2": [], "n3": []}
