"""The child's side of librdkafka's queue clients in processes of their own (workloads/rdk_proc.py):
run as the factory a child interpreter of workloads/client_procs.py builds, today's QueueClient
with a stand-in for the workload it reads."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from workloads.client import Completion, Invocation
from workloads.client_procs import Gate
from workloads.pipelined import PipelinedProducer
from workloads.queue import QueueClient, QueueWorkload

Acked = list[tuple[int, int | None, int]]


class ChildQueueState:
    """What QueueClient reads of its workload, in the child: the run's settings, the history's
    clock (CLOCK_MONOTONIC is one clock for every process), and the acknowledged sends of the
    op in progress, which go back to the client host with its completion."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.gen: dict[str, Any] = config["gen"]
        self.run_id: str = config["run_id"]
        self.concurrency: int = config["concurrency"]
        self.bootstrap: str = config["bootstrap"]
        self.topic: str = config["topic"]
        self.keys = int(self.gen["keys"])
        t0 = int(config["t0_ns"])
        self.clock = lambda: time.monotonic_ns() - t0
        # The completion's node is the client host's to name (workloads/rdk_proc.py).
        self.leaders = SimpleNamespace(leaders={})
        self.acked: list[tuple[int, int | None, int]] = []

    def note_acked(self, key: int, offset: int | None, value: int) -> None:
        self.acked.append((key, offset, value))

    def consumer_conf(self, group: str, subscriber: bool = False) -> dict[str, Any]:
        # The workload's own rule, which reads only the settings this state has.
        return QueueWorkload.consumer_conf(self, group, subscriber)  # type: ignore[arg-type]


class ServedQueueClient:
    """The child's side: today's QueueClient, held at its points by the child's gate."""

    def __init__(self, config: dict[str, Any], gate: Gate) -> None:
        self.state = ChildQueueState(config)
        # Its own draws are never used: the client host draws every op.
        self.client = QueueClient(self.state, config["process"], random.Random(0))  # type: ignore[arg-type]
        self.client.at = gate.at

    def _answer(self, done: Completion) -> tuple[Completion, Acked]:
        acked, self.state.acked = self.state.acked, []
        return done, acked

    def open(self, op: Invocation) -> tuple[Completion, Acked]:
        return self._answer(self.client.open(op))

    def apply(self, op: Invocation) -> tuple[Completion, Acked]:
        return self._answer(self.client.apply(op))

    def close(self) -> None:
        self.client.close()


def serve_queue_client(
    config: dict[str, Any], gate: Gate, say: Callable[[Any], None]
) -> ServedQueueClient:
    return ServedQueueClient(config, gate)


class ServedPipelinedProducer:
    """The child's side of a pipelined producer: today's PipelinedProducer, its sends queued
    as they come (in batches: one frame per burst of the slot), each completion told from the
    delivery report that decided it, in one ``sent`` frame per poll that served any."""

    def __init__(self, config: dict[str, Any], gate: Gate, say: Callable[[Any], None]) -> None:
        self.state = ChildQueueState(config)
        # Its own draws are never used: the client host draws every send.
        self.producer = PipelinedProducer(self.state, config["producer"], random.Random(0))  # type: ignore[arg-type]
        self.producer.at = gate.at
        self._say = say
        self._told_broken = False
        self._answers: list[tuple[int, Completion, Acked]] = []

    def _answer(self, token: int, done: Completion) -> None:
        acked, self.state.acked = self.state.acked, []
        self._answers.append((token, done, acked))

    def _tell(self) -> None:
        if self._answers:
            answers, self._answers = self._answers, []
            self._say(("sent", answers, self.producer.broken))

    def send(self, sends: list[tuple[int, Invocation]]) -> None:
        for token, op in sends:
            try:
                refused = self.producer.send(op, lambda c, t=token: self._answer(t, c))
            except Exception as exc:  # a client bug: the send's fate is unknown, as in a thread
                refused = Completion("info", op.value, f"{type(exc).__name__}: {exc}", op.node)
            if refused is not None:
                self._answer(token, refused)
        self._tell()

    def idle(self, timeout: float) -> None:
        self.producer.poll(timeout)
        self._tell()
        if self.producer.broken and not self._told_broken:
            self._told_broken = True
            self._say(("broken",))

    def close(self) -> None:
        self.producer.close()


def serve_pipelined_producer(
    config: dict[str, Any], gate: Gate, say: Callable[[Any], None]
) -> ServedPipelinedProducer:
    return ServedPipelinedProducer(config, gate, say)
