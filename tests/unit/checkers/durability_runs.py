"""Hand-written run directories for the durability family: a queue history with power losses
(as nemesis/disk.py records them), the brokers' final data logs and high-watermark checkpoints,
the controllers' committed metadata log, cluster.json and plan.json."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tests.unit.checkers.datalogs import B, dump
from tests.unit.checkers.histories import SEC, H
from tests.unit.checkers.metalogs import BASE_MS, dump_batches, rec

TOPIC = "kchaos-queue"
TOPIC_ID = "cLeQx89bSOu6lgtiqv6AmA"
NODES = ("n1", "n2", "n3")
CLUSTER = {
    "topology": "kraft-combined",
    "nodes": [
        {"name": f"n{i}", "roles": ["broker", "controller"], "node_id": i} for i in (1, 2, 3)
    ],
}
# Op i of a history is at i/10 s; its wall clock is BASE_MS + that (the header's started_wall).
STARTED_WALL = BASE_MS / 1000


def history(**header: Any) -> H:
    return H(started_wall=STARTED_WALL, **header)


def ms_at(h: H) -> int:
    """The wall clock (ms) of the next op the builder writes."""
    return BASE_MS + (h.clock + SEC // 10) // 1_000_000


def power_loss(
    h: H,
    nodes: Iterable[str],
    target: str = "all",
    outcome: str = "ok",
    lost_offsets: dict[str, dict[str, list[int | None]]] | None = None,
    kind: str = "power-loss",
) -> H:
    """A disk fault's start as the disk package records it, and its stop."""
    nodes = list(nodes)
    planned = {"at_s": 8.0, "action": "start", "fault": "disk", "kind": kind, "target": target,
               "seed": 1, "params": {}}  # fmt: skip
    h.invoke("nemesis", "start-disk", planned)
    seg = f"data/{TOPIC}-0/00000000000000000000.log"
    dropped = {
        n: {"files": {seg: 120}, "written": {seg: 120}, "bytes": 120, "written_bytes": 120,
            "names": [], **({"lost_offsets": lost_offsets[n]} if lost_offsets and n in
                            lost_offsets else {})}
        for n in nodes
    }  # fmt: skip
    said: dict[str, Any] = {"kind": kind, "target": target, "targets": nodes}
    if kind == "power-loss":
        said |= {"dropped": dropped, "exited_after_s": {n: 0.01 for n in nodes}}
    # A power loss takes its nodes down; another disk fault has an effect no checker knows.
    effect = "down" if kind == "power-loss" else kind
    said["effects"] = [{"effect": effect, "nodes": nodes, "done": nodes}]
    h.complete("nemesis", "start-disk", outcome, said if outcome == "ok" else planned)
    if outcome != "open":
        restarted = {"kind": kind, "restarted": nodes,
                     "effects": [{"effect": "restarted", "nodes": nodes}]}  # fmt: skip
        h.nemesis("stop-disk", restarted)
    return h


def open_power_loss(h: H) -> H:
    """A power loss whose start never completed: its targets are not known."""
    planned = {"at_s": 8.0, "action": "start", "fault": "disk", "kind": "power-loss",
               "target": "one", "seed": 1, "params": {}}  # fmt: skip
    return h.invoke("nemesis", "start-disk", planned)


def heal(h: H) -> H:
    return h.nemesis("heal", {"by": "heal_cluster"})


def partition_log(
    isr_changes: Iterable[tuple[int, list[int]]] = (),
    elr: int | None = None,
    replicas: tuple[int, ...] = (1, 2, 3),
    unclean: bool = False,
) -> str:
    """A committed metadata log: the brokers, the topic's partition 0 on `replicas`, then each
    (wall ms, ISR) change; `elr`: an eligible.leader.replicas.version record first."""
    t0 = BASE_MS - 10_000
    batches: list[tuple[int, list[dict[str, Any] | str]]] = [(2, ["LEADER_CHANGE(2)"])]
    times = [t0]
    if elr is not None:
        batches.append((2, [rec("FEATURE_LEVEL_RECORD", name="eligible.leader.replicas.version",
                                featureLevel=elr)]))  # fmt: skip
        times.append(t0)
    for i in (1, 2, 3):
        registered = rec("REGISTER_BROKER_RECORD", brokerId=i, brokerEpoch=i, fenced=False)
        batches.append((2, [registered]))
        times.append(t0 + i)
    batches.append((2, [rec("TOPIC_RECORD", name=TOPIC, topicId=TOPIC_ID)]))
    times.append(t0 + 10)
    partition = rec(
        "PARTITION_RECORD", partitionId=0, topicId=TOPIC_ID, replicas=list(replicas),
        isr=list(replicas), leader=replicas[0], leaderEpoch=0, partitionEpoch=0,
    )  # fmt: skip
    batches.append((2, [partition]))
    times.append(t0 + 11)
    if unclean:
        batches.append((2, [rec("CONFIG_RECORD", resourceType=2, resourceName=TOPIC,
                               name="unclean.leader.election.enable", value="true")]))  # fmt: skip
        times.append(t0 + 12)
    for ms, isr in isr_changes:
        batches.append((2, [rec("PARTITION_CHANGE_RECORD", partitionId=0, topicId=TOPIC_ID,
                                isr=isr, leader=isr[0] if isr else -1)]))  # fmt: skip
        times.append(ms)
    batches.append((2, [rec("NO_OP_RECORD")]))
    times.append(max(times) + 1)
    return dump_batches(batches, times=times)


def write_run(
    directory: Path,
    h: H,
    logs: dict[str, list[B]] | None = None,
    checkpoints: dict[str, int] | None = None,
    metadata: str | None = None,
    plan: dict[str, Any] | None = None,
) -> Path:
    """`logs`: each broker's batches of partition 0 (None: no data/); `checkpoints`: each
    broker's high watermark of partition 0; `metadata`: every controller's log."""
    directory.mkdir(parents=True, exist_ok=True)
    h.write(directory)
    gen = {"workload": "queue", "topic": TOPIC, "keys": 1, "replication": 3,
           "min_insync_replicas": 2, **(plan or {})}  # fmt: skip
    (directory / "plan.json").write_text(json.dumps({"kchaos_plan": 1, "generator": gen}))
    (directory / "cluster.json").write_text(json.dumps(CLUSTER))
    if logs is not None:
        data = directory / "data"
        data.mkdir()
        for node, batches in logs.items():
            (data / f"{node}.txt").write_text(dump({0: batches}, topic=TOPIC))
        for node, hw in (checkpoints or {}).items():
            (data / f"{node}-raw").mkdir()
            text = f"0\n1\n{TOPIC} 0 {hw}\n"
            (data / f"{node}-raw" / "replication-offset-checkpoint").write_text(text)
    if metadata is not None:
        (directory / "metadata").mkdir()
        for node in NODES:
            (directory / "metadata" / f"{node}.txt").write_text(metadata)
    return directory


def data(*values: int, lepoch: int = 0) -> B:
    """A non-transactional batch of `values`."""
    return B(1000, 0, lepoch, values=tuple(values), txn=False)
