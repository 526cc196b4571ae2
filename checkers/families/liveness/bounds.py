"""Every bound the liveness rules use, derived from the run's timing profile and stated in each
finding. Kafka promises no time (docs/checkers.md, "Liveness"): each bound is a multiple of the
timeouts the run configured, wide enough that a healthy cluster on a busy two-core box meets it
many times over, because a false alarm is the worst finding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# broker.session.timeout.ms per timing profile (clusters/config.py FAST_KRAFT; Kafka's default),
# as metadata_log/lease.py states them; ZooKeeper mode's zookeeper.session.timeout.ms (FAST_ZK;
# Kafka's 18 s default) bounds the same thing there: how long a dead broker keeps its place.
SESSION_TIMEOUT_S = {"fast": 3.0, "default": 9.0}
ZK_SESSION_TIMEOUT_S = {"fast": 4.0, "default": 18.0}
# The subscribers' group session (workloads/queue.py asks 6 s of the classic protocol;
# clusters/config.py CONSUMER_GROUP gives KIP-848's coordinator the same), in both timings.
GROUP_SESSION_S = 6.0
# The longest a client op of kchaos's workloads can take before it completes info: the
# transactional producer's transaction.timeout.ms (workloads/queue.py and java_client.py
# TXN_TIMEOUT_S); sends time out after 10 s, admin requests after 10 s. A copy: checkers/ cannot
# import workloads/ (tests/unit/checkers/test_liveness.py holds them equal).
CLIENT_OP_TIMEOUT_S = 15.0
# After a fault that disrupted nodes ends, they are given this long to come back before the
# cluster counts as healthy again: a killed JVM restarts, replays its log and registers (6-12 s
# seen on 3.9 and 4.x under load), and the controller then unfences it and moves leaders; plus
# one session timeout for a fence the fault left owed.
RESTART_S = 20.0
# How many session timeouts of a healthy majority the no-progress bound allows on top of the
# client's own op timeout: one to fence a dead leader, one to elect, one for the clients'
# metadata refresh and backoff.
PROGRESS_SESSIONS = 3
PROGRESS_SLACK_S = 10.0
# A broker fenced or unregistered, a controller unregistered, this many session timeouts after
# the last heal (plus RESTART_S: the heal restarts what it killed).
AFTER_HEAL_SESSIONS = 5
# A partition without a leader while a live (registered, unfenced) member of its ISR exists: the
# controller elects such a member in the same operation that fences the old leader or unfences
# the member (ReplicationControlManager handleBrokerFenced / handleBrokerUnfenced), so this is
# only the time for those records to commit, many times over.
OFFLINE_SESSIONS = 2
# A consumer group holding no partition while its members poll and a majority is healthy.
GROUP_SESSIONS = 5


@dataclass(frozen=True)
class Bounds:
    """The run's liveness bounds, in seconds, each with the sentence that derives it."""

    timing: str
    session_s: float
    recovery_s: float  # how long after a disruption ends the cluster is given to come back
    progress_s: float
    after_heal_s: float
    offline_s: float
    group_s: float

    @classmethod
    def of(cls, cluster: dict[str, Any]) -> Bounds:
        timing = cluster.get("timing") if cluster.get("timing") in SESSION_TIMEOUT_S else "default"
        zk = any("zookeeper" in (n.get("roles") or []) for n in cluster.get("nodes") or [])
        session = max(SESSION_TIMEOUT_S[timing], ZK_SESSION_TIMEOUT_S[timing] if zk else 0.0)
        return cls(
            timing,
            session,
            RESTART_S + session,
            CLIENT_OP_TIMEOUT_S + PROGRESS_SESSIONS * session + PROGRESS_SLACK_S,
            RESTART_S + AFTER_HEAL_SESSIONS * session,
            RESTART_S + OFFLINE_SESSIONS * session,
            GROUP_SESSIONS * GROUP_SESSION_S + CLIENT_OP_TIMEOUT_S,
        )

    def says(self) -> str:
        s = f"{self.session_s:g} s"
        return (
            f"timing {self.timing}: session timeout {s}; a disrupted node is given "
            f"{self.recovery_s:g} s after its fault ends ({RESTART_S:g} s to restart + one "
            f"session); no progress: {self.progress_s:g} s ({CLIENT_OP_TIMEOUT_S:g} s client op "
            f"timeout + {PROGRESS_SESSIONS} sessions + {PROGRESS_SLACK_S:g} s); after the heal: "
            f"{self.after_heal_s:g} s ({RESTART_S:g} s + {AFTER_HEAL_SESSIONS} sessions); "
            f"offline partition: {self.offline_s:g} s ({RESTART_S:g} s + {OFFLINE_SESSIONS} "
            f"sessions); unassigned group: {self.group_s:g} s ({GROUP_SESSIONS} group sessions of "
            f"{GROUP_SESSION_S:g} s + {CLIENT_OP_TIMEOUT_S:g} s)"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "timing": self.timing,
            "session_s": self.session_s,
            "recovery_s": self.recovery_s,
            "progress_s": self.progress_s,
            "after_heal_s": self.after_heal_s,
            "offline_s": self.offline_s,
            "group_s": self.group_s,
        }
