"""Controller membership changes (KIP-853) as recorded steps of a run, beside the workload.

With ``--quorum dynamic`` (Kafka 3.9+) the plan removes one seeded controller from the voter set
and adds it back; with ``--quorum static-to-dynamic`` (4.1+) it first raises ``kraft.version`` to
1 (the upgrade driver's feature step) and reconfigures every node with
``controller.quorum.bootstrap.servers`` (Kafka's docs, KRaft "Upgrade"), then does the same.

- ``remove-controller``: Kafka's ``kafka-metadata-quorum remove-controller --controller-id N
  --controller-directory-id D``, run inside a running node (D as the leader describes the voter
  set just before); ok only when the tool says Kafka acknowledged it; then observed: the leader's
  voter set no longer holds (N, D).
- ``reprovision-controller`` (dedicated ``kraft`` topology): the removed controller is stopped,
  its data directory emptied at its next start (a new disk) and re-formatted with
  ``--no-initial-controllers``, so it gets a new directory id: a new replica, which starts as
  an observer. The step completes as soon as the node is started, before it can be sampled, so
  that the observer samples show the wipe between its last old sample and its first new one.
- ``add-controller``: once the node fetches from the leader, ``kafka-metadata-quorum
  --command-config <its server.properties> add-controller`` run inside it; ok only when
  acknowledged; then observed: (N, its directory id) is a voter and the controllers agree on a
  leader. On ``kraft-combined`` the node is never stopped nor wiped (its data directory holds its
  partitions too): the same replica, with the same directory id and a log it never lost, is
  added back, which KIP-853 allows (a replica is its id and directory id; only a replica that
  lost its disk needs a new one).
- ``quorum-config`` (static-to-dynamic): one node re-rendered with
  ``controller.quorum.bootstrap.servers`` and restarted, once ``kraft.version`` is 1.

With ``--quorum dynamic-auto-join`` (4.2+, dedicated ``kraft`` topology, every controller started
with ``controller.quorum.auto.join.enable``, KIP-1186) the controller is replaced the way auto-join
is meant for: ``stop-controller`` (stopped first, so that it cannot join again by itself while
it is removed), ``remove-controller``, ``reprovision-controller`` (started wiped: a new
directory id), then ``await-auto-join`` instead of ``add-controller``: no request is sent; ok once
(N, its new directory id) is a voter and the controllers agree on a leader, info if that is not
seen within the driver's wait. The removed replica (N, old directory id) has lost its disk, so
the removal's durability is judged as with ``add-controller``; the join itself, asked by the
node and not by kchaos, is an observation, not a request whose acknowledgement is judged.

Each attempt of the tool is one request (the Admin client does not retry: clusters/quorum.py).
An attempt the leader refused before appending anything may be retried (it did not happen); an
attempt whose outcome is unknown is retried too (the same change, refused if it was made), but
then a later refusal no longer proves the change did not happen: the step ends info. Every
completion records what it observed: the voter set (id and directory id), leader, epoch and high
watermark the leader described, and each controller's own JMX view right after the
acknowledgement (``at_ack``), which checkers/families/quorum_membership.py judges.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from typing import Any

from clusters.capabilities import Controllable
from clusters.cluster import ClusterInfo
from clusters.config import CONF_DIR, DATA_DIR, WIPE_MARKER, node_classpath, render_node
from clusters.errors import ClusterError
from clusters.quorum import (
    ADMIN_PROPERTIES,
    AUTO_JOIN,
    KRAFT_VERSION,
    STATIC,
    STATIC_TO_DYNAMIC,
    Outcome,
    QuorumStatus,
    configured_dynamic,
    membership_outcome,
    parse_status,
)
from clusters.topology import Topology, build_topology
from history.format import UPGRADE
from steps.recorded import (
    STOP_TIMEOUT_S,
    StepFailed,
    StepUnsure,
    broker_running,
    node_sample,
    quorum_agreed,
    restart,
)
from steps.upgrade import FEATURES, Handler, UpgradeDriver, UpgradeStep

REMOVE, ADD = "remove-controller", "add-controller"
REPROVISION, CONFIGURE = "reprovision-controller", "quorum-config"
STOP, AWAIT_JOIN = "stop-controller", "await-auto-join"
# The run's last word on the voter set, after every fault was healed (interpreter).
DESCRIBE = "describe-quorum"
STEPS = (REMOVE, REPROVISION, ADD, CONFIGURE, STOP, AWAIT_JOIN)
# Where in the time limit each phase may begin: the removed controller runs outside the voter
# set, under faults, for about a quarter of the run before it is added back.
WINDOWS = {"remove": (0.15, 0.2), "add": (0.4, 0.45)}
# After kraft.version 1 and a roll of every node's configuration.
STATIC_TO_DYNAMIC_WINDOWS = {"features": (0.05, 0.08), "remove": (0.5, 0.55), "add": (0.7, 0.72)}
TOOL_TIMEOUT_S = 45.0
ADMIN_CONFIG = f"{CONF_DIR}/quorum-admin.properties"
ADD_CONFIG = f"{CONF_DIR}/add-controller.properties"
META_PROPERTIES = f"{DATA_DIR}/meta.properties"


def quorum_schedule(
    topology: str, time_limit: float, seed: int, quorum: str | None
) -> list[UpgradeStep]:
    """The plan's quorum steps, appended to its upgrade steps; empty for a static quorum.

    Their own random stream, so adding them moved no other plan.
    """
    if quorum in (None, STATIC):
        return []
    rng = random.Random(f"kchaos/{seed}/quorum")
    topo = build_topology(topology)
    windows = STATIC_TO_DYNAMIC_WINDOWS if quorum == STATIC_TO_DYNAMIC else WINDOWS

    def start(phase: str) -> float:
        low, high = windows[phase]
        return round(time_limit * rng.uniform(low, high), 3)

    steps: list[UpgradeStep] = []
    if quorum == STATIC_TO_DYNAMIC:
        at = start("features")
        params = {"action": "upgrade", "feature": KRAFT_VERSION, "level": 1, "dry_run": False}
        steps.append(UpgradeStep(at, FEATURES, rng.choice([b.name for b in topo.brokers]), params))
        kafka = [n.name for n in topo.nodes if not n.is_zookeeper]
        steps += [UpgradeStep(at, CONFIGURE, n) for n in rng.sample(kafka, len(kafka))]
    controller = rng.choice([c.name for c in topo.controllers])
    at = start("remove")
    if quorum == AUTO_JOIN:
        steps.append(UpgradeStep(at, STOP, controller))
    steps.append(UpgradeStep(at, REMOVE, controller))
    at = start("add")
    if topology == "kraft":
        steps.append(UpgradeStep(at, REPROVISION, controller))
    steps.append(UpgradeStep(at, AWAIT_JOIN if quorum == AUTO_JOIN else ADD, controller))
    return steps


class QuorumSteps:
    """The quorum steps' handlers for an UpgradeDriver (``handlers()``), and what they remember
    between steps: which nodes are configured for a dynamic quorum."""

    def __init__(self, info: ClusterInfo) -> None:
        self.info = info
        self.dynamic = {n.name for n in info.topology.nodes if configured_dynamic(info.topology)}

    @property
    def topology(self) -> Topology:
        return self.info.topology

    def handlers(self) -> dict[str, Handler]:
        return {
            REMOVE: self.remove,
            REPROVISION: self.reprovision,
            ADD: self.add,
            CONFIGURE: self.configure,
            STOP: self.stop,
            AWAIT_JOIN: self.await_join,
        }

    # remove-controller ---------------------------------------------------------------------------
    def remove(self, driver: UpgradeDriver, step: UpgradeStep, value: dict[str, Any]) -> dict:
        node = _node(driver, step)
        nid = node.spec.node_id
        before = _described(driver, "the voter set before the removal")
        directory = before.directory_of(nid)
        if directory is None:
            raise StepFailed(
                f"{node.name} (id {nid}) is not a voter: the voters are {before.voters}"
            )
        args = ["remove-controller", "--controller-id", str(nid)]
        args += ["--controller-directory-id", directory]
        runners = _runners(driver, avoid=node.name)
        out, tries = _attempts(
            driver,
            f"{node.name} removed",
            "remove",
            lambda k: _tool(driver, runners[k % len(runners)], args),
        )
        at_ack = controller_views(driver)
        took, after = driver.until(
            f"({nid}, {directory}) out of the voter set",
            _voters_say(driver, lambda s: (nid, directory) not in s.voters),
        )
        return {
            "node_id": nid,
            "directory_id": directory,
            "before": before.to_value(),
            "attempts": tries,
            "output": out.said,
            "at_ack": at_ack,
            "observed_after_s": took,
            **after,
        }

    # reprovision-controller ----------------------------------------------------------------------
    def reprovision(self, driver: UpgradeDriver, step: UpgradeStep, value: dict[str, Any]) -> dict:
        node = _node(driver, step)
        if not node.spec.is_controller or node.spec.is_broker:
            raise StepFailed(f"{node.name} is not a dedicated controller: its disk holds more")
        cfg = render_node(
            self.topology,
            node.spec,
            driver.dists_for(node.name),
            self.info.timing,
            self.info.cluster_id,
            dynamic=True,
            fresh=True,
            extra=driver.extra,
        )
        was_running = _stopped(node)
        try:
            node.put_files({**cfg.files, WIPE_MARKER: "kchaos reprovision-controller\n"})
        except ClusterError as exc:
            _start_anyway(node)
            raise StepFailed(f"{node.name} kept its disk (config not written: {exc})") from None
        try:
            node.start()
        except ClusterError as exc:
            raise StepUnsure(f"{node.name} wiped on its next start, which failed: {exc}") from None
        self.dynamic.add(node.name)
        return {"was_running": was_running, "wiped": DATA_DIR, "format": "--no-initial-controllers"}

    # add-controller ------------------------------------------------------------------------------
    def add(self, driver: UpgradeDriver, step: UpgradeStep, value: dict[str, Any]) -> dict:
        node = _node(driver, step)
        nid = node.spec.node_id
        try:
            fetching, seen = driver.until(
                f"{node.name} fetching from a leader", lambda: _knows_leader(node)
            )
            directory = _directory_id(node)
            config = node.get_file(f"{CONF_DIR}/server.properties").decode()
            node.put_file(ADD_CONFIG, config.rstrip("\n") + "\n" + _props(ADMIN_PROPERTIES))
        except (StepUnsure, ClusterError) as exc:
            raise StepFailed(
                f"{node.name} not ready to be added, nothing was sent: {exc}"
            ) from None
        args = ["--command-config", ADD_CONFIG, "add-controller"]
        out, tries = _attempts(
            driver, f"{node.name} added", "add", lambda k: _tool(driver, node, args)
        )
        at_ack = controller_views(driver)
        took, after = self._voter(driver, nid, directory, "a voter")
        return {
            "node_id": nid,
            "directory_id": out.directory_id or directory,
            "fetching_after_s": fetching,
            "fetching": seen,
            "attempts": tries,
            "output": out.said,
            "at_ack": at_ack,
            "observed_after_s": took,
            **after,
        }

    # stop-controller and await-auto-join (KIP-1186) ---------------------------------------------
    def stop(self, driver: UpgradeDriver, step: UpgradeStep, value: dict[str, Any]) -> dict:
        return {"was_running": _stopped(_node(driver, step))}

    def _voter(
        self, driver: UpgradeDriver, nid: int, directory: str, what: str
    ) -> tuple[float, Any]:
        """Waits until (nid, directory) is a voter and the controllers agree on a leader."""
        controllers = [driver.nodes[c.name] for c in self.topology.controllers]

        def joined(s: QuorumStatus) -> bool:
            return (nid, directory) in s.voters and quorum_agreed(controllers)[0]

        return driver.until(
            f"({nid}, {directory}) {what} and the controllers agreeing",
            _voters_say(driver, joined),
        )

    def await_join(self, driver: UpgradeDriver, step: UpgradeStep, value: dict[str, Any]) -> dict:
        node = _node(driver, step)
        nid = node.spec.node_id
        try:
            fetching, seen = driver.until(
                f"{node.name} fetching from a leader", lambda: _knows_leader(node)
            )
            directory = _directory_id(node)
        except (StepUnsure, ClusterError) as exc:
            raise StepUnsure(f"{node.name} never fetched from a leader: {exc}") from None
        took, after = self._voter(driver, nid, directory, "a voter by its own request")
        return {
            "node_id": nid,
            "directory_id": directory,
            "fetching_after_s": fetching,
            "fetching": seen,
            "observed_after_s": took,
            **after,
        }

    # quorum-config -------------------------------------------------------------------------------
    def configure(self, driver: UpgradeDriver, step: UpgradeStep, value: dict[str, Any]) -> dict:
        node = _node(driver, step)
        cfg = render_node(
            self.topology,
            node.spec,
            driver.dists_for(node.name),
            self.info.timing,
            self.info.cluster_id,
            dynamic=True,
            extra=driver.extra,
        )
        try:
            node.put_files(cfg.files)
        except ClusterError as exc:
            raise StepFailed(f"could not write {node.name}'s configuration: {exc}") from None
        self.dynamic.add(node.name)
        restarted = restart(node, f"{node.name} set to controller.quorum.bootstrap.servers")
        if node.spec.is_broker:
            took, seen = driver.until(f"{node.name} RUNNING", lambda: broker_running(node))
        else:
            controllers = [driver.nodes[c.name] for c in self.topology.controllers]
            took, seen = driver.until(
                "the controllers agreeing on a leader", lambda: quorum_agreed(controllers)
            )
        return {"quorum": "dynamic", **restarted, "ready_after_s": took, "ready": seen}


def final_observation(driver: UpgradeDriver, attempts: int = 3) -> dict[str, Any]:
    """Records the voter set once more, as the run's last word (an op ``describe-quorum`` of the
    process ``upgrade``, after the driver stopped and every fault was healed); returns it."""
    recorder = driver.recorder
    recorder.invoke(DESCRIBE, None, UPGRADE, None)
    runners = _runners(driver, avoid=None)
    said = "no running node to describe the quorum from"
    for k in range(attempts if runners else 0):
        status, said = describe(driver, runners[k % len(runners)])
        if status is not None:
            controllers = [driver.nodes[c.name] for c in driver.topology.controllers]
            agreed, view = quorum_agreed(controllers)
            value = {**status.to_value(), "agreed": agreed, "jmx": view}
            recorder.ok(DESCRIBE, value, UPGRADE, None)
            return value
    recorder.fail(DESCRIBE, None, UPGRADE, said, None)
    return {"error": said}


# Kafka's tool, run inside a node ------------------------------------------------------------------
def tool_command(driver: UpgradeDriver, node: Controllable, args: list[str]) -> list[str]:
    """``kafka-metadata-quorum`` from the release ``node`` runs, against every controller."""
    dist = driver.dists_for(node.name)
    return [
        "java",
        "-Xmx128m",
        "-XX:TieredStopAtLevel=1",
        "-XX:+UseSerialGC",
        f"-Dlog4j.configuration=file:{CONF_DIR}/log4j.properties",
        f"-Dlog4j2.configurationFile={CONF_DIR}/log4j2.properties",
        "-cp",
        node_classpath(dist),
        dist.classes["metadata_quorum"],
        "--bootstrap-controller",
        driver.topology.controller_endpoints(),
        *([] if "--command-config" in args else ["--command-config", ADMIN_CONFIG]),
        *args,
    ]


def _tool(driver: UpgradeDriver, node: Controllable, args: list[str]) -> tuple[int, str, str]:
    """One run of the tool in ``node``; exit code -1 when it could not be started there."""
    try:
        if "--command-config" not in args:
            node.put_file(ADMIN_CONFIG, _props(ADMIN_PROPERTIES))
        result = node.exec(tool_command(driver, node, args), timeout=TOOL_TIMEOUT_S)
    except ClusterError as exc:
        return -1, "", f"not run in {node.name}: {exc}"
    return result.exit_code, result.stdout, result.stderr


def describe(driver: UpgradeDriver, node: Controllable) -> tuple[QuorumStatus | None, str]:
    """``describe --status`` run in ``node``: the leader's view, or None and what the tool said."""
    code, out, err = _tool(driver, node, ["describe", "--status"])
    status = parse_status(out) if code == 0 else None
    said = " ".join((out.strip() + " " + err.strip()).split())[-300:]
    return status, said


