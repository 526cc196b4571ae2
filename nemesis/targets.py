"""Who a fault hits: TARGETS selectors resolved against what the nodes report at fault time.

Counting selectors (one, minority, majority, all) draw from every node of the topology with the
step's seed. Role selectors ask the nodes themselves (JMX, ZooKeeper ``srvr``) at the moment of
the fault, because the active controller at plan time means nothing once faults begin. The
choice from those answers is a pure function, tested without Docker.
"""

from __future__ import annotations

import base64
import random
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol

from clusters.status import node_status, zk_mode
from clusters.topology import Topology
from nemesis.api import NAMED, NAMED_PARAM, TARGETS, FaultContext
from nemesis.errors import NemesisError
from nemesis.grudge import majority


@dataclass(frozen=True)
class Resolved:
    """The nodes a selector named, and how: recorded in the history beside the fault."""

    selector: str
    targets: list[str]
    evidence: dict[str, Any] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"target": self.selector, "targets": self.targets}
        if self.evidence:
            out["resolved_by"] = self.evidence
        return out


# The counting selectors and how many of n nodes each names: the one place that knows them.
_COUNTS: dict[str, Callable[[int], int]] = {
    "one": lambda n: 1,
    "minority": lambda n: (n - 1) // 2,
    "majority": majority,
    "all": lambda n: n,
}
COUNTING = tuple(_COUNTS)


def could_name(selector: str, topo: Topology) -> list[str]:
    """The nodes ``selector`` may name on ``topo``: those ``resolve`` chooses among (what a
    spec's ``--nemesis`` items are checked against, nemesis/items.py)."""
    if selector in (
        "partition-leader",
        "busiest-leader",
        "txn-coordinator",
        "share-leader",
        "share-coordinator",
    ):
        return [n.name for n in topo.brokers]
    if selector == "zk-leader" or (selector == "quorum-leader" and not topo.kraft):
        return [n.name for n in topo.zookeepers]
    if selector in ("active-controller", "quorum-leader") and topo.kraft:
        return [n.name for n in topo.controllers]
    if selector == "active-controller":
        return [n.name for n in topo.brokers]
    return topo.names()  # counting selectors


def pick_count(names: Collection[str], selector: str, rng: random.Random) -> list[str]:
    """one / minority / majority / all of ``names``, chosen with ``rng``; sorted."""
    pool = sorted(names)
    n = len(pool)
    if selector not in _COUNTS:
        raise NemesisError(f"'{selector}' is not a counting selector: {', '.join(COUNTING)}")
    k = _COUNTS[selector](n)
    if k < 1 or n < 1:
        raise NemesisError(f"{n} node(s) have no {selector}: it needs at least 3 nodes")
    return sorted(rng.sample(pool, k))


def named_nodes(topology: Topology, params: dict[str, Any] | None) -> Resolved:
    """The nodes a step's ``params["nodes"]`` names (target ``nodes``, which only a plan
    writes); NemesisError for a list that names no node of ``topology``."""
    names = (params or {}).get(NAMED_PARAM)
    if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
        raise NemesisError(
            f"target '{NAMED}' needs params {NAMED_PARAM}: a list of node names, not {names!r}"
        )
    unknown = sorted(set(names) - set(topology.names()))
    if unknown:
        raise NemesisError(
            f"target '{NAMED}' names {', '.join(unknown)}: this cluster's nodes are "
            f"{', '.join(topology.names())}"
        )
    return Resolved(NAMED, sorted(set(names)))


def active_controller(topology: Topology, statuses: list[dict[str, Any]]) -> Resolved:
    """The one KRaft node whose ActiveControllerCount is 1."""
    active = [s["name"] for s in statuses if (s.get("jmx") or {}).get("active_controller_count")]
    if len(active) != 1:
        raise NemesisError(
            f"cannot name the active controller: {len(active)} nodes report "
            f"ActiveControllerCount 1 ({', '.join(active) or 'none'})"
        )
    return Resolved("active-controller", active, {"ActiveControllerCount=1": active})


