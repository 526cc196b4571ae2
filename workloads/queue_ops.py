"""What a queue process does next: its assignment and its operations, drawn from its own random
stream. Every client of the queue workload (librdkafka's, the Java client's) draws through this,
so one seed gives the same operations whichever client runs them (docs/history.md)."""

from __future__ import annotations

import random
import time
from typing import Any

from workloads.client import Invocation
from workloads.client_choice import JAVA, LIBRDKAFKA
from workloads.pipelined import slot_mix


class OpChooser:
    """One process's generator: keys, unique values (process p's n-th value is
    p * value_stride + n), and the mix of plan.json's generator."""

    def __init__(self, gen: dict[str, Any], process: int, rng: random.Random) -> None:
        self.gen = gen
        self.rng = rng
        self.keys = int(gen["keys"])
        self._next_value = process * int(gen["value_stride"])
        # Pipelined transactions (--send-mode async --txn): each transaction holds up to this
        # many sends and nothing else; None: the mix of sends and polls of max_txn_ops.
        self.txn_sends = gen.get("txn_sends")
        # A poller slot's processes only poll beside pipelined producers (--pollers).
        self.mix = slot_mix(gen, process)

    def assignment(self) -> Invocation:
        if self.gen["mode"] == "subscribe":
            return Invocation("subscribe", list(range(self.keys)))
        n = self.rng.randint(1, self.keys)
        return Invocation("assign", sorted(self.rng.sample(range(self.keys), n)))

    def _value(self) -> int:
        self._next_value += 1
        return self._next_value

    def _mop(self, kind: str) -> list[Any]:
        if kind == "send":
            return ["send", self.rng.randrange(self.keys), self._value()]
        return ["poll"]

    def next_op(self, leaders: dict[int, str | None]) -> Invocation:
        """The next operation; a single send names the leader its key had last (`leaders`)."""
        mix = self.mix
        f = self.rng.choices(sorted(mix), weights=[mix[k] for k in sorted(mix)])[0]
        if f == "txn":
            if self.txn_sends:
                n = self.rng.randint(1, int(self.txn_sends))
                return Invocation("txn", [self._mop("send") for _ in range(n)])
            n = self.rng.randint(2, int(self.gen["max_txn_ops"]))
            mops = [self._mop(self.rng.choice(("send", "poll"))) for _ in range(n)]
            return Invocation("txn", mops)
        mop = self._mop(f)
        node = leaders.get(mop[1]) if f == "send" else None
        return Invocation(f, [mop], node)


# Records per second each client's final reads are budgeted to read back, beyond
# --final-timeout (QueueWorkload.final_timeout). Measured by bench/bench_final_reads.py on a kept
# 3-broker Kafka 4.4 cluster (a default 30 s run, 465,401 acknowledged sends, two cores shared
# with other work): librdkafka's consume() in batches 164,014/s, the Java client's loop in its
# JVM 220,686/s (about 2 M/s on a 6 M-send topic, where its start-up weighs less). Rounded down.
# The deadline also extends while records are still being read (workloads/readback.py
# ReadDeadline), so a slower box costs waiting, not a cut-short read.
FINAL_READ_RATE: dict[str, float] = {LIBRDKAFKA: 150_000.0, JAVA: 200_000.0}


def final_poll_records(acknowledged: int) -> int:
    """Records one final poll asks for: 500 as ever, up to 20,000 when millions were
    acknowledged, so that reading them back is not a round trip and a history line per 500."""
    return max(500, min(20_000, acknowledged // 200))


def final_outcome(
    acknowledged: int,
    unread: int,
    missing: list[list[int]],
    polls: int,
    started: float,
    ends: dict[int, int],
) -> dict[str, Any]:
    """What the final reads found (run.json's `final_reads`), whichever client read: how many
    of the `acknowledged` (key, value) sends were read back (`unread` were not), and the first
    missing ones by name (`missing`, [key, value] in that order: workloads/readback.py
    FinalTally.missing)."""
    return {
        "acknowledged": acknowledged,
        "read_acknowledged": acknowledged - unread,
        "missing": missing,
        "complete": not unread,
        "polls": polls,
        "seconds": round(time.monotonic() - started, 2),
        "high_watermarks": {str(k): v for k, v in ends.items()},
    }