def controller_views(driver: UpgradeDriver) -> dict[str, Any]:
    """Each controller's own JMX view (state, leader, epoch), by node id: what the checker's
    epoch bounds rest on. Keyed by id, not name, so a step's value names only its own node."""
    out: dict[str, Any] = {}
    for spec in driver.topology.controllers:
        seen = node_sample(driver.nodes[spec.name])
        raft = (seen or {}).get("raft")
        out[str(spec.node_id)] = (
            {k: raft.get(k) for k in ("state", "leader", "epoch", "high_watermark")}
            if raft
            else None
        )
    return out


# Helpers -----------------------------------------------------------------------------------------
def _node(driver: UpgradeDriver, step: UpgradeStep) -> Controllable:
    if step.node is None or step.node not in driver.nodes:
        raise StepFailed(f"{step.step} names no node of this cluster ({step.node})")
    return driver.nodes[step.node]


def _runners(driver: UpgradeDriver, avoid: str | None) -> list[Controllable]:
    """Running Kafka nodes to run the tool in, brokers first, ``avoid`` last: attempts go round
    them, so one node cut off by a partition does not decide every attempt."""
    specs = sorted(
        (n for n in driver.topology.nodes if not n.is_zookeeper),
        key=lambda n: (n.name == avoid, not n.is_broker),
    )
    out = []
    for spec in specs:
        try:
            if driver.nodes[spec.name].is_running():
                out.append(driver.nodes[spec.name])
        except ClusterError:
            continue
    if not out:
        raise StepFailed("no Kafka node is running to run kafka-metadata-quorum in")
    return out


