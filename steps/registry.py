"""The planned step families, in the order the run starts their drivers (a family may wait for
one started before it: the upgrade waits for the migration). A new family is its module, with
its ``FAMILY``, and its line here; the plan, the interpreter and the run options (``STEP_OPTIONS``)
loop over ``FAMILIES``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from history.options import Option
from steps import migration, rolling
from steps.family import Family
from steps.recorded import PlannedStep

FAMILIES: tuple[Family, ...] = (
    migration.FAMILY,
    rolling.FAMILY,
)


def _options() -> tuple[Option, ...]:
    by_name: dict[str, Option] = {}
    for family in FAMILIES:
        for o in family.options:
            if o.name in by_name:
                raise ValueError(f"step option '{o.name}' is declared by two families")
            by_name[o.name] = o
    return tuple(by_name.values())


# Every family's run options, in the registry's order (harness/spec.py reads them as it reads
# the workload kinds').
STEP_OPTIONS: tuple[Option, ...] = _options()


def node_properties(planned: Mapping[str, Sequence[PlannedStep]]) -> dict[str, str]:
    """What every Kafka node's configuration needs from the start for the planned steps."""
    out: dict[str, str] = {}
    for family in FAMILIES:
        if planned.get(family.key):
            out.update(family.node_properties(planned[family.key]))
    return out