def quorum_leader(topology: Topology, statuses: list[dict[str, Any]]) -> Resolved:
    """The KRaft controller whose own raft state is leader (only its own word counts)."""
    leaders = [
        s["name"]
        for s in statuses
        if ((s.get("jmx") or {}).get("raft") or {}).get("state") == "leader"
    ]
    if len(leaders) != 1:
        views = {s["name"]: ((s.get("jmx") or {}).get("raft") or {}).get("state") for s in statuses}
        raise NemesisError(f"cannot name the quorum leader: controllers' raft states are {views}")
    return Resolved("quorum-leader", leaders, {"raft_state=leader": leaders})


def zk_leader(modes: dict[str, str | None]) -> Resolved:
    """The ZooKeeper whose ``srvr`` says leader (or standalone, for a single server)."""
    if not modes:
        raise NemesisError("target zk-leader needs a zk topology: this cluster has no ZooKeeper")
    leaders = [n for n, m in modes.items() if m in ("leader", "standalone")]
    if len(leaders) != 1:
        raise NemesisError(f"cannot name the ZooKeeper leader: srvr modes are {modes}")
    return Resolved("zk-leader", leaders, {"zk_modes": modes})


def partition_leader(
    topology: Topology, hints: dict[str, Any], params: dict[str, Any], rng: random.Random
) -> Resolved:
    """The broker leading a partition, from the harness's hints; a seeded broker if none.

    Hints: ``partition_leaders`` maps "topic-partition" to a node id or name (the step's
    ``params["partition"]`` chooses one, else the seed does), or ``partition_leader`` names one.
    """
    leaders = hints.get("partition_leaders") or {}
    wanted = params.get("partition")
    if wanted is not None and wanted not in leaders:
        raise NemesisError(f"no leader hint for partition {wanted}: hints know {sorted(leaders)}")
    if leaders:
        part = wanted if wanted is not None else rng.choice(sorted(leaders))
        return Resolved(
            "partition-leader", [_node_name(topology, leaders[part])], {"partition": part}
        )
    if "partition_leader" in hints:
        name = _node_name(topology, hints["partition_leader"])
        return Resolved("partition-leader", [name], {"hint": hints["partition_leader"]})
    brokers = sorted(n.name for n in topology.brokers)
    return Resolved(
        "partition-leader",
        [rng.choice(brokers)],
        {"fallback": "no partition leader hint from the harness: a seeded random broker"},
    )


# Hints the workload gives for the producer-state selectors (workloads/queue.py hints).
IN_FLIGHT_HINT = "in_flight"  # partition -> sends in flight now; absent: sync sends
TXN_IDS_HINT = "transactional_ids"  # the run's transactional ids; absent: no --txn
TXN_TOPIC = "__transaction_state"
# Worker slot -> its ClientProcess, given only by a run whose clients live in OS processes of
# their own (the client fault kinds need that: nemesis/client.py).
CLIENT_PROCS_HINT = "client_processes"
# Worker slot -> its clients' network (clusters/client_net.py ``ClientNet``), given by the harness
# only to a run whose generator says ``client_nets`` (nemesis/client.py ``isolate``).
CLIENT_NETS_HINT = "client_networks"
# The timeouts a client pause may outlast, by Kafka's config name -> ms, as the run sets them
# (transaction.timeout.ms, session.timeout.ms, the share lock, ...): the pause kinds draw their
# length past or short of them (nemesis/client.py).
CLIENT_TIMEOUTS_HINT = "client_timeouts"


class ClientProcess(Protocol):
    """One worker slot's client in an OS process of its own, as the client faults see it.

    A thread cannot be stopped alone, so a client that must be paused or killed by itself
    lives in a process; the workload replaces a killed one (a new Jepsen process id)."""

    slot: int
    role: str  # "producer", "consumer", "share-consumer", ...

    def pid(self) -> int | None:
        """The OS process hosting the slot's client now; None between a kill and its heir."""
        ...

    def hold(self, point: str) -> None:
        """Block the client just before its next `point` call ("send", "commit", "abort")
        until release(); a call already past that point is not held."""
        ...

    def release(self) -> None: ...


