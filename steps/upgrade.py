"""Rolling upgrades and downgrades and feature-level changes as recorded steps of a run.

``--upgrade-to B`` restarts every Kafka node, one at a time in a seeded order, on release B's
jars (same container, data and id: clusters/config.py mounts every assembled release), then
finalizes B's feature levels (KIP-584, KIP-778): a dry run of the ``metadata.version`` upgrade,
the upgrade itself, then each other feature B supports, one feature per request. ZooKeeper-mode
clusters have no ``metadata.version``: after the software roll their brokers roll again with
``inter.broker.protocol.version`` raised to B, as Kafka's upgrade notes say. ``--downgrade-to C``
first lowers ``metadata.version`` to C's newest level (a safe downgrade, which Kafka refuses when
metadata would be lost), then rolls every node back to C. After a migration (topology
``migration``) the upgrade begins once the migration has finished.

Every step is one operation of the process ``upgrade`` (steps/recorded.py): ok only when Kafka
acknowledged it, fail when Kafka definitely refused it, info when the outcome is unknown. A
feature step is carried out by Kafka's own tool (``kafka-features``), run inside a broker from
the release that node runs, against every broker; its invocation names the exact levels, which
the driver resolves from what the nodes say they support (ApiVersions, KIP-584) just before it.
"""

from __future__ import annotations

import contextlib
import random
import re
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from clusters.api_versions import FeaturesUnavailable, describe_features
from clusters.capabilities import Controllable, layout_of
from clusters.cluster import ClusterInfo
from clusters.config import render_node
from clusters.errors import ClusterError
from clusters.kafka_dist import KafkaDist, metadata_version_level, parse_version, run_tool
from clusters.migration import BROKER_KRAFT, CONTROLLER_FINALIZED, ibp
from clusters.topology import BROKER_PORT, CONTROLLER_PORT, Topology, build_topology
from history.format import UPGRADE
from steps.feature_steps import (
    AUTO,
    RELEASE_VERSION,
    FeatureItem,
    parse_version_mapping,
    release_level,
    release_line,
)
from steps.feature_steps import times as feature_times
from steps.feature_steps import window as feature_window
from steps.recorded import (
    PlannedStep,
    RecordedSteps,
    StepFailed,
    StepUnsure,
    node_sample,
    restart,
    role_readiness,
    role_ready,
)

ROLL, IBP, FEATURES, AWAIT_SNAPSHOT = "roll", "ibp", "features", "await-snapshot"
# KIP-778: "Once the downgrade snapshot has been loaded by all nodes, a software downgrade is now
# possible." Kafka writes no snapshot on a downgrade (KIP-1155), so a run that rolls back asks
# for frequent ones, and waits until every node holds one past the downgrade's record: an older
# release replaying the log from before it meets a metadata.version it cannot read and
# terminates.
SNAPSHOT_PROPS = {"metadata.log.max.snapshot.interval.ms": "5000"}
METADATA_PARTITION = "__cluster_metadata-0"
METADATA_VERSION = "metadata.version"
# Changed by its own steps (controller membership, KIP-853), never by "every other feature".
KRAFT_VERSION = "kraft.version"
LATEST = "latest"  # the highest level every node that answers supports
EVERY_OTHER = "*"  # each feature but metadata.version and kraft.version, one request each
RELEASE = "release:"  # release:3.8 is 3.8's newest production metadata.version
# Where in the time limit each phase may begin. A node's restart and readiness take 10-30 s on
# two shared cores, so a three-node roll needs about a third of a two-minute run.
WINDOWS = {
    "roll": (0.05, 0.1),
    "features": (0.35, 0.4),
    "downgrade": (0.5, 0.55),
    "downgrade-alone": (0.2, 0.25),
}
# After a migration, whose finalization may begin as late as 0.65 of the time limit.
AFTER_MIGRATION = {"roll": (0.7, 0.72), "features": (0.82, 0.85)}
STEP_TIMEOUT_S = 180.0
TOOL_TIMEOUT_S = 90.0
DESCRIBE_TIMEOUT_S = 2.0
# The controller's answers that say an update was refused and nothing was written
# (FeatureControlManager's InvalidUpdateVersion and invalid metadata.version errors). Anything
# else (a timeout, a lost connection, a controller change) leaves the outcome unknown.
REFUSALS = (
    "Invalid update version",
    "Invalid metadata.version",
    "Refusing to perform",
    "Unable to modify",
    "Unable to set",
    "Unsafe metadata downgrade is not supported",
    "Can't downgrade",
    "cannot be less than",
    "only supports versions",
    "does not support",
    "not supported",
    "Unknown metadata.version",
    # Kafka 4.x refusing a kraft.version upgrade, and with it the whole request (4.4.0, seen
    # with one voter cut off: "Invalid upgrade of kraft.version to KRAFT_VERSION_1 because not
    # all of the voters support it").
    "Invalid upgrade of",
    "The update failed for all features",
)


