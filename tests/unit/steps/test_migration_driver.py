"""The migration driver's bookkeeping: one operation per planned step, and a clean end."""

from __future__ import annotations

from harness.run.recorder import Recorder
from history.reader import read_history
from steps.migration import MigrationDriver, MigrationStep, migration_schedule

STEPS = [MigrationStep(0.0, s.step, s.node) for s in migration_schedule("migration", 100, 5)]


class Scripted(MigrationDriver):
    """Steps end as scripted (ok unless named) instead of acting on a cluster."""

    def __init__(self, recorder, outcome=None):
        super().__init__(STEPS, info=None, dist=None, nodes={}, recorder=recorder)  # type: ignore[arg-type]
        self.outcome = outcome or {}

    def run_step(self, step):
        kind = self.outcome.get((step.step, step.node), "ok")
        self.recorder.invoke(step.step, {"step": step.step}, "migration", step.node)
        if kind == "ok":
            self.recorder.ok(step.step, {"step": step.step}, "migration", step.node)
        else:
            self.recorder.record(kind, step.step, None, "migration", step.node, "scripted")
        self.done.append({"step": step.step, "node": step.node, "type": kind})
        return kind


def run(tmp_path, driver_kind=Scripted, **kw):
    rec = Recorder(tmp_path / "history.jsonl", "test")
    driver = driver_kind(rec, **kw)
    driver.start()
    driver._thread.join(10)
    driver.stop()
    rec.close()
    ops = [op for op in read_history(tmp_path / "history.jsonl").ops if op["type"] != "invoke"]
    return driver, ops


def test_a_whole_migration_is_one_ok_per_step_and_completed(tmp_path):
    driver, ops = run(tmp_path)
    assert [op["f"] for op in ops] == [s.step for s in STEPS]
    assert {op["type"] for op in ops} == {"ok"} and all(op["process"] == "migration" for op in ops)
    summary = driver.summary()
    assert summary["completed"] and summary["ended"] is None
    assert summary["last_ok"] == {"step": "await-finalized", "node": None}


def test_after_a_step_that_cannot_complete_every_later_step_fails_as_not_attempted(tmp_path):
    broker = next(s.node for s in STEPS if s.step == "kraft-broker")
    driver, ops = run(tmp_path, outcome={("kraft-broker", broker): "info"})
    first = next(i for i, op in enumerate(ops) if op["type"] != "ok")
    assert ops[first]["type"] == "info" and ops[first]["node"] == broker
    rest = ops[first + 1 :]
    assert rest and all(op["type"] == "fail" for op in rest)
    assert all("not attempted" in op["error"] and broker in op["error"] for op in rest)
    assert [op["f"] for op in ops] == [s.step for s in STEPS]
    assert not driver.summary()["completed"] and "ended info" in driver.summary()["ended"]


def test_a_run_that_ends_before_a_step_is_due_records_the_rest_as_not_attempted(tmp_path):
    rec = Recorder(tmp_path / "history.jsonl", "test")
    late = [STEPS[0], MigrationStep(3600.0, STEPS[1].step, STEPS[1].node)]
    driver = Scripted(rec)
    driver.steps = late
    driver.start()
    while not driver.done:  # the first step is due at once; the second is an hour away
        driver._thread.join(0.01)
    driver.stop()  # the time limit
    rec.close()
    ops = [op for op in read_history(tmp_path / "history.jsonl").ops if op["type"] != "invoke"]
    assert [op["type"] for op in ops] == ["ok", "fail"]
    assert "time limit came before this step" in ops[1]["error"]
