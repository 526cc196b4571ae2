"""The clients of a run: one thread per slot, each slot running its processes one after another.

Jepsen's rule for processes: an operation whose outcome is unknown (``info``) leaves its client's
state unknown too, so that process retires and its slot goes on as a new process with a new
client. Every operation is an invocation and a completion in the history.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from harness.plan import client_rng, client_rng_prefix
from harness.run.recorder import Recorder
from workloads.api import Workload
from workloads.client import Client, Completion, Invocation
from workloads.pipelined import (
    SEND_TIMEOUT_S,
    Pipelining,
    Polling,
    ProducerClient,
    RecordsSends,
    SlotSetup,
)

# After the time limit a pipelined producer waits this long for its sends' delivery reports
# (librdkafka gives one by message.timeout.ms), then records the rest as unknown.
DRAIN_S = SEND_TIMEOUT_S + 2.0
# How long a slot with every lane busy waits in one poll for a delivery report.
LANE_WAIT_S = 0.05
# Unpaced sends queued onto free lanes between two polls.
BURST = 64
# How often a slot whose producer records its own sends asks it how far it got.
RECORDED_STATS_S = 0.25


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

    def reserve(self, highest: int) -> None:
        """Process ids up to `highest` were taken elsewhere (lanes retired in a JVM)."""
        with self._lock:
            self.highest = max(self.highest, highest)


class Lanes:
    """The process ids of one pipelined producer, each with at most one send in flight.

    Jepsen's invariant, each process does one thing at a time, holds per lane: a send is
    invoked on a free lane and the lane is free again once its completion is recorded. A lane
    whose send ended `info` retires its process (``ProcessIds.retire``) and goes on as a new
    one, as a sync process does. `finish` may be called from whichever thread serves the
    producer's delivery reports; a lane given up on (``abandon``) ignores a later report.
    """

    def __init__(self, first: list[int], processes: ProcessIds) -> None:
        self._processes = processes
        self._free = list(reversed(first))  # popped from the end: the lowest first
        self._busy: dict[int, Invocation] = {}
        self._lock = threading.Lock()

    @property
    def in_flight(self) -> int:
        return len(self._busy)

    def take(self) -> int | None:
        """A free lane's process, now busy until `finish`; None: every lane is busy."""
        with self._lock:
            return self._free.pop() if self._free else None

    def start(self, process: int, op: Invocation) -> None:
        """The op `process` (from `take`) now runs."""
        with self._lock:
            self._busy[process] = op

    def finish(
        self, process: int, op: Invocation, retire: bool, record: Callable[[], object]
    ) -> bool:
        """Records `op`'s completion (`record`) and frees its lane, if `op` is still what the
        lane runs; False: it is not (abandoned), and nothing is recorded. The lane is freed
        only after the line is written, so no later op of the process is invoked before it."""
        with self._lock:
            if self._busy.get(process) is not op:
                return False
            record()
            del self._busy[process]
            self._free.append(self._processes.retire(process) if retire else process)
            return True

    def abandon(self, record: Callable[[int, Invocation], object]) -> int:
        """Every busy lane's op recorded by `record` as its completion, and its process
        retired (its outcome stays unknown); how many there were."""
        with self._lock:
            gone = list(self._busy.items())
            for process, op in gone:
                record(process, op)
            self._busy.clear()
            self._free.extend(self._processes.retire(p) for p, _ in gone)
        return len(gone)


