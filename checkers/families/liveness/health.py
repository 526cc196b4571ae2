"""When a connected majority of the cluster was healthy: the stretches of a run in which Kafka
promises to make progress, from the faults' recorded effects (checkers/scan/fault_windows.py),
never from a package's name.

A node is disrupted while a fault that may have touched it holds (`FaultSpan.outer`: from the
start's invocation to the completion of the op that ended it), and for `Bounds.recovery_s`
after (a killed JVM restarts and registers); a heal, upgrade or migration step disrupts the
nodes it names (every node when it names none) the same way. Cut links do not disrupt their
ends by themselves: the cluster is healthy at a moment when some set M of undisrupted nodes,
pairwise connected (no cut link between two of them), holds a majority of the brokers and a
majority of each quorum (the KRaft controllers, the ZooKeeper ensemble), and, for writes, no
more brokers are outside M than the topic's replication less its min.insync.replicas allows
(acks=all needs that many in-sync replicas).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from itertools import combinations, pairwise
from typing import Any

from checkers.scan.fault_windows import Faults
from history.effects import CUT, Link

# Above this many nodes the largest connected set is not searched: every end of a cut link is
# taken as disrupted (fewer healthy stretches, never more).
SEARCHED_NODES = 12


@dataclass(frozen=True)
class Roles:
    brokers: frozenset[str]
    quorums: tuple[frozenset[str], ...]  # the controllers, the ZooKeeper ensemble (non-empty)
    write_tolerance: int  # brokers that may be lost with acks=all writes still possible

    @property
    def nodes(self) -> frozenset[str]:
        return self.brokers.union(*self.quorums)

    @classmethod
    def of(cls, cluster: dict[str, Any], header: dict[str, Any] | None = None) -> Roles:
        nodes = [n for n in cluster.get("nodes") or [] if isinstance(n.get("name"), str)]

        def having(role: str) -> frozenset[str]:
            return frozenset(n["name"] for n in nodes if role in (n.get("roles") or []))

        quorums = tuple(q for q in (having("controller"), having("zookeeper")) if q)
        durability = (header or {}).get("durability")
        durability = durability if isinstance(durability, dict) else {}
        replication = durability.get("replication", 3)
        min_isr = durability.get("min_insync_replicas", 2)
        ok = isinstance(replication, int) and isinstance(min_isr, int)
        tolerance = max(0, replication - min_isr) if ok else 0
        return cls(having("broker"), quorums, tolerance)


@dataclass(frozen=True)
class Disruption:
    start: float
    end: float  # math.inf: never ended
    nodes: frozenset[str]
    cut: frozenset[Link]
    says: str


@dataclass(frozen=True)
class Stretch:
    """A time span in which the cluster was healthy for reads (and `writes`: for writes too)."""

    start: float
    end: float
    writes: bool


def disruptions(faults: Faults, roles: Roles, recovery_s: float) -> list[Disruption]:
    every = roles.nodes
    out = []
    for span in faults.spans:
        hit: set[str] = set()
        cut: set[Link] = set()
        for e in span.effects:
            if e.effect == CUT and e.links is not None:
                cut |= e.links
            else:  # a cut that names no links, and every other effect, known or not
                hit |= every if e.nodes is None else e.nodes & every
        a, b = span.outer
        out.append(Disruption(a, b + recovery_s, frozenset(hit), frozenset(cut), span.says()))
    for op, named in faults.others:
        nodes = every if named is None else named & every
        says = f"{op.process} op {op.cite()}"
        out.append(Disruption(op.start, op.end + recovery_s, nodes, frozenset(), says))
    return out


def _connected(group: tuple[str, ...], cut: frozenset[Link]) -> bool:
    return all(frozenset(p) not in cut for p in combinations(group, 2))


def _majority(of: frozenset[str], within: frozenset[str]) -> bool:
    return len(of & within) * 2 > len(of)


def healthy_now(roles: Roles, down: frozenset[str], cut: frozenset[Link]) -> tuple[bool, bool]:
    """(reads, writes): whether some connected set of undisrupted nodes holds a majority of the
    brokers and of each quorum (and, for writes, leaves out no more brokers than tolerated)."""
    alive = sorted(roles.nodes - down)
    if len(roles.nodes) > SEARCHED_NODES:
        ends = frozenset(n for link in cut for n in link)
        alive = [n for n in alive if n not in ends]
        candidates: list[tuple[str, ...]] = [tuple(alive)]
    else:
        candidates = [c for k in range(len(alive), 0, -1) for c in combinations(alive, k)]
    best = -1
    for group in candidates:
        members = frozenset(group)
        if not _majority(roles.brokers, members) or not all(
            _majority(q, members) for q in roles.quorums
        ):
            continue
        if _connected(group, cut):
            best = max(best, len(roles.brokers & members))
    if best < 0:
        return False, False
    return True, len(roles.brokers) - best <= roles.write_tolerance


def stretches(disrupted: list[Disruption], roles: Roles, start: float, end: float) -> list[Stretch]:
    """The healthy stretches within [start, end], in order: maximal spans of one health."""
    if not roles.brokers or end <= start:
        return []
    points = {start, end}
    for d in disrupted:
        points |= {t for t in (d.start, d.end) if start < t < end}
    times = sorted(points)
    out: list[Stretch] = []
    for a, b in pairwise(times):
        mid = (a + b) / 2
        held = [d for d in disrupted if d.start <= mid < d.end]
        down = frozenset().union(*(d.nodes for d in held))
        cut = frozenset().union(*(d.cut for d in held))
        reads, writes = healthy_now(roles, down, cut)
        if not reads:
            continue
        if out and out[-1].end == a and out[-1].writes == writes:
            out[-1] = Stretch(out[-1].start, b, writes)
        else:
            out.append(Stretch(a, b, writes))
    return out


def healthy_within(
    spans: list[Stretch], lo: float, hi: float, writes: bool
) -> tuple[float, float] | None:
    """The longest contiguous healthy span inside [lo, hi] (for writes: healthy for writes)."""
    best: tuple[float, float] | None = None
    run: tuple[float, float] | None = None
    for s in spans:
        if writes and not s.writes:
            run = None
            continue
        a, b = max(s.start, lo), min(s.end, hi)
        if b <= a:
            continue
        run = (run[0], b) if run is not None and math.isclose(run[1], a) else (a, b)
        if best is None or run[1] - run[0] > best[1] - best[0]:
            best = run
    return best
