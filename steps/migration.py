"""The ZooKeeper-to-KRaft migration as recorded steps of a run (topology ``migration``).

The plan fixes, from the seed, when each phase may begin and the order nodes are rolled in; the
driver carries the steps out on its own thread while clients and nemeses go on, each step an
operation of the process ``"migration"``. A step does not begin before its time nor before the
previous step's readiness was observed (never after a sleep): brokers answer RUNNING, the active
KRaft controller reports the expected ZkMigrationState, the controllers agree on a leader.

The steps follow Kafka's "ZooKeeper to KRaft Migration" guide (KIP-866):

1. ``await-pre-migration``: the controllers, started with migration enabled, are in
   PRE_MIGRATION (KIP-866 MigratingZkData's start: waiting for the brokers);
2. ``enable-migration`` per broker: migration config added, broker restarted in ZooKeeper mode;
3. ``await-dual-write``: the active controller copied ZooKeeper's metadata and reports MIGRATION
   (DualWriteMetadata);
4. ``kraft-broker`` per broker: restarted as a KRaft broker (same id, no ZooKeeper config);
5. ``finalize-controller`` per controller: restarted without migration config or
   zookeeper.connect;
6. ``await-finalized``: the active controller reports POST_MIGRATION (MigrationFinalized).

A step that cannot complete is recorded as ``info`` (it may have half-happened: a node may be
restarted with its new config) or ``fail`` (nothing was changed), and the migration ends there:
every later step is recorded as ``fail`` with the reason, so the history says how far it got.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from clusters.capabilities import Controllable
from clusters.cluster import ClusterInfo
from clusters.config import CONF_DIR, render_node, server_properties
from clusters.errors import ClusterError
from clusters.kafka_dist import KafkaDist
from clusters.migration import (
    BROKER_KRAFT,
    BROKER_MIGRATING,
    BROKER_ZK,
    CONTROLLER_FINALIZED,
    CONTROLLER_MIGRATING,
)
from clusters.topology import Topology, build_topology
from history.format import MIGRATION
from steps.family import Family, Stage
from steps.recorded import (
    PlannedStep,
    RecordedSteps,
    StepFailed,
    node_sample,
    restart,
    role_readiness,
    role_ready,
)

AWAIT_PRE, ENABLE, AWAIT_DUAL, KRAFT_BROKER, FINALIZE, AWAIT_FINAL = (
    "await-pre-migration",
    "enable-migration",
    "await-dual-write",
    "kraft-broker",
    "finalize-controller",
    "await-finalized",
)
STEPS = (AWAIT_PRE, ENABLE, AWAIT_DUAL, KRAFT_BROKER, FINALIZE, AWAIT_FINAL)
# The ZkMigrationState (Kafka's names) an await step waits for on the active controller.
AWAITED = {AWAIT_PRE: "PRE_MIGRATION", AWAIT_DUAL: "MIGRATION", AWAIT_FINAL: "POST_MIGRATION"}
# The phase a restart step moves its node from and to (clusters/migration.py).
PHASES = {
    ENABLE: (BROKER_ZK, BROKER_MIGRATING),
    KRAFT_BROKER: (BROKER_MIGRATING, BROKER_KRAFT),
    FINALIZE: (CONTROLLER_MIGRATING, CONTROLLER_FINALIZED),
}
# Where in the time limit each rolling phase may begin: early enough that, at the pace two
# shared cores allow (a broker restart takes 10-30 s), the migration can finish in the run.
WINDOWS = {ENABLE: (0.03, 0.12), KRAFT_BROKER: (0.3, 0.4), FINALIZE: (0.55, 0.65)}
# Bound on one step's readiness: a restarted JVM on busy cores plus a nemesis interval.
STEP_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class MigrationStep:
    at_s: float  # seconds into the run before which the step does not begin
    step: str
    node: str | None = None


def migration_schedule(
    topology: str, time_limit: float, seed: int, zookeepers: int = 1
) -> list[MigrationStep]:
    """The migration's steps for a run; empty unless the topology is ``migration``.

    Its own random stream (not the fault schedule's), so adding it changed no other plan.
    """
    if topology != "migration":
        return []
    rng = random.Random(f"kchaos/{seed}/migration")
    topo = build_topology(topology, zookeepers=zookeepers)
    brokers = [n.name for n in topo.brokers]
    controllers = [n.name for n in topo.controllers]

    def start(step: str) -> float:
        low, high = WINDOWS[step]
        return round(time_limit * rng.uniform(low, high), 3)

    steps = [MigrationStep(0.0, AWAIT_PRE)]
    at = start(ENABLE)
    steps += [MigrationStep(at, ENABLE, b) for b in rng.sample(brokers, len(brokers))]
    steps.append(MigrationStep(at, AWAIT_DUAL))
    at = start(KRAFT_BROKER)
    steps += [MigrationStep(at, KRAFT_BROKER, b) for b in rng.sample(brokers, len(brokers))]
    at = start(FINALIZE)
    steps += [MigrationStep(at, FINALIZE, c) for c in rng.sample(controllers, len(controllers))]
    steps.append(MigrationStep(at, AWAIT_FINAL))
    return steps


def active_state(controllers: list[Controllable]) -> tuple[str | None, str | None]:
    """(active controller, its ZkMigrationState), from each controller's own JMX."""
    for node in controllers:
        seen = node_sample(node)
        if seen and seen.get("active_controller_count") == 1:
            return node.name, seen.get("zk_migration_state")
    return None, None


class MigrationDriver(RecordedSteps):
    """Carries out the plan's migration steps on its own thread, recording each one."""

    def __init__(
        self,
        steps: list[MigrationStep],
        info: ClusterInfo,
        dist: KafkaDist,
        nodes: dict[str, Controllable],
        recorder: Any,
        step_timeout: float = STEP_TIMEOUT_S,
        extra: Mapping[str, str] | None = None,
    ) -> None:
        self.info = info
        self.dist = dist
        self.nodes = nodes
        # What the nodes came up with: a restart into a new phase keeps it.
        self.extra = dict(extra or {})
        super().__init__(MIGRATION, steps, recorder, step_timeout)

    @property
    def topology(self) -> Topology:
        return self.info.topology

    def _do(self, step: Any, value: dict[str, Any]) -> dict[str, Any]:
        if step.step in AWAITED:
            return self._await_state(AWAITED[step.step])
        return self._restart(step)

    # Steps ---------------------------------------------------------------------------------------
    def _controllers(self) -> list[Controllable]:
        return [self.nodes[n.name] for n in self.topology.controllers]

    def _ready(self, node: Controllable) -> dict[str, Any]:
        controllers = self._controllers()
        what = f"{node.name} RUNNING" if node.spec.is_broker else role_readiness(node)
        took, seen = self._until(what, lambda: role_ready(node, controllers))
        return {"ready_after_s": took, "ready": seen}

    def _await_state(self, state: str) -> dict[str, Any]:
        def check() -> tuple[bool, Any]:
            active, seen = active_state(self._controllers())
            view = {"active_controller": active, "zk_migration_state": seen}
            return seen == state, view

        took, view = self._until(f"the active controller in {state}", check)
        return {"observed_after_s": took, **view}

    def _restart(self, step: MigrationStep) -> dict[str, Any]:
        if step.node is None:
            raise StepFailed(f"{step.step} names no node")
        node = self.nodes[step.node]
        old, new = PHASES[step.step]
        before = self._properties(node, old)
        after = self._properties(node, new)
        files = render_node(
            self.topology,
            node.spec,
            self.dist,
            self.info.timing,
            self.info.cluster_id,
            phase=new,
            extra=self.extra,
        ).files
        path = f"{CONF_DIR}/server.properties"
        try:
            # Written before the restart: whoever starts the node next (this step, or the kill
            # nemesis's restart) starts it in its new phase.
            node.put_files({path: files[path]})
        except ClusterError as exc:
            raise StepFailed(f"could not write {path}: {exc}") from None
        change = {
            "phase": [old, new],
            "set": {k: v for k, v in after.items() if before.get(k) != v},
            "removed": sorted(set(before) - set(after)),
        }
        restarted = restart(node, f"config written ({change})")
        return {"config": change, **restarted, **self._ready(node)}

    def _properties(self, node: Controllable, phase: str) -> dict[str, str]:
        return server_properties(
            self.topology, node.spec, self.info.timing, phase, self.dist.version
        )


class MigrationSpec(Protocol):
    """What the migration is planned from (history/options.py Values)."""

    topology: str
    time_limit: float
    zookeepers: int


def plan(spec: MigrationSpec, seed: int) -> list[MigrationStep]:
    return migration_schedule(spec.topology, spec.time_limit, seed, spec.zookeepers)


def load(data: list[dict[str, Any]]) -> list[MigrationStep]:
    return [MigrationStep(**s) for s in data]


def drive(steps: Sequence[PlannedStep], stage: Stage) -> MigrationDriver:
    # The release the nodes run, not the newest one the run assembled (the cluster's tools):
    # a migration's restarts render ZooKeeper-mode brokers whose inter.broker.protocol.version
    # must be their own (3.9 brokers refused "4.0").
    nodes = dict(stage.nodes())
    return MigrationDriver(
        list(steps),  # type: ignore[arg-type]
        stage.info,
        stage.started_on(),
        nodes,
        stage.recorder,
        extra=stage.node_properties,
    )


FAMILY = Family(MIGRATION, plan=plan, load=load, drive=drive)