@dataclass(frozen=True)
class UpgradeStep:
    at_s: float  # seconds into the run before which the step does not begin
    step: str  # roll, ibp, features, or a step a handler adds (controller membership)
    node: str | None = None
    params: dict[str, Any] = field(default_factory=dict)


def upgrade_schedule(
    topology: str,
    time_limit: float,
    seed: int,
    upgrade_to: str | None,
    downgrade_to: str | None,
    zookeepers: int = 1,
    feature_items: list[FeatureItem] | None = None,
    finalize: str | None = None,
) -> list[UpgradeStep]:
    """The plan's upgrade steps; empty unless the spec asks for an upgrade, a downgrade or
    feature steps of its own (``feature_items``, steps/feature_steps.py). ``finalize``
    ``release-version`` finalizes an upgrade with KIP-1022's one request (a dry run, then
    ``kafka-features upgrade --release-version B``) instead of one request per feature.

    Its own random stream, so adding it moved no other plan; the user's feature steps draw
    last, so a plan without them is what it always was.
    """
    if not upgrade_to and not downgrade_to and not feature_items:
        return []
    rng = random.Random(f"kchaos/{seed}/upgrade")
    topo = build_topology(topology, zookeepers=zookeepers)
    kafka = [n.name for n in topo.nodes if not n.is_zookeeper]
    brokers = [n.name for n in topo.brokers]
    windows = AFTER_MIGRATION if topo.migration else WINDOWS

    def start(phase: str) -> float:
        low, high = windows[phase]
        return round(time_limit * rng.uniform(low, high), 3)

    def roll(to: str, at: float) -> list[UpgradeStep]:
        return [UpgradeStep(at, ROLL, n, {"to": to}) for n in rng.sample(kafka, len(kafka))]

    def features(at: float, action: str, feature: str, level: Any, **kw: Any) -> UpgradeStep:
        params = {"action": action, "feature": feature, "level": level, "dry_run": False}
        return UpgradeStep(at, FEATURES, rng.choice(brokers), {**params, **kw})

    steps: list[UpgradeStep] = []
    if upgrade_to:
        steps += roll(upgrade_to, start("roll"))
        at = start("features")
        if topology == "zk":
            line = ibp(upgrade_to)
            steps += [
                UpgradeStep(at, IBP, b, {"ibp": line}) for b in rng.sample(brokers, len(brokers))
            ]
        elif finalize == RELEASE_VERSION:
            line = release_line(upgrade_to)
            steps.append(features(at, "upgrade", RELEASE_VERSION, line, dry_run=True))
            steps.append(features(at, "upgrade", RELEASE_VERSION, line))
        else:
            steps.append(features(at, "upgrade", METADATA_VERSION, LATEST, dry_run=True))
            steps.append(features(at, "upgrade", METADATA_VERSION, LATEST))
            steps.append(features(at, "upgrade", EVERY_OTHER, LATEST))
    if downgrade_to:
        at = start("downgrade" if upgrade_to else "downgrade-alone")
        target = RELEASE + downgrade_to
        steps.append(features(at, "downgrade", METADATA_VERSION, target, dry_run=True))
        steps.append(features(at, "downgrade", METADATA_VERSION, target))
        steps.append(UpgradeStep(at, AWAIT_SNAPSHOT))
        steps += roll(downgrade_to, at)
    if feature_items:
        bounds = feature_window(bool(upgrade_to), bool(downgrade_to), topo.migration)
        n = len(feature_items)
        for item, at in zip(feature_items, feature_times(rng, time_limit, n, bounds), strict=True):
            steps.append(
                features(
                    at,
                    item.action,
                    item.feature,
                    item.level,
                    dry_run=item.dry_run,
                    unsafe=item.unsafe,
                )
            )
    return steps


