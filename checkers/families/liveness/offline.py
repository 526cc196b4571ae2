"""`partition-offline-live-isr`: a partition without a leader while a live member of its ISR
exists, from the committed metadata log replayed (elr/replay.py for the partitions,
metadata_log/liveness.py BrokerStates for the brokers), in the controllers' wall clock.

The controller elects a leader among the ISR's unfenced members whenever a leader is lost
(ReplicationControlManager handleBrokerFenced, and on a broker's unfence,
handleBrokerUnfenced: "partitions with no leader ... where this broker is in the ISR"), in the
same operation that records the fence or the unfence. So a committed state in which a
partition has leader -1 and some member of its ISR is registered, unfenced and not shutting
down is a moment, not a state: one that lasts longer than `Bounds.offline_s` (to the end of the
committed records the history covers) is a finding. The evidence is all in the committed log;
the observer's DescribeTopicPartitions answers (3.8+) are a broker's cache and are not used.
Under KIP-966 (ELR) the ISR of a leaderless partition may hold only its last member; the rule
reads the ISR as committed, whatever ELR holds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from checkers.core.findings import Finding
from checkers.families.elr.replay import NO_LEADER, PartitionState, replay
from checkers.families.metadata_log.liveness import UNFENCED, BrokerStates, transition
from checkers.families.metadata_log.parse import Record
from checkers.scan.fault_windows import utc

OFFLINE_RULE = (
    "Kafka's design (Replication): a partition stays available while one replica of its ISR is "
    "alive, the controller electing its new leader from the ISR; KIP-631: a broker is alive to "
    "the controller while it is registered and unfenced"
)


@dataclass
class _Open:
    since: float
    record: Record
    state: PartitionState
    live: tuple[int, ...]


def offline_partitions(
    committed: list[Record], history_end: float, bound: float, topics: dict[str, str] | None = None
) -> tuple[list[Finding], int]:
    """Findings, and how many leaderless moments were seen (judged)."""
    records = [r for r in committed if r.create_ms / 1000 <= history_end]
    if not records:
        return [], 0
    replayed = replay(records)
    names = topics if topics is not None else replayed.topics
    brokers = BrokerStates.of(records)
    changes = {c.record.offset: c for c in replayed.changes}
    current: dict[tuple[str, int], PartitionState] = {}
    opened: dict[tuple[str, int], _Open] = {}
    found: list[Finding] = []
    seen = 0
    end = max(r.create_ms for r in records) / 1000

    def live(isr: tuple[int, ...], at: float) -> tuple[int, ...]:
        return tuple(b for b in isr if brokers.at(b, at)[0] == UNFENCED)

    def close(key: tuple[str, int], until: float, by: Record | None) -> None:
        o = opened.pop(key)
        if until - o.since > bound:
            found.append(_finding(o, until, by, bound, names.get(key[0], key[0])))

    for r in records:
        t = r.create_ms / 1000
        touched: list[tuple[str, int]] = []
        c = changes.get(r.offset)
        if c is not None and c.record is r:
            key = (c.after.topic_id, c.after.partition)
            current[key] = c.after
            touched.append(key)
        elif transition(r) is not None:
            touched = list(current)
        for key in touched:
            state = current[key]
            alive = live(state.isr, t) if state.leader == NO_LEADER else ()
            if alive and key not in opened:
                seen += 1
                opened[key] = _Open(t, r, state, alive)
            elif not alive and key in opened:
                close(key, t, r)
    for key in list(opened):
        close(key, end, None)
    return found, seen


def _finding(o: _Open, until: float, by: Record | None, bound: float, topic: str) -> Finding:
    ended = f"until {by.cite()}" if by is not None else "to the end of the committed records"
    return Finding(
        "partition-offline-live-isr",
        None,
        (),
        f"partition {topic}-{o.state.partition} had no leader from {utc(o.since)} "
        f"({o.record.cite()}) {ended} at {utc(until)}, {until - o.since:.1f} s, longer than the "
        f"{bound:g} s bound, while broker(s) {list(o.live)} of its ISR {list(o.state.isr)} were "
        f"registered and unfenced in the committed log ({o.state.describe()}). "
        f"Rule: {OFFLINE_RULE}",
        {
            "rule": OFFLINE_RULE,
            "topic": topic,
            "partition": o.state.partition,
            "live_isr": list(o.live),
            "seconds": round(until - o.since, 3) if math.isfinite(until) else None,
        },
    )
