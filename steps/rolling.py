"""The upgrade family: rolls onto other releases, feature levels and ZooKeeper mode's protocol
bump (steps/upgrade.py), the user's own feature steps (steps/feature_steps.py) and controller
membership changes (steps/quorum_steps.py), all carried out by one driver, process ``upgrade``,
in plan order. It begins after the migration when a run has both.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from clusters.errors import ClusterError
from clusters.kafka_dist import parse_version
from clusters.quorum import STATIC
from clusters.upgrade_paths import check_downgrade, check_upgrade
from history.format import MIGRATION, UPGRADE
from history.options import AS_ASKED, Option, OptionError
from steps.family import Family, Stage, by_time
from steps.feature_steps import (
    RELEASE_VERSION,
    RELEASE_VERSION_FROM,
    FeatureSpec,
    FeatureSpecError,
    feature_items,
)
from steps.quorum_steps import QuorumSteps, final_observation, quorum_schedule
from steps.recorded import PlannedStep, RecordedSteps
from steps.upgrade import UpgradeDriver, UpgradeStep, load_steps, node_properties, upgrade_schedule

# Rolling software changes (steps/upgrade.py): the release to upgrade to after the start (and
# after a migration), the one to roll back to after a safe feature downgrade, and the user's
# own feature steps (steps/feature_steps.py: "transaction.version=0, dry-run:group.version=0,
# metadata.version=release:4.0, ...", each one planned step). Written into plan.json only when
# given, as the first plans had none of them.
OPTIONS = (
    Option(
        "upgrade_to",
        str,
        stored=AS_ASKED,
        help="Roll every node to this Kafka release during the run, then finalize its feature "
        "levels (docs/upgrades.md).",
    ),
    Option(
        "downgrade_to",
        str,
        stored=AS_ASKED,
        help="Lower metadata.version safely to this older release's, then roll every node back "
        "to it (after --upgrade-to, if given).",
    ),
    # KIP-1022: how an upgrade finalizes its feature levels. "features" (the first plans' way):
    # a dry run and the upgrade of metadata.version, then one request per other feature;
    # "release-version": a dry run, then `kafka-features upgrade --release-version B`, the
    # command Kafka 4.x documents. Written into plan.json only when it is the latter.
    Option(
        "finalize",
        str,
        default="features",
        choices=("features", RELEASE_VERSION),
        noun="way to finalize",
        stored=AS_ASKED,
        help="How --upgrade-to finalizes the new release's feature levels: features (one "
        "kafka-features request per feature) or release-version (one `kafka-features upgrade "
        "--release-version B`, KIP-1022, Kafka 4.0+; docs/upgrades.md).",
    ),
    Option(
        "features",
        str,
        stored=AS_ASKED,
        help="Feature steps of your own, in order, each one kafka-features request during the "
        "run (after any roll): name=level (upgrade or downgrade, whichever the finalized level "
        "calls for), name=level!unsafe, dry-run:name=level, metadata.version=release:X; "
        "comma-separated (docs/upgrades.md, Feature steps).",
    ),
)


class RollingSpec(FeatureSpec, Protocol):
    """What the family is planned from (history/options.py Values: its options, and the
    harness's it reads; ``quorum``: the controller quorum the cluster is brought up with)."""

    time_limit: float
    zookeepers: int
    version: str
    upgrade_to: str | None
    downgrade_to: str | None
    quorum: str | None
    finalize: str


def releases(spec: RollingSpec) -> list[str]:
    return [v for v in (spec.upgrade_to, spec.downgrade_to) if v]


def check(spec: RollingSpec) -> None:
    """The upgrade and downgrade paths (clusters/upgrade_paths.py) and the user's feature steps."""
    try:
        if spec.upgrade_to:
            check_upgrade(spec.topology, spec.version, spec.upgrade_to)
        if spec.downgrade_to:
            check_downgrade(spec.topology, spec.version, spec.downgrade_to, spec.upgrade_to)
        if spec.features is not None:
            feature_items(spec)
    except (ClusterError, FeatureSpecError) as exc:
        raise OptionError(str(exc)) from None
    if spec.finalize == RELEASE_VERSION:
        _check_release_finalize(spec)


def _check_release_finalize(spec: RollingSpec) -> None:
    if not spec.upgrade_to:
        raise OptionError("--finalize release-version finalizes an upgrade: give --upgrade-to")
    if spec.topology == "zk":
        raise OptionError(
            "--finalize release-version: ZooKeeper mode has no feature levels to finalize (its "
            "upgrade bumps inter.broker.protocol.version)"
        )
    if (*parse_version(spec.upgrade_to), 0)[:2] < RELEASE_VERSION_FROM:
        raise OptionError(
            f"--finalize release-version: kafka-features has --release-version from Kafka 4.0 "
            f"on (KIP-1022), not {spec.upgrade_to}"
        )


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
        spec.finalize,
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
        extra=stage.node_properties,
    )


def after_heal(driver: RecordedSteps, spec: RollingSpec) -> dict[str, Any]:
    """The voter set once every fault is healed: what acknowledged changes must match."""
    if (spec.quorum or STATIC) == STATIC:
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
    options=OPTIONS,
    check=check,
    releases=releases,
    # A roll, a finalization, a feature step or a membership change, each planned for one
    # moment, may be dropped whole by a shrink; what is left keeps its order.
    drop_units=by_time,
)
