"""The committed metadata log replayed into partition and broker states, record by record.

What each record does, as the controller's replay does it (metadata PartitionRegistration.merge,
ClusterControlManager.replay; field names as DumpLogSegments' JSON prints them):

- PARTITION_RECORD sets a partition whole: replicas, isr, leader, leaderEpoch, partitionEpoch,
  leaderRecoveryState, and from version 2 eligibleLeaderReplicas and lastKnownElr (absent:
  empty, the field's null default);
- PARTITION_CHANGE_RECORD changes only what it names: isr, replicas, removingReplicas,
  addingReplicas, eligibleLeaderReplicas, lastKnownElr when present; leader unless it is -2
  ("the leader didn't change"), and any leader field, even the same leader, bumps the leader
  epoch; leaderRecoveryState unless it is -1;
- REMOVE_TOPIC_RECORD drops the topic's partitions;
- REGISTER_BROKER_RECORD registers a broker (fenced as it says: a new incarnation registers
  fenced); BROKER_REGISTRATION_CHANGE_RECORD's fenced is 1 (fence), -1 (unfence) or 0, its
  inControlledShutdown 1 or 0; FENCE_BROKER_RECORD and UNFENCE_BROKER_RECORD (older
  metadata.versions) fence and unfence; UNREGISTER_BROKER_RECORD unregisters.

A partition is known from its PARTITION_RECORD on, a broker from its first registration record:
a log that begins after either (a snapshot took the start) says nothing about them, and nothing
is concluded from them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from checkers.families.metadata_log.parse import Record

PARTITION_RECORD, PARTITION_CHANGE = "PARTITION_RECORD", "PARTITION_CHANGE_RECORD"
NO_LEADER_CHANGE, NO_LEADER = -2, -1
ELR_FEATURE = "eligible.leader.replicas.version"
BROKER_TYPES = (
    "REGISTER_BROKER_RECORD",
    "BROKER_REGISTRATION_CHANGE_RECORD",
    "FENCE_BROKER_RECORD",
    "UNFENCE_BROKER_RECORD",
    "UNREGISTER_BROKER_RECORD",
)


def _ints(x: Any) -> tuple[int, ...] | None:
    if not isinstance(x, list) or not all(isinstance(i, int) for i in x):
        return None
    return tuple(x)


@dataclass(frozen=True)
class PartitionState:
    topic_id: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    elr: tuple[int, ...]
    last_known_elr: tuple[int, ...]
    leader: int
    leader_epoch: int
    leader_recovery: int = 0  # 1: recovering from an unclean election
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    def describe(self) -> str:
        return (
            f"leader {self.leader} (epoch {self.leader_epoch}), ISR {list(self.isr)}, ELR "
            f"{list(self.elr)}, last known ELR {list(self.last_known_elr)}"
        )


@dataclass
class BrokerState:
    registered: bool
    fenced: bool
    shutting_down: bool = False
    epoch: int | None = None


@dataclass(frozen=True)
class Change:
    """One committed partition record and the partition before and after it."""

    record: Record
    before: PartitionState | None  # None: a PARTITION_RECORD (or a partition not known before)
    after: PartitionState
    brokers: dict[int, BrokerState]  # every known broker as of just before the record

    @property
    def elected(self) -> int | None:
        """The leader this record elected, or None when it elected nobody new: no leader field,
        the same leader again (an epoch bump), or no leader at all."""
        if self.before is None:
            return None
        new = self.after.leader
        return new if new >= 0 and new != self.before.leader else None

    @property
    def reassigning(self) -> bool:
        """A replica set change, or a partition mid-reassignment: not an election's shape."""
        d = self.record.data
        busy = self.before is not None and bool(self.before.adding or self.before.removing)
        return busy or any(
            d.get(k) is not None for k in ("replicas", "addingReplicas", "removingReplicas")
        )


