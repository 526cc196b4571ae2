"""The disk package's corrupt and disk-full kinds for real: one 40 s run on Kafka 4.4 (three
nodes on the disk layer) with a full disk on one node, another's quorum-state cut short (which
Kafka refuses to start on), and a bit of an offset index flipped on the third, whose JVM is
killed after it (plan.json's parameters set, as editing a stored plan and replaying it does),
checked as `kchaos run` checks it: the node that stays down is recorded and the run still ends
with a verdict; and, on the cluster it kept, `kchaos heal` clearing fail rules that a run which
died would have left."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from clusters.disk_layer import ask
from clusters.docker_lifecycle import DockerCluster
from harness.plan import Plan
from history.reader import read_history
from nemesis.api import FaultStep
from nemesis.heal import heal_cluster
from tests.integration.runs import Finished, quiet_run

NAME, SUBNET = "disk-faults-it", "10.213.205.0/24"
# An offset index, flipped where its entries are, then the node crash-restarted. What Kafka does
# with a damaged segment depends on which byte the run's sizes let the seed pick (in this test's
# runs: a base offset no check covers, served; a flip that kept 4.4 from starting, "Split
# operation is only permitted for segments with overflow"; docs/disk.md), while the index of a
# segment recovery scans is rebuilt whatever the byte, so the run goes on to be judged.
FLIP_AN_INDEX = {"file_class": "index", "how": "flip", "restart": 1}
# A quorum-state cut short is JSON Kafka cannot parse: every start of that node exits ("Error
# while reading the Quorum status from the file"), so the node stays down after the heal.
CUT_QUORUM_STATE = {"file_class": "quorum-state", "how": "truncate", "restart": 1, "age_s": 6}
# Between the full disk's stop and the index's start, with no stop of its own: the index's stop
# (every exited node is started) and the run's heal start it, and it exits each time. Targets are
# drawn from the seed alone: the full disk on n1, the index on n2, this on n3.
KEPT_DOWN_AT_S, KEPT_DOWN_SEED = 10, 29


def _aim(plan: Plan) -> None:
    """The corrupt step flips a bit of an index and crash-restarts its node; one window each;
    before it, a second corrupt step cuts another node's quorum-state short."""
    seen: set[tuple[str, str]] = set()
    steps = []
    for s in plan.faults:
        if (s.kind, s.action) in seen:
            continue  # a later window of a kind: the time limit leaves room for one each
        seen.add((s.kind, s.action))
        if s.kind == "corrupt":
            s = dataclasses.replace(s, params={**s.params, **FLIP_AN_INDEX})
        steps.append(s)
    cut = FaultStep(
        KEPT_DOWN_AT_S, "start", "disk", "corrupt", "one", KEPT_DOWN_SEED, dict(CUT_QUORUM_STATE)
    )
    plan.faults = sorted([*steps, cut], key=lambda s: s.at_s)


def _heal_after_a_death(dc: DockerCluster) -> dict[str, Any]:
    """What `kchaos heal` finds after a run died mid disk-full: a fail rule on every running
    node (on a path Kafka never writes, so that no broker halts meanwhile), cleared by a heal
    that knows nothing of the run. The node the quorum-state keeps down has no layer to ask."""
    nodes = {n: node for n, node in dc.nodes(dc.info()).items() if node.is_running()}
    for node in nodes.values():
        ask(node, "fail", "write", "ENOSPC", "data/kchaos-never-written")
    said = heal_cluster(dc)
    return {
        "said": said,
        "failing": {n: ask(node, "status")["failing"] for n, node in nodes.items()},
    }


