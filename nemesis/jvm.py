"""Faults inside a running Kafka JVM: Byteman rules in named Kafka methods.

Every Kafka JVM starts with Byteman's agent, its rule listener on the node's own cluster address
(clusters/config.py, clusters/byteman.py). A fault loads rules into the target JVMs; stop
unloads them. Unlike SIGSTOP, a rule slows or breaks one code path while every other thread of
the process runs on: the controller's event queue stalls while its Raft client keeps leading.

Which class and method a kind hooks is looked up when the fault happens, for the Kafka version
each target runs then (an upgrade roll changes it node by node), in that version's jars in the
host cache, and recorded: classes move between release lines (``BrokerLifecycleManager`` left
Scala in 4.x, ``FileRecords`` moved to ``record.internal`` in 4.3). A kind the version cannot take
fails before any node is touched.

Every rule carries its own deadline: its condition compares the node's
``System.currentTimeMillis()`` with an absolute end, so a harness that dies mid-fault leaves no
JVM faulted past the fault's length. The end is the harness host's clock plus the fault's
length; Docker nodes share that clock (the clock package skews only a JVM it restarted under
libfaketime, and its stop sets the offset back to 0; one fault is on at a time).
"""

from __future__ import annotations

import random
import re
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from clusters.byteman import BytemanError, NoListener, Rule
from clusters.capabilities import (
    Controllable,
    Exec,
    Frozen,
    Logs,
    MissingCapability,
    Rules,
    layout_of,
    proc_dir,
    require,
)
from clusters.classfile import declared_methods
from clusters.config import running_version
from clusters.errors import ClusterError
from clusters.kafka_dist import dist_home
from clusters.topology import TOPOLOGIES, NodeSpec, Topology
from history.effects import BROKER, CONTROLLER, EFFECTS, RESTARTED, STALLED, effect
from nemesis.api import FaultContext, FaultStep
from nemesis.errors import NemesisError, before_touching
from nemesis.menu import Interval, Kind, Menu, Param, Pick
from nemesis.nodes import number, on_each, split_running, wait_for
from nemesis.process import restart_exited
from nemesis.targets import COUNTING, Resolved, pick_count, resolve

# Where KRaft controllers and KRaft-registered brokers exist (a migration has both from its start).
KRAFT = tuple(t for t in TOPOLOGIES if t != "zk")
# Every rule this package loads is named "kchaos <kind> <step seed> <hook role>".
PREFIX = "kchaos "
# The message of the injected IOException; with the step's tag it finds Kafka's handling in logs.
FSYNC_MARKER = "kchaos fsync-error"
# How long fsync-error's start watches for what the node does (bounded by the fault's length).
WATCH_S = 15.0
# A JVM opens its listener in the agent's premain, moments after its process starts.
LISTENER_WAIT_S = 5.0
# After Kafka has logged the injected exception, how long a halt may take to show as an exit.
EXIT_GRACE_S = 5.0

DEFAULTS: dict[str, dict[str, float]] = {
    "controller-stall": {"stall_s": 10.0},
    "heartbeat-delay": {"delay_ms": 4000.0, "for_s": 60.0},
    "slow-disk": {"delay_ms": 100.0, "for_s": 60.0},
    "fsync-error": {"for_s": 60.0},
}
# Who a kind hits when the step names no target; a step's own target takes precedence.
DEFAULT_TARGET = {
    "controller-stall": "active-controller",
    "heartbeat-delay": "partition-leader",
    "slow-disk": "partition-leader",
    "fsync-error": "partition-leader",
}

# Whose code a kind slows (history/effects.py STALLED `side`); not listed: the whole node's.
SIDE = {"controller-stall": CONTROLLER, "heartbeat-delay": BROKER}


def can_hook(kind: str, node: NodeSpec, topology: Topology) -> bool:
    """Whether a node runs the code ``kind`` hooks: a KRaft controller's QuorumController, a
    KRaft-registered broker's lifecycle manager, or any Kafka node's logs."""
    if node.is_zookeeper:
        return False
    if kind == "controller-stall":
        return node.is_controller
    if kind == "heartbeat-delay":
        return node.is_broker and topology.kraft
    return True