# How long a slot waits before asking for a client again after one could not be made.
CLIENT_RETRY_S = 2.0


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
        # The last slots that only poll beside pipelined producers (--pollers), unpaced: the
        # rate is the other slots'.
        self.pollers = workload.poller_slots() if isinstance(workload, Polling) else 0
        # Seconds between two operations of one paced slot; 0: as fast as the client goes.
        self.interval = (concurrency - self.pollers) / rate if rate else 0.0
        self.processes = processes
        self.stop = stop
        # In-flight sends per pipelined producer (workloads/pipelined.py); 0: sync clients.
        self.lanes = workload.pipelined_lanes() if isinstance(workload, Pipelining) else 0
        # Clients the workload could not make (run.json `failed_client_starts`).
        self.failed_starts: list[str] = []
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
        poller = slot >= self.concurrency - self.pollers
        if self.lanes and not poller:
            wl = self.workload
            if isinstance(wl, RecordsSends) and wl.records_sends():
                self.run_recorded(slot)
            else:
                self.run_pipelined(slot)
            return
        # A poller beside pipelined producers has their slot's process ids (its first lane's).
        process = slot * max(self.lanes, 1)
        interval = 0.0 if poller and self.pollers else self.interval
        # Slots start staggered so that the total rate is smooth, not bursts of `concurrency`.
        next_at = time.monotonic() + interval * slot / self.concurrency
        while not self.stop.is_set():
            try:
                client = self.workload.client(process, client_rng(self.seed, process))
            except Exception as exc:
                # A client that could not be made (its own process failed to start): nothing
                # was invoked, so the history is untouched; the slot tries again.
                self.failed_starts.append(f"slot {slot}, process {process}: {exc}")
                if self.stop.wait(CLIENT_RETRY_S):
                    break
                continue
            # A client with nothing to open (admin) goes straight to its operations.
            ok = client.setup_op is None or self.do(client, client.setup_op, client.open)
            while ok and not self.stop.is_set():
                if interval:
                    if self.stop.wait(max(0.0, next_at - time.monotonic())):
                        break
                    next_at = max(next_at + interval, time.monotonic() - interval)
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
        node = done.node or op.node
        rec.record(done.type, op.f, done.value, client.process, node, done.error, extra=done.extra)
        return done.type != "info" and not done.retire

    def run_pipelined(self, slot: int) -> None:
        """One pipelined producer at a time on this slot, with `lanes` process ids: slot s's
        lanes start as processes s*N .. s*N+N-1 (``ProcessIds`` of concurrency*N), its k-th
        producer is number s + k*concurrency. Delivery reports are served by this thread's
        polls, so the producer's send order is its invocations' order in the history."""
        assert isinstance(self.workload, Pipelining)
        n = self.lanes
        lanes = Lanes([slot * n + j for j in range(n)], self.processes)
        producer = slot
        next_at = time.monotonic() + self.interval * slot / self.concurrency
        while not self.stop.is_set():
            client = self.workload.producer_client(producer, client_rng(self.seed, producer))
            while not self.stop.is_set() and not client.broken:
                if self.interval:
                    delay = next_at - time.monotonic()
                    if delay > 0:
                        client.poll(min(delay, LANE_WAIT_S))
                        continue
                if not self.send_one(client, lanes):
                    client.poll(LANE_WAIT_S)  # every lane busy: wait for a delivery report
                    continue
                if self.interval:
                    next_at = max(next_at + self.interval, time.monotonic() - self.interval)
                else:
                    # Unpaced: a burst onto the free lanes before serving delivery reports,
                    # so one poll serves many sends.
                    for _ in range(BURST - 1):
                        if self.stop.is_set() or not self.send_one(client, lanes):
                            break
                client.poll(0)
            self.drain(client, lanes, DRAIN_S)
            client.close()
            producer += self.concurrency

    def run_recorded(self, slot: int) -> None:
        """A pipelined producer that records its own sends (workloads/java_recorded.py): the
        same lanes, producer ids, pacing and drain as ``run_pipelined``, carried out where the
        producer runs and written into a side file the history is merged with at the end
        (history/merge.py). This thread asks how far it got, for the counts, until the stop."""
        assert isinstance(self.workload, RecordsSends)
        setup = SlotSetup(
            side_dir=self.recorder.side_dir,
            t0_ns=self.recorder.t0_ns,
            seed_prefix=client_rng_prefix(self.seed),
            concurrency=self.concurrency,
            lanes=self.lanes,
            interval_s=self.interval,
            start_delay_s=self.interval * slot / self.concurrency,
            drain_s=DRAIN_S,
        )
        producer = self.workload.recorded_producer(slot, setup)
        seen = dict.fromkeys(("ok", "fail", "info"), 0)

        def took(stats: dict[str, Any]) -> None:
            now = {t: int(stats.get(t) or 0) for t in seen}
            self.recorder.add_counts({t: now[t] - seen[t] for t in seen})
            seen.update(now)

        try:
            while not self.stop.wait(RECORDED_STATS_S):
                stats = producer.stats()
                took(stats)
                if stats.get("gone"):
                    break  # nothing sends any more; finish says what it last knew
        finally:
            final = producer.finish()
            took(final)
            self.processes.reserve(int(final.get("highest") or 0))

    def send_one(self, client: ProducerClient, lanes: Lanes) -> bool:
        """Invokes one send on a free lane and queues it; False: no lane is free."""
        process = lanes.take()
        if process is None:
            return False
        op = client.next_op()
        lanes.start(process, op)

        def done(c: Completion) -> None:
            self.complete(client, lanes, process, op, c)

        # Invoked before produce(): its delivery report may be served by any later poll.
        if op.f == "send" and len(op.value) == 1:
            _, key, value = op.value[0]
            self.recorder.send_invoke(key, value, process, op.node, client.producer)
        else:
            self.recorder.invoke(op.f, op.value, process, op.node, producer=client.producer)
        try:
            refused = client.send(op, done)
        except Exception as exc:  # a client bug: the send's fate is unknown
            refused = Completion("info", op.value, f"{type(exc).__name__}: {exc}", op.node)
        if refused is not None:
            done(refused)
        return True

    def complete(
        self, client: ProducerClient, lanes: Lanes, process: int, op: Invocation, c: Completion
    ) -> None:
        """Records one send's completion and frees its lane (from a delivery report)."""

        def record() -> None:
            node = c.node or op.node
            if c.type == "ok" and op.f == "send" and c.error is None and not c.extra:
                _, key, (offset, value) = c.value[0]
                self.recorder.send_ok(key, offset, value, process, node, client.producer)
                return
            self.recorder.record(
                c.type, op.f, c.value, process, node, c.error, client.producer, c.extra
            )

        lanes.finish(process, op, c.type == "info" or c.retire, record)

    def drain(self, client: ProducerClient, lanes: Lanes, timeout: float) -> None:
        """Waits for every send in flight to complete; what has no report by `timeout` is
        recorded as unknown, its lane retired."""
        deadline = time.monotonic() + timeout
        while lanes.in_flight and time.monotonic() < deadline:
            client.poll(LANE_WAIT_S)
        why = "no delivery report in time"

        def record(process: int, op: Invocation) -> None:
            self.recorder.record(
                "info", op.f, op.value, process, op.node, why, producer=client.producer
            )

        lanes.abandon(record)
