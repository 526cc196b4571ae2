"""Issue 30's three capabilities on real clusters, one short run each (docs/upgrades.md and
docs/checkers.md give the runs they were drawn from):

- KIP-1022: `--features release-version=4.0` on Kafka 4.0 (kraft-combined, 3 nodes) under the
  kill nemesis: one features operation naming every level the tool sends, judged; Kafka 4.0.2
  acknowledges kraft.version 1 on the static quorum and keeps 0, which is a note;
- KIP-966: `shutdown:elr-last-replica` on Kafka 4.4 (kraft: 3 controllers and 3 brokers, the
  fewest nodes the scenario runs on, since stopping two of three combined nodes would stop the
  controller quorum too): a restarted clean replica is elected from the ELR, every
  acknowledged send is read back, the ELR family replayed the committed records;
- KIP-996: `partition:one-way-layout` on Kafka 4.4 with five controllers (kraft-combined, 5
  nodes: the layout is five voters'): the leader keeps its epoch, judged by the pre-vote family.
"""

from __future__ import annotations

import json

import pytest

from history.format import NEMESIS, UPGRADE
from history.reader import read_history
from tests.integration.runs import quiet_run


def _run(docker_client, tmp_path_factory, name, subnet, seed, **fields):
    done = quiet_run(
        docker_client,
        name,
        subnet,
        seed,
        tmp_path_factory.mktemp("results"),
        rate=20,
        send_mode="sync",
        **fields,
    )
    assert done.left_behind == [], f"the run left {done.left_behind}"
    return done.result


def _ops(result, process, f=None):
    return [
        op
        for op in read_history(result.run_dir / "history.jsonl").ops
        if op["process"] == process and op["type"] != "invoke" and f in (None, op["f"])
    ]


def _results(result):
    return json.loads((result.run_dir / "results.json").read_text())


@pytest.fixture(scope="module")
def release_version(docker_client, tmp_path_factory):
    return _run(
        docker_client,
        tmp_path_factory,
        "elr-rv",
        "10.213.191.0/24",
        51,
        version="4.0",
        features="dry-run:release-version=4.0,release-version=4.0",
        nemesis=["kill"],
        nemesis_interval=10,
        time_limit=50,
    )


def test_release_version_is_one_operation_per_request_and_judged(release_version):
    steps = _ops(release_version, UPGRADE, "features")
    assert len(steps) == 2, steps
    levels = steps[-1]["value"]["params"]["levels"]
    assert levels == {"metadata.version": 25, "kraft.version": 1, "transaction.version": 2,
                      "group.version": 1}  # fmt: skip
    # Under kills a request may end unknown; Kafka 4.0 never refuses it on a healthy quorum.
    assert {op["type"] for op in steps} <= {"ok", "info"}, [op.get("error") for op in steps]
    assert release_version.summary["check"]["status"] == "valid", release_version.summary
    notes = _results(release_version)["notes"]
    if steps[-1]["type"] == "ok":
        assert any("acknowledged with kraft.version=1 on a static quorum" in n for n in notes)


@pytest.fixture(scope="module")
def last_replica(docker_client, tmp_path_factory):
    return _run(
        docker_client,
        tmp_path_factory,
        "elr-scn",
        "10.213.192.0/24",
        42,
        version="4.4",
        topology="kraft",
        nemesis=["shutdown:elr-last-replica"],
        nemesis_interval=45,
        time_limit=110,
    )


def test_a_clean_replica_is_elected_from_the_elr_and_nothing_acknowledged_is_lost(last_replica):
    (stop,) = [op for op in _ops(last_replica, NEMESIS, "stop-shutdown") if op["type"] == "ok"]
    (start,) = [op for op in _ops(last_replica, NEMESIS, "start-shutdown") if op["type"] == "ok"]
    assert stop["value"]["elected"] in start["value"]["followers"], stop["value"]
    assert last_replica.summary["check"]["status"] == "valid", last_replica.summary
    reads = last_replica.summary["final_reads"]
    assert reads["read_acknowledged"] == reads["acknowledged"] > 0
    changes = _results(last_replica)["stats"]["elr"]["committed"]["changes"]
    part = int(start["value"]["partition"])
    mine = [c for c in changes if c["topic"] == "kchaos-queue" and c["partition"] == part]
    elected = [c for c in mine if c["elr"] and c["leader"] == -1]
    assert elected, mine  # leaderless with an ELR, before a follower was elected from it


@pytest.fixture(scope="module")
def one_way(docker_client, tmp_path_factory):
    return _run(
        docker_client,
        tmp_path_factory,
        "elr-pv",
        "10.213.193.0/24",
        31,
        version="4.4",
        controllers=5,
        nemesis=["partition:one-way-layout"],
        nemesis_interval=20,
        time_limit=60,
    )


def test_under_the_one_way_layout_the_leader_keeps_its_epoch(one_way):
    results = _results(one_way)
    assert one_way.summary["check"]["status"] == "valid", one_way.summary
    notes = [n for n in results["notes"] if n.startswith("pre-vote:")]
    assert notes and "controllers ran 4.4.0" in notes[0], results["notes"]
    assert not any(f["kind"] == "leadership-unstable" for f in results["findings"])
