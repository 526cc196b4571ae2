"""The supervisor of a run's client host (harness/run/supervisor.py), with a stand-in run whose
child does what a real one's may: end well, fail as bad input, abort in native code, hang, or be
interrupted. The real thing, against a cluster, is tests/integration/test_run_crash.py."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from clusters.errors import ClusterError
from harness.exit_codes import CRASHED_RUN_EXIT, INTERRUPTED_EXIT
from harness.run import supervisor
from harness.run.outcome import RunResult
from harness.run.supervisor import STDERR_NAME, run_supervised


class StandIn:
    """A run whose body is ``body(self)``, run in the supervised child."""

    def __init__(self, tmp_path: Path, body: Any) -> None:
        self.run_dir: Path | None = tmp_path / "run"
        self.run_dir.mkdir()
        self.summary: dict[str, Any] = {"seed": 7}
        self.heard: list[str] = []
        self.say = self.heard.append
        self.on_state: Any = None
        self.plan = SimpleNamespace(seed=7)
        self.spec = SimpleNamespace(cluster="sv-none", keep_cluster=False)
        self.body = body

    def prepare(self) -> Path:
        assert self.run_dir is not None
        return self.run_dir

    def run_here(self) -> RunResult:
        return self.body(self)

    def note(self, **facts: Any) -> None:
        self.on_state({**facts, "summary": self.summary})


def _run_json(run: StandIn) -> dict[str, Any]:
    assert run.run_dir is not None
    return json.loads((run.run_dir / "run.json").read_text())


def test_a_child_that_ends_well_returns_its_result_and_its_words(tmp_path):
    def body(run: StandIn) -> RunResult:
        run.say("from the child")
        run.summary["ops"] = {"ok": 3}
        return RunResult(run.run_dir, 7, 1, run.summary)

    run = StandIn(tmp_path, body)
    result = run_supervised(run)
    assert (result.exit_code, result.summary["ops"]) == (1, {"ok": 3})
    assert run.summary == result.summary and run.heard == ["from the child"]
    assert not (tmp_path / "run" / "run.json").exists()  # the child's to write, not ours


def test_a_child_error_is_raised_in_the_supervisor_as_itself(tmp_path):
    def body(run: StandIn) -> RunResult:
        raise ClusterError("Kafka 2.8 is not supported")

    with pytest.raises(ClusterError, match=r"Kafka 2\.8 is not supported"):
        run_supervised(StandIn(tmp_path, body))


def test_a_native_abort_in_the_child_ends_in_a_crashed_run_json(tmp_path):
    assertion = b"python3: rdkafka_admin.c:960: rd_kafka_admin_response_parse: Assertion failed."

    def body(run: StandIn) -> RunResult:
        run.note(phase="workload", budget_s=60)
        os.write(2, assertion + b"\n")
        os.abort()

    run = StandIn(tmp_path, body)
    result = run_supervised(run)
    assert result.exit_code == CRASHED_RUN_EXIT
    crashed = _run_json(run)["crashed"]
    assert crashed["signal"] == "SIGABRT" and crashed["where"] == "workload"
    assert assertion.decode() in crashed["stderr_tail"]
    assert assertion in (tmp_path / "run" / STDERR_NAME).read_bytes()
    # Which Python call was in flight: the crashing thread's innermost frame is the body's.
    assert "in body" in crashed["python_stack"][0]
    assert _run_json(run)["exit_code"] == CRASHED_RUN_EXIT
    # Nothing was recorded, so nothing was judged: said so, never a verdict on nothing.
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["status"] == "not checked"
    assert any("died of SIGABRT during workload" in line for line in run.heard)


def test_a_child_hung_past_its_phase_budget_is_killed_and_the_run_ends(tmp_path, monkeypatch):
    monkeypatch.setattr(supervisor, "TERM_GRACE_S", 0.5)

    def body(run: StandIn) -> RunResult:
        # As a thread stuck in native code: SIGTERM never reaches Python, only SIGKILL works.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        run.note(phase="final reads", budget_s=1.0)
        time.sleep(600)
        raise AssertionError("not reached")

    run = StandIn(tmp_path, body)
    result = run_supervised(run)
    crashed = _run_json(run)["crashed"]
    assert crashed["where"] == "final reads" and crashed["hang"]["budget_s"] == 1.0
    assert crashed["signal"] == "SIGKILL" and result.exit_code == CRASHED_RUN_EXIT


@pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread(), reason="signals: main thread"
)
def test_ctrl_c_reaches_the_child_once_and_its_own_ending_runs(tmp_path):
    def body(run: StandIn) -> RunResult:
        run.note(phase="workload", budget_s=60)
        try:
            time.sleep(60)
        except KeyboardInterrupt:
            run.say("interrupted: healing")
        try:
            time.sleep(0.5)  # a second interrupt here would end the cleanup early
        except KeyboardInterrupt:
            run.say("interrupted twice")
        return RunResult(run.run_dir, 7, INTERRUPTED_EXIT, run.summary)

    run = StandIn(tmp_path, body)
    timer = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    result = run_supervised(run)
    timer.join()
    assert result.exit_code == INTERRUPTED_EXIT
    assert run.heard == ["interrupted: healing"]


def test_a_cluster_removed_under_the_child_stays_itself_for_its_exit_code(tmp_path):
    from clusters.hold import ClusterRemoved

    def body(run: StandIn) -> RunResult:
        raise ClusterRemoved("c1", "by pid 9, kchaos cluster down --force", "history kept")

    with pytest.raises(ClusterRemoved, match="by pid 9, kchaos cluster down --force") as ended:
        run_supervised(StandIn(tmp_path, body))
    assert ended.value.cluster == "c1"