def node_properties(steps: list[UpgradeStep]) -> dict[str, str]:
    """What every Kafka node's configuration needs from the start for these steps."""
    return dict(SNAPSHOT_PROPS) if any(s.step == AWAIT_SNAPSHOT for s in steps) else {}


def load_steps(data: list[dict[str, Any]]) -> list[UpgradeStep]:
    return [UpgradeStep(**s) for s in data]


def feature_outcome(
    exit_code: int, stdout: str, stderr: str, feature: str, level: int, dry_run: bool
) -> tuple[str, str]:
    """(ok|fail|info, what Kafka's tool said) for a one-feature ``kafka-features`` call."""
    # The tool's answer is on stdout; its stderr ends with the JVM's logging noise (an
    # unconfigured log4j), which would crowd Kafka's own words out of the record.
    said = " ".join(stdout.split())[-600:]
    if stderr.strip():
        said = (" ".join(stderr.split())[-300:] + " | " + said) if said else stderr.strip()[-600:]
    verb = "can be" if dry_run else "was"
    done = re.search(rf"\b{re.escape(feature)} {verb} \w+d to {level}\.", stdout)
    if exit_code == 0 and done:
        return "ok", said
    answered = re.search(rf"(Could|Can) not \w+ {re.escape(feature)} to {level}\. (.*)", stdout)
    if answered and any(r in answered.group(2) for r in REFUSALS):
        return "fail", said
    if exit_code != 0 and "Command line error" in stderr + stdout:
        return "fail", said  # the tool refused its arguments: nothing was sent
    return "info", said or f"kafka-features exited {exit_code} and said nothing"


def release_outcome(
    exit_code: int, stdout: str, stderr: str, levels: dict[str, int], dry_run: bool
) -> tuple[str, str]:
    """(ok|fail|info, what the tool said) for ``upgrade --release-version``: one answer line per
    feature it sent (tools FeatureCommand.update); ok only when every one of ``levels`` says it
    was (can be) upgraded, fail when every line is a controller's refusal or the tool refused
    its own arguments (nothing was sent), info otherwise."""
    said = " ".join(stdout.split())[-900:]
    if stderr.strip():
        said = (" ".join(stderr.split())[-300:] + " | " + said) if said else stderr.strip()[-600:]
    verb = "can be" if dry_run else "was"
    done = [
        f
        for f, lv in levels.items()
        if re.search(rf"\b{re.escape(f)} {verb} upgraded to {lv}\.", stdout)
    ]
    if exit_code == 0 and levels and len(done) == len(levels):
        return "ok", said
    refused = [
        f
        for f, lv in levels.items()
        if (m := re.search(rf"(?:Could|Can) not upgrade {re.escape(f)} to {lv}\. (.*)", stdout))
        and any(r in m.group(1) for r in REFUSALS)
    ]
    if levels and len(refused) == len(levels):
        return "fail", said
    if exit_code != 0 and any(
        t in stderr + stdout
        for t in ("Command line error", "Can not specify", "Unknown metadata.version")
    ):
        return "fail", said  # the tool refused its own arguments: nothing was sent
    return "info", said or f"kafka-features exited {exit_code} and said nothing"


Handler = Callable[["UpgradeDriver", UpgradeStep, dict[str, Any]], dict[str, Any]]