@pytest.fixture(scope="module")
def done(docker_client, tmp_path_factory) -> Finished:
    # disk-full 4-8 s, the quorum-state at 10 s, the index 12-16 s; each stop waits for the
    # nodes it starts (11 and 19 s on a busy machine), so the steps run late: 40 s leaves room.
    return quiet_run(
        docker_client,
        NAME,
        SUBNET,
        3,
        tmp_path_factory.mktemp("disk-faults"),
        version="4.4",
        time_limit=40,
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


def _of_kind(values: list[dict[str, Any]], kind: str, file_class: str = "index") -> dict[str, Any]:
    (value,) = [
        v for v in values if v["kind"] == kind and v.get("file_class", file_class) == file_class
    ]
    return value


def _index_seed(done: Finished) -> int:
    return next(s.seed for s in done.plan.faults if s.params.get("file_class") == "index")


def _stop_of(done: Finished, seed: int) -> dict[str, Any]:
    """The ok stop of the corrupt step with ``seed`` (a stop's value does not repeat the step:
    its invocation does, and the nemesis completes each op before it invokes the next)."""
    seeds, found = [], []
    for op in read_history(done.result.run_dir).ops:
        if op["process"] != "nemesis":
            continue
        if op["type"] == "invoke":
            seeds.append(op["value"].get("seed"))
        elif op["type"] == "ok" and op["f"] == "stop-disk" and seeds[-1] == seed:
            found.append(op["value"])
    (value,) = found
    return value


def test_a_flipped_index_bit_is_recorded_the_node_restarted_and_the_damage_judged(done):
    assert done.result.exit_code == 0, done.result.summary
    start = _of_kind(_nemesis_ops(done, "start-disk"), "corrupt")
    (node,) = start["targets"]
    hit = start["corrupted"][node]
    assert hit["path"].endswith(".index") and hit["synced_first"]
    assert hit["after"] == hit["before"] ^ hit["mask"]
    assert start["effects"][0]["effect"] == "down" and start["effects"][0]["done"] == [node]
    stop = _stop_of(done, _index_seed(done))
    # It also starts the node the quorum-state keeps down, which exits again.
    assert node in stop["restarted"] and stop["after_restart"][node] == "started"
    assert "kafka_said" in stop
    # Judged either way: what Kafka logged about it, or a note that it logged nothing.
    results = json.loads((done.result.run_dir / "results.json").read_text())
    detected = [f for f in results["findings"] if f["kind"] == "corruption-detected"]
    noted = [n for n in results["notes"] if n.startswith("disk: Kafka logged nothing")]
    assert [f["data"]["file"] for f in detected] == [hit["path"]] or len(noted) == 1
    assert results["status"] == "valid", results["findings"][:3]


def test_a_node_kafka_refuses_to_start_on_is_kept_down_and_the_run_still_ends_with_a_verdict(done):
    start = _of_kind(_nemesis_ops(done, "start-disk"), "corrupt", "quorum-state")
    (node,) = start["targets"]
    assert start["corrupted"][node]["path"].endswith("__cluster_metadata-0/quorum-state")
    # The index's stop started it too (every exited node), and it exited again.
    assert _stop_of(done, _index_seed(done))["after_restart"][node] == "exited"
    (kept,) = _nemesis_ops(done, "kept-down")
    assert list(kept["nodes"]) == [node] and kept["nodes"][node]["file_class"] == "quorum-state"
    assert kept["effects"][0]["effect"] == "down"
    assert done.result.summary["kept_down"] == [node]
    # The final reads ran on the nodes that were up, and the run was judged.
    assert done.result.summary["final_reads"]["complete"], done.result.summary
    results = json.loads((done.result.run_dir / "results.json").read_text())
    (refused,) = [f for f in results["findings"] if f["kind"] == "corruption-refused-start"]
    assert refused["data"]["node"] == node and refused["tolerated"]
    assert any("Quorum status" in line for line in refused["data"]["kafka_said"][node])


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
    running = sorted(healed["failing"])
    assert len(running) == 2
    assert {f"{n}: cleared 1 disk fail rule(s)" for n in running} <= set(healed["said"])
    assert healed["failing"] == {n: [] for n in running}
