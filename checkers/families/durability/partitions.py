"""The queue topic's partitions as the committed metadata log says they were: each one's
replicas, its ISR over time (the controller's wall clock) and its final leader and ISR, the
brokers' names, and the ELR feature level over time. Read from the log the ELR family replays
(checkers/families/elr/replay.py), committed as the metadata-log checks bound it."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

from checkers.families.elr.replay import Replayed, replay, topic_config
from checkers.families.metadata_log.check import MetadataLogRead
from checkers.families.metadata_log.committed import committed_of_cluster

UNCLEAN = "unclean.leader.election.enable"


@dataclass(frozen=True)
class State:
    """A partition after one committed record."""

    ms: int  # the record's CreateTime: the controller's wall clock
    leader: str | None
    isr: frozenset[str]
    replicas: tuple[str, ...]
    record: str  # where it is: metadata/<node>.txt:line offset ...


@dataclass
class Partitions:
    """What the committed log says of the topic's partitions. Broker ids the cluster does not
    name are kept as `b<id>`."""

    topic: str
    states: dict[int, list[State]] = field(default_factory=dict)  # in log order
    elr_levels: list[tuple[int, int]] = field(default_factory=list)  # (ms, level)
    from_start: bool = False  # the log begins at offset 0: no record is missing before
    unclean: bool = False  # a committed ConfigRecord turned unclean elections on

    def replicas(self, partition: int) -> tuple[str, ...] | None:
        s = self.states.get(partition)
        return s[-1].replicas if s else None

    def final(self, partition: int) -> State | None:
        s = self.states.get(partition)
        return s[-1] if s else None

    def during(self, partition: int, start_ms: float, end_ms: float) -> list[State]:
        """The states in effect at some time in [start_ms, end_ms]: the last before it and
        every one committed within."""
        s = self.states.get(partition, [])
        times = [x.ms for x in s]
        lo = max(0, bisect.bisect_right(times, start_ms) - 1)
        hi = bisect.bisect_right(times, end_ms)
        return s[lo:hi] if s and s[lo].ms <= end_ms else []

    def elr_at(self, ms: float) -> bool | None:
        """Whether ELR was on (eligible.leader.replicas.version >= 1 committed) at `ms`; None
        when the log cannot say (it began after any such record could have been)."""
        levels = [lv for t, lv in self.elr_levels if t <= ms]
        if levels:
            return levels[-1] >= 1
        return False if self.from_start else None


def broker_names(cluster: dict[str, Any]) -> dict[int, str]:
    return {
        n["node_id"]: n["name"]
        for n in cluster.get("nodes") or []
        if isinstance(n, dict) and isinstance(n.get("node_id"), int) and "name" in n
    }


def brokers_of(cluster: dict[str, Any]) -> list[str]:
    """The cluster's broker nodes (cluster.json roles); [] when it does not say."""
    return [
        n["name"]
        for n in cluster.get("nodes") or []
        if isinstance(n, dict) and "broker" in (n.get("roles") or []) and "name" in n
    ]


def read_partitions(
    read: MetadataLogRead | None, cluster: dict[str, Any], topic: str
) -> Partitions | None:
    """None without a readable metadata log or anything proven committed."""
    if read is None or read.error is not None or not read.voters:
        return None
    committed = committed_of_cluster(read.voters, cluster)
    if not committed:
        return None
    return partitions_of(replay(committed), committed[0].offset == 0, cluster, topic, committed)


def partitions_of(
    replayed: Replayed, from_start: bool, cluster: dict[str, Any], topic: str, records: list[Any]
) -> Partitions:
    names = broker_names(cluster)

    def name(i: int) -> str:
        return names.get(i, f"b{i}")

    out = Partitions(topic, from_start=from_start)
    ms_of = {r.offset: r.create_ms for r in records}
    out.elr_levels = [(ms_of.get(o, 0), lv) for o, lv in replayed.elr_levels]
    out.unclean = (topic_config(replayed, topic, UNCLEAN) or "false").lower() == "true"
    for c in replayed.changes:
        a = c.after
        if replayed.topics.get(a.topic_id) != topic:
            continue
        out.states.setdefault(a.partition, []).append(
            State(
                c.record.create_ms,
                name(a.leader) if a.leader >= 0 else None,
                frozenset(map(name, a.isr)),
                tuple(map(name, a.replicas)),
                c.record.cite(),
            )
        )
    return out
