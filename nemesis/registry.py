"""Fault packages by the name plans and ``--nemesis`` use, and their menus."""

from __future__ import annotations

from typing import Any

from nemesis import choreo
from nemesis.api import TARGET_MEANINGS, Nemesis
from nemesis.client import ClientNemesis
from nemesis.clock import ClockNemesis
from nemesis.disk import DiskNemesis
from nemesis.errors import NemesisError
from nemesis.jvm import JvmNemesis
from nemesis.menu import PARTITION_LEADER, SELECTOR_PARAM, SELECTOR_PARAM_MEANING, Menu
from nemesis.packet import PacketNemesis
from nemesis.partition import PartitionNemesis
from nemesis.process import KillNemesis, PauseNemesis
from nemesis.shutdown import ShutdownNemesis

NEMESES: dict[str, type] = {
    "partition": PartitionNemesis,
    "kill": KillNemesis,
    "pause": PauseNemesis,
    "clock": ClockNemesis,
    "packet": PacketNemesis,
    "jvm": JvmNemesis,
    "disk": DiskNemesis,
    "shutdown": ShutdownNemesis,
    "client": ClientNemesis,
}
# The order healing undoes faults in: a stopped or exited JVM first (later steps exec in nodes
# and restart them; a stopped JVM's rule listener cannot answer; a JVM on a disk that lost
# power is killed before the exited are started), the clock last, since removing libfaketime
# restarts the node. The client package touches no node: its hijacker lives in this process.
HEAL_ORDER = ("client", "pause", "disk", "kill", "shutdown", "jvm", "partition", "packet", "clock")

# What each package offers a plan; every package class carries its module's menu.
MENUS: dict[str, Menu] = {name: cls.menu for name, cls in NEMESES.items()}
FAULT_KINDS: dict[str, tuple[str, ...]] = {name: m.kind_names() for name, m in MENUS.items()}


def build(names: list[str]) -> dict[str, Nemesis]:
    """One instance per named package; an unknown name fails with the valid ones listed."""
    unknown = [n for n in names if n not in NEMESES]
    if unknown:
        raise NemesisError(
            f"unknown nemesis {', '.join(repr(n) for n in unknown)}: choose from "
            f"{', '.join(NEMESES)}"
        )
    return {n: NEMESES[n]() for n in dict.fromkeys(names)}


def catalog() -> dict[str, Any]:
    """Every package's menu and every target selector, as plain data (``kchaos nemeses``)."""
    return {
        "packages": [m.describe() for m in MENUS.values()],
        "targets": [
            {
                "target": name,
                "meaning": meaning,
                "reads": [SELECTOR_PARAM] if name == PARTITION_LEADER else [],
            }
            for name, meaning in TARGET_MEANINGS.items()
        ],
        "target_params": [{"name": SELECTOR_PARAM, "meaning": SELECTOR_PARAM_MEANING}],
        # Sequences of the packages' steps the plan draws (nemesis/choreo.py), not packages.
        "choreographies": choreo.catalog(),
    }