class UpgradeDriver(RecordedSteps):
    """Carries out the plan's upgrade steps on its own thread, recording each one."""

    def __init__(
        self,
        steps: list[UpgradeStep],
        info: ClusterInfo,
        dists: Mapping[str, KafkaDist],
        nodes: dict[str, Controllable],
        recorder: Any,
        after: RecordedSteps | None = None,
        handlers: Mapping[str, Handler] | None = None,
        step_timeout: float = STEP_TIMEOUT_S,
        extra: Mapping[str, str] | None = None,
    ) -> None:
        self.info = info
        # What the nodes came up with (``extra``: the workload's, such as the share group's
        # lock, and every family's), so that a roll's configuration keeps it.
        self.extra = {**(extra or {}), **node_properties(steps)}
        self.dists = dict(dists)
        self.nodes = nodes
        self.after = after
        self.handlers = dict(handlers or {})
        first = self.dists[info.version].version
        self.versions = {n: first for n in nodes if not nodes[n].spec.is_zookeeper}
        self.ibps = {n: ibp(first) for n in self.versions}
        super().__init__(UPGRADE, steps, recorder, step_timeout)

    @property
    def topology(self) -> Topology:
        return self.info.topology

    def _blocked(self) -> str | None:
        if self.after is None:
            return None
        while not self.after.finished.wait(0.5):
            if self._stop.is_set():
                return f"the run ended before the {self.after.process} finished"
        if not self.after.completed():
            return f"the {self.after.process} did not complete ({self.after.ended})"
        return None

    # Feature steps resolve their levels before they are invoked ----------------------------------
    def run_step(self, step: PlannedStep) -> str:
        if step.step != FEATURES:
            return super().run_step(step)
        assert isinstance(step, UpgradeStep)
        if step.params.get("feature") == RELEASE_VERSION:
            return self._run_release(step)
        try:
            levels = self._resolve(step)
        except StepFailed as exc:
            value = self._value(step)
            self.recorder.invoke(step.step, value, self.process, step.node)
            self.recorder.fail(step.step, value, self.process, str(exc), step.node)
            self.done.append({**value, "type": "fail", "error": str(exc)})
            return "fail"
        if not levels:
            value = self._value(step)
            value = {
                **value,
                "params": {**value["params"], "levels": {}},
                "note": "every feature is already at the highest level every node supports",
            }
            self.recorder.invoke(step.step, value, self.process, step.node)
            self.recorder.ok(step.step, value, self.process, step.node)
            self.done.append({**value, "type": "ok"})
            return "ok"
        # One operation per feature, its level (and, for a user's step, its direction)
        # resolved in the invocation's params.
        kinds = []
        for f, lv in levels:
            params = {**step.params, "levels": {f: lv}}
            if params["action"] == AUTO:
                try:
                    params.update(self._direction(f, lv))
                except StepFailed as exc:
                    value = {**self._value(step), "params": params}
                    self.recorder.invoke(step.step, value, self.process, step.node)
                    self.recorder.fail(step.step, value, self.process, str(exc), step.node)
                    self.done.append({**value, "type": "fail", "error": str(exc)})
                    kinds.append("fail")
                    break
            kinds.append(super().run_step(replace(step, params=params)))
        worst = [k for k in ("info", "fail") if k in kinds]
        return worst[0] if worst else "ok"

    def _resolve(self, step: UpgradeStep) -> list[tuple[str, int]]:
        feature, level = step.params["feature"], step.params["level"]
        if isinstance(level, int):
            return [(feature, level)]
        if isinstance(level, str) and level.startswith(RELEASE):
            release = level[len(RELEASE) :]
            if release not in self.dists:
                # A user's step may name any older release: the newest jars the cluster runs
                # know every earlier metadata.version.
                newest = self.newest_dist()
                try:
                    found = release_level(newest.host_classpath(), newest.home, release)
                except ValueError as exc:
                    raise StepFailed(str(exc)) from None
                return [(feature, found[0])]
            try:
                return [(feature, metadata_version_level(self.dists[release])[0])]
            except ClusterError as exc:
                raise StepFailed(str(exc)) from None
        if level != LATEST:
            raise StepFailed(f"unknown feature level {level!r}")
        views = self._views_of_all()
        if not views:
            raise StepFailed("no Kafka node answered ApiVersions: no level to resolve")
        latest = max(views.values(), key=lambda v: v["epoch"])["finalized"]
        names = (
            [feature]
            if feature != EVERY_OTHER
            else sorted(
                {f for v in views.values() for f in v["supported"]}
                - {METADATA_VERSION, KRAFT_VERSION}
            )
        )
        out = []
        for name in names:
            # A node that does not list a feature supports only its level 0.
            target = min(v["supported"].get(name, [0, 0])[1] for v in views.values())
            if feature != EVERY_OTHER or target > latest.get(name, 0):
                out.append((name, target))
        return out

    def _run_release(self, step: UpgradeStep) -> str:
        """KIP-1022's one request for every feature: its levels (what the tool will send, from
        the same tool's version-mapping) resolved into the invocation, then one operation."""
        release = str(step.params["level"])
        try:
            levels = self.release_levels(release)
        except StepFailed as exc:
            value = self._value(step)
            self.recorder.invoke(step.step, value, self.process, step.node)
            self.recorder.fail(step.step, value, self.process, str(exc), step.node)
            self.done.append({**value, "type": "fail", "error": str(exc)})
            return "fail"
        params = {**step.params, "release_version": release, "levels": levels}
        return super().run_step(replace(step, params=params))

    def release_levels(self, release: str) -> dict[str, int]:
        """What ``kafka-features upgrade --release-version release`` sends, by the newest tool the
        cluster runs: ``version-mapping``'s levels, less those at 0 (the tool sends no upgrade
        to 0). Asked of the jars alone, no node."""
        dist = self.newest_dist()
        args = [
            "--bootstrap-server",
            self.topology.bootstrap_servers(),
            "version-mapping",
            "--release-version",
            release,
        ]
        code, out, err = run_tool(dist, "features", args, TOOL_TIMEOUT_S)
        mapping = parse_version_mapping(out) if code == 0 else {}
        if METADATA_VERSION not in mapping:
            said = " ".join((err.strip() or out.strip()).split())[-300:]
            raise StepFailed(
                f"no version mapping for release {release} from Kafka "
                f"{dist.version}'s kafka-features (exit {code}): {said}"
            )
        return {f: lv for f, lv in mapping.items() if lv > 0}

    def _direction(self, feature: str, level: int) -> dict[str, Any]:
        """``upgrade`` or ``downgrade`` for a user's step, against the finalized level of the
        highest-epoch answer just before it (``from``): what an operator reads off
        ``kafka-features describe`` before choosing. An equal level is an upgrade, which
        Kafka accepts and records again."""
        # Any answer will do (the highest epoch decides): waiting for every node, as a level
        # every node supports needs, would hold the step while the nemesis has a node down.
        best: dict[str, dict[str, Any]] = {}

        def check() -> tuple[bool, Any]:
            nonlocal best
            best = self.describe()
            return bool(best), {"answered": sorted(best)}

        with contextlib.suppress(StepUnsure):
            self._until("a Kafka node answering ApiVersions", check)
        views = best
        if not views:
            raise StepFailed("no Kafka node answered ApiVersions: no finalized level to compare")
        if feature == KRAFT_VERSION:
            # The Raft layer's level: brokers list it, controllers leave it out (KIP-853).
            now = max(v["finalized"].get(feature, 0) for v in views.values())
        else:
            now = max(views.values(), key=lambda v: v["epoch"])["finalized"].get(feature, 0)
        return {"action": "downgrade" if level < now else "upgrade", "from": now}

    def _views_of_all(self) -> dict[str, dict[str, Any]]:
        """Every Kafka node's ApiVersions answer, waiting (bounded) until all answer: a node
        restarting after a fault would otherwise be left out of the levels every node supports.
        What answered by the bound (or when the run stops) is what there is."""
        best: dict[str, dict[str, Any]] = {}

        def check() -> tuple[bool, Any]:
            nonlocal best
            views = self.describe()
            if len(views) >= len(best):
                best = views
            return len(views) == len(self.versions), {"answered": sorted(views)}

        with contextlib.suppress(StepUnsure):
            self._until("every Kafka node answering ApiVersions", check)
        return best

    def describe(
        self, port: int | None = None, names: list[str] | None = None
    ) -> dict[str, dict[str, Any]]:
        """What every Kafka node that answers says of its features now (KIP-584's ApiVersions),
        on ``port`` (default: the broker listener, or a controller's own)."""
        views = {}
        for name in names if names is not None else list(self.versions):
            spec = self.nodes[name].spec
            listener = port or (BROKER_PORT if spec.is_broker else CONTROLLER_PORT)
            try:
                views[name] = describe_features(spec.ip, listener, DESCRIBE_TIMEOUT_S)
            except FeaturesUnavailable:
                continue
        return views

    # Steps ---------------------------------------------------------------------------------------
    def _do(self, step: PlannedStep, value: dict[str, Any]) -> dict[str, Any]:
        assert isinstance(step, UpgradeStep)
        if step.step == FEATURES:  # only ever with its levels resolved (run_step)
            if value["params"].get("feature") == RELEASE_VERSION:
                return self._release_features(value)
            return self._features(value)
        if step.step == ROLL:
            return self._roll(step)
        if step.step == IBP:
            return self._ibp(step)
        if step.step == AWAIT_SNAPSHOT:
            return self._await_snapshot()
        if step.step in self.handlers:
            return self.handlers[step.step](self, step, value)
        raise StepFailed(f"no driver for step '{step.step}'")

    def _node(self, step: UpgradeStep) -> Controllable:
        if step.node is None or step.node not in self.versions:
            raise StepFailed(f"{step.step} names no Kafka node ({step.node})")
        return self.nodes[step.node]

    def _roll(self, step: UpgradeStep) -> dict[str, Any]:
        node = self._node(step)
        to = step.params["to"]
        if to not in self.dists:
            raise StepFailed(f"release {to} was not assembled for this run")
        dist = self.dists[to]
        before = self.versions[node.name]
        self._reconfigure(node, dist, self.ibps[node.name])
        self.versions[node.name] = dist.version
        restarted = restart(node, f"{node.name} set to start on Kafka {dist.version}")
        ready = self._ready(node, dist.version)
        return {"from": before, "version": dist.version, **restarted, **ready}

    def _ibp(self, step: UpgradeStep) -> dict[str, Any]:
        node = self._node(step)
        before, after = self.ibps[node.name], step.params["ibp"]
        self._reconfigure(node, self.dists_for(node.name), after)
        self.ibps[node.name] = after
        restarted = restart(node, f"{node.name} set to inter.broker.protocol.version {after}")
        return {"ibp_from": before, **restarted, **self._ready(node, self.versions[node.name])}

    def dists_for(self, name: str) -> KafkaDist:
        """The release a node runs now."""
        version = self.versions[name]
        return next(d for d in self.dists.values() if d.version == version)

    def _reconfigure(self, node: Controllable, dist: KafkaDist, pinned: str) -> None:
        """Writes the node's files for ``dist``: whoever starts it next (this step, or the kill
        nemesis's restart) starts it on that release."""
        phase = None
        if self.topology.migration:
            phase = CONTROLLER_FINALIZED if node.spec.is_controller else BROKER_KRAFT
        cfg = render_node(
            self.topology,
            node.spec,
            dist,
            self.info.timing,
            self.info.cluster_id,
            phase=phase,
            ibp=pinned if self.topology.kind == "zk" else None,
            extra=self.extra,
            # Where this kind of node keeps its files: the image's, or an SSH host's.
            layout=layout_of(node),
        )
        try:
            node.put_files(cfg.files)
        except ClusterError as exc:
            raise StepFailed(f"could not write {node.name}'s configuration: {exc}") from None

    def _ready(self, node: Controllable, version: str) -> dict[str, Any]:
        """The restarted node runs ``version`` by its own account (JMX app-info), and is RUNNING
        (a broker) or the controllers agree on a leader (a controller)."""
        controllers = [self.nodes[n.name] for n in self.topology.controllers]

        def check() -> tuple[bool, Any]:
            seen = node_sample(node)
            running = seen.get("version") if seen else None
            if running != version:
                return False, {"version": running}
            ok, view = role_ready(node, controllers)
            return ok, {"version": running, **view}

        what = f"{node.name} on Kafka {version} and " + role_readiness(node)
        took, seen = self._until(what, check)
        return {"ready_after_s": took, "ready": seen}

    def _await_snapshot(self) -> dict[str, Any]:
        """Every Kafka node holds a metadata snapshot that ends after the last feature change
        (a controller's ApiVersions epoch is the offset of its last feature change)."""
        controllers = [n.name for n in self.topology.controllers]

        def check() -> tuple[bool, Any]:
            views = self.describe(port=CONTROLLER_PORT, names=controllers)
            if not views:
                return False, {"feature_change_offset": None}
            change = max(v["epoch"] for v in views.values())
            ends = {name: self._snapshot_end(name) for name in self.versions}
            behind = sorted(n for n, end in ends.items() if end is None or end <= change)
            return not behind, {"feature_change_offset": change, "snapshot_ends": ends}

        took, seen = self._until("a metadata snapshot past the downgrade on every node", check)
        return {"observed_after_s": took, **seen}

    def _snapshot_end(self, name: str) -> int | None:
        """The end offset of the node's newest metadata snapshot (its file name), if any."""
        try:
            node = self.nodes[name]
            listing = node.exec(
                ["ls", f"{layout_of(node).data_dir}/{METADATA_PARTITION}"], timeout=10
            )
        except ClusterError:
            return None
        ends = [int(f.split("-")[0]) for f in listing.stdout.split() if f.endswith(".checkpoint")]
        return max(ends) if ends else None

    def _features(self, value: dict[str, Any]) -> dict[str, Any]:
        """Kafka's kafka-features from the newest release any node runs, on this host against
        every broker (a node the nemesis kills mid-step would otherwise take the tool with it)."""
        params = value["params"]
        ((feature, level),) = params["levels"].items()
        dist = self.newest_dist()
        args = [
            "--bootstrap-server",
            self.topology.bootstrap_servers(),
            params["action"],
            "--feature",
            f"{feature}={level}",
        ]
        if params.get("unsafe"):
            args.append("--unsafe")
        if params.get("dry_run"):
            args.append("--dry-run")
        code, out, err = run_tool(dist, "features", args, TOOL_TIMEOUT_S)
        kind, said = feature_outcome(code, out, err, feature, level, params["dry_run"])
        if kind == "fail":
            raise StepFailed(f"refused: {said}")
        if kind == "info":
            raise StepUnsure(f"outcome unknown: {said}")
        return {"tool": f"kafka-features {dist.version} " + shlex.join(args), "output": said}

    def _release_features(self, value: dict[str, Any]) -> dict[str, Any]:
        """``kafka-features upgrade --release-version X [--dry-run]``, as ``_features`` runs one
        feature: from the newest release any node runs, against every broker."""
        params = value["params"]
        dist = self.newest_dist()
        args = [
            "--bootstrap-server",
            self.topology.bootstrap_servers(),
            "upgrade",
            "--release-version",
            params["release_version"],
        ]
        if params.get("dry_run"):
            args.append("--dry-run")
        code, out, err = run_tool(dist, "features", args, TOOL_TIMEOUT_S)
        kind, said = release_outcome(code, out, err, params["levels"], params["dry_run"])
        if kind == "fail":
            raise StepFailed(f"refused: {said}")
        if kind == "info":
            raise StepUnsure(f"outcome unknown: {said}")
        return {"tool": f"kafka-features {dist.version} " + shlex.join(args), "output": said}

    def newest_dist(self) -> KafkaDist:
        """The newest release any node runs: its tools know every feature the cluster has."""
        return max(
            (self.dists_for(n) for n in self.versions), key=lambda d: parse_version(d.version)
        )
