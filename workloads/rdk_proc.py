"""librdkafka's queue clients in processes of their own (the generator's ``client_procs``).

The slot's thread drives ``ProcQueueClient``, a Client (workloads/client.py) that draws its
ops as ``QueueClient`` does (the same OpChooser, the same random stream) and has each carried
out by today's ``QueueClient`` code in the slot's child process (workloads/client_procs.py), so
every op's ok/fail/info is decided from librdkafka's errors exactly as in a thread. What that
code reads and writes of the shared workload is split so: the child gets the run's settings
and the history's clock (``ChildQueueState``); the acknowledged sends it saw come back with
each completion and go into the workload's tally here; a send's ``node`` is taken from the
workload's leader map here, when its completion is recorded, as the thread does.

What only a process can show, each an ``info`` completion whose process retires: a child
killed mid-op (its pipe ended) and one that gave no answer by the op's deadline (paused, or
stuck). The deadlines are what the client's own timeouts add up to, and a margin, so an op
that would have finished in a thread is not cut short.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from workloads.client import Completion, Invocation
from workloads.client_procs import (
    CLOSE_GRACE_S,
    ChildFailed,
    ChildGone,
    ChildProcess,
    ChildSilent,
    SlotProcess,
)
from workloads.pipelined import InFlight, SendChooser
from workloads.queue_ops import OpChooser

# What the child builds (workloads/rdk_child.py), named, not imported: that module imports the
# queue workload, which makes these clients.
FACTORY = "workloads.rdk_child:serve_queue_client"
PIPELINED_FACTORY = "workloads.rdk_child:serve_pipelined_producer"
_MARGIN_S = 10.0


def op_deadline(op: Invocation, txn_timeout_s: float, send_timeout_s: float) -> float:
    """Seconds the slot waits for `op`'s answer while no point of it is held: the client's own
    bounds (workloads/queue.py) and a margin. A transaction may init (txn timeout), flush
    (send timeout), then commit and, failing, abort (txn timeout each)."""
    if op.f == "txn":
        return 3 * txn_timeout_s + send_timeout_s + _MARGIN_S * 2
    if op.f == "send":
        return send_timeout_s + 2 + _MARGIN_S
    # A poll's consume is bounded by its poll timeout; a subscriber's commit and an open
    # (assign, subscribe) by the coordinator's answer.
    return 3 * _MARGIN_S


def _named(wl: Any, op: Invocation, done: Completion) -> Completion:
    """A send's completion names the leader its key has in this host's leader map, as a
    thread's does (QueueClient._send_op, PipelinedProducer.completion)."""
    if done.type == "ok" and op.f == "send":
        done.node = wl.leaders.leaders.get(op.value[0][1], op.node)
    return done


class ProcQueueClient:
    """One process of a slot whose librdkafka client lives in a child process."""

    def __init__(
        self,
        wl: Any,
        process: int,
        rng: random.Random,
        slot: SlotProcess,
        config: dict[str, Any],
        timeouts: tuple[float, float],
    ) -> None:
        """`config`: the child's (workloads/rdk_child.py ChildQueueState); `timeouts`: the
        client's transaction and send timeouts, which its ops' deadlines add up."""
        self.wl = wl
        self.process = process
        self.ops = OpChooser(wl.gen, process, rng)
        # Drawn first, as QueueClient's constructor does: the same stream, the same ops.
        self.setup_op: Invocation | None = self.ops.assignment()
        self.slot = slot
        self._timeouts = timeouts
        self.child: ChildProcess | None = slot.start(FACTORY, {**config, "process": process})
        self._unknown = False

    def next_op(self) -> Invocation:
        return self.ops.next_op(self.wl.leaders.leaders)

    def open(self, op: Invocation) -> Completion:
        return self._call("open", op)

    def apply(self, op: Invocation) -> Completion:
        return self._call("apply", op)

    def _call(self, method: str, op: Invocation) -> Completion:
        child = self.child
        if child is None:
            return Completion("info", op.value, "no client process", op.node)
        try:
            done, acked = child.call(method, op, op_deadline(op, *self._timeouts))
        except (ChildGone, ChildSilent, ChildFailed) as exc:
            # The child's state is unknown (a paused one may still act): killed on close.
            self._unknown = True
            return Completion("info", op.value, str(exc), op.node)
        for key, offset, value in acked:
            self.wl.note_acked(key, offset, value)
        return _named(self.wl, op, done)

    def close(self) -> None:
        _close_child(self)


