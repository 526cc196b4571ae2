"""Pipelined queue sends (`--send-mode async`): one idempotent producer per worker slot with many
sends outstanding, each send its own history operation.

The history keeps its invariant, each process does one thing at a time: a producer with
`in_flight` N owns N process ids ("lanes", harness/run/workers.py), and each send is invoked on a
free lane when `produce()` is called and completed from its delivery report: `ok` with
[offset, value] as a sync send, `fail` for a definite error, `info` for a timeout or anything
unknown (that lane's process retires). Every operation names the librdkafka handle that sent it
(`producer`), so the order of one producer's invocations in the history is its send order,
which is what Kafka's idempotent producer keeps per partition (KIP-98: at most 5 requests in
flight per connection, retried in sequence order).

This module is the client side only: which lane an op runs on and how completions reach the
history belong to the harness's worker slots.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Protocol, runtime_checkable

from confluent_kafka import KafkaError, KafkaException, Producer

from history.format import JVM_RECORDER, SEND_RECORDER_FIELD, TXN_SENDS_FIELD
from history.options import AS_ASKED, Option, OptionError, Values
from workloads.client import Completion, Invocation
from workloads.client_choice import JAVA
from workloads.kafka_errors import describe, kafka_error, produce_is_definite

ASYNC = "async"
# What a stored plan that names no --in-flight had (the first pipelined plans): it replays so.
DEFAULT_IN_FLIGHT = 5
# A new run's window (history/options.py ``fresh``), sized like a real producer's: many
# batches per partition in flight, since Little's law makes the rate at most the window over
# the latency (docs/clients.md "Defaults"). The Java client's producers that record their own
# sends in the JVM take a wider one: there Python does not touch a send, and the brokers' cost
# per batch is the bound, so more in flight makes fuller batches. A pipelined transaction
# holds up to --in-flight sends, so a smaller one there: a transaction of thousands of sends
# would be one history line of thousands of micro-ops.
FRESH_IN_FLIGHT = 2000
FRESH_JVM_IN_FLIGHT = 50_000
FRESH_TXN_IN_FLIGHT = 100
# librdkafka's own default since 1.7; stated so a run's plan says what its producers did. A
# stored plan without --linger-ms had it.
DEFAULT_LINGER_MS = 5.0
# A new run's: fuller batches per partition (kchaos keys every send to a random partition of
# 8, so each linger window fills 8 batches), fewer requests for the brokers on 2 cores.
FRESH_LINGER_MS = 50.0
SEND_TIMEOUT_S = 10.0
# Values stay unique across the run: producer q's n-th value is q * stride + n. A pipelined
# producer sends far more than a sync process, so its stride is wider.
ASYNC_VALUE_STRIDE = 1_000_000_000
# History header fields (docs/history.md): what a pipelined run's producers did.
SEND_MODE_FIELD, IN_FLIGHT_FIELD, IDEMPOTENCE_FIELD = "send_mode", "in_flight", "idempotence"
# The generator's count of worker slots that poll beside the pipelined producers.
POLLERS_FIELD = "pollers"


def send_keys(options: Any) -> dict[str, Any]:
    """The generator keys every pipelined producer has (the queue's and the share workload's)."""
    return {
        "send_mode": ASYNC,
        "in_flight": int(getattr(options, "in_flight", None) or DEFAULT_IN_FLIGHT),
        "linger_ms": float(
            DEFAULT_LINGER_MS if getattr(options, "linger_ms", None) is None else options.linger_ms
        ),
        "value_stride": ASYNC_VALUE_STRIDE,
    }


def generator_params(options: Any) -> dict[str, Any]:
    """The generator parameters of the send mode; {} for sync, so earlier plans stay the same."""
    if getattr(options, "send_mode", None) != ASYNC:
        return {}
    params: dict[str, Any] = {
        **send_keys(options),
        # Only sends, unless some slots poll (--pollers): the final reads read every key back.
        "mix": {"send": 1},
    }
    if getattr(options, "txn", False):
        # Pipelined transactions: a producer runs one transaction at a time (Kafka's rule), so
        # each worker slot is one process as in sync mode, and each `txn` op holds up to
        # `in_flight` sends, all produced before its commit: that many in flight at once.
        params["mix"] = {"txn": 1}
        params["txn_sends"] = params["in_flight"]
    pollers = int(getattr(options, "pollers", None) or 0)
    if pollers:
        # The last `pollers` worker slots each run one consumer process that only polls, the
        # others a pipelined producer: the mix counts slots (``slot_mix``). Absent without
        # pollers, so the plans before them stay the same.
        producers = int(options.concurrency) - pollers
        params["mix"] = {**{f: producers for f in params["mix"]}, "poll": pollers}
        params[POLLERS_FIELD] = pollers
    if getattr(options, "batch_size", None) is not None:
        params["batch_size"] = int(options.batch_size)
    if records_in_jvm(options):
        params[SEND_RECORDER_FIELD] = JVM_RECORDER
    return params


def pollers_of(gen: dict[str, Any]) -> int:
    """Worker slots that only poll beside the pipelined producers (the last ones); 0 in every
    plan before --pollers and in sync runs."""
    return int(gen.get(POLLERS_FIELD) or 0)


def is_poller(gen: dict[str, Any], slot: int) -> bool:
    return slot >= int(gen["concurrency"]) - pollers_of(gen)


def slot_mix(gen: dict[str, Any], process: int) -> dict[str, int]:
    """The operations process `process` draws from (workloads/queue_ops.py OpChooser): the
    plan's mix, or with pollers, polls only on a poller slot's processes and the rest on a
    producer's. Slot s's processes are s*lanes + j + k*concurrency*lanes (harness ProcessIds)."""
    mix: dict[str, int] = gen["mix"]
    if not pollers_of(gen):
        return mix
    slot = (process // lanes_of(gen)) % int(gen["concurrency"])
    if is_poller(gen, slot):
        return {"poll": 1}
    return {f: 1 for f in mix if f != "poll"}


# Who writes a pipelined send's operations (`--send-recorder`): the harness's recorder, each
# send through it (every client, and every run before the option), or, with the Java client,
# the producer's own JVM (workloads/java_recorded.py, docs/history.md "Sends recorded in the
# JVM"), which is the Java client's default.
HARNESS_RECORDER = "harness"
SEND_RECORDERS = (JVM_RECORDER, HARNESS_RECORDER)
SEND_MODES = ("sync", ASYNC)  # the first is what a run without the option does
# The workloads whose producers may be pipelined: the queue's, and the share workload's (its
# producers' sends in the Java client's JVM, workloads/share.py).
PIPELINED_WORKLOADS = ("queue", "share")
_WITH_ASYNC = ("send_mode", ASYNC)

# The queue's options of the send mode (workloads/queue.py lists them among its own).
OPTIONS = (
    Option(
        "send_mode",
        str,
        choices=SEND_MODES,
        noun="send mode",
        stored=AS_ASKED,
        quiet=(SEND_MODES[0],),
        fresh=lambda v: ASYNC if v["workload"] == "queue" else None,
        help="Queue sends pipelined (async, the default): each producer slot one idempotent "
        "producer with --in-flight sends outstanding, each its own operation, and --pollers "
        "slots polling beside them; or one at a time per process (sync, Jepsen's shape: sends, "
        "polls and transactions drawn by every process). A stored plan that names no send "
        "mode was sync, and replays so (docs/clients.md).",
    ),
    Option(
        "in_flight",
        int,
        minimum=1,
        maximum=1_000_000,  # librdkafka's max.in.flight
        only_with=_WITH_ASYNC,
        stored=AS_ASKED,
        fresh=lambda v: _fresh_in_flight(v) if v["send_mode"] == ASYNC else None,
        help="With --send-mode async: sends outstanding per producer, one process id each; "
        f"with --txn, the most sends of one transaction (default {FRESH_IN_FLIGHT}; "
        f"{FRESH_JVM_IN_FLIGHT} with --client java recording in the JVM; {FRESH_TXN_IN_FLIGHT} "
        f"with --txn; a stored plan that names none had {DEFAULT_IN_FLIGHT}).",
    ),
    Option(
        "pollers",
        int,
        minimum=0,
        maximum=255,
        only_with=_WITH_ASYNC,
        stored=AS_ASKED,
        quiet=(0,),
        fresh=lambda v: (
            int(v["concurrency"]) // 2
            if v["send_mode"] == ASYNC and v["workload"] == "queue"
            else None
        ),
        help="With --send-mode async: worker slots (of --concurrency) that poll, one consumer "
        "each as the queue's polls (--mode), unpaced, beside the producer slots (default half "
        "of --concurrency; a stored plan that names none had 0).",
    ),
    Option(
        "linger_ms",
        float,
        minimum=0,
        maximum=900_000,  # librdkafka's linger.ms
        unit="milliseconds",
        only_with=_WITH_ASYNC,
        stored=AS_ASKED,
        fresh=lambda v: FRESH_LINGER_MS if v["send_mode"] == ASYNC else None,
        help=f"With --send-mode async: the producer's linger.ms (default {FRESH_LINGER_MS:g}; "
        f"a stored plan that names none had {DEFAULT_LINGER_MS:g}).",
    ),
    Option(
        "batch_size",
        int,
        minimum=1,
        maximum=2**31 - 1,  # librdkafka's batch.size
        unit="bytes",
        only_with=_WITH_ASYNC,
        stored=AS_ASKED,
        help="With --send-mode async: the producer's batch.size in bytes (librdkafka's default).",
    ),
    Option(
        "send_recorder",
        str,
        choices=SEND_RECORDERS,
        noun="send recorder",
        only_with=_WITH_ASYNC,
        stored=AS_ASKED,
        help="With --client java --send-mode async: who writes each send's operations, the "
        "producer's JVM (jvm, the default: tens of thousands of sends a second) or the harness "
        "(each send through its recorder, as librdkafka's are; docs/history.md).",
    ),
)


def _fresh_in_flight(v: Any) -> int:
    if v["txn"]:
        return FRESH_TXN_IN_FLIGHT
    if records_in_jvm(SimpleNamespace(**v)):
        return FRESH_JVM_IN_FLIGHT
    return FRESH_IN_FLIGHT


def check(values: Values) -> None:
    """Refuses pipelined sends that cannot run as asked (beyond each option's own refusals)."""
    if values.send_mode != ASYNC:
        return
    if values.workload not in PIPELINED_WORKLOADS:
        raise OptionError(
            f"send-mode async is an option of the {' and '.join(PIPELINED_WORKLOADS)} "
            f"workloads, not of '{values.workload}'"
        )
    if values.workload != "queue":
        return  # the share workload refuses what its producers cannot do (workloads/share.py)
    if (values.pollers or 0) >= values.concurrency:
        raise OptionError(
            f"pollers {values.pollers} leaves no producer among --concurrency "
            f"{values.concurrency} worker slots: at most {values.concurrency - 1}"
        )
    if values.send_recorder is not None:
        if values.client != JAVA:
            raise OptionError(
                "send-recorder applies to --client java (librdkafka's sends are "
                "recorded by the harness)"
            )
        if values.txn and values.send_recorder == JVM_RECORDER:
            raise OptionError(
                "send-recorder jvm records pipelined sends, not transactions: with --txn each "
                "txn op spans its sends and its commit, and the harness records it"
            )


def records_in_jvm(options: Any) -> bool:
    """Do the run's pipelined sends get recorded in the Java client's JVM? Only pipelined
    sends of the Java client without transactions (pipelined transactions keep the harness's
    recording: a `txn` op spans its sends and its commit, docs/history.md), unless the run
    asks for the harness's recorder."""
    return (
        getattr(options, "send_mode", None) == ASYNC
        and getattr(options, "client", None) == JAVA
        and not getattr(options, "txn", False)
        and getattr(options, "send_recorder", None) in (None, JVM_RECORDER)
    )


def has_lanes(gen: dict[str, Any]) -> bool:
    """Do the run's producers own lanes (several process ids each)? Pipelined sends do;
    sync runs and pipelined transactions (whose sends are one op) do not."""
    return gen.get("send_mode") == ASYNC and not gen.get("txn")


def lanes_of(gen: dict[str, Any]) -> int:
    """Process ids per worker slot: a pipelined producer's in-flight bound, else 1."""
    return int(gen["in_flight"]) if has_lanes(gen) else 1


def history_header(gen: dict[str, Any]) -> dict[str, Any]:
    """What a pipelined run's history header declares; {} for sync (headers stay the same)."""
    if gen.get("send_mode") != ASYNC:
        return {}
    if gen.get("txn"):
        return {TXN_SENDS_FIELD: int(gen["txn_sends"])}
    header: dict[str, Any] = {
        SEND_MODE_FIELD: ASYNC,
        IN_FLIGHT_FIELD: int(gen["in_flight"]),
        IDEMPOTENCE_FIELD: True,
    }
    if gen.get(SEND_RECORDER_FIELD) == JVM_RECORDER:
        header[SEND_RECORDER_FIELD] = JVM_RECORDER
    return header


class InFlight:
    """Sends in flight per partition over every live pipelined producer, for the busiest-leader
    target (nemesis/targets.py). Each producer counts in a row of its own that only its slot's
    thread writes (produce() and the delivery reports its polls serve run there), so a send
    takes no lock; a fault reads the sums, at most a few sends stale."""

    def __init__(self, partitions: int) -> None:
        self.partitions = partitions
        self._rows: dict[int, list[int]] = {}
        self._lock = threading.Lock()  # only rows coming and going

    def register(self, producer: int) -> list[int]:
        row = [0] * self.partitions
        with self._lock:
            self._rows[producer] = row
        return row

    def unregister(self, producer: int) -> None:
        with self._lock:
            self._rows.pop(producer, None)

    def by_partition(self) -> dict[int, int]:
        """Partition -> sends in flight now; partitions with none are left out."""
        with self._lock:
            rows = list(self._rows.values())
        sums = [sum(col) for col in zip(*rows, strict=True)] if rows else []
        return {p: n for p, n in enumerate(sums) if n > 0}


class QueueState(Protocol):
    """What a pipelined producer reads of its queue workload (workloads/queue.py)."""

    gen: dict[str, Any]
    keys: int
    topic: str
    bootstrap: str
    leaders: Any  # .leaders: partition -> node name, as the cluster metadata last said
    sends_in_flight: InFlight

    def note_acked(self, key: int, offset: int | None, value: int) -> None: ...


class ProducerClient(Protocol):
    """One pipelined producer, driven by one worker slot's thread."""

    producer: int
    # A fatal producer error was seen: no further send can succeed on this handle.
    broken: bool

    def next_op(self) -> Invocation: ...

    def send(self, op: Invocation, done: Callable[[Completion], None]) -> Completion | None:
        """Queues the send; None: `done` gets its completion from a delivery report, during
        some later `poll`. A Completion: produce() refused it, nothing was queued."""
        ...

    def poll(self, timeout: float) -> None:
        """Serves delivery reports (their `done` callbacks run in this call)."""
        ...

    def close(self) -> None: ...


@runtime_checkable
class Pipelining(Protocol):
    """A workload that can run pipelined producers (the queue workload)."""

    def pipelined_lanes(self) -> int:
        """In-flight sends per producer; 0: this run sends synchronously."""
        ...

    def producer_client(self, producer: int, rng: random.Random) -> ProducerClient: ...


@runtime_checkable
class Polling(Protocol):
    """A workload whose last worker slots may only poll beside pipelined producers."""

    def poller_slots(self) -> int:
        """How many (--pollers); 0: every slot runs the plan's mix."""
        ...


@dataclass(frozen=True)
class SlotSetup:
    """What the harness gives a worker slot whose producer records its own sends."""

    # Where the slot's side file goes (history/format.py JVM_SENDS_DIR in the run directory).
    side_dir: Path
    # The history's clock: its zero in time.monotonic_ns() (harness/run/recorder.py).
    t0_ns: int
    # harness/plan.py client_rng's seed string without the producer id: producer q's keys come
    # from the stream of `seed_prefix + str(q)`, as the harness-recorded producer's do.
    seed_prefix: str
    concurrency: int
    lanes: int
    # Seconds between two sends of the slot (0: unpaced), and before its first.
    interval_s: float
    start_delay_s: float
    # How long the sends in flight at the end are waited for before they are recorded info.
    drain_s: float


class RecordedProducer(Protocol):
    """One worker slot's pipelined producer that records its own sends, driven by the slot's
    thread: it runs from construction until `finish`."""

    def stats(self) -> dict[str, Any]:
        """Counts so far (`invoke`, `ok`, `fail`, `info`) and the highest process id; with
        `gone` (why) when the producer can send no more (its host died)."""
        ...

    def finish(self) -> dict[str, Any]:
        """Stops sending, drains, closes; the final `stats`. Its acknowledged sends are then
        the workload's (final reads)."""
        ...


@runtime_checkable
class RecordsSends(Protocol):
    """A workload whose pipelined producers may record their own sends (the Java client's)."""

    def records_sends(self) -> bool: ...

    def recorded_producer(self, slot: int, setup: SlotSetup) -> RecordedProducer: ...


def producer_conf(wl: QueueState) -> dict[str, Any]:
    gen = wl.gen
    conf: dict[str, Any] = {
        "bootstrap.servers": wl.bootstrap,
        "acks": "all",
        # Kafka's per-partition order guarantee with several requests in flight (KIP-98);
        # librdkafka keeps max.in.flight.requests.per.connection at 5 or below for it.
        "enable.idempotence": True,
        "max.in.flight.requests.per.connection": 5,
        "message.timeout.ms": int(SEND_TIMEOUT_S * 1000),
        "linger.ms": float(gen.get("linger_ms", DEFAULT_LINGER_MS)),
    }
    if gen.get("batch_size") is not None:
        conf["batch.size"] = int(gen["batch_size"])
    return conf


class SendChooser:
    """A pipelined producer's sends: keys from its own random stream, values producer q's
    q * value_stride + n, each naming the leader its key had last."""

    def __init__(self, wl: QueueState, producer: int, rng: random.Random) -> None:
        self.wl = wl
        self.rng = rng
        self._keys = wl.keys
        self._next_value = producer * int(wl.gen["value_stride"])

    def next_op(self) -> Invocation:
        key = self.rng.randrange(self._keys)
        self._next_value += 1
        return Invocation(
            "send", [["send", key, self._next_value]], self.wl.leaders.leaders.get(key)
        )


def _unheld(point: str) -> None:
    """A producer in a thread is never held."""


class PipelinedProducer:
    """A producer whose sends complete from delivery reports; one per worker slot."""

    def __init__(
        self,
        wl: QueueState,
        producer: int,
        rng: random.Random,
        conf: dict[str, Any] | None = None,
    ) -> None:
        self.wl = wl
        self.producer = producer
        self.rng = rng
        self.broken = False
        self._draws = SendChooser(wl, producer, rng)
        self._topic = wl.topic
        # Where a client fault holds it, in a process of its own (workloads/client_procs.py
        # Gate.at): just before each produce().
        self.at: Callable[[str], None] = _unheld
        quiet = {"log_level": 0, "error_cb": self._error}
        self._producer = Producer({**(conf or producer_conf(wl)), **quiet})
        # A workload that aims no fault by it may give none: the counts are then this one's.
        self._counts: InFlight = getattr(wl, "sends_in_flight", None) or InFlight(wl.keys)
        self._in_flight = self._counts.register(producer)

    def _error(self, err: KafkaError) -> None:
        # librdkafka reports a fatal idempotence error (e.g. an out-of-order sequence it cannot
        # recover from) here as well as on each later send; the slot then starts a new handle.
        if err.fatal():
            self.broken = True

    def next_op(self) -> Invocation:
        return self._draws.next_op()

    def send(self, op: Invocation, done: Callable[[Completion], None]) -> Completion | None:
        _, key, value = op.value[0]

        def delivered(err: KafkaError | None, msg: Any) -> None:
            self._in_flight[key] -= 1
            done(self.completion(op, key, value, err, msg.offset() if err is None else None))

        try:
            self.at("send")
            self._producer.produce(
                self._topic,
                value=str(value).encode(),
                key=str(key).encode(),
                partition=key,
                on_delivery=delivered,
            )
        except KafkaException as exc:
            err = kafka_error(exc)
            if err is not None and err.fatal():
                self.broken = True
            kind = "fail" if err is not None and produce_is_definite(err) else "info"
            return Completion(kind, op.value, describe(exc), op.node)
        except BufferError as exc:
            return Completion("fail", op.value, f"local queue full: {exc}", op.node)
        self._in_flight[key] += 1
        return None

    def completion(
        self, op: Invocation, key: int, value: int, err: KafkaError | None, offset: int | None
    ) -> Completion:
        """What a delivery report says of one send (Jepsen's rule, as the sync send)."""
        if err is not None:
            if err.fatal():
                self.broken = True
            kind = "fail" if produce_is_definite(err) and not err.fatal() else "info"
            return Completion(kind, op.value, describe(err), op.node)
        # A negative offset: librdkafka delivered it but does not know where.
        at = offset if offset is not None and offset >= 0 else None
        self.wl.note_acked(key, at, value)
        node = self.wl.leaders.leaders.get(key, op.node)
        return Completion("ok", [["send", key, [at, value]]], None, node)

    def poll(self, timeout: float) -> None:
        self._producer.poll(timeout)

    def close(self) -> None:
        # Sends still queued locally are abandoned (the slot recorded them as info already).
        self._counts.unregister(self.producer)
        try:
            self._producer.purge(in_queue=True, in_flight=False)
            self._producer.flush(0)
        except KafkaException:
            pass
