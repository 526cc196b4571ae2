"""The client faults that hold one librdkafka client at a point, and the one that cuts its network,
on a real Kafka 3.9 cluster: each worker slot's client is a child interpreter of its own
(workloads/client_procs.py) inside a network namespace of its own on the cluster's network
(clusters/docker_client_net.py). Seed 4 draws, every 4 s: `pause-send` (short) at 4 s,
`pause-commit` (short) at 12 s, `isolate` (long) at 20 s, `pause-abort` (long) at 28 s.
test_run_java.py runs `hijack`, `kill` and `pause` with the Java client."""

from __future__ import annotations

import json

from clusters.docker_lifecycle import DockerCluster
from history.reader import read_history
from tests.integration.runs import quiet_run

NAME = "kckinds"
SUBNET = "10.213.194.0/24"
KINDS = ["client:pause-send", "client:pause-commit", "client:isolate", "client:pause-abort"]


def test_holds_and_a_network_cut_of_one_librdkafka_client_are_done_undone_and_judged(
    docker_client, tmp_path
):
    def client_containers(dc: DockerCluster) -> list[str]:
        return [c.name for c in dc.client_containers()]

    done = quiet_run(
        docker_client,
        NAME,
        SUBNET,
        4,
        tmp_path,
        inspect=client_containers,
        version="3.9",
        txn=True,
        send_mode="sync",
        nemesis=KINDS,
        nemesis_interval=4,
        time_limit=31,
        rate=30,
    )
    assert done.left_behind == []
    # The run's end removed its client networks (the cluster's removal would have too).
    assert done.inspected == []
    gen = done.plan.generator
    assert gen["client_procs"] is True and gen["client_nets"] is True
    d = done.result.run_dir
    history = read_history(d)
    starts = {
        op["value"]["kind"]: op
        for op in history.ops
        if op["process"] == "nemesis" and op["f"] == "start-client"
    }
    assert set(starts) == {k.split(":")[1] for k in KINDS}, starts
    # Every kind applied (ok): the holds reached a slot's child, the cut its network.
    assert all(op["type"] == "ok" for op in starts.values()), starts
    cut = starts["isolate"]
    assert cut["value"]["effects"] == [
        {"effect": "cut", "nodes": [], "links": [], "by": cut["value"]["effects"][0]["by"]}
    ]
    assert starts["pause-commit"]["value"]["point"] == "commit"
    # The cut slot's client got no answer while its network dropped every packet: none of its
    # ops completed ok from the cut (its start's ok, plus a second for an answer already read)
    # to the stop, and one of them was waiting across it.
    slot = cut["value"]["slot"]
    began = cut["time"] + 1_000_000_000
    ended = next(
        op["time"]
        for op in history.ops
        if op["process"] == "nemesis"
        and op["f"] in ("stop-client", "heal")
        and op["time"] > cut["time"]
    )
    spans = _spans_by_invoke(history.ops, slot)
    answered = [d for _, d in spans if d["type"] == "ok" and began < d["time"] < ended]
    assert not answered, (slot, began, ended, answered[:3])
    assert any(inv < ended and began < d["time"] for inv, d in spans), (slot, began, ended)
    results = json.loads((d / "results.json").read_text())
    assert results["status"] == "valid", results
    assert done.result.exit_code == 0


def _slot_of(op: dict) -> int | None:
    return op["process"] % 4 if isinstance(op["process"], int) else None


def _spans_by_invoke(ops: list[dict], slot: int) -> list[tuple[int, dict]]:
    """(invoke time, completion) of each of the slot's ops: a process's ops do not overlap."""
    pending: dict[int, int] = {}
    out = []
    for op in ops:
        if _slot_of(op) != slot:
            continue
        if op["type"] == "invoke":
            pending[op["process"]] = op["time"]
        elif op["process"] in pending:
            out.append((pending.pop(op["process"]), op))
    return out
