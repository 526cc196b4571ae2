"""Disk faults, on the disk layer under the nodes' data (clusters/disk_layer.py, docs/disk.md).

``power-loss``: the nodes the target names lose power together. Every JVM is stopped from the
host first (SIGSTOP: nothing more reaches its disk), then each node's layer drops what no fsync
made durable, then every JVM is killed (SIGKILL: the container ends, its layer with it). Stop
starts every exited node again, on what its disk kept. The start records, per node, what the
drop took (its files and bytes, the name changes undone). A node not on the layer is refused
before anything is touched: ``--nemesis disk`` runs every node on it (``--disk-layer``).

Still to come (issue 29): ``corrupt`` (the layer's ``corrupt`` and ``rollback`` commands) and
``disk-full`` (its ``fail write ENOSPC``).
"""

from __future__ import annotations

import random
from typing import Any

from clusters.capabilities import Controllable
from clusters.disk_layer import DiskLayerError, ask
from history.effects import DOWN, EFFECTS, RESTARTED, effect
from nemesis.api import FaultContext, FaultStep
from nemesis.errors import NemesisError, before_touching
from nemesis.menu import Kind, Menu
from nemesis.nodes import on_each, split_running, wait_for
from nemesis.process import restart_exited
from nemesis.targets import resolve

POWER_LOSS = "power-loss"
BY = "power loss (SIGSTOP, unsynced writes dropped, SIGKILL)"

MENU = Menu(
    "disk",
    (
        Kind(
            POWER_LOSS,
            "the nodes the target names lose power together: each JVM stopped, what no fsync "
            "made durable dropped from its disk, the JVM killed; stop starts every exited node "
            "again on what its disk kept",
        ),
    ),
    meaning="faults of the disk under the nodes' data, on kchaos's disk layer (docs/disk.md); "
    "--nemesis disk runs every node on it",
    targets=("one", "minority", "majority", "all"),
    effects=(DOWN,),
    stop_effects=(RESTARTED,),
)


def _summary(dropped: dict[str, Any]) -> dict[str, Any]:
    """What a drop took from one node, as the history keeps it: every file with its bytes."""
    return {
        "files": {f["path"]: f["bytes"] for f in dropped.get("files", [])},
        "written": {f["path"]: f["written"] for f in dropped.get("files", []) if f["written"]},
        "bytes": dropped.get("dropped_bytes", 0),
        "written_bytes": dropped.get("dropped_written", 0),
        "names": [
            f"{n['op']} {n['path']}" + (f" -> {n['to']}" if n.get("to") else "")
            for n in dropped.get("names", [])
        ],
        **({"errors": dropped["errors"]} if dropped.get("errors") else {}),
    }


class DiskNemesis:
    fault = "disk"
    menu = MENU

    def check(self, step: FaultStep) -> dict[str, Any]:
        self.menu.check_keys(step)
        return {}

    def start(self, ctx: FaultContext, step: FaultStep) -> dict[str, Any]:
        with before_touching():
            self.check(step)
            found = resolve(ctx, step.target, random.Random(step.seed), step.params)
            nodes = [ctx.nodes[t] for t in found.targets]
            running, down = split_running(nodes)
            for node in running:
                try:
                    ask(node, "ping")
                except DiskLayerError as exc:
                    raise NemesisError(
                        f"{node.name} is not on the disk layer (run with --disk-layer): {exc}"
                    ) from None
        # The order makes the loss coordinated: no target writes once any has lost power.
        on_each(running, _stop)
        dropped = on_each(running, _drop)
        took = on_each(running, _kill)
        out: dict[str, Any] = {
            "kind": step.kind,
            **found.record(),
            "dropped": {n: _summary(d) for n, d in dropped.items() if "error" not in d},
            "exited_after_s": took,
        }
        failed = {n: d["error"] for n, d in dropped.items() if "error" in d}
        if failed:
            # Killed all the same: a crash, not a power loss, on those nodes.
            out["drop_failed"] = failed
        if down:
            out["not_running"] = down
        aimed = [n.name for n in nodes]
        return {**out, EFFECTS: [effect(DOWN, aimed, took, by=BY)]}

    def stop(self, ctx: FaultContext, step: FaultStep) -> dict[str, Any]:
        # Every exited node, not only this step's: stop means "heal", as in Jepsen.
        restarted = restart_exited(ctx)
        return {"kind": step.kind, "restarted": restarted, EFFECTS: [effect(RESTARTED, restarted)]}

    def heal_all(self, ctx: FaultContext) -> list[str]:
        """A node whose layer lost power but whose JVM still runs (a power loss cut short) is
        killed, every fail rule (a full disk) is cleared, and every exited node started again.
        A corruption is left as it is: it is the fault's lasting effect."""
        said = []
        for node in ctx.nodes.values():
            if not node.is_running():
                continue
            try:
                status = ask(node, "status", timeout=30)
            except DiskLayerError:
                continue  # not on the layer, or its layer is gone with its JVM
            if not status["powered"]:
                _kill(node)
                said.append(f"{node.name}: killed the JVM of a powered-off disk")
            elif status.get("failing"):
                cleared = ask(node, "heal", timeout=30)["cleared"]
                said.append(f"{node.name}: cleared {cleared} disk fail rule(s)")
        return said + [f"{n}: started exited node" for n in restart_exited(ctx)]


def _stop(node: Controllable) -> float:
    node.pause()
    return wait_for(f"{node.name} to stop", node.is_paused_by_signal, timeout=30)


def _drop(node: Controllable) -> dict[str, Any]:
    try:
        return ask(node, "drop", timeout=120)
    except DiskLayerError as exc:
        return {"error": str(exc)}


def _kill(node: Controllable) -> float:
    node.kill()
    return wait_for(f"{node.name} to exit", lambda: not node.is_running(), timeout=30)
