"""The upgrade family: rolls onto other releases, feature levels and ZooKeeper mode's protocol
bump (steps/upgrade.py), the user's own feature steps (steps/feature_steps.py) and controller
membership changes (steps/quorum_steps.py), all carried out by one driver, process ``upgrade``,
in plan order. It begins after the migration when a run has both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from clusters.quorum import STATIC
from history.format import MIGRATION, UPGRADE
from steps.family import Family, Stage
from steps.feature_steps import FeatureSpec, feature_items
from steps.quorum_steps import QuorumSteps, final_observation, quorum_schedule
from steps.recorded import PlannedStep, RecordedSteps
from steps.upgrade import UpgradeDriver, UpgradeStep, load_steps, node_properties, upgrade_schedule


class RollingSpec(FeatureSpec, Protocol):
    """What the family is planned from (harness/spec.py RunSpec)."""

    time_limit: float
    zookeepers: int
    upgrade_to: str | None
    downgrade_to: str | None
    quorum: str | None

    @property
    def quorum_mode(self) -> str: ...


def plan(spec: RollingSpec, seed: int) -> list[UpgradeStep]:
    """The quorum steps come after any upgrade's: one driver carries them out in list order.
    The user's own feature steps (the upgrade list's tail) are spread over the run, so they
    are merged with the quorum steps by start time (each in time order already; the sort
    keeps ties in order)."""
    items = feature_items(spec)
    upgrade = upgrade_schedule(
        spec.topology,
        spec.time_limit,
        seed,
        spec.upgrade_to,
        spec.downgrade_to,
        spec.zookeepers,
        items,
    )
    quorum = quorum_schedule(spec.topology, spec.time_limit, seed, spec.quorum)
    if not items or not quorum:
        return upgrade + quorum
    cut = len(upgrade) - len(items)
    return upgrade[:cut] + sorted(upgrade[cut:] + quorum, key=lambda s: s.at_s)


def drive(steps: Sequence[PlannedStep], stage: Stage) -> UpgradeDriver:
    # A release is known by the name the spec gave it and by its own version.
    dists = {**stage.releases, **{d.version: d for d in stage.releases.values()}}
    return UpgradeDriver(
        list(steps),  # type: ignore[arg-type]
        stage.info,
        dists,
        dict(stage.nodes()),
        stage.recorder,
        after=stage.started.get(MIGRATION),
        # Controller membership steps are carried out by handlers.
        handlers=QuorumSteps(stage.info).handlers(),
    )


def after_heal(driver: RecordedSteps, spec: RollingSpec) -> dict[str, Any]:
    """The voter set once every fault is healed: what acknowledged changes must match."""
    if spec.quorum_mode == STATIC:
        return {}
    assert isinstance(driver, UpgradeDriver)
    return {"quorum": final_observation(driver)}


FAMILY = Family(
    UPGRADE,
    plan=plan,
    load=load_steps,
    drive=drive,
    node_properties=node_properties,  # type: ignore[arg-type]
    after_heal=after_heal,
)
