"""Process faults: SIGKILL with a restart on stop, and SIGSTOP with SIGCONT on stop.

Signals go to the node's PID 1, the Kafka (or ZooKeeper) JVM itself. Stopping a kill waits for
the process to run again, not for Kafka to be ready: recovery is what the history should show.
"""

from __future__ import annotations

import random
from collections.abc import Collection
from typing import Any

from clusters.capabilities import Controllable, Pause, Process
from clusters.topology import TOPOLOGIES, ZK_TOPOLOGIES
from history.effects import DOWN, EFFECTS, ENDS_ONLY, RESTARTED, RESUMED, STOPPED, effect
from nemesis.api import NAMED, NAMED_ONLY_TARGETS, TARGETS, FaultContext, FaultStep
from nemesis.errors import before_touching
from nemesis.menu import Kind, Menu
from nemesis.nodes import on_each, on_live, split_running, wait_for
from nemesis.targets import named_nodes, resolve

# Where a plan aims a selector: at a quorum leader where there is a KRaft quorum (ZooKeeper mode
# has none; a migration has both the whole run long), at a ZooKeeper leader where there is one.
AIMED_ONLY_ON = {
    "quorum-leader": tuple(t for t in TOPOLOGIES if t != "zk"),
    "zk-leader": ZK_TOPOLOGIES,
}


def signal_menu(fault: str, meaning: str, does: str, stop_does: str) -> Menu:
    """Kill and pause: every kind is a selector, and the nodes it names get the signal; every
    start has the effect ``does``, every stop ``stop_does``."""
    kinds = tuple(
        Kind(
            t,
            f"the nodes target '{t}' names (below)",
            only_on=AIMED_ONLY_ON.get(t),
            drawn=t not in NAMED_ONLY_TARGETS,
        )
        for t in TARGETS
    )
    return Menu(
        fault,
        kinds,
        kind_is_target=True,
        meaning=meaning,
        effects=(does,),
        stop_effects=(stop_does,),
    )


KILL_MENU = signal_menu(
    "kill", "SIGKILL the JVM; stop starts every exited node again", DOWN, RESTARTED
)
PAUSE_MENU = signal_menu(
    "pause", "SIGSTOP the JVM; stop sends SIGCONT to every stopped JVM", STOPPED, RESUMED
)


def _targets(ctx: FaultContext, step: FaultStep) -> tuple[list[Controllable], dict[str, Any]]:
    # For kill and pause the kind is itself a selector; an explicit target takes precedence.
    found = resolve(ctx, step.target or step.kind, random.Random(step.seed), step.params)
    return [ctx.nodes[t] for t in found.targets], found.record()


def restart_exited(ctx: FaultContext) -> list[str]:
    """Starts every node whose process is not running and waits until each runs again."""
    down = [n for n in ctx.nodes.values() if not n.is_running()]

    def up(node: Process) -> float:
        node.start()
        return wait_for(f"{node.name} to run again", node.is_running, timeout=60)

    on_each(down, up)
    return sorted(n.name for n in down)


def resume_paused(ctx: FaultContext, only: Collection[str] | None = None) -> list[str]:
    """Sends SIGCONT to every running node whose JVM is stopped by a signal (of ``only``, when
    given)."""
    stopped = [
        n
        for n in ctx.nodes.values()
        if (only is None or n.name in only) and n.is_running() and n.is_paused_by_signal()
    ]

    def cont(node: Pause) -> float:
        node.resume()
        return wait_for(f"{node.name} to continue", lambda: not node.is_paused_by_signal())

    on_each(stopped, cont)
    return sorted(n.name for n in stopped)


class _SignalNemesis:
    """Sends one signal to the chosen nodes' JVMs and waits until each shows its effect."""

    fault: str
    menu: Menu
    signal: str
    took_key: str  # how the history names the seconds each node took to show the effect
    does: str  # the effect on the nodes it acted on (history/effects.py)

    def act(self, node: Controllable) -> float:
        raise NotImplementedError

    def check(self, step: FaultStep) -> dict[str, Any]:
        self.menu.check_keys(step)
        return {}

    def start(self, ctx: FaultContext, step: FaultStep) -> dict[str, Any]:
        with before_touching():
            self.check(step)
            nodes, chosen = _targets(ctx, step)
        running, down = split_running(nodes)
        acted = on_each(running, lambda n: on_live(n, lambda: self.act(n)))
        took = {n: t for n, t in acted.items() if t is not None}
        down = sorted([*down, *(n for n, t in acted.items() if t is None)])
        out = {"kind": step.kind, **chosen, "signal": self.signal, self.took_key: took}
        if down:
            out["not_running"] = down
        aimed = [n.name for n in nodes]
        return {**out, EFFECTS: [effect(self.does, aimed, took, by=self.signal)]}


class KillNemesis(_SignalNemesis):
    fault = "kill"
    menu = KILL_MENU
    signal = "SIGKILL"
    took_key = "exited_after_s"
    does = DOWN

    def act(self, node: Process) -> float:
        node.kill()
        return wait_for(f"{node.name} to exit", lambda: not node.is_running(), timeout=30)

    def stop(self, ctx: FaultContext, step: FaultStep) -> dict[str, Any]:
        # Restarts every exited node, not only this step's: stop means "heal", as in Jepsen.
        restarted = restart_exited(ctx)
        return {"kind": step.kind, "restarted": restarted, EFFECTS: [effect(RESTARTED, restarted)]}

    def heal_all(self, ctx: FaultContext) -> list[str]:
        return [f"{n}: started exited node" for n in restart_exited(ctx)]


class PauseNemesis(_SignalNemesis):
    fault = "pause"
    menu = PAUSE_MENU
    signal = "SIGSTOP"
    took_key = "stopped_after_s"
    does = STOPPED

    def act(self, node: Pause) -> float:
        node.pause()
        return wait_for(f"{node.name} to stop", node.is_paused_by_signal, timeout=30)

    def stop(self, ctx: FaultContext, step: FaultStep) -> dict[str, Any]:
        if step.target != NAMED:
            resumed = resume_paused(ctx)
            return {
                "kind": step.kind,
                "signal": "SIGCONT",
                "resumed": resumed,
                EFFECTS: [effect(RESUMED, resumed)],
            }
        # A choreography's stop (nemesis/choreo.py): only the nodes it names, while the others
        # it paused stay stopped; the record says so, for the checks that pair stops with starts.
        with before_touching():
            self.check(step)
            found = named_nodes(ctx.topology, step.params)
        resumed = resume_paused(ctx, found.targets)
        return {
            "kind": step.kind,
            **found.record(),
            "signal": "SIGCONT",
            "resumed": resumed,
            ENDS_ONLY: found.targets,
            EFFECTS: [effect(RESUMED, resumed)],
        }

    def heal_all(self, ctx: FaultContext) -> list[str]:
        return [f"{n}: sent SIGCONT to stopped JVM" for n in resume_paused(ctx)]
