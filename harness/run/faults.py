"""Carrying out the plan's fault steps, recording each as a nemesis operation, and healing.

The packages come from `nemesis.registry`; the harness only knows the interface in
`nemesis/api.py`. Healing is the one thing that must happen whatever else went wrong, so `heal`
never raises: it records what was undone, or why it could not be.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from history.effects import DOWN, EFFECTS, effect
from history.format import KEPT_DOWN, NEMESIS
from nemesis.api import FaultContext, FaultStep, Lasting, Nemesis, Preparable
from nemesis.errors import NotApplied
from nemesis.heal import heal_cluster
from nemesis.registry import NEMESES
from steps.timed import TimedSteps

# What a package's preparation does, for the line the run says before it (it can take minutes).
PREPARE_WHY = {"clock": "restarting each JVM under libfaketime at offset 0"}


class FaultDriver(TimedSteps):
    """Runs the fault steps at their times on its own thread; knows which faults are on."""

    def __init__(
        self,
        steps: list[FaultStep],
        nemeses: dict[str, Nemesis],
        ctx: FaultContext,
        recorder: Any,
        hints: Callable[[], dict[str, Any]] | None = None,
    ) -> None:
        self.steps = sorted(steps, key=lambda s: s.at_s)
        self.nemeses = nemeses
        self.ctx = ctx
        self.recorder = recorder
        self.hints = hints
        # A fault's start and stop steps share fault, kind, target and seed (a choreography
        # pauses two minorities of one kind at once, each its own seed).
        self.active: dict[tuple[str, str, str | None, int], FaultStep] = {}
        self.timeline: list[dict[str, Any]] = []
        super().__init__("nemesis")

    def _loop(self) -> None:
        for step in self.steps:
            if self._until_due(step.at_s):
                return
            self.apply(step)

    def apply(self, step: FaultStep) -> None:
        f = f"{step.action}-{step.fault}"
        nem = self.nemeses[step.fault]
        if self.hints is not None:
            self.ctx.hints.update(self.hints())
        self.recorder.invoke(f, asdict(step), NEMESIS)
        t0 = time.monotonic()
        try:
            detail = (
                nem.start(self.ctx, step) if step.action == "start" else nem.stop(self.ctx, step)
            )
        except NotApplied as exc:
            # Definitely not done (this kernel has no netem, say): a fail, and the run goes on.
            self.recorder.fail(f, asdict(step), NEMESIS, str(exc))
            self.timeline.append({"at_s": step.at_s, "f": f, "type": "fail", "error": str(exc)})
            return
        except Exception as exc:  # a nemesis bug must not end the run before healing
            error = f"{type(exc).__name__}: {exc}"
            self.recorder.info(f, asdict(step), NEMESIS, error)
            self.timeline.append({"at_s": step.at_s, "f": f, "type": "info", "error": error})
            if step.action == "start":
                self.active[_key(step)] = step  # it may have half-happened
            return
        self.recorder.ok(f, detail, NEMESIS)
        self.timeline.append(
            {
                "at_s": step.at_s,
                "f": f,
                "type": "ok",
                "value": detail,
                "seconds": round(time.monotonic() - t0, 3),
            }
        )
        if step.action == "start":
            self.active[_key(step)] = step
        else:
            self.active.pop(_key(step), None)

    def describe_active(self) -> list[str]:
        return [f"{s.fault}:{s.kind}" for s in self.active.values()]


def _key(step: FaultStep) -> tuple[str, str, str | None, int]:
    return step.fault, step.kind, step.target, step.seed


def prepare(
    nemeses: dict[str, Nemesis], ctx: FaultContext, recorder: Any, say: Callable[[str], None]
) -> bool:
    """Runs each package's optional ``prepare`` and records it; True when a node was changed.

    The clock package restarts every node under libfaketime here, so that its faults during the
    run only change offsets; that cost is paid before the clients start, and recorded. The
    caller waits for readiness when this says so.
    """
    changed = False
    for name, nem in nemeses.items():
        if not isinstance(nem, Preparable):
            continue
        say(f"{name}: preparing the nodes ({PREPARE_WHY.get(name, 'package setup')})")
        recorder.invoke("prepare", {"by": name}, NEMESIS)
        try:
            actions = nem.prepare(ctx)
        except Exception as exc:
            recorder.info("prepare", {"by": name}, NEMESIS, f"{type(exc).__name__}: {exc}")
            raise
        recorder.ok("prepare", {"by": name, "actions": actions}, NEMESIS)
        for action in actions:
            say(f"{name}: {action}")
        changed = changed or bool(actions)
    return changed


def heal(
    nemeses: dict[str, Nemesis], ctx: FaultContext | None, recorder: Any, cluster: Any
) -> list[dict[str, Any]]:
    """Undoes every fault on every node and records it as one ``heal`` operation; never raises.

    ``heal_cluster`` runs every registry package in its heal order, whichever of them this run
    used: a fault of a package the run did not name cannot be there, and looking costs little.
    Packages from outside the registry (tests bring their own) heal themselves first.
    """
    done: list[dict[str, Any]] = []

    def one(what: str, fn: Callable[[], list[str]]) -> None:
        recorder.invoke("heal", {"by": what}, NEMESIS)
        try:
            actions = fn()
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            recorder.info("heal", {"by": what}, NEMESIS, error)
            done.append({"by": what, "error": error})
            return
        recorder.ok("heal", {"by": what, "actions": actions}, NEMESIS)
        done.append({"by": what, "actions": actions})

    for name, nem in nemeses.items():
        if ctx is not None and type(nem) is not NEMESES.get(name):
            one(name, lambda nem=nem: nem.heal_all(ctx))
    one("heal_cluster", lambda: heal_cluster(cluster))
    return done


KEPT_BY = "a lasting fault: the node could not start again after the heal"


def lasting_of(nemeses: dict[str, Nemesis], ctx: FaultContext) -> Callable[[str], Any] | None:
    """What may keep a node down, asked of every package that has lasting faults (nemesis/api.py
    ``Lasting``): the first record one gives; None when no package of the run has any."""
    lasting = [n for n in nemeses.values() if isinstance(n, Lasting)]
    if not lasting:
        return None

    def ask(node: str) -> dict[str, Any] | None:
        for nem in lasting:
            record = nem.kept_down(ctx, node)
            if record is not None:
                return record
        return None

    return ask


def record_kept_down(recorder: Any, kept: dict[str, dict[str, Any]]) -> None:
    """One ``kept-down`` operation (docs/history.md): the nodes a lasting fault keeps down after
    the heal, each with its fault's record, and the ``down`` effect on them."""
    nodes = sorted(kept)
    recorder.invoke(KEPT_DOWN, {"nodes": nodes}, NEMESIS)
    value = {
        "nodes": {n: kept[n] for n in nodes},
        EFFECTS: [effect(DOWN, nodes, nodes, by=KEPT_BY)],
    }
    recorder.ok(KEPT_DOWN, value, NEMESIS)