@dataclass
class Replayed:
    changes: list[Change] = field(default_factory=list)
    topics: dict[str, str] = field(default_factory=dict)  # topic id -> name
    # (topic id, config name) -> value; the topic "" holds the cluster-wide defaults.
    configs: dict[tuple[str, str], str | None] = field(default_factory=dict)
    # Records of changes to partitions never seen created (the log began after them).
    unknown_partitions: int = 0
    batches: dict[int, list[Record]] = field(default_factory=dict)
    # eligible.leader.replicas.version as the committed FEATURE_LEVEL_RECORDs set it, in order:
    # (offset, level).
    elr_levels: list[tuple[int, int]] = field(default_factory=list)


def _apply_change(s: PartitionState, d: dict[str, Any]) -> PartitionState:
    out = s
    for key, attr in (
        ("isr", "isr"),
        ("replicas", "replicas"),
        ("addingReplicas", "adding"),
        ("removingReplicas", "removing"),
        ("eligibleLeaderReplicas", "elr"),
        ("lastKnownElr", "last_known_elr"),
    ):
        if (value := _ints(d.get(key))) is not None:
            out = replace(out, **{attr: value})
    leader = d.get("leader", NO_LEADER_CHANGE)
    if isinstance(leader, int) and leader != NO_LEADER_CHANGE:
        out = replace(out, leader=leader, leader_epoch=s.leader_epoch + 1)
    recovery = d.get("leaderRecoveryState", -1)
    if isinstance(recovery, int) and recovery >= 0:
        out = replace(out, leader_recovery=recovery)
    return out


def _created(d: dict[str, Any]) -> PartitionState | None:
    topic, partition = d.get("topicId"), d.get("partitionId")
    replicas, isr = _ints(d.get("replicas")), _ints(d.get("isr"))
    leader, epoch = d.get("leader"), d.get("leaderEpoch")
    if not isinstance(topic, str) or not isinstance(partition, int) or replicas is None:
        return None
    if isr is None or not isinstance(leader, int) or not isinstance(epoch, int):
        return None
    recovery = d.get("leaderRecoveryState", 0)
    return PartitionState(
        topic,
        partition,
        replicas,
        isr,
        _ints(d.get("eligibleLeaderReplicas")) or (),
        _ints(d.get("lastKnownElr")) or (),
        leader,
        epoch,
        recovery if isinstance(recovery, int) else 0,
        _ints(d.get("addingReplicas")) or (),
        _ints(d.get("removingReplicas")) or (),
    )


def _broker(brokers: dict[int, BrokerState], r: Record) -> None:
    d = r.data
    if r.type == "REGISTER_BROKER_RECORD" and isinstance(d.get("brokerId"), int):
        brokers[d["brokerId"]] = BrokerState(
            True,
            d.get("fenced") is not False,
            d.get("inControlledShutdown") is True,
            d.get("brokerEpoch") if isinstance(d.get("brokerEpoch"), int) else None,
        )
    elif r.type == "UNREGISTER_BROKER_RECORD" and isinstance(d.get("brokerId"), int):
        brokers[d["brokerId"]] = BrokerState(False, True)
    elif r.type in ("FENCE_BROKER_RECORD", "UNFENCE_BROKER_RECORD") and isinstance(
        d.get("id"), int
    ):
        known = brokers.get(d["id"])
        if known is not None:
            known.fenced = r.type == "FENCE_BROKER_RECORD"
    elif r.type == "BROKER_REGISTRATION_CHANGE_RECORD" and isinstance(d.get("brokerId"), int):
        known = brokers.get(d["brokerId"])
        if known is None:
            return
        if d.get("fenced") in (1, -1):
            known.fenced = d["fenced"] == 1
        if d.get("inControlledShutdown") in (0, 1):
            known.shutting_down = d["inControlledShutdown"] == 1