def busiest_leader(
    topology: Topology, hints: dict[str, Any], params: dict[str, Any], rng: random.Random
) -> Resolved:
    """The leader of the partition with the most sends in flight (ties: the step's seed).

    Without an in-flight hint (sync sends, one send per process) or with nothing in flight,
    the partition-leader rule, and the evidence says so."""
    counts = {p: n for p, n in (hints.get(IN_FLIGHT_HINT) or {}).items() if n > 0}
    leaders = hints.get("partition_leaders") or {}
    led = {p: n for p, n in counts.items() if leaders.get(p) is not None}
    if not led:
        found = partition_leader(topology, hints, params, rng)
        why = (
            "no in-flight hint (sync sends)"
            if IN_FLIGHT_HINT not in hints
            else "no send in flight on a partition with a known leader"
        )
        note = f"{why}: the partition-leader rule"
        return Resolved("busiest-leader", found.targets, {**found.evidence, "fallback": note})
    most = max(led.values())
    part = rng.choice(sorted(p for p, n in led.items() if n == most))
    name = _node_name(topology, leaders[part])
    return Resolved(
        "busiest-leader", [name], {"partition": part, "in_flight": most, "leader": name}
    )


def java_string_hash(s: str) -> int:
    """Java's String.hashCode: s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, as int32."""
    h = 0
    units = s.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i : i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def txn_partition(transactional_id: str, partitions: int) -> int:
    """Kafka's TransactionStateManager.partitionFor: Utils.abs(id.hashCode) % partitions, where
    Utils.abs maps Integer.MIN_VALUE to 0 (Math.abs would leave it negative)."""
    h = java_string_hash(transactional_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def txn_state_leaders(topology: Topology) -> dict[int, int]:
    """__transaction_state partition -> leader broker id, as the cluster metadata says now."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": topology.bootstrap_servers(), "log_level": 0})
    try:
        md = admin.list_topics(TXN_TOPIC, timeout=5)
    except KafkaException as exc:
        raise NemesisError(f"cannot read {TXN_TOPIC} metadata: {exc}") from None
    t = md.topics.get(TXN_TOPIC)
    if t is None or t.error is not None:
        raise NemesisError(f"cannot read {TXN_TOPIC} metadata: {t.error if t else 'no topic'}")
    return {p: pm.leader for p, pm in t.partitions.items()}


def txn_coordinator(
    topology: Topology,
    hints: dict[str, Any],
    rng: random.Random,
    metadata: Callable[[Topology], dict[int, int]] = txn_state_leaders,
) -> Resolved:
    """The transaction coordinator of one of the run's transactional ids (the step's seed
    picks which): the leader of its __transaction_state partition, from metadata read now."""
    ids = sorted(hints.get(TXN_IDS_HINT) or ())
    if not ids:
        raise NemesisError(
            "target txn-coordinator needs a run with transactions (--txn): this workload "
            "gives no transactional ids"
        )
    txn_id = rng.choice(ids)
    leaders = metadata(topology)
    if not leaders:
        raise NemesisError(f"{TXN_TOPIC} has no partitions in the cluster metadata")
    part = txn_partition(txn_id, len(leaders))
    leader = leaders.get(part)
    if leader is None or leader < 0:
        raise NemesisError(f"{TXN_TOPIC}-{part} (of {txn_id}) has no leader now")
    name = _node_name(topology, leader)
    return Resolved(
        "txn-coordinator",
        [name],
        {"transactional_id": txn_id, "partition": part, "partitions": len(leaders), "leader": name},
    )


# The share workload's hint (workloads/share.py hints): its group's id; absent: no share group.
SHARE_GROUP_HINT = "share_group"
SHARE_STATE_TOPIC = "__share_group_state"


def _share_group(hints: dict[str, Any], selector: str) -> tuple[str, str]:
    group, topic = hints.get(SHARE_GROUP_HINT), hints.get("topic")
    if not group or not topic:
        raise NemesisError(
            f"target {selector} needs a share group (--workload share): this workload gives none"
        )
    return str(group), str(topic)


def share_leader(
    topology: Topology, hints: dict[str, Any], params: dict[str, Any], rng: random.Random
) -> Resolved:
    """The leader of one partition of the share topic (the step's seed picks which, among the
    partitions whose leader the workload knows): the share-partition leader, which holds the
    acquisition locks of the group's records there."""
    group, topic = _share_group(hints, "share-leader")
    leaders = {p: n for p, n in (hints.get("partition_leaders") or {}).items() if n is not None}
    if not leaders:
        raise NemesisError(f"target share-leader: no partition of {topic} has a known leader now")
    part = rng.choice(sorted(leaders))
    name = _node_name(topology, leaders[part])
    return Resolved(
        "share-leader",
        [name],
        {"group": group, "share_partition": f"{topic}-{part}", "leader": name},
    )