MENU = Menu(
    "jvm",
    kinds=(
        Kind(
            "controller-stall",
            "the controller's event queue (QuorumController) blocked for stall_s while its "
            "Raft client runs on",
            reads=("stall_s",),
            draws=(Interval("stall_s", at_least=1.0),),
            only_on=KRAFT,
        ),
        Kind(
            "heartbeat-delay",
            "each heartbeat a broker sends its controller waits delay_ms first (broker side)",
            reads=("delay_ms", "for_s"),
            # Below, near and well past a session timeout (3 s fast, 9 s default timing).
            draws=(Pick("delay_ms", (1000, 4000, 12000)), Interval("for_s", at_least=1.0)),
            only_on=KRAFT,
        ),
        Kind(
            "slow-disk",
            "each log append and flush (data and metadata logs) waits delay_ms first",
            reads=("delay_ms", "for_s"),
            draws=(Pick("delay_ms", (10, 100, 1000)), Interval("for_s", at_least=1.0)),
        ),
        Kind(
            "fsync-error",
            "each log flush throws java.io.IOException; stop starts the node again if it exited",
            reads=("for_s",),
            draws=(Interval("for_s", at_least=1.0),),
        ),
    ),
    meaning="Byteman rules in named Kafka methods of the target JVMs; stop unloads them",
    effects=(STALLED,),
    stop_effects=(RESTARTED,),  # fsync-error: a JVM that halted is started again
    params=(
        Param("stall_s", "controller-stall: seconds the event queue stays blocked", "> 0", 10.0),
        Param(
            "delay_ms",
            "ms each hooked call waits: each heartbeat send (heartbeat-delay, default 4000), "
            "each log append and flush (slow-disk, default 100)",
            "> 0",
            None,
        ),
        Param(
            "for_s",
            "seconds the rules act at most (their own deadline); stop unloads them before",
            "> 0",
            60.0,
        ),
    ),
    targets_note=(
        "the kind says who: controller-stall the active controller, the other kinds a partition "
        "leader; a step's own target (any selector) takes precedence, one/minority/majority/all "
        "counted among the nodes the kind can hook"
    ),
    acts_on=can_hook,
)


@dataclass(frozen=True)
class Hook:
    """One method a kind hooks: its role in the fault and where it may live, newest line first."""

    role: str
    candidates: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class FoundHook:
    """A hook as one Kafka version has it: the class, the method's name in the class file, the
    jar."""

    role: str
    cls: str
    method: str
    jar: str

    def record(self) -> dict[str, str]:
        return {"role": self.role, "class": self.cls, "method": self.method, "jar": self.jar}


_QC = "org.apache.kafka.controller.QuorumController$"
_FILE_RECORDS = (
    "org.apache.kafka.common.record.internal.FileRecords",  # 4.3 on
    "org.apache.kafka.common.record.FileRecords",
)
# Only QuorumController's own event classes: the KafkaEventQueue under them serves brokers too.
HOOKS: dict[str, tuple[Hook, ...]] = {
    "controller-stall": tuple(
        Hook(role, tuple((_QC + cls, "run") for cls in classes))
        for role, classes in (
            ("write-event", ("ControllerWriteEvent",)),
            ("read-event", ("ControllerReadEvent",)),
            # 3.3 names the class of events that are neither reads nor writes ControlEvent;
            # 3.4 renamed it ControllerEvent.
            ("control-event", ("ControllerEvent", "ControlEvent")),
        )
    ),
    "heartbeat-delay": (
        Hook(
            "heartbeat-send",
            (
                ("org.apache.kafka.server.BrokerLifecycleManager", "sendBrokerHeartbeat"),
                # Scala mangles the private method's name in the class file (3.x to 4.1).
                (
                    "kafka.server.BrokerLifecycleManager",
                    "kafka$server$BrokerLifecycleManager$$sendBrokerHeartbeat",
                ),
            ),
        ),
    ),
    "slow-disk": (
        Hook("append", tuple((c, "append") for c in _FILE_RECORDS)),
        Hook("flush", tuple((c, "flush") for c in _FILE_RECORDS)),
    ),
    "fsync-error": (Hook("flush", tuple((c, "flush") for c in _FILE_RECORDS)),),
}


def find_hooks(kind: str, libs: Path, version: str) -> tuple[FoundHook, ...]:
    """Each hook of ``kind`` in the jars at ``libs``; NemesisError naming what is missing."""
    found = []
    for hook in HOOKS[kind]:
        for cls, method in hook.candidates:
            declared = declared_methods(libs, cls)
            if declared is not None and method in declared[1]:
                found.append(FoundHook(hook.role, cls, method, declared[0]))
                break
        else:
            tried = " or ".join(f"{c}.{m}" for c, m in hook.candidates)
            raise NemesisError(
                f"Kafka {version} cannot take jvm {kind}: its jars have no {tried} to hook"
            )
    return tuple(found)


