"""What a planned step family declares, and what its driver is given: the shape steps/registry.py
lists, as nemesis/menu.py is for the fault packages.

A family declares its own run options (``options``, history/options.py: the harness derives
the ``kchaos run`` options, the spec's parsing and checks and plan.json's spec from them, as
from a workload kind's), refuses the combinations it cannot plan (``check``), and says which
Kafka releases it rolls to (``releases``), which the run assembles beside the one it starts on.
Its process in the history is its key: a named process, so no reader counts it as a client
(history/format.py ``is_client``).

A family plans its steps from the run's option values and the seed, on a random stream of its own
(``random.Random(f"kchaos/{seed}/<name>")``), so that a new family moves no other plan; its steps
go into plan.json under its key only when there are some, so every plan without them stays byte
for byte the same. The run starts a family's driver when the plan has its steps and never asks
which family it is: what a family needs of the run (node properties from the start, a last
observation after healing) it declares here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from clusters.capabilities import Controllable
from clusters.cluster import ClusterInfo
from clusters.kafka_dist import KafkaDist
from history.options import Option, Values
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
    # What every Kafka node's configuration was given when the cluster came up (the families'
    # and the workload's node_properties): a step that writes a node's files again keeps them.
    node_properties: Mapping[str, str] = field(default_factory=dict)


def _no_properties(steps: Sequence[PlannedStep]) -> dict[str, str]:
    return {}


def _nothing_after(driver: RecordedSteps, values: Values) -> dict[str, Any]:
    return {}


def _no_check(values: Values) -> None:
    return None


def _no_releases(values: Values) -> Sequence[str]:
    return ()


def _kept_whole(steps: Sequence[PlannedStep]) -> list[list[int]]:
    return []


def by_time(steps: Sequence[PlannedStep]) -> list[list[int]]:
    """The steps planned for one moment (a roll of every node, a finalization, one feature
    step, a controller's removal), by their indices: units `kchaos shrink` may drop."""
    units: dict[float, list[int]] = {}
    for i, s in enumerate(steps):
        units.setdefault(s.at_s, []).append(i)
    return list(units.values())


@dataclass(frozen=True)
class Family:
    """One family of planned steps. ``values`` are the run's option values (history/options.py
    ``Values``: the harness's, every workload kind's and every family's, and ``releases``),
    read only, by the names the family's module uses (typed there by a Protocol of its own,
    hence ``Any`` below)."""

    # Its plan.json key, the process its steps are recorded as, run.json's key and <key>.json.
    key: str
    # The family's steps for the run's values and a seed; empty: the run asks for none.
    plan: Callable[[Any, int], Sequence[PlannedStep]]
    # Its steps back from plan.json (a replay).
    load: Callable[[list[dict[str, Any]]], Sequence[PlannedStep]]
    # Its driver for these steps, not yet started.
    drive: Callable[[Sequence[PlannedStep], Stage], RecordedSteps]
    # What every Kafka node's configuration needs from the start for these steps.
    node_properties: Callable[[Sequence[PlannedStep]], dict[str, str]] = _no_properties
    # What run.json records once every fault is healed (keys beside the family's own).
    after_heal: Callable[[RecordedSteps, Any], dict[str, Any]] = _nothing_after
    # Its run options (history/options.py); no other family or workload kind may name one.
    options: tuple[Option, ...] = ()
    # Refuses, with OptionError, what the family cannot plan: given after each option's own
    # refusals, with every release known (``values.releases``).
    check: Callable[[Any], None] = _no_check
    # The releases it rolls to, by the names the spec gave them, in the order it rolls.
    releases: Callable[[Any], Sequence[str]] = _no_releases
    # The units of its steps (indices) a shrink may drop, each whole, the rest kept in order
    # (docs/shrink.md); by default none: a family that says nothing keeps every step.
    drop_units: Callable[[Sequence[PlannedStep]], list[list[int]]] = _kept_whole
