"""The fault driver records each step's outcome: ok, fail (definitely not done) or info."""

from __future__ import annotations

from typing import Any

from harness.run.faults import FaultDriver
from harness.run.recorder import Recorder
from history.reader import read_history
from nemesis.api import FaultContext, FaultStep
from nemesis.errors import NemesisError, NotApplied


class Scripted:
    """A package whose start does what the step's params say."""

    fault = "packet"

    def check(self, step: FaultStep) -> dict[str, Any]:
        return {}

    def start(self, ctx: FaultContext, step: FaultStep) -> dict[str, Any]:
        outcome = step.params["outcome"]
        if outcome == "not applied":
            raise NotApplied("this kernel has no netem qdisc")
        if outcome == "broke":
            raise NemesisError("node n2: 'tc' failed half-way")
        return {"kind": step.kind}

    def stop(self, ctx: FaultContext, step: FaultStep) -> dict[str, Any]:
        return {"kind": step.kind, "cleared": []}

    def heal_all(self, ctx: FaultContext) -> list[str]:
        return []


def test_a_step_that_cannot_run_here_is_a_fail_and_the_run_goes_on(tmp_path):
    rec = Recorder(tmp_path / "history.jsonl", "t")
    steps = [
        FaultStep(0, "start", "packet", "delay", "one", 1, {"outcome": "not applied"}),
        FaultStep(0, "start", "packet", "reorder", "one", 2, {"outcome": "broke"}),
        FaultStep(0, "start", "packet", "loss", "one", 3, {"outcome": "ok"}),
    ]
    driver = FaultDriver(steps, {"packet": Scripted()}, None, rec)  # type: ignore[arg-type]
    for step in steps:
        driver.apply(step)
    rec.close()
    done = [op for op in read_history(tmp_path / "history.jsonl").ops if op["type"] != "invoke"]
    assert [(op["type"], op["value"]["kind"]) for op in done] == [
        ("fail", "delay"),
        ("info", "reorder"),
        ("ok", "loss"),
    ]
    assert "no netem" in done[0]["error"]
    # A failed step is not on; one that broke half-way may be, so healing must look for it.
    assert sorted(driver.describe_active()) == ["packet:loss", "packet:reorder"]
    assert [t["type"] for t in driver.timeline] == ["fail", "info", "ok"]


class Preparing(Scripted):
    fault = "clock"

    def __init__(self, actions: list[str]) -> None:
        self.actions = actions

    def prepare(self, ctx: FaultContext) -> list[str]:
        return self.actions


def test_prepare_runs_before_the_workload_is_recorded_and_waits_for_readiness(tmp_path):
    from harness.plan import build_plan
    from harness.run.interpreter import PREPARE_READY_TIMEOUT_S, Run, Up
    from harness.spec import RunSpec

    plan = build_plan(RunSpec.of(nemesis=["clock", "kill"], results_dir=str(tmp_path)), 1)
    waits: list[float] = []
    for actions, expected_waits in ((["n1: restarted under libfaketime"], 1), ([], 0)):
        waits.clear()
        rec = Recorder(tmp_path / f"h{expected_waits}.jsonl", "t")
        run = Run(plan, say=lambda m: None, nemeses={"clock": Preparing(actions)})
        run._wait_ready = lambda dc, info, why, timeout: waits.append(timeout)  # type: ignore
        run.prepare()  # the run directory, and the given nemeses in place of the registry's
        run._prepare_nemeses(None, Up(None, None, rec), None)  # type: ignore[arg-type]
        rec.close()
        ops = read_history(tmp_path / f"h{expected_waits}.jsonl").ops
        assert [(op["type"], op["f"], op["process"]) for op in ops] == [
            ("invoke", "prepare", "nemesis"),
            ("ok", "prepare", "nemesis"),
        ]
        assert ops[1]["value"] == {"by": "clock", "actions": actions}
        assert waits == [PREPARE_READY_TIMEOUT_S] * expected_waits
