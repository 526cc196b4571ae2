"""Fault packages by the name plans and ``--nemesis`` use."""

from __future__ import annotations

from nemesis.api import Nemesis
from nemesis.clock import ClockNemesis
from nemesis.errors import NemesisError
from nemesis.packet import PacketNemesis
from nemesis.partition import PartitionNemesis
from nemesis.process import KillNemesis, PauseNemesis

NEMESES: dict[str, type] = {
    "partition": PartitionNemesis,
    "kill": KillNemesis,
    "pause": PauseNemesis,
    "clock": ClockNemesis,
    "packet": PacketNemesis,
}
# The order healing undoes faults in: a stopped or exited JVM first (later steps exec in nodes
# and restart them), the clock last, since removing libfaketime restarts the node.
HEAL_ORDER = ("pause", "kill", "partition", "packet", "clock")


def build(names: list[str]) -> dict[str, Nemesis]:
    """One instance per named package; an unknown name fails with the valid ones listed."""
    unknown = [n for n in names if n not in NEMESES]
    if unknown:
        raise NemesisError(
            f"unknown nemesis {', '.join(repr(n) for n in unknown)}: choose from "
            f"{', '.join(NEMESES)}"
        )
    return {n: NEMESES[n]() for n in dict.fromkeys(names)}
