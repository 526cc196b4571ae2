"""`kchaos run --client java` on a real Kafka 4.4 cluster: Kafka's own Java client runs the
queue with transactions, its subscribers on KIP-848's consumer group protocol, while a node is
killed. The history carries what only a group member knows (rebalance events, commits), the
brokers' logs show transaction.version 2's epoch bump at every end, and the run is judged. The
client faults take turns with the kill: a hijack, and one slot's own JVM killed and paused
(each slot's client in a process of its own, workloads/java_procs.py)."""

from __future__ import annotations

import json

from history.reader import read_history
from tests.integration.runs import quiet_run

NAME = "kjava"
SUBNET = "10.213.174.0/24"


def test_the_java_client_runs_transactions_and_a_kip848_group_under_kills_and_hijacks(
    docker_client, tmp_path
):
    done = quiet_run(
        docker_client,
        NAME,
        SUBNET,
        7,
        tmp_path,
        version="4.4",
        client="java",
        txn=True,
        mode="subscribe",
        group_protocol="consumer",
        # kill and the client faults take turns: a hijack fences a slot's producer, client:kill
        # and client:pause act on one slot's JVM (nemesis/client.py). Seed 7 draws client:kill
        # at 4 s, kill at 12 s, client:hijack at 20 s, client:pause (short) at 28 s.
        nemesis=["kill", "client:hijack", "client:kill", "client:pause"],
        nemesis_interval=4,
        time_limit=33,
        rate=30,
    )
    assert done.left_behind == []
    result = done.result
    assert done.plan.generator["client"] == "java"
    d = result.run_dir
    history = read_history(d)
    assert history.header["client"] == "java" and history.header["group_protocol"] == "consumer"
    clients = [op for op in history.ops if isinstance(op["process"], int)]
    assert any(op["f"] == "txn" and op["type"] == "ok" for op in clients)
    events = [e for op in clients for e in op.get("rebalance", [])]
    assert any(e[0] == "assigned" and e[1] for e in events), events[:5]
    assert any("commit" in op for op in clients)
    run = json.loads((d / "run.json").read_text())
    assert run["final_reads"]["complete"] is True, run["final_reads"]
    results = json.loads((d / "results.json").read_text())
    assert any("transaction.version 2" in n for n in results["notes"]), results["notes"]
    assert results["status"] == "valid", results
    assert result.exit_code == 0
    hijacks = [
        op["value"]
        for op in history.ops
        if op["process"] == "nemesis" and op["f"] == "start-client" and op["type"] == "ok"
    ]
    assert done.plan.generator["client_procs"] is True
    by_kind = {h["kind"]: h for h in hijacks}
    assert set(by_kind) == {"hijack", "kill", "pause"}, hijacks
    assert by_kind["kill"]["effects"][0]["effect"] == "down"
    assert by_kind["pause"]["effects"][0]["effect"] == "stopped"
    assert by_kind["pause"]["timeouts_ms"]["transaction.timeout.ms"] == 15000
    # The killed JVM ended the slot's op in flight, or its next (unknown, or a transaction not
    # begun), and the slot went on as a new process in a fresh JVM.
    killed = by_kind["kill"]["slot"]
    ended = [
        op
        for op in clients
        if op["process"] % 4 == killed
        and op["type"] in ("info", "fail")
        and "the Java client" in str(op.get("error"))
    ]
    assert ended, [op for op in clients if op["type"] == "info"][:5]
    hijacks = [h for h in hijacks if h["kind"] == "hijack"]
    assert hijacks and all(h["effects"][0]["effect"] == "fenced" for h in hijacks), hijacks
    # Every hijack was judged by hijacked-producer-ack (checkers/families/fenced_acks.py).
    assert results["stats"]["hijacks"] == len(hijacks)