def _described(driver: UpgradeDriver, what: str) -> QuorumStatus:
    """The leader's description, or StepFailed (nothing was sent yet)."""
    runners = _runners(driver, avoid=None)
    tries: list[str] = []

    def check() -> tuple[bool, Any]:
        status, said = describe(driver, runners[len(tries) % len(runners)])
        tries.append(said)
        return status is not None, status or said

    try:
        return driver.until(what, check)[1]
    except StepUnsure as exc:
        raise StepFailed(f"{what} could not be described, nothing was sent: {exc}") from None


def _voters_say(
    driver: UpgradeDriver, wanted: Callable[[QuorumStatus], bool]
) -> Callable[[], tuple[bool, dict[str, Any]]]:
    """A readiness check: the leader's description satisfies ``wanted``. Successive checks ask
    from successive running nodes."""
    asked: list[int] = []

    def check() -> tuple[bool, dict[str, Any]]:
        runners = _runners(driver, avoid=None)
        status, said = describe(driver, runners[len(asked) % len(runners)])
        asked.append(1)
        if status is None:
            return False, {"describe": said}
        return wanted(status), status.to_value()

    return check


def _attempts(
    driver: UpgradeDriver, what: str, action: str, run: Callable[[int], tuple[int, str, str]]
) -> tuple[Outcome, int]:
    """Runs attempts until one is acknowledged or refused for good (see the module's
    docstring); StepFailed when none can have happened, StepUnsure when one may have."""
    seen: list[Outcome] = []

    def attempt() -> tuple[bool, Any]:
        code, out, err = run(len(seen))
        outcome = membership_outcome(action, code, out, err)
        if code == -1:  # the tool never started in that node: nothing was sent
            outcome = Outcome("busy", err)
        seen.append(outcome)
        return outcome.kind in ("ok", "refused"), outcome.said

    def unknown() -> list[str]:
        return [o.said for o in seen if o.kind == "unknown"]

    try:
        driver.until(what, attempt)
    except StepUnsure as exc:
        if unknown():
            raise StepUnsure(f"{exc}; an attempt's outcome is unknown: {unknown()[-1]}") from None
        raise StepFailed(
            "no attempt can have made the change (each was refused before anything was "
            f"appended, or never ran): {exc}"
        ) from None
    last = seen[-1]
    if last.kind == "refused":
        if unknown():
            raise StepUnsure(
                f"refused ({last.said}) after an attempt whose outcome is unknown "
                f"({unknown()[-1]}), which may have made the change"
            )
        raise StepFailed(f"refused: {last.said}")
    return last, len(seen)