def share_coordinator_key(group: str, topic_id: str, partition: int) -> str:
    """Kafka's SharePartitionKey.asCoordinatorKey: "%s:%s:%d" of the group, the topic's id
    (Uuid.toString, URL-safe base64 without padding) and the partition."""
    return f"{group}:{topic_id}:{partition}"


def share_state_partition(group: str, topic_id: str, partition: int, partitions: int) -> int:
    """Kafka's ShareCoordinatorService.partitionFor(SharePartitionKey): Utils.abs(key.
    asCoordinatorKey().hashCode()) % share.coordinator.state.topic.num.partitions (the same
    in 4.1 to 4.4's jars). Each share-partition has its own coordinator, not the group."""
    return txn_partition(share_coordinator_key(group, topic_id, partition), partitions)


def kafka_uuid(msb: int, lsb: int) -> str:
    """Kafka's Uuid.toString: the 16 bytes, URL-safe base64 without padding (confluent_kafka's
    Uuid prints the standard alphabet, '+' and '/', which would hash to another partition)."""
    raw = (msb & (2**64 - 1)).to_bytes(8, "big") + (lsb & (2**64 - 1)).to_bytes(8, "big")
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


@dataclass(frozen=True)
class ShareState:
    """What the share-coordinator target reads of the cluster's metadata at fault time."""

    topic_id: str  # the share topic's id, as Kafka's Uuid.toString writes it
    partitions: int  # the share topic's partition count
    leaders: dict[int, int]  # __share_group_state partition -> leader broker id


def share_state_metadata(topology: Topology, topic: str) -> ShareState:
    """The share topic's id and partition count, and __share_group_state's leaders, read now."""
    from confluent_kafka import KafkaException, TopicCollection
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": topology.bootstrap_servers(), "log_level": 0})
    try:
        described = admin.describe_topics(TopicCollection([topic]), request_timeout=5)[
            topic
        ].result()
        md = admin.list_topics(SHARE_STATE_TOPIC, timeout=5)
    except KafkaException as exc:
        raise NemesisError(f"cannot read {topic} and {SHARE_STATE_TOPIC} metadata: {exc}") from None
    state = md.topics.get(SHARE_STATE_TOPIC)
    if state is None or state.error is not None:
        why = state.error if state else "no topic"
        raise NemesisError(f"cannot read {SHARE_STATE_TOPIC} metadata: {why}")
    uuid = described.topic_id
    return ShareState(
        kafka_uuid(uuid.get_most_significant_bits(), uuid.get_least_significant_bits()),
        len(described.partitions),
        {p: pm.leader for p, pm in state.partitions.items()},
    )


def share_coordinator(
    topology: Topology,
    hints: dict[str, Any],
    rng: random.Random,
    metadata: Callable[[Topology, str], ShareState] = share_state_metadata,
) -> Resolved:
    """The share coordinator of one of the group's share-partitions (the step's seed picks
    which): the leader of the __share_group_state partition its key hashes to, from metadata
    read now."""
    group, topic = _share_group(hints, "share-coordinator")
    state = metadata(topology, topic)
    if not state.leaders:
        raise NemesisError(f"{SHARE_STATE_TOPIC} has no partitions in the cluster metadata")
    if state.partitions < 1:
        raise NemesisError(f"{topic} has no partitions in the cluster metadata")
    part = rng.randrange(state.partitions)
    key = share_coordinator_key(group, state.topic_id, part)
    state_part = share_state_partition(group, state.topic_id, part, len(state.leaders))
    leader = state.leaders.get(state_part)
    if leader is None or leader < 0:
        raise NemesisError(f"{SHARE_STATE_TOPIC}-{state_part} (of {key}) has no leader now")
    name = _node_name(topology, leader)
    return Resolved(
        "share-coordinator",
        [name],
        {
            "share_partition": f"{topic}-{part}",
            "key": key,
            "partition": state_part,
            "partitions": len(state.leaders),
            "leader": name,
        },
    )