@lru_cache(maxsize=64)
def hooks_for(kind: str, version: str) -> tuple[FoundHook, ...]:
    """The hooks of ``kind`` in a version's jars in the host cache, looked up once per version."""
    libs = dist_home(version) / "libs"
    if not libs.is_dir():
        raise NemesisError(
            f"Kafka {version} is not in this host's cache ({libs}), so which methods jvm {kind} "
            "hooks there cannot be looked up"
        )
    return find_hooks(kind, libs, version)


def rule_names(kind: str, tag: str, hooks: tuple[FoundHook, ...]) -> list[str]:
    return [f"{PREFIX}{kind} {tag} {h.role}" for h in hooks]


def rules_for(
    kind: str, hooks: tuple[FoundHook, ...], params: dict[str, float], end_ms: int, tag: str
) -> list[Rule]:
    """The rules of one fault on one node. Each acts only while its node's wall clock is before
    ``end_ms`` and never waits past it, whatever the harness does meanwhile."""
    end = f"{end_ms}L"
    left = f"{end} - System.currentTimeMillis()"
    if kind == "controller-stall":
        # The first event to run blocks until the end; every event queued behind it waits on
        # the single event thread, and runs at once afterwards (the condition is false then).
        action = f"delay(Math.max(1L, {left}))"
    elif kind in ("heartbeat-delay", "slow-disk"):
        action = f"delay(Math.max(1L, Math.min({int(params['delay_ms'])}L, {left})))"
    elif kind == "fsync-error":
        # FileRecords.flush declares IOException: Kafka's own handling of a failed fsync runs.
        action = (
            f'throw new java.io.IOException("{FSYNC_MARKER} {tag}: injected by kchaos through '
            'Byteman")'
        )
    else:
        raise NemesisError(f"unknown jvm kind '{kind}': choose one of {', '.join(HOOKS)}")
    names = rule_names(kind, tag, hooks)
    return [
        Rule(name, h.cls, h.method, f"System.currentTimeMillis() < {end}", action)
        for name, h in zip(names, hooks, strict=True)
    ]


def reaction(logs: str, tag: str, limit: int = 8) -> list[str]:
    """What Kafka logged about the injected IOException of step ``tag``: each log statement that
    carried it (its header line and the causes up to it), then later statements that say what
    the node did about it (a log dir taken offline, a halt, a shutdown)."""
    lines = logs.splitlines()
    marker = f"{FSYNC_MARKER} {tag}"
    hits = [i for i, ln in enumerate(lines) if marker in ln]
    if not hits:
        return []
    out: list[str] = []
    for i in hits:
        start = next((j for j in range(i, -1, -1) if lines[j].startswith("[")), i)
        for ln in lines[start : i + 1]:
            text = ln.strip()
            if text and not text.startswith("at ") and text not in out:
                out.append(text)
    after = re.compile(r"offline|[Hh]alt|[Ss]hut ?down|Stopping serving|fatal", re.IGNORECASE)
    for ln in lines[hits[0] + 1 :]:
        if ln.startswith("[") and after.search(ln) and ln.strip() not in out:
            out.append(ln.strip())
    return [ln[:300] for ln in out[:limit]]


