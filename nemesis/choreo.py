"""Choreographies: fault sequences with fixed roles, drawn into a plan as other packages' steps.

Jepsen's NATS analysis (2025) lost acknowledged writes with "last replica standing" sequences:
pause a minority so that it misses writes, let writes build up on the others, power-kill one of
them, pause the rest and resume the minority, restart the crashed node, and heal; the same with
network partitions instead of pauses. The minority and the crashed node then make a majority
that holds only what the crashed node's disk kept.

A choreography is plan data only. ``draw`` turns one into ordinary steps of the pause,
partition and disk packages, at the times of the fault window the plan gave it; its roles
(which minority, which node loses power) are drawn with the plan's seed and written into every
step as the ``nodes`` target (nemesis/api.py ``NAMED``), so that each step hits the same nodes
whoever leads at that moment. The history then records each sub-fault as that package's own
ops, each package heals its own (the run's heal undoes them all, in registry order), and a
replay of the plan runs the same sequence. ``--nemesis choreo:<name>`` names one (``choreo``
alone: the plan draws one at each turn); a choreography that powers a node off puts the run on
the disk layer, as ``--nemesis disk`` does.

The roles are among the brokers (the replicas): the minority, floor((n-1)/2) of them, the one
node that loses power, and the rest. Only with an odd number of brokers, at least three, do the
minority and the crashed node make a majority (of controllers too, on kraft-combined).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from clusters.topology import Topology
from nemesis.api import NAMED, NAMED_PARAM, FaultStep
from nemesis.disk import POWER_LOSS

CHOREO = "choreo"

# Roles: who a move acts on, drawn once per sequence.
MINORITY, CRASHED, REST = "minority", "crashed", "rest"
# Phases: when in the fault window a move happens. START: the window's start; TURN: half way
# to its stop (a third of the way to the time limit when the window reaches it); END: the
# window's stop (two thirds of the way to the time limit).
START, TURN, END = "start", "turn", "end"


@dataclass(frozen=True)
class Move:
    """One step of a sequence: a package's start or stop at a phase, on a role's nodes."""

    phase: str
    action: str  # start or stop
    fault: str  # a package (nemesis/registry.py)
    kind: str  # a kind of its menu that reads the target
    role: str


@dataclass(frozen=True)
class Choreography:
    name: str
    meaning: str
    moves: tuple[Move, ...]

    @property
    def packages(self) -> tuple[str, ...]:
        """The packages its steps are of, in the order it first uses them."""
        return tuple(dict.fromkeys(m.fault for m in self.moves))

    def describe(self) -> dict[str, Any]:
        """The choreography as plain data (``kchaos nemeses --json``)."""
        return {
            "choreography": self.name,
            "meaning": self.meaning,
            "packages": list(self.packages),
            "moves": [
                {
                    "phase": m.phase,
                    "step": f"{m.action}-{m.fault}",
                    "kind": m.kind,
                    "role": m.role,
                }
                for m in self.moves
            ],
        }


# Each package's kind for a move on named nodes: pause SIGSTOPs them (stop: SIGCONT to them
# only), partition cuts each from every other node, disk powers them off (stop: every exited
# node starts again on what its disk kept).
_PAUSE, _CUT, _POWER = ("pause", "minority"), ("partition", "isolate-one"), ("disk", POWER_LOSS)


def _move(phase: str, action: str, what: tuple[str, str], role: str) -> Move:
    return Move(phase, action, what[0], what[1], role)


CHOREOGRAPHIES: dict[str, Choreography] = {
    c.name: c
    for c in (
        Choreography(
            "last-replica-pause",
            "pause a minority (writes build up on the others), power-kill one other node, pause "
            "the rest and resume the minority, restart the crashed node; at the window's end "
            "resume the rest (Jepsen NATS pause-kill)",
            (
                _move(START, "start", _PAUSE, MINORITY),
                _move(TURN, "start", _POWER, CRASHED),
                _move(TURN, "start", _PAUSE, REST),
                _move(TURN, "stop", _PAUSE, MINORITY),
                _move(TURN, "stop", _POWER, CRASHED),
                _move(END, "stop", _PAUSE, REST),
            ),
        ),
        Choreography(
            "last-replica-partition",
            "cut a minority off (writes build up on the others), power-kill one other node, "
            "heal and cut the rest off instead, restart the crashed node; at the window's end "
            "heal (Jepsen NATS part-kill)",
            (
                _move(START, "start", _CUT, MINORITY),
                _move(TURN, "start", _POWER, CRASHED),
                _move(TURN, "stop", _CUT, MINORITY),
                _move(TURN, "start", _CUT, REST),
                _move(TURN, "stop", _POWER, CRASHED),
                _move(END, "stop", _CUT, REST),
            ),
        ),
    )
}
NAMES = tuple(CHOREOGRAPHIES)


class ChoreoError(ValueError):
    """A choreography that cannot run on a cluster; the message is the whole story."""


def check_brokers(name: str, topo: Topology) -> None:
    """Refuses a cluster whose brokers cannot play the roles (ChoreoError, one sentence)."""
    n = len(topo.brokers)
    if n < 3 or n % 2 == 0:
        raise ChoreoError(
            f"{CHOREO}:{name} needs an odd number of brokers, at least 3 (the paused minority "
            f"and the crashed node must make a majority): this {topo.kind} cluster has {n}"
        )


def roles(topo: Topology, rng: random.Random) -> dict[str, list[str]]:
    """The minority, the node that loses power and the rest, among the brokers, drawn with
    ``rng`` (in this order: the minority, then the crashed node among the others)."""
    brokers = sorted(n.name for n in topo.brokers)
    minority = sorted(rng.sample(brokers, (len(brokers) - 1) // 2))
    others = [b for b in brokers if b not in minority]
    crashed = rng.choice(others)
    return {MINORITY: minority, CRASHED: [crashed], REST: [b for b in others if b != crashed]}


def phase_times(start_s: float, stop_s: float | None, time_limit: float) -> dict[str, float]:
    """When each phase happens in a window from ``start_s`` to ``stop_s`` (None: the window
    reaches the time limit, and the sequence still ends before it, healed)."""
    if stop_s is not None:
        return {
            START: start_s,
            TURN: round(start_s + (stop_s - start_s) / 2, 3),
            END: stop_s,
        }
    third = (time_limit - start_s) / 3
    return {
        START: start_s,
        TURN: round(start_s + third, 3),
        END: round(start_s + 2 * third, 3),
    }


def draw(
    rng: random.Random,
    topo: Topology,
    start_s: float,
    stop_s: float | None,
    time_limit: float,
    names: tuple[str, ...] | None = None,
) -> list[FaultStep]:
    """One choreography's steps in a fault window, in time order.

    Draws, in this order: the choreography (among ``names``, the item's; None: every one; no
    draw for a single one), its roles, then one seed per sub-fault (the role a package acts on),
    which its start and stop share. Every step names its nodes: target ``nodes``.
    """
    pool = names or NAMES
    chosen = CHOREOGRAPHIES[pool[0] if len(pool) == 1 else rng.choice(pool)]
    check_brokers(chosen.name, topo)
    cast = roles(topo, rng)
    seeds: dict[tuple[str, str], int] = {}
    for m in chosen.moves:
        if (m.fault, m.role) not in seeds:
            seeds[(m.fault, m.role)] = rng.getrandbits(32)
    at = phase_times(start_s, stop_s, time_limit)
    return [
        FaultStep(
            at[m.phase],
            m.action,
            m.fault,
            m.kind,
            NAMED,
            seeds[(m.fault, m.role)],
            {NAMED_PARAM: cast[m.role]},
        )
        for m in chosen.moves
    ]


def catalog() -> list[dict[str, Any]]:
    """Every choreography as plain data."""
    return [c.describe() for c in CHOREOGRAPHIES.values()]
