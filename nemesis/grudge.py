"""Network partitions as grudges: pure functions from node names to who drops whose traffic.

A grudge maps every node of the topology to the set of nodes whose packets it drops. All grudges
built here are symmetric: a one-way drop breaks TCP in both directions anyway (the handshake and
acknowledgements need both), so an asymmetric grudge would only mislead whoever reads it.
Randomness comes from the caller's ``random.Random``, so a step's seed reproduces its partition.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence

from nemesis.errors import NemesisError

Grudge = dict[str, frozenset[str]]


def majority(n: int) -> int:
    return n // 2 + 1


def from_components(nodes: Collection[str], components: Sequence[Collection[str]]) -> Grudge:
    """Each node drops every node outside its own component; nodes in no component see all."""
    seen: set[str] = set()
    for comp in components:
        overlap = seen & set(comp)
        if overlap:
            raise NemesisError(f"nodes {sorted(overlap)} are in more than one side of a partition")
        seen |= set(comp)
    unknown = seen - set(nodes)
    if unknown:
        raise NemesisError(f"a partition names nodes {sorted(unknown)} not in the topology")
    grudge: Grudge = {n: frozenset() for n in nodes}
    for comp in components:
        others = frozenset(seen - set(comp))
        for n in comp:
            grudge[n] = others
    return grudge


def components_of(grudge: Grudge) -> list[list[str]]:
    """The sides of a component-shaped grudge, each sorted; for the history and for tests."""
    sides = {frozenset(set(grudge) - drops) for drops in grudge.values()}
    return sorted((sorted(s) for s in sides), key=lambda s: (len(s), s))


def view(grudge: Grudge, node: str) -> frozenset[str]:
    """Whom a node can talk to (itself included): neither side of the pair drops the other."""
    return frozenset(
        other for other in grudge if node not in grudge[other] and other not in grudge[node]
    )


def _shuffled(nodes: Collection[str], rng: random.Random) -> list[str]:
    out = sorted(nodes)  # sorted first so the same seed gives the same answer for any order
    rng.shuffle(out)
    return out


def _need(nodes: Collection[str], at_least: int, kind: str) -> None:
    if len(nodes) < at_least:
        raise NemesisError(f"partition {kind} needs at least {at_least} nodes, got {len(nodes)}")


def isolate(nodes: Collection[str], victims: Collection[str]) -> Grudge:
    """The victims are cut off from everyone else and from each other."""
    _need(nodes, 2, "isolate")
    rest = [n for n in nodes if n not in victims]
    return from_components(nodes, [[v] for v in sorted(victims)] + [rest])


def random_halves(nodes: Collection[str], rng: random.Random) -> Grudge:
    """Two sides of ⌊n/2⌋ and ⌈n/2⌉ nodes."""
    _need(nodes, 2, "random-halves")
    order = _shuffled(nodes, rng)
    half = len(order) // 2
    return from_components(nodes, [order[:half], order[half:]])


def majority_minority(nodes: Collection[str], rng: random.Random) -> Grudge:
    """A strict majority on one side, the rest (a minority) on the other."""
    _need(nodes, 2, "majority-minority")
    order = _shuffled(nodes, rng)
    m = majority(len(order))
    return from_components(nodes, [order[:m], order[m:]])


def bridge(nodes: Collection[str], rng: random.Random) -> Grudge:
    """Two halves that cannot talk, and one node in the middle that talks to both."""
    _need(nodes, 3, "bridge")
    order = _shuffled(nodes, rng)
    mid = len(order) // 2
    left, middle, right = order[:mid], order[mid], order[mid + 1 :]
    grudge: Grudge = {n: frozenset() for n in nodes}
    for n in left:
        grudge[n] = frozenset(right)
    for n in right:
        grudge[n] = frozenset(left)
    grudge[middle] = frozenset()
    return grudge


def majorities_ring(nodes: Collection[str], rng: random.Random) -> Grudge:
    """Every node sees a majority, but (from four nodes on) no two see the same majority.

    Nodes are placed on a random ring and each keeps links to its nearest neighbours, enough for
    a majority view. Three nodes cannot do better than a bridge: each must see one other node,
    and a symmetric link set where all three do that, without everyone seeing everyone, is a path.
    """
    _need(nodes, 3, "majorities-ring")
    order = _shuffled(nodes, rng)
    n = len(order)
    if n == 3:
        return bridge(nodes, rng)
    degree = majority(n) - 1  # links each node needs besides itself
    offsets = set(range(1, degree // 2 + 1))
    if degree % 2:
        # An odd degree on an even ring: link to the node opposite; on an odd ring, one more.
        offsets.add(n // 2 if n % 2 == 0 else degree // 2 + 1)
    links: dict[str, set[str]] = {x: set() for x in order}
    for i, x in enumerate(order):
        for k in offsets:
            for j in (i + k, i - k):
                links[x].add(order[j % n])
    return {x: frozenset(set(order) - links[x] - {x}) for x in order}


def controllers_brokers(coordinators: Collection[str], brokers: Collection[str]) -> Grudge:
    """The coordination side (KRaft controllers or ZooKeepers) cut off from the brokers."""
    if not coordinators or not brokers:
        raise NemesisError(
            "partition controllers-brokers needs dedicated controllers (or ZooKeepers) and "
            "brokers: in kraft-combined every node is both; use topology kraft or zk"
        )
    return from_components([*coordinators, *brokers], [list(coordinators), list(brokers)])
