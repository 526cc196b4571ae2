"""Planned steps that change the cluster itself, carried out one at a time beside the workload.

Every step family (steps/registry.py: the ZooKeeper-to-KRaft migration, steps/migration.py;
the upgrade, feature and quorum steps, steps/rolling.py) shares this shape: the plan fixes each
step's earliest time and its node; the driver runs on its own thread while clients and nemeses
go on; each step is an operation of the driver's process (invoke, then ok, fail or info by
Jepsen's rule); a step waits for readiness it observes, never for a sleep; and once a step does
not end ok, every later step is recorded as ``fail`` (not attempted) with the reason, so the
history says how far it got.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any, Protocol

from clusters.capabilities import Controllable, Process
from clusters.errors import ClusterError
from clusters.jmx import JmxUnavailable, sample_kafka
from clusters.status import quorum_view
from steps.timed import TimedSteps

POLL_S = 0.5
STOP_TIMEOUT_S = 30.0


class PlannedStep(Protocol):
    at_s: float  # seconds into the run before which the step does not begin
    step: str
    node: str | None


class StepRecorder(Protocol):
    """What a driver writes its steps with: the run's history (harness/run/recorder.py Recorder)."""

    def record(
        self,
        type_: str,
        f: str,
        value: Any,
        process: int | str,
        node: str | None = None,
        error: str | None = None,
    ) -> dict[str, Any]: ...

    def invoke(self, f: str, value: Any, process: int | str, node: str | None = None) -> dict: ...

    def ok(self, f: str, value: Any, process: int | str, node: str | None = None) -> dict: ...

    def fail(
        self, f: str, value: Any, process: int | str, error: str, node: str | None = None
    ) -> dict: ...


class StepFailed(Exception):
    """A step that changed nothing (``fail``), with the reason."""


class StepUnsure(Exception):
    """A step whose effect is unknown or unconfirmed (``info``), with the reason."""


class RecordedSteps(TimedSteps):
    """Carries out planned steps in order, recording each; subclasses implement ``_do``."""

    def __init__(
        self,
        process: str,
        steps: Sequence[PlannedStep],
        recorder: StepRecorder,
        step_timeout: float,
    ) -> None:
        self.process = process
        self.steps = list(steps)
        self.recorder = recorder
        self.step_timeout = step_timeout
        self.done: list[dict[str, Any]] = []
        self.ended: str | None = None  # why the steps stopped before the last one
        self.steps_ok = 0  # planned steps that ended ok, in order
        self.finished = threading.Event()
        super().__init__(process)

    def summary(self) -> dict[str, Any]:
        last = next((d for d in reversed(self.done) if d["type"] == "ok"), None)
        return {
            "steps": self.done,
            "completed": self.completed(),
            "last_ok": last and {k: last.get(k) for k in ("step", "node")},
            "ended": self.ended,
        }

    def completed(self) -> bool:
        """Every planned step ended ok. Counted by planned step, not by entry of `done`: a
        feature step for every other feature records one operation per feature."""
        return (
            bool(self.steps)
            and self.steps_ok == len(self.steps)
            and all(d["type"] == "ok" for d in self.done)
        )

    # The loop ------------------------------------------------------------------------------------
    def _loop(self) -> None:
        try:
            self._run_all()
        finally:
            self.finished.set()

    def _run_all(self) -> None:
        blocked = self._blocked()
        if blocked:
            self.ended = blocked
            self._give_up(self.steps)
            return
        for i, step in enumerate(self.steps):
            if self._until_due(step.at_s):
                self.ended = "the run's time limit came before this step"
                self._give_up(self.steps[i:])
                return
            kind = self.run_step(step)
            if kind == "ok":
                self.steps_ok += 1
            else:
                self.ended = f"{step.step} {step.node or ''}".strip() + f" ended {kind}"
                self._give_up(self.steps[i + 1 :])
                return

    def _blocked(self) -> str | None:
        """Why no step may begin at all (None: they may); waits if it must."""
        return None

    def _give_up(self, rest: Sequence[PlannedStep]) -> None:
        for step in rest:
            value = self._value(step)
            self.recorder.invoke(step.step, value, self.process, step.node)
            why = f"not attempted: the {self.process} ended earlier ({self.ended})"
            self.recorder.fail(step.step, value, self.process, why, step.node)
            self.done.append({**value, "type": "fail", "error": why})

    def _value(self, step: PlannedStep) -> dict[str, Any]:
        return asdict(step)  # type: ignore[call-overload]

    def run_step(self, step: PlannedStep) -> str:
        """One step as an invoke and its completion; returns the completion's type."""
        value = self._value(step)
        self.recorder.invoke(step.step, value, self.process, step.node)
        t0 = time.monotonic()
        try:
            detail = self._do(step, value)
        except StepFailed as exc:
            return self._complete("fail", step, value, str(exc), t0)
        except StepUnsure as exc:
            return self._complete("info", step, value, str(exc), t0)
        except Exception as exc:  # a driver bug must not stop the run before it heals
            return self._complete("info", step, value, f"{type(exc).__name__}: {exc}", t0)
        detail = {**value, **detail, "seconds": round(time.monotonic() - t0, 3)}
        self.recorder.ok(step.step, detail, self.process, step.node)
        self.done.append({**detail, "type": "ok"})
        return "ok"

    def _do(self, step: PlannedStep, value: dict[str, Any]) -> dict[str, Any]:
        """Carries the step out; returns what the ok completion adds to the value. ``value`` is
        the invocation's value (a step may fill in what it resolved before invoking)."""
        raise NotImplementedError

    def _complete(
        self, kind: str, step: PlannedStep, value: dict[str, Any], error: str, t0: float
    ) -> str:
        self.recorder.record(kind, step.step, value, self.process, step.node, error)
        self.done.append(
            {**value, "type": kind, "error": error, "seconds": round(time.monotonic() - t0, 3)}
        )
        return kind

    def until(self, what: str, check: Callable[[], tuple[bool, Any]]) -> tuple[float, Any]:
        """``_until`` for the step handlers other modules give a driver (steps/quorum_steps)."""
        return self._until(what, check)

    def _until(self, what: str, check: Callable[[], tuple[bool, Any]]) -> tuple[float, Any]:
        """Polls ``check`` until it says yes; StepUnsure on timeout or when the run stops."""
        t0 = time.monotonic()
        seen: Any = None
        while True:
            ok, seen = check()
            if ok:
                return round(time.monotonic() - t0, 3), seen
            if time.monotonic() - t0 > self.step_timeout:
                raise StepUnsure(
                    f"{what} not observed within {self.step_timeout:.0f} s; last seen: {seen}"
                )
            if self._stop.wait(POLL_S):
                raise StepUnsure(f"the run's time limit came before {what}; last seen: {seen}")