def replay(committed: list[Record]) -> Replayed:
    """Every committed partition record as a Change, in log order, with what else the rules
    need: topic names, topic and cluster configs, the records of each batch."""
    out = Replayed()
    partitions: dict[tuple[str, int], PartitionState] = {}
    brokers: dict[int, BrokerState] = {}
    for r in committed:
        if r.control:
            continue
        if r.batch >= 0:
            out.batches.setdefault(r.batch, []).append(r)
        d, kind = r.data, r.type
        if kind in BROKER_TYPES:
            _broker(brokers, r)
        elif kind == "TOPIC_RECORD" and isinstance(d.get("topicId"), str):
            out.topics[d["topicId"]] = str(d.get("name"))
        elif kind == "REMOVE_TOPIC_RECORD":
            gone = d.get("topicId")
            partitions = {k: v for k, v in partitions.items() if k[0] != gone}
        elif kind == "CONFIG_RECORD":
            _config(out, d)
        elif kind == "FEATURE_LEVEL_RECORD" and d.get("name") == ELR_FEATURE:
            level = d.get("featureLevel")
            if isinstance(level, int):
                out.elr_levels.append((r.offset, level))
        elif kind == PARTITION_RECORD:
            state = _created(d)
            if state is not None:
                key = (state.topic_id, state.partition)
                snapshot = {b: replace(s) for b, s in brokers.items()}
                out.changes.append(Change(r, None, state, snapshot))
                partitions[key] = state
        elif kind == PARTITION_CHANGE:
            key = (d.get("topicId"), d.get("partitionId"))
            before = partitions.get(key)  # type: ignore[arg-type]
            if before is None:
                out.unknown_partitions += 1
                continue
            after = _apply_change(before, d)
            snapshot = {b: replace(s) for b, s in brokers.items()}
            out.changes.append(Change(r, before, after, snapshot))
            partitions[key] = after  # type: ignore[index]
    return out


# ConfigResource types in ConfigRecord (clients ConfigResource.Type): 2 a topic, 4 a broker
# ("" for the cluster-wide default).
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4


def _config(out: Replayed, d: dict[str, Any]) -> None:
    kind, name, key = d.get("resourceType"), d.get("resourceName"), d.get("name")
    if not isinstance(key, str) or not isinstance(name, str):
        return
    value = d.get("value")
    if kind == TOPIC_RESOURCE:
        out.configs[(name, key)] = value if isinstance(value, str) else None
    elif kind == BROKER_RESOURCE and name == "":
        out.configs[("", key)] = value if isinstance(value, str) else None


def topic_config(replayed: Replayed, topic: str, key: str) -> str | None:
    """A topic's dynamic config as the committed log last set it, else the cluster default's."""
    if (topic, key) in replayed.configs and replayed.configs[(topic, key)] is not None:
        return replayed.configs[(topic, key)]
    return replayed.configs.get(("", key))


def batch_brokers(replayed: Replayed, r: Record) -> dict[int, str]:
    """The brokers another record of `r`'s batch fences, unregisters, registers anew or sends
    into controlled shutdown, each with what it does: decided in the same controller
    operation, they were already no leader candidates when `r` was made."""
    out: dict[int, str] = {}
    for other in replayed.batches.get(r.batch, []):
        d = other.data
        if other.type == "REGISTER_BROKER_RECORD" and isinstance(d.get("brokerId"), int):
            out[d["brokerId"]] = "registers anew (a new incarnation: an unclean shutdown)"
        elif other.type == "UNREGISTER_BROKER_RECORD" and isinstance(d.get("brokerId"), int):
            out[d["brokerId"]] = "unregisters"
        elif other.type == "FENCE_BROKER_RECORD" and isinstance(d.get("id"), int):
            out[d["id"]] = "is fenced"
        elif other.type == "BROKER_REGISTRATION_CHANGE_RECORD" and isinstance(
            d.get("brokerId"), int
        ):
            if d.get("fenced") == 1:
                out[d["brokerId"]] = "is fenced"
            elif d.get("inControlledShutdown") == 1:
                out[d["brokerId"]] = "enters controlled shutdown"
    return out
