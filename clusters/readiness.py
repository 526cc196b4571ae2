"""When is a cluster ready? One leader agreed by every controller, every broker registered and
unfenced (or, in ZooKeeper mode, a live controller broker and every broker registered).

Readiness is observed, never assumed after a sleep: ``wait_ready`` polls until ``problems`` is
empty, and a node that dies or never becomes ready is reported with its last log lines. A caller
may excuse nodes that are allowed to stay down (``may_stay_down``: a lasting fault, such as a
corrupted file Kafka refuses to start on, keeps them down): once such a node has exited, the rest
of the cluster is judged without it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from typing import Any

from clusters.capabilities import Logs, Process
from clusters.cluster import Cluster, ClusterInfo
from clusters.errors import ClusterError
from clusters.status import cluster_status, quorum_view

DEAD = ("exited", "missing")
# Where the status wait_ready returns names the excused nodes that stayed down.
KEPT_DOWN = "kept_down"

POLL_INTERVAL_S = 0.25
LOG_LINES_ON_FAILURE = 15


def problems(status: dict[str, Any], down: Collection[str] = ()) -> list[str]:
    """Why a cluster status is not ready yet; empty when it is. ``down``: nodes excused from
    it (kept down by a lasting fault): the quorum is judged on the other controllers' views and
    ZooKeeper's registrations on the other brokers."""
    found = []
    nodes = [n for n in status["nodes"] if n["name"] not in down]
    for n in nodes:
        if n["process"] != "running":
            found.append(f"{n['name']}: process {n['process']}")
    brokers = [n for n in nodes if "broker" in n["roles"]]
    for b in brokers:
        state = (b.get("jmx") or {}).get("broker_state")
        if state != "RUNNING":
            found.append(f"{b['name']}: broker state {state or 'unknown'}")
    if "quorum" in status:
        q = quorum_view(nodes) if down else status["quorum"]
        if not q["agreed"]:
            views = ", ".join(
                f"{name}: " + (f"leader {v['leader']} epoch {v['epoch']}" if v else "no answer")
                for name, v in q["views"].items()
            )
            found.append(f"controllers do not agree on a leader ({views})")
        elif len(q["active_controllers"]) != 1:
            found.append(f"active controllers: {q['active_controllers'] or 'none'}")
    if "zookeeper" in status:
        zk = status["zookeeper"]
        ids = {b["node_id"] for b in brokers}
        controller = (zk.get("controller") or {}).get("brokerid")
        if zk.get("error"):
            found.append(zk["error"])
        elif controller not in ids:
            found.append(f"/controller names {controller}, not a broker of this cluster")
        elif set(zk.get("broker_ids") or []) != ids:
            found.append(f"registered brokers {zk.get('broker_ids')} != {sorted(ids)}")
    return found


def wait_ready(
    cluster: Cluster[Process],
    info: ClusterInfo,
    timeout: float,
    on_poll=None,
    may_stay_down: Callable[[str], bool] | None = None,
) -> dict[str, Any]:
    """Polls the cluster until it is ready; returns that ready status. Needs ``Process`` of
    every node (refused at the first poll otherwise); the failure shows each named node's last
    log lines where it has ``Logs``, and says it has none where it has not.

    A dead node ``may_stay_down`` excuses is not the end of the wait: it is left out of what
    the cluster must show from then on, and the status returned lists it under ``kept_down``
    (sorted). Any other dead node ends the wait as before."""
    deadline = time.monotonic() + timeout
    last: list[str] = []
    down: set[str] = set()
    while True:
        status = cluster_status(cluster, info, check_paused=False)
        if may_stay_down is not None:
            down |= {
                n["name"]
                for n in status["nodes"]
                if n["process"] in DEAD and may_stay_down(n["name"])
            }
        last = problems(status, down)
        if on_poll:
            on_poll(status, last)
        if not last:
            return {**status, KEPT_DOWN: sorted(down)} if down else status
        dead = [n for n in status["nodes"] if n["process"] in DEAD and n["name"] not in down]
        if dead or time.monotonic() > deadline:
            names = [n["name"] for n in dead] or _unready_nodes(status, last)
            if dead:
                # The other nodes' complaints are consequences; the dead node is the story.
                why = f"lost {', '.join(names)}: the process {dead[0]['process']} during start"
            else:
                why = f"was not ready after {timeout:.0f} s: " + "; ".join(last)
            raise ClusterError(
                f"cluster {info.topology.cluster} {why}" + log_tails(cluster, info, names)
            )
        time.sleep(POLL_INTERVAL_S)


def _unready_nodes(status: dict[str, Any], issues: list[str]) -> list[str]:
    named = [
        n["name"] for n in status["nodes"] if any(i.startswith(n["name"] + ":") for i in issues)
    ]
    return named or [n["name"] for n in status["nodes"]][:1]


def log_tails(cluster: Cluster[Process], info: ClusterInfo, names: list[str]) -> str:
    """Each named node's last log lines, for an error that ends a bring-up."""
    handles = cluster.nodes(info)
    parts = []
    for name in names:
        node = handles[name]
        if not isinstance(node, Logs):
            tail = f"(no logs: a {type(node).__name__} node has no Logs capability)"
        else:
            try:
                tail = node.logs(tail=LOG_LINES_ON_FAILURE).rstrip()
            except ClusterError:
                tail = "(no logs: the node is gone)"
        parts.append(f"\n--- last log lines of {name} ---\n{tail}")
    return "".join(parts)
