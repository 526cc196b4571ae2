"""The planned step families, in the order the run starts their drivers (a family may wait for
one started before it: the upgrade waits for the migration). A new family is its module, with
its ``FAMILY``, and its line here; the plan and the interpreter loop over ``FAMILIES``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from steps import migration, rolling
from steps.family import Family
from steps.recorded import PlannedStep

FAMILIES: tuple[Family, ...] = (
    migration.FAMILY,
    rolling.FAMILY,
)


def node_properties(planned: Mapping[str, Sequence[PlannedStep]]) -> dict[str, str]:
    """What every Kafka node's configuration needs from the start for the planned steps."""
    out: dict[str, str] = {}
    for family in FAMILIES:
        if planned.get(family.key):
            out.update(family.node_properties(planned[family.key]))
    return out