def _node_name(topology: Topology, ref: int | str) -> str:
    for n in topology.nodes:
        if ref in (n.name, n.node_id, str(n.node_id)) and not n.is_zookeeper:
            return n.name
    raise NemesisError(f"partition leader hint {ref!r} names no broker of this cluster")


def kafka_statuses(ctx: FaultContext) -> list[dict[str, Any]]:
    """Each Kafka node's own status (JMX), asked in parallel; paused nodes simply do not answer."""
    nodes = [h for h in ctx.nodes.values() if not h.spec.is_zookeeper]
    with ThreadPoolExecutor(max_workers=max(1, len(nodes))) as pool:
        return list(pool.map(lambda h: node_status(h, check_paused=False), nodes))


def zk_modes(ctx: FaultContext) -> dict[str, str | None]:
    return {n.name: zk_mode(n.ip) for n in ctx.topology.zookeepers}


def zk_active_controller(ctx: FaultContext) -> Resolved:
    """ZooKeeper mode: the broker that /controller names."""
    from clusters.cluster import ClusterInfo
    from clusters.status import zookeeper_view

    seen = zookeeper_view(ClusterInfo(ctx.topology, "", "", ""))
    broker_id = (seen.get("controller") or {}).get("brokerid")
    if broker_id is None:
        raise NemesisError(f"cannot name the active controller: ZooKeeper says {seen}")
    name = _node_name(ctx.topology, broker_id)
    return Resolved("active-controller", [name], {"/controller": broker_id})


def resolve(
    ctx: FaultContext,
    selector: str | None,
    rng: random.Random,
    params: dict[str, Any] | None = None,
    statuses: Callable[[FaultContext], list[dict[str, Any]]] = kafka_statuses,
) -> Resolved:
    """Names the nodes ``selector`` means right now; raises NemesisError if it cannot."""
    if selector is None:
        raise NemesisError(f"this fault needs a target: one of {', '.join(TARGETS)}")
    if selector == NAMED:
        return named_nodes(ctx.topology, params)
    if selector not in TARGETS:
        raise NemesisError(f"unknown target '{selector}': choose one of {', '.join(TARGETS)}")
    topo = ctx.topology
    if selector in COUNTING:
        return Resolved(selector, pick_count(could_name(selector, topo), selector, rng))
    if selector == "partition-leader":
        return partition_leader(topo, ctx.hints, params or {}, rng)
    if selector == "busiest-leader":
        return busiest_leader(topo, ctx.hints, params or {}, rng)
    if selector == "txn-coordinator":
        return txn_coordinator(topo, ctx.hints, rng)
    if selector == "share-leader":
        return share_leader(topo, ctx.hints, params or {}, rng)
    if selector == "share-coordinator":
        return share_coordinator(topo, ctx.hints, rng)
    if selector == "zk-leader" or (selector == "quorum-leader" and not topo.kraft):
        # In ZooKeeper mode the quorum is the ensemble: its leader is the quorum leader.
        found = zk_leader(zk_modes(ctx))
        return Resolved(selector, found.targets, found.evidence)
    if not topo.kraft:
        return zk_active_controller(ctx)
    # Only KRaft controllers: in a migration a ZooKeeper-mode broker may still report
    # ActiveControllerCount 1 (it holds /controller until a KRaft controller takes it over).
    controllers = set(could_name(selector, topo))
    seen = [s for s in statuses(ctx) if s["name"] in controllers]
    return (
        active_controller(topo, seen)
        if selector == "active-controller"
        else quorum_leader(topo, seen)
    )
