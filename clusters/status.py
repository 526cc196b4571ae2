"""What a cluster says about itself, each node asked on its own.

Controllers are asked one by one over JMX (raft-metrics), because DescribeQuorum is answered only
by the leader and a broker names whichever controller it last heard of: the point is to see
disagreement, so nobody's answer may stand in for another's.
"""

from __future__ import annotations

import json
import logging
import socket
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from clusters.capabilities import Frozen, Pause, Process, require
from clusters.cluster import Cluster, ClusterInfo
from clusters.errors import ClusterError
from clusters.jmx import JmxUnavailable, sample_kafka
from clusters.topology import ZK_CLIENT_PORT, NodeSpec

logging.getLogger("kazoo").setLevel(logging.CRITICAL)


def process_state(node: Process, check_paused: bool) -> str:
    """missing, exited, frozen, paused or running. Only a node with ``Pause`` can say it is
    paused, and only one with ``Frozen`` that it is frozen: any other reports running then."""
    try:
        if not node.is_running():
            return "exited"
        if isinstance(node, Frozen) and node.is_frozen():
            return "frozen"
    except ClusterError:
        return "missing"
    if check_paused and isinstance(node, Pause) and node.is_paused_by_signal():
        return "paused"
    return "running"


def four_letter(ip: str, word: str, timeout: float = 2.0) -> str | None:
    """A ZooKeeper four-letter command (ruok, srvr); None when the server does not answer."""
    try:
        with socket.create_connection((ip, ZK_CLIENT_PORT), timeout=timeout) as s:
            s.sendall(word.encode())
            chunks = []
            while chunk := s.recv(4096):
                chunks.append(chunk)
        return b"".join(chunks).decode(errors="replace")
    except OSError:
        return None


def zk_mode(ip: str) -> str | None:
    answer = four_letter(ip, "srvr")
    if not answer:
        return None
    for line in answer.splitlines():
        if line.startswith("Mode:"):
            return line.split(":", 1)[1].strip()
    return None


def node_status(node: Process, check_paused: bool = True) -> dict[str, Any]:
    """What one node says of itself; refuses (MissingCapability) a node without ``Process``."""
    require([node], (Process,), "a node's status")
    spec: NodeSpec = node.spec
    entry: dict[str, Any] = {
        "name": spec.name,
        "roles": sorted(spec.roles),
        "node_id": spec.node_id,
        "ip": spec.ip,
        "process": process_state(node, check_paused),
        "jmx": None,
        "zk_mode": None,
    }
    if entry["process"] != "running":
        return entry
    if spec.is_zookeeper:
        entry["zk_mode"] = zk_mode(spec.ip)
        return entry
    try:
        entry["jmx"] = sample_kafka(spec.ip, spec.roles)
    except JmxUnavailable as exc:
        entry["error"] = str(exc)
    return entry


def zookeeper_view(info: ClusterInfo, timeout: float = 5.0) -> dict[str, Any]:
    """/controller, /controller_epoch and registered broker ids, read from the ensemble."""
    from kazoo.exceptions import NoNodeError

    from clusters.zk_client import zk_client

    view: dict[str, Any] = {"controller": None, "controller_epoch": None, "broker_ids": None}
    zk = zk_client(info.topology.zookeeper_connect(), timeout, read_only=True)
    try:
        zk.start(timeout=timeout)
    except Exception as exc:  # kazoo raises its own timeout type; any failure means "no answer"
        view["error"] = f"ZooKeeper did not answer: {type(exc).__name__}"
        return view
    try:
        try:
            data, stat = zk.get("/controller")
            view["controller"] = json.loads(data.decode())
            view["controller_zxid"] = stat.czxid
        except NoNodeError:
            pass
        try:
            data, _ = zk.get("/controller_epoch")
            view["controller_epoch"] = int(data.decode())
        except NoNodeError:
            pass
        try:
            view["broker_ids"] = sorted(int(b) for b in zk.get_children("/brokers/ids"))
        except NoNodeError:
            view["broker_ids"] = []
        try:
            data, _ = zk.get("/migration")
            view["migration"] = json.loads(data.decode())
        except NoNodeError:
            pass
    finally:
        zk.stop()
        zk.close()
    return view


def quorum_view(nodes: list[dict[str, Any]]) -> dict[str, Any]:
    """Summarises controllers' own views: do they agree on one leader in one epoch?"""
    views = {}
    for n in nodes:
        if "controller" not in n["roles"]:
            continue
        raft = (n.get("jmx") or {}).get("raft")
        views[n["name"]] = (
            {
                "leader": raft["leader"],
                "epoch": raft["epoch"],
                "state": raft["state"],
                "high_watermark": raft["high_watermark"],
            }
            if raft
            else None
        )
    answered = [v for v in views.values() if v is not None]
    pairs = {(v["leader"], v["epoch"]) for v in answered}
    agreed = len(answered) == len(views) and len(pairs) == 1
    leader, epoch = next(iter(pairs)) if len(pairs) == 1 else (None, None)
    if leader is not None and leader < 0:
        agreed, leader = False, None
    # Only KRaft controllers count: during a migration the ZooKeeper-mode controller broker
    # reports ActiveControllerCount 1 too, until a KRaft controller takes /controller over.
    active = [
        n["name"]
        for n in nodes
        if "controller" in n["roles"] and (n.get("jmx") or {}).get("active_controller_count") == 1
    ]
    return {
        "views": views,
        "agreed": agreed,
        "leader": leader,
        "epoch": epoch,
        "active_controllers": active,
    }


def cluster_status(
    cluster: Cluster[Process], info: ClusterInfo | None = None, check_paused: bool = True
) -> dict[str, Any]:
    """Every node's own status and the cluster's view; refuses, before asking any node, a
    cluster with a node that cannot say whether its process runs (no ``Process``)."""
    info = info or cluster.info()
    handles = cluster.nodes(info)
    require(handles.values(), (Process,), "cluster status")
    with ThreadPoolExecutor(max_workers=max(1, len(handles))) as pool:
        nodes = list(pool.map(lambda h: node_status(h, check_paused), handles.values()))
    for n in nodes:
        if "broker" in n["roles"]:
            state = (n.get("jmx") or {}).get("broker_state")
            # KRaft broker lifecycle (KIP-631): STARTING until registered, RECOVERY while fenced.
            n["registered"] = state in ("RECOVERY", "RUNNING", "PENDING_CONTROLLED_SHUTDOWN")
            n["fenced"] = None if state is None else state != "RUNNING"
    status: dict[str, Any] = {
        "cluster": info.topology.cluster,
        "topology": info.topology.kind,
        "version": info.version,
        "timing": info.timing,
        "cluster_id": info.cluster_id,
        "nodes": nodes,
    }
    if info.topology.kraft:
        status["quorum"] = quorum_view(nodes)
    else:
        status["zookeeper"] = zookeeper_view(info)
    return status