class JvmNemesis:
    fault = "jvm"
    menu = MENU

    def check(self, step: FaultStep) -> dict[str, float]:
        MENU.check_keys(step)
        params = {}
        for key, default in DEFAULTS[step.kind].items():
            value = number(step.params, key, default)
            if not value > 0:
                raise NemesisError(f"jvm {step.kind} {key} must be positive, got {value:g}")
            params[key] = value
        return params

    def start(self, ctx: FaultContext, step: FaultStep) -> dict[str, Any]:
        kind, tag = step.kind, f"{step.seed:08x}"
        # Everything that can refuse comes before the first rule is loaded: a step that fails
        # here changed no node.
        with before_touching():
            params = self.check(step)
            found, skipped = _targets(ctx, step)
            running, down = split_running(ctx.nodes[t] for t in found.targets)
            try:
                require(running, (Rules,), f"jvm {kind}")
            except MissingCapability as exc:
                raise NemesisError(str(exc)) from None
            versions = on_each(running, _version)
            hooks = {n: hooks_for(kind, v) for n, v in versions.items()}
            on_each(running, _ask_listener)  # a JVM without the agent refuses here, untouched
        length = params.get("stall_s", params.get("for_s", 0.0))
        end_ms = int(time.time() * 1000 + length * 1000)
        rules = {n: rules_for(kind, hooks[n], params, end_ms, tag) for n in hooks}
        loaded = on_each(running, lambda n: _load(n, rules[n.name]))
        out: dict[str, Any] = {
            "kind": kind,
            **found.record(),
            **params,
            "until_ms": end_ms,
            "hooks": {
                n: {"version": versions[n], "hooks": [h.record() for h in hooks[n]]}
                for n in sorted(hooks)
            },
            "rules": {n: sorted(names) for n, names in sorted(loaded.items())},
            "injected": {n: _injected(ctx.nodes[n], rules[n]) for n in sorted(loaded)},
        }
        if skipped:
            out["skipped"] = skipped
        if down:
            out["not_running"] = down
        if kind == "fsync-error" and running:
            out["node_did"] = _watch(running, tag, min(WATCH_S, length))
        out[EFFECTS] = [effect(STALLED, found.targets, side=SIDE.get(kind), by="Byteman")]
        return out

    def stop(self, ctx: FaultContext, step: FaultStep) -> dict[str, Any]:
        # Every kchaos rule on every node, not only this step's targets: stop means heal.
        nodes, frozen = _rule_nodes(ctx)
        unloaded = on_each(nodes, _unload)
        out: dict[str, Any] = {
            "kind": step.kind,
            "unloaded": {n: names for n, names in sorted(unloaded.items()) if names},
        }
        if frozen:
            out["frozen"] = frozen
        if step.kind == "fsync-error":
            tag = f"{step.seed:08x}"
            did = {}
            for node in ctx.nodes.values():
                if node.spec.is_zookeeper or not isinstance(node, Logs):
                    continue
                logged = reaction(node.logs(tail=3000), tag)
                if logged:
                    did[node.name] = {"running": node.is_running(), "log": logged}
            out["node_did"] = did
            out["restarted"] = restart_exited(ctx)
            out[EFFECTS] = [effect(RESTARTED, out["restarted"])]
        return out

    def heal_all(self, ctx: FaultContext) -> list[str]:
        """Starts exited nodes (a JVM that halted on an injected fsync error), then unloads every
        rule from every running Kafka JVM. Nodes without ``Rules`` are left as they are: no rule
        can have been loaded into them."""
        done = [f"{n}: started exited node" for n in restart_exited(ctx)]
        nodes, frozen = _rule_nodes(ctx)
        done += [f"{n}: frozen, any Byteman rules left to their deadline" for n in frozen]
        for name, result in sorted(on_each(nodes, _delete_all).items()):
            if isinstance(result, str):
                done.append(f"{name}: {result}")
            elif result:
                done.append(f"{name}: unloaded Byteman rules {', '.join(sorted(result))}")
        return done


def _targets(ctx: FaultContext, step: FaultStep) -> tuple[Resolved, dict[str, str]]:
    """The nodes the step's selector names among those its kind can hook, and the ones it named
    but the kind cannot hook there (with why)."""
    topo, kind = ctx.topology, step.kind
    selector = step.target or DEFAULT_TARGET[kind]
    rng = random.Random(step.seed)
    pool = sorted(n.name for n in topo.nodes if can_hook(kind, n, topo))
    if not pool:
        raise NemesisError(f"jvm {kind} has nothing to hook on a {topo.kind} cluster")
    if selector in COUNTING:
        return Resolved(selector, pick_count(pool, selector, rng), {"among": pool}), {}
    found = resolve(ctx, selector, rng, step.params)
    skipped = {n: f"runs no code jvm {kind} hooks" for n in found.targets if n not in pool}
    hit = [n for n in found.targets if n in pool]
    if not hit:
        raise NemesisError(
            f"jvm {kind} hooks code that target {selector} ({', '.join(found.targets)}) does not "
            f"run: it needs one of {', '.join(pool)}"
        )
    return Resolved(found.selector, hit, found.evidence), skipped


def _version(node: Exec) -> str:
    got = node.exec(["cat", f"{proc_dir(node)}/cmdline"], timeout=10)
    version = running_version(got.stdout, layout_of(node)) if got.ok else None
    if version is None:
        raise NemesisError(f"node {node.name}: cannot tell which Kafka version its JVM runs")
    return version