def _knows_leader(node: Controllable) -> tuple[bool, Any]:
    seen = node_sample(node)
    raft = (seen or {}).get("raft") or {}
    leader = raft.get("leader")
    view = {k: raft.get(k) for k in ("state", "leader", "epoch")} if raft else None
    return isinstance(leader, int) and leader >= 0, view


def _directory_id(node: Controllable) -> str:
    text = node.get_file(META_PROPERTIES).decode(errors="replace")
    m = re.search(r"^directory\.id=(\S+)$", text, re.MULTILINE)
    if m is None:
        raise ClusterError(f"{node.name}'s {META_PROPERTIES} names no directory.id")
    return m.group(1)


def _props(values: dict[str, str]) -> str:
    return "".join(f"{k}={v}\n" for k, v in values.items())


def _stopped(node: Controllable) -> bool:
    """Stops the node if it runs; whether it ran. StepUnsure when it could not be stopped."""
    try:
        was_running = node.is_running()
        if was_running:
            node.stop(timeout=STOP_TIMEOUT_S)
    except ClusterError as exc:
        raise StepUnsure(f"could not stop {node.name}: {exc}") from None
    return was_running


def _start_anyway(node: Controllable) -> None:
    """A node this step stopped is started again, whatever else went wrong."""
    try:
        if not node.is_running():
            node.start()
    except ClusterError:
        pass