# Readiness a step observes ----------------------------------------------------------------------
def node_sample(node: Controllable) -> dict[str, Any] | None:
    """The node's own JMX view (clusters/jmx.py), or None when it does not answer."""
    try:
        return sample_kafka(node.ip, node.spec.roles, timeout=2.0)
    except JmxUnavailable:
        return None


def broker_running(node: Controllable) -> tuple[bool, Any]:
    seen = node_sample(node)
    state = seen.get("broker_state") if seen else None
    return state == "RUNNING", {"broker_state": state}


def quorum_agreed(controllers: list[Controllable]) -> tuple[bool, Any]:
    """Every controller names the same leader and exactly one is active."""
    statuses = []
    for node in controllers:
        statuses.append({"name": node.name, "roles": ["controller"], "jmx": node_sample(node)})
    q = quorum_view(statuses)
    view = {"leader": q["leader"], "epoch": q["epoch"], "active": q["active_controllers"]}
    return q["agreed"] and len(q["active_controllers"]) == 1, view


def role_ready(node: Controllable, controllers: list[Controllable]) -> tuple[bool, Any]:
    """A restarted node's readiness by its role: a broker RUNNING, a controller's quorum
    agreeing on one active leader."""
    return broker_running(node) if node.spec.is_broker else quorum_agreed(controllers)


def role_readiness(node: Controllable) -> str:
    """What ``role_ready`` waits for, in words."""
    return "RUNNING" if node.spec.is_broker else "the controllers agreeing on a leader"


def restart(node: Process, what: str) -> dict[str, Any]:
    """Stops the node gracefully (if it runs) and starts it; StepUnsure, saying ``what`` was
    already done, when Docker cannot."""
    t0 = time.monotonic()
    try:
        was_running = node.is_running()
        if was_running:
            node.stop(timeout=STOP_TIMEOUT_S)
        node.start()
    except ClusterError as exc:
        raise StepUnsure(f"{what}, restart failed: {exc}") from None
    return {"was_running": was_running, "restart_s": round(time.monotonic() - t0, 3)}


def stop_and_report(
    driver: RecordedSteps, say: Callable[[str], None]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Ends the steps where they are (a waiting step ends ``info``); returns every step (what
    the run writes to <process>.json) and what run.json keeps: how far they got."""
    driver.stop()
    summary = driver.summary()
    say(
        f"{driver.process}: "
        + ("completed" if summary["completed"] else f"ended early: {summary['ended']}")
    )
    return summary, {k: summary[k] for k in ("completed", "last_ok", "ended")}
