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
from workloads.queue_ops import OpChooser

# What the child builds (workloads/rdk_child.py), named, not imported: that module imports the
# queue workload, which makes these clients.
FACTORY = "workloads.rdk_child:serve_queue_client"
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
        return self._named(op, done)

    def _named(self, op: Invocation, done: Completion) -> Completion:
        # QueueClient._send_op's rule, with this host's leader map as a thread has it.
        if done.type == "ok" and op.f == "send":
            done.node = self.wl.leaders.leaders.get(op.value[0][1], op.node)
        return done

    def close(self) -> None:
        child, self.child = self.child, None
        if child is None:
            return
        try:
            child.close(0.0 if self._unknown else CLOSE_GRACE_S)
        finally:
            self.slot.gone(child)
