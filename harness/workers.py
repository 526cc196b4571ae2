"""The clients of a run: one thread per slot, each slot running its processes one after another.

Jepsen's rule for processes: an operation whose outcome is unknown (``info``) leaves its client's
state unknown too, so that process retires and its slot goes on as a new process with a new
client. Every operation is an invocation and a completion in the history.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from harness.plan import client_rng
from harness.recorder import Recorder
from workloads.api import Workload
from workloads.client import Client, Completion, Invocation


class ProcessIds:
    """Jepsen's process ids: slot i starts as process i; a retired process p becomes p + n."""

    def __init__(self, concurrency: int) -> None:
        self.n = concurrency
        self._lock = threading.Lock()
        self.highest = concurrency - 1

    def retire(self, process: int) -> int:
        with self._lock:
            new = process + self.n
            self.highest = max(self.highest, new)
            return new

    def fresh(self) -> int:
        with self._lock:
            self.highest += 1
            return self.highest


class Clients:
    """The worker threads of one run, paced to a total rate, until ``stop`` is set."""

    def __init__(
        self,
        workload: Workload,
        recorder: Recorder,
        seed: int,
        concurrency: int,
        rate: float,
        processes: ProcessIds,
        stop: threading.Event,
    ) -> None:
        self.workload = workload
        self.recorder = recorder
        self.seed = seed
        self.concurrency = concurrency
        # Seconds between two operations of one slot; 0: as fast as the client goes.
        self.interval = concurrency / rate if rate else 0.0
        self.processes = processes
        self.stop = stop
        self.threads = [
            threading.Thread(target=self.run_slot, args=(i,), name=f"c{i}", daemon=True)
            for i in range(concurrency)
        ]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def join(self, timeout_each: float) -> None:
        """Waits for each slot's operation in flight (bounded by the client's own timeouts)."""
        for t in self.threads:
            if t.is_alive():
                t.join(timeout_each)

    def run_slot(self, slot: int) -> None:
        process = slot
        # Slots start staggered so that the total rate is smooth, not bursts of `concurrency`.
        next_at = time.monotonic() + self.interval * slot / self.concurrency
        while not self.stop.is_set():
            client = self.workload.client(process, client_rng(self.seed, process))
            # A client with nothing to open (admin) goes straight to its operations.
            ok = client.setup_op is None or self.do(client, client.setup_op, client.open)
            while ok and not self.stop.is_set():
                if self.interval:
                    if self.stop.wait(max(0.0, next_at - time.monotonic())):
                        break
                    next_at = max(next_at + self.interval, time.monotonic() - self.interval)
                ok = self.do(client, client.next_op(), client.apply)
            client.close()
            if not ok:
                process = self.processes.retire(process)

    def do(self, client: Client, op: Invocation, apply: Callable[[Invocation], Completion]) -> bool:
        """One invocation and its completion; False when the process must retire."""
        rec = self.recorder
        rec.invoke(op.f, op.value, client.process, op.node)
        try:
            done = apply(op)
        except Exception as exc:  # a client bug: the op's fate is unknown
            done = Completion("info", op.value, f"{type(exc).__name__}: {exc}", op.node)
        rec.record(done.type, op.f, done.value, client.process, done.node or op.node, done.error)
        return done.type != "info" and not done.retire
