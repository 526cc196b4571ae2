"""A client the workload cannot make (a slot's own JVM that fails to start) costs the slot a
retry, never its thread: nothing is recorded for it, and the run says so."""

from __future__ import annotations

import threading
from typing import Any

from harness.run import workers
from harness.run.recorder import Recorder
from harness.run.workers import Clients, ProcessIds
from history.reader import read_history
from workloads.client import Completion, Invocation


class _Client:
    setup_op = None

    def __init__(self, process: int, stop: threading.Event) -> None:
        self.process = process
        self.stop = stop

    def next_op(self) -> Invocation:
        return Invocation("poll", [["poll"]])

    def apply(self, op: Invocation) -> Completion:
        self.stop.set()  # one op is enough
        return Completion("ok", [["poll", {}]])

    def close(self) -> None:
        pass


class _Workload:
    def __init__(self, stop: threading.Event, failures: int) -> None:
        self.stop = stop
        self.failures = failures
        self.asked: list[int] = []

    def client(self, process: int, rng: Any) -> _Client:
        self.asked.append(process)
        if len(self.asked) <= self.failures:
            raise RuntimeError("the Java client exited at start")
        return _Client(process, self.stop)


def test_a_slot_whose_client_cannot_be_made_tries_again_and_records_nothing_for_it(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(workers, "CLIENT_RETRY_S", 0.01)
    stop = threading.Event()
    wl = _Workload(stop, failures=2)
    rec = Recorder(tmp_path / "h.jsonl", "r/1")
    clients = Clients(wl, rec, 7, 1, 0, ProcessIds(1), stop)  # type: ignore[arg-type]
    clients.start()
    clients.join(30)
    rec.close()
    assert not any(t.is_alive() for t in clients.threads)
    assert wl.asked == [0, 0, 0]
    assert clients.failed_starts == [
        "slot 0, process 0: the Java client exited at start",
        "slot 0, process 0: the Java client exited at start",
    ]
    ops = read_history(tmp_path / "h.jsonl").ops
    assert [(o["type"], o["process"]) for o in ops] == [("invoke", 0), ("ok", 0)]