def _ask_listener(node: Rules) -> None:
    """The JVM's listener answers; one that is not up yet (a JVM a moment after its start, as
    a kill's stop leaves it) is given LISTENER_WAIT_S to open its port."""
    refused: list[BytemanError] = []

    def answers() -> bool:
        try:
            node.loaded_rules()
            return True
        except NoListener as exc:
            refused[:] = [exc]
            return False
        except BytemanError as exc:
            raise NemesisError(f"node {node.name}: {exc}") from None

    try:
        wait_for(f"{node.name}'s Byteman listener", answers, LISTENER_WAIT_S, every=0.25)
    except NemesisError:
        if refused:
            raise NemesisError(f"node {node.name}: {refused[0]}") from None
        raise


def _load(node: Rules, rules: list[Rule]) -> list[str]:
    try:
        return node.load_rules(rules)
    except BytemanError as exc:
        raise NemesisError(f"node {node.name}: {exc}") from None


def _injected(node: Controllable, rules: list[Rule]) -> dict[str, list[str]]:
    """Where each rule is in the running JVM's code now; an empty list: its class is not loaded
    yet (Byteman injects it when it is)."""
    if not isinstance(node, Rules):
        return {}
    try:
        listed = {r.name: list(r.injected) for r in node.loaded_rules()}
    except BytemanError:
        return {}  # the JVM went away (an fsync-error halt): what it did is recorded apart
    return {r.name: listed.get(r.name, []) for r in rules}


def _watch(nodes: list[Controllable], tag: str, timeout: float) -> dict[str, dict[str, Any]]:
    """What each node did about the injected IOException, observed: exited, or logged it and ran
    on (a log dir taken offline), or nothing yet (no flush ran within ``timeout``)."""
    t0 = time.monotonic()
    seen: dict[str, float] = {}

    def settled() -> bool:
        for node in nodes:
            if node.name in seen or not node.is_running():
                seen.setdefault(node.name, time.monotonic())
        waiting = [
            n for n in nodes if n.name not in seen and not (isinstance(n, Logs) and _logged(n, tag))
        ]
        return not waiting

    try:
        wait_for("the injected fsync error to be handled", settled, timeout, every=0.2)
        # Kafka logged it; a halt follows within moments if that is its handling.
        wait_for(
            "a node that logged the error to exit",
            lambda: all(not n.is_running() for n in nodes),
            EXIT_GRACE_S,
            every=0.2,
        )
    except NemesisError:
        pass  # what was observed by then is the record
    out: dict[str, dict[str, Any]] = {}
    for node in nodes:
        running = node.is_running()
        entry: dict[str, Any] = {"exited": not running}
        if not running:
            entry["exited_within_s"] = round(seen.get(node.name, time.monotonic()) - t0, 3)
        logged = reaction(node.logs(tail=3000), tag) if isinstance(node, Logs) else []
        entry["log"] = logged
        if running and not logged:
            entry["note"] = (
                f"no flush ran within {timeout:g} s: a broker-only node flushes its data logs "
                "only when a segment rolls (or a topic's flush.messages/flush.ms asks)"
            )
        out[node.name] = entry
    return out


def _logged(node: Logs, tag: str) -> bool:
    return f"{FSYNC_MARKER} {tag}" in node.logs(tail=500)


def _rule_nodes(ctx: FaultContext) -> tuple[list[Any], list[str]]:
    """The running Kafka nodes with ``Rules``, and the names of those frozen from outside
    (``docker pause``), whose listener cannot answer: their rules end at their deadline."""
    out, frozen = [], []
    for node in ctx.nodes.values():
        if node.spec.is_zookeeper or not isinstance(node, Rules):
            continue
        try:
            if not node.is_running():
                continue  # an exited JVM took its rules with it
            if isinstance(node, Frozen) and node.is_frozen():
                frozen.append(node.name)
            else:
                out.append(node)
        except ClusterError:
            continue  # a node that is gone holds no rules
    return out, sorted(frozen)


def _unload(node: Rules) -> list[str]:
    """Unloads this package's rules (named ``kchaos ...``) from one JVM; those it unloaded."""
    try:
        ours = [r.name for r in node.loaded_rules() if r.name.startswith(PREFIX)]
        return sorted(node.delete_rules(ours)) if ours else []
    except NoListener:
        return []  # no listener, no rules: a JVM restarted since holds none
    except BytemanError as exc:
        raise NemesisError(f"node {node.name}: {exc}") from None


def _delete_all(node: Rules) -> list[str] | str:
    try:
        return node.delete_all_rules()
    except NoListener:
        return []
    except BytemanError as exc:
        return f"could not unload Byteman rules: {exc}"
