"""What a planned step family declares, and what its driver is given: the shape steps/registry.py
lists, as nemesis/menu.py is for the fault packages.

A family plans its steps from the spec and the seed, on a random stream of its own
(``random.Random(f"kchaos/{seed}/<name>")``), so that a new family moves no other plan; its steps
go into plan.json under its key only when there are some, so every plan without them stays byte
for byte the same. The run starts a family's driver when the plan has its steps and never asks
which family it is: what a family needs of the run (node properties from the start, a last
observation after healing) it declares here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from clusters.capabilities import Controllable
from clusters.cluster import ClusterInfo
from clusters.kafka_dist import KafkaDist
from steps.recorded import PlannedStep, RecordedSteps, StepRecorder


@dataclass(frozen=True)
class Stage:
    """What a driver is given when the run starts it, once the cluster is up."""

    info: ClusterInfo
    # Every release the run assembled, by the name the spec gave it (a line such as 3.9).
    releases: Mapping[str, KafkaDist]
    recorder: StepRecorder
    # The node handles, a fresh mapping for each driver (each acts on its own thread).
    nodes: Callable[[], Mapping[str, Controllable]]
    # The release the nodes started on (not the newest one, whose tools the cluster uses).
    started_on: Callable[[], KafkaDist]
    # The drivers started before this one, by family key: a family may wait for another's.
    started: Mapping[str, RecordedSteps]


def _no_properties(steps: Sequence[PlannedStep]) -> dict[str, str]:
    return {}


def _nothing_after(driver: RecordedSteps, spec: Any) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class Family:
    """One family of planned steps. ``spec`` is the run's spec (harness/spec.py RunSpec), read
    only, by the fields the family's module names."""

    # Its plan.json key, the process its steps are recorded as, run.json's key and <key>.json.
    key: str
    # The family's steps for a spec and a seed; empty: the spec asks for none.
    plan: Callable[[Any, int], Sequence[PlannedStep]]
    # Its steps back from plan.json (a replay).
    load: Callable[[list[dict[str, Any]]], Sequence[PlannedStep]]
    # Its driver for these steps, not yet started.
    drive: Callable[[Sequence[PlannedStep], Stage], RecordedSteps]
    # What every Kafka node's configuration needs from the start for these steps.
    node_properties: Callable[[Sequence[PlannedStep]], dict[str, str]] = _no_properties
    # What run.json records once every fault is healed (keys beside the family's own).
    after_heal: Callable[[RecordedSteps, Any], dict[str, Any]] = _nothing_after
