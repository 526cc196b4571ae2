"""Every interesting state a run can reach (issue 33, coverage), in kinds.py's spirit: one table
of names, what each means and where it is counted from. A VALID verdict says little about a run
that never reached the states its faults were meant to cause; results.json's `coverage` block
counts each state the run reached (checkers/families/coverage/), and a state the run's evidence
cannot show is listed as not measured, never as 0.
"""

from __future__ import annotations

from dataclasses import dataclass

HISTORY, METADATA = "history", "committed metadata log"


@dataclass(frozen=True)
class State:
    name: str
    meaning: str
    evidence: str  # HISTORY or METADATA


STATES: tuple[State, ...] = (
    State("node-killed", "a fault's start took a JVM down (effect down, done)", HISTORY),
    State("node-paused", "a fault's start stopped a JVM (effect stopped, done)", HISTORY),
    State("links-cut", "a fault's start cut links between nodes (effect cut)", HISTORY),
    State("traffic-degraded", "a fault's start degraded nodes' traffic (effect degraded)", HISTORY),
    State("clock-skewed", "a fault's start skewed nodes' clocks (effect skewed)", HISTORY),
    State("jvm-stalled", "a fault's start stalled code paths in a JVM (effect stalled)", HISTORY),
    State(
        "client-stopped",
        "a client fault stopped or killed one client's process (effect stopped or down, no node)",
        HISTORY,
    ),
    State(
        "client-held",
        "a client fault held one client before a send, commit or abort (effect stalled, no node)",
        HISTORY,
    ),
    State("client-cut", "a client fault cut one client's network (effect cut, no node)", HISTORY),
    State(
        "client-fenced",
        "a client fault took a transactional id over (effect fenced: a hijack)",
        HISTORY,
    ),
    State("op-indeterminate", "a client op completed info: its outcome unknown", HISTORY),
    State("txn-aborted", "a transaction op completed fail: aborted", HISTORY),
    State(
        "producer-fenced",
        "a client op failed with a fencing error (ProducerFenced, InvalidProducerEpoch, fenced)",
        HISTORY,
    ),
    State("partitions-revoked", "a subscriber's rebalance listener revoked partitions", HISTORY),
    State("partitions-lost", "a subscriber's rebalance listener lost partitions", HISTORY),
    State(
        "redelivery",
        "a record (key, offset) polled by two different subscribers of the run's group",
        HISTORY,
    ),
    State("leader-elected", "a committed partition record elected a new leader", METADATA),
    State(
        "leader-change-with-sends-in-flight",
        "a committed leader election while some send or transaction was in flight",
        METADATA,
    ),
    State("broker-fenced", "a committed record fenced a broker", METADATA),
    State("controller-failover", "a new Raft epoch in the committed log: an election", METADATA),
    State(
        "controller-failover-during-step",
        "a new Raft epoch while an upgrade, feature, membership or migration step ran",
        METADATA,
    ),
)

BY_NAME = {s.name: s for s in STATES}
