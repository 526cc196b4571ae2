"""KIP-848 subscribers and the transaction protocol on real Kafka 4.4 clusters: a short
`kchaos run --mode subscribe --group-protocol consumer` with librdkafka records what the group
did to each member (`rebalance`) and what each poll committed (`commit`), and the check judges
it; a cluster formatted for `--txn-protocol` finalizes the asked transaction.version."""

from __future__ import annotations

import json
import re

import pytest

from clusters.cluster import UpOptions
from clusters.docker_lifecycle import DockerCluster
from clusters.kafka_dist import ensure_dist, run_tool
from clusters.topology import build_topology
from history.reader import read_history
from tests.integration.runs import quiet_run
from workloads.client_choice import TRANSACTION_VERSION, format_features

NAME = "k848-it"
SUBNET = "10.213.171.0/24"
KEYS = 8


# Slow (`make nightly`): make test must stay under 45 min (session 19 rehearsal: 46).
@pytest.mark.slow
def test_kip848_subscribers_record_rebalances_and_commits(docker_client, tmp_path):
    done = quiet_run(
        docker_client,
        NAME,
        SUBNET,
        5,
        tmp_path,
        version="4.4",
        mode="subscribe",
        group_protocol="consumer",
        keys=KEYS,
        time_limit=30,
        nemesis=["kill"],
        nemesis_interval=10,
        final_timeout=60,
    )
    assert done.left_behind == []
    result = done.result
    history = read_history(result.run_dir)
    assert history.header["group_protocol"] == "consumer"
    clients = [op for op in history.ops if isinstance(op["process"], int)]
    events = [e for op in clients for e in op.get("rebalance", [])]
    assigned = {k for event, keys, _ in events if event == "assigned" for k in keys}
    # Every partition was given to some member, each event on the history's clock.
    assert assigned == set(range(KEYS)), events
    assert all(0 <= t <= history.ops[-1]["time"] for _, _, t in events)
    assert all(op["f"] in ("subscribe", "poll") for op in clients if "rebalance" in op)
    commits = [op for op in clients if "commit" in op]
    assert len(commits) >= 5
    assert all(op["f"] == "poll" and op["type"] == "ok" for op in commits)
    for op in commits:
        read = op["value"][0][1]
        # The commit stores the position after the last record each partition returned.
        for key, pairs in read.items():
            if key in op["commit"]:
                assert op["commit"][key] == pairs[-1][0] + 1, op
    run = json.loads((result.run_dir / "run.json").read_text())
    assert run["final_reads"]["complete"] is True
    # Judged: valid, or invalid with the findings that say why.
    status = run["check"]["status"]
    assert status in ("valid", "invalid"), run["check"]
    if status == "invalid":
        results = json.loads((result.run_dir / "results.json").read_text())
        failing = [f for f in results["findings"] if not f["tolerated"] and not f["unknown"]]
        assert failing and all(f["explanation"] for f in failing), results


@pytest.mark.parametrize("protocol", ["classic", "v2"])
def test_the_txn_protocol_is_the_finalized_transaction_version(docker_client, protocol):
    features = format_features({"txn_protocol": protocol})
    dc = DockerCluster(docker_client, NAME)
    dc.remove()  # leftovers of an interrupted earlier test run
    topo = build_topology("kraft-combined", cluster=NAME, subnet=SUBNET)
    try:
        dc.up(topo, UpOptions("4.4", timing="fast", features=features), say=lambda m: None)
        args = ["--bootstrap-server", topo.bootstrap_servers(), "describe"]
        code, out, err = run_tool(ensure_dist("4.4"), "features", args, 60)
    finally:
        dc.remove()
    assert code == 0, err
    line = next(x for x in out.splitlines() if "Feature: transaction.version" in x)
    finalized = re.search(r"FinalizedVersionLevel:\s*(\d+)", line)
    assert finalized and int(finalized.group(1)) == TRANSACTION_VERSION[protocol], line