def _close_child(client: Any) -> None:
    """Ends a slot client's child (at once when its last answer was unknown: nothing it says
    can be trusted) and tells the slot it is gone."""
    child, client.child = client.child, None
    if child is None:
        return
    try:
        child.close(0.0 if client._unknown else CLOSE_GRACE_S)
    finally:
        client.slot.gone(child)


class ProcPipelinedProducer:
    """A slot's pipelined producer (workloads/pipelined.py ProducerClient) whose librdkafka
    handle lives in a child process: the sends are drawn and recorded here, queued there, and
    each completion comes back from the delivery report that decided it, during ``poll``.

    A child killed ends every send in flight ``info`` and the producer (the slot starts the
    next one, in a new child); one that answers no send in flight by the send deadline while
    not held (paused) likewise, and is killed."""

    def __init__(
        self,
        wl: Any,
        producer: int,
        rng: random.Random,
        slot: SlotProcess,
        config: dict[str, Any],
        send_timeout_s: float,
    ) -> None:
        self.wl = wl
        self.producer = producer
        self.broken = False
        self._draws = SendChooser(wl, producer, rng)
        self._deadline = op_deadline(Invocation("send", []), 0.0, send_timeout_s)
        self._counts: InFlight = wl.sends_in_flight
        self._row = self._counts.register(producer)
        # token -> (op, its done, when it was sent), oldest first.
        self._pending: dict[int, tuple[Invocation, Callable[[Completion], None], float]] = {}
        self._token = 0
        self._outbox: list[tuple[int, Invocation]] = []  # sent with the next poll, in one frame
        self._held_at: float | None = None
        self._grace = 0.0  # seconds held so far, which no send's deadline counts
        self._unknown = False
        self.slot = slot
        self.child: ChildProcess | None = slot.start(
            PIPELINED_FACTORY, {**config, "producer": producer}
        )

    @property
    def held(self) -> bool:
        """Does the child say it waits at a held point now (as last served by ``poll``)?"""
        return self._held_at is not None

    def next_op(self) -> Invocation:
        return self._draws.next_op()

    def send(self, op: Invocation, done: Callable[[Completion], None]) -> Completion | None:
        if self.child is None:
            return Completion("info", op.value, "no client process", op.node)
        key = op.value[0][1]
        self._token += 1
        self._pending[self._token] = (op, done, time.monotonic())
        self._row[key] += 1
        # The slot queues a burst of sends, then polls: the burst goes to the child in one frame.
        self._outbox.append((self._token, op))
        return None

    def poll(self, timeout: float) -> None:
        until = time.monotonic() + timeout
        if self._outbox and self.child is not None:
            sends, self._outbox = self._outbox, []
            try:
                self.child.cast("send", sends)
            except (ChildGone, ChildSilent) as exc:
                self._lost(str(exc))
                return
        while self.child is not None:
            try:
                got = self.child.receive(until)
            except ChildGone as exc:
                self._lost(str(exc))
                return
            if got is None:
                break
            self._take(got)
        if self._pending and self._held_at is None:
            sent = next(iter(self._pending.values()))[2]
            if time.monotonic() - sent > self._deadline + self._grace:
                pid = self.child.pid if self.child is not None else None
                self._lost(f"no answer from client process {pid} in {self._deadline:g} s")

    def _take(self, got: tuple[Any, ...]) -> None:
        kind = got[0]
        if kind == "sent":
            _, answers, broken = got
            self.broken = self.broken or broken
            for token, done, acked in answers:
                entry = self._pending.pop(token, None)
                if entry is None:
                    continue
                op, answer, _ = entry
                self._row[op.value[0][1]] -= 1
                for key, offset, value in acked:
                    self.wl.note_acked(key, offset, value)
                answer(_named(self.wl, op, done))
        elif kind == "held":
            self._held_at = time.monotonic()
        elif kind == "going":
            if self._held_at is not None:
                self._grace += time.monotonic() - self._held_at
            self._held_at = None
        elif kind == "broken":
            self.broken = True
        elif kind == "error":
            self._lost(got[1])

    def _lost(self, why: str) -> None:
        """Every send in flight ends unknown; this producer can send no more."""
        self.broken = True
        self._unknown = True
        self._outbox = []
        pending, self._pending = self._pending, {}
        for op, answer, _ in pending.values():
            self._row[op.value[0][1]] -= 1
            answer(Completion("info", op.value, why, op.node))

    def close(self) -> None:
        self._counts.unregister(self.producer)
        _close_child(self)
