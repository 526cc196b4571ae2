"""Disk faults, on the disk layer under the nodes' data (clusters/disk_layer.py, docs/disk.md).

``power-loss``: the nodes the target names lose power together. Every JVM is stopped from the
host first (SIGSTOP: nothing more reaches its disk), then each node's layer drops what no fsync
made durable, then every JVM is killed (SIGKILL: the container ends, its layer with it). Stop
starts every exited node again, on what its disk kept. The start records, per node, what the
drop took (its files and bytes, the name changes undone) and, per partition whose segment lost
written bytes, the offsets they held (``lost_offsets``: the record batches past each segment's
durable length, read while the JVMs are stopped and before the drop). A node not on the layer
is refused before anything is touched: ``--nemesis disk`` runs every node on it
(``--disk-layer``).

Still to come (issue 29): ``corrupt`` (the layer's ``corrupt`` and ``rollback`` commands) and
``disk-full`` (its ``fail write ENOSPC``).
"""

from __future__ import annotations

import random
import re
import time
from typing import Any

from clusters.capabilities import Controllable
from clusters.disk_layer import DiskLayerError, ask, batches
from history.effects import DOWN, EFFECTS, RESTARTED, effect
from nemesis.api import FaultContext, FaultStep
from nemesis.errors import NemesisError, before_touching
from nemesis.menu import Kind, Menu
from nemesis.nodes import on_each, split_running, wait_for
from nemesis.process import restart_exited
from nemesis.targets import resolve

POWER_LOSS = "power-loss"
# Per node in a power loss's record (docs/history.md): {"<topic>-<partition>": [first, last]}.
LOST_OFFSETS = "lost_offsets"
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
    """What a drop took from one node, as the history keeps it: every file with its bytes, and
    the offsets lost per partition where some were."""
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
        **({LOST_OFFSETS: dropped[LOST_OFFSETS]} if dropped.get(LOST_OFFSETS) else {}),
    }


# A partition's segment under a log directory: <dir>/<topic>-<partition>/<base offset>.log.
SEGMENT = re.compile(r"(?:^|/)(?P<partition>[^/]+-\d+)/(?P<base>\d{20})\.log$")


def pending_segments(status: dict[str, Any]) -> dict[str, int]:
    """The segment files a layer's ``status`` lists as pending, each with its durable length."""
    return {
        f["path"]: int(f["durable_size"])
        for f in status.get("files", [])
        if SEGMENT.search(f["path"]) and f["size"] > f["durable_size"]
    }


def lost_offsets(
    walked: list[dict[str, Any]], dropped: list[dict[str, Any]]
) -> dict[str, list[int | None]]:
    """Per partition ("<topic>-<partition>"), [first, last] offset of the record batches its
    segments lost: ``walked`` is ``kchaos-disk batches``' answer from before the drop (each
    segment's batches past its durable length then), ``dropped`` the drop's ``files`` (what
    each file lost, and the length it kept, ``size_after``). A bound is None where it cannot be
    told: the walk stopped before it (a header that is no batch's), or more became durable
    between the walk and the drop (the layer's writeback), so the first lost batch is later."""
    kept = {f["path"]: int(f.get("size_after", 0)) for f in dropped}
    spans: dict[str, list[tuple[str, int | None, int | None]]] = {}
    for w in walked:
        found = SEGMENT.search(str(w.get("path", "")))
        if found is None or w["path"] not in kept:
            continue  # not a segment, or it lost nothing in the drop
        start = int(w.get("from", 0))
        if "batches" not in w:  # unreadable
            first = last = None
        else:
            if not w.get("lost") and "error" not in w:
                continue
            first, last = w.get("first"), w.get("last")
            if "error" in w:
                # The walk stopped early: what lies past where it stopped is unknown.
                last = None
                if int(w.get("walked_to", 0)) <= start:
                    first = None
            if kept[w["path"]] > start:
                first = None
        spans.setdefault(found["partition"], []).append((found["base"], first, last))
    out: dict[str, list[int | None]] = {}
    for partition, segments in sorted(spans.items()):
        segments.sort()
        out[partition] = [segments[0][1], segments[-1][2]]
    return out


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
            check_on_layer(running)
        out: dict[str, Any] = {"kind": step.kind, **found.record(), **lose_power(running)}
        if down:
            out["not_running"] = down
        aimed = [n.name for n in nodes]
        return {**out, EFFECTS: [effect(DOWN, aimed, out["exited_after_s"], by=BY)]}

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


def check_on_layer(nodes: list[Controllable]) -> None:
    """NemesisError naming the first node whose layer does not answer (call it inside
    ``before_touching``: a refusal then touches nothing)."""
    for node in nodes:
        try:
            ask(node, "ping")
        except DiskLayerError as exc:
            raise NemesisError(
                f"{node.name} is not on the disk layer (run with --disk-layer): {exc}"
            ) from None


def lose_power(nodes: list[Controllable]) -> dict[str, Any]:
    """The running ``nodes`` lose power together (each on the layer: ``check_on_layer``); the
    record's part every power loss has (docs/history.md): ``dropped`` (per node, what its drop
    took, with ``lost_offsets``), ``exited_after_s``, ``offsets_read_s``, and
    ``offsets_unread`` and ``drop_failed`` where those went wrong."""
    # The order makes the loss coordinated: no target writes once any has lost power.
    on_each(nodes, _stop)
    dropped = on_each(nodes, _drop)
    took = on_each(nodes, _kill)
    out: dict[str, Any] = {
        "dropped": {n: _summary(d) for n, d in dropped.items() if "error" not in d},
        "exited_after_s": took,
        # What reading the lost offsets added to the time the JVMs stood stopped.
        "offsets_read_s": {n: d["offsets_read_s"] for n, d in dropped.items() if "error" not in d},
    }
    unread = {n: d["offsets_error"] for n, d in dropped.items() if d.get("offsets_error")}
    if unread:
        out["offsets_unread"] = unread
    failed = {n: d["error"] for n, d in dropped.items() if "error" in d}
    if failed:
        # Killed all the same: a crash, not a power loss, on those nodes.
        out["drop_failed"] = failed
    return out


def _stop(node: Controllable) -> float:
    node.pause()
    return wait_for(f"{node.name} to stop", node.is_paused_by_signal, timeout=30)


def _drop(node: Controllable) -> dict[str, Any]:
    """The node's drop, with the offsets it took: its pending segments' batches past their
    durable lengths, read first (the JVM is stopped: nothing changes them). A walk that fails
    leaves the drop as it was, said in ``offsets_error``."""
    t0 = time.monotonic()
    walked: list[dict[str, Any]] | None = None
    error = None
    try:
        walked = batches(node, pending_segments(ask(node, "status", timeout=60)))
    except DiskLayerError as exc:
        error = str(exc)
    read_s = round(time.monotonic() - t0, 3)
    try:
        dropped = ask(node, "drop", timeout=120)
    except DiskLayerError as exc:
        return {"error": str(exc) + (f"; before it, {error}" if error else "")}
    files = dropped.get("files", [])
    if walked is None:
        # Every dropped segment's partition lost something: what, unknown.
        walked = [{"path": f["path"]} for f in files]
    return {
        **dropped,
        LOST_OFFSETS: lost_offsets(walked, files),
        "offsets_read_s": read_s,
        **({"offsets_error": error} if error else {}),
    }


def _kill(node: Controllable) -> float:
    node.kill()
    return wait_for(f"{node.name} to exit", lambda: not node.is_running(), timeout=30)
