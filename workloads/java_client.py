"""The queue workload's clients on Kafka's own Java client (`--client java`).

The same operations, values and outcome rules as the librdkafka client (workloads/queue.py,
docs/history.md), made with KafkaProducer and KafkaConsumer in a JVM beside the harness
(workloads/java_host.py). What differs is how an exception becomes `fail` or `info`: the
Java client says which of Kafka's error categories (KIP-1050) an exception belongs to, and
`outcome` below is the one place that turns a category into Jepsen's types (docs/history.md,
"Clients").
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from history.format import HELD_FIELD, QUEUE_FS, TXN_ABORT_CHECK, TXN_TIMEOUT_MS
from workloads.client import Completion, Invocation
from workloads.client_choice import consumer_settings
from workloads.client_procs import wants_processes
from workloads.java_host import JavaError, JavaGone, JavaHost, conf_args, error_of
from workloads.pipelined import DEFAULT_LINGER_MS, InFlight, QueueState
from workloads.queue_ops import OpChooser

SEND_TIMEOUT_S = 10.0
TXN_TIMEOUT_S = 15.0
# How often a transaction coordinator aborts the transactions open past their timeout: Kafka's
# default, which kchaos leaves.
TXN_ABORT_CHECK_MS = 10_000
# How long the harness waits for a reply beyond the client's own timeout before it calls the
# outcome unknown (a JVM that stopped answering).
GRACE_S = 5.0
# Sends the broker refused before appending anything, whatever the client retried: the record
# is in no log. Everything else a send reports after it was queued is indefinite.
DEFINITE_SEND = frozenset(
    {
        "RecordTooLargeException",
        "RecordBatchTooLargeException",
        "InvalidTopicException",
        "TopicAuthorizationException",
        "ClusterAuthorizationException",
        "SerializationException",
        "InvalidRequiredAcksException",
    }
)


def error_class(err: JavaError) -> str:
    return err.message.split(":", 1)[0]


def send_outcome(err: JavaError | JavaGone) -> str:
    """`fail` for a send that never reached a broker or that a broker refused before
    appending it, `info` for everything else (a timeout, a lost leader, a fenced producer)."""
    if isinstance(err, JavaGone):
        return "info"
    if err.pre or error_class(err) in DEFINITE_SEND:
        return "fail"
    return "info"


def producer_conf(wl: QueueState, transactional_id: str | None, pipelined: bool) -> dict[str, Any]:
    gen = wl.gen
    conf: dict[str, Any] = {
        "bootstrap.servers": wl.bootstrap,
        "acks": "all",
        "enable.idempotence": True,
        "max.in.flight.requests.per.connection": 5,
        # delivery.timeout.ms bounds a send as librdkafka's message.timeout.ms does; it must be
        # at least linger.ms + request.timeout.ms.
        "delivery.timeout.ms": int(SEND_TIMEOUT_S * 1000),
        "request.timeout.ms": 5000,
        "linger.ms": int(gen.get("linger_ms", DEFAULT_LINGER_MS)) if pipelined else 0,
        # send() waits this long for metadata; init, commit and abort of a transaction too.
        "max.block.ms": int((TXN_TIMEOUT_S if transactional_id else SEND_TIMEOUT_S) * 1000),
    }
    if pipelined and gen.get("batch_size") is not None:
        conf["batch.size"] = int(gen["batch_size"])
    if transactional_id:
        conf["transactional.id"] = transactional_id
        conf["transaction.timeout.ms"] = int(TXN_TIMEOUT_S * 1000)
    return conf


def consumer_conf(wl: QueueState, group: str, subscribe: bool) -> dict[str, Any]:
    """The settings both clients share (client_choice.consumer_settings), and the Java
    consumer's own bounds: a poll returns what librdkafka's consume(64) would, and no call
    blocks past the client's timeouts."""
    return {
        **consumer_settings(wl.gen, wl.bootstrap, group, subscribe),
        "max.poll.records": int(wl.gen["poll_max_messages"]),
        "default.api.timeout.ms": 10000,
    }


class Events:
    """Rebalance events of one consumer, as the listener reported them, until an op takes them
    (docs/history.md: `rebalance`, times in the history's clock)."""

    def __init__(self, topic: str, clock: Callable[[], int]) -> None:
        """`clock`: the history's clock (workloads/api.py Clocked), read as each event arrives:
        the JVM writes an event when its listener runs, before the reply of the poll that ran
        it, and the one reader thread takes them in that order."""
        self._topic = topic
        self._clock = clock
        self._events: list[list[Any]] = []
        self._lock = threading.Lock()

    def __call__(self, msg: dict[str, Any]) -> None:
        keys = sorted(p for t, p in msg["p"] if t == self._topic)
        with self._lock:
            self._events.append([msg["ev"], keys, self._clock()])

    def take(self) -> list[list[Any]]:
        with self._lock:
            out, self._events = self._events, []
        return out


class JavaQueueClient:
    """One process's KafkaProducer and KafkaConsumer. Retired after any indefinite outcome."""

    def __init__(
        self, wl: Any, host: JavaHost, process: int, rng: random.Random, tid: str | None
    ) -> None:
        """`tid`: the process's transactional.id with --txn, else None."""
        self.wl = wl
        self.host = host
        self.process = process
        self.rng = rng
        self.ops = OpChooser(wl.gen, process, rng)
        self._txn = bool(wl.gen["txn"])
        self._subscribe = wl.gen["mode"] == "subscribe"
        self._topic = wl.topic
        self._events = Events(wl.topic, wl.clock)
        self._tid = tid
        self._p = host.handle()
        self._c = host.handle(self._events if self._subscribe else None)
        self._opened: list[int] = []
        group = f"kchaos-{wl.run_id}"
        self._group = group if self._subscribe else f"{group}-{process}"
        self._txn_ready = False
        self.setup_op = self.ops.assignment()

    def _done(self, type_: str, value: Any, error: str | None = None, **kw: Any) -> Completion:
        """A completion carrying the rebalance events the op's calls ran (subscribe mode)."""
        extra = dict(kw.pop("extra", None) or {})
        events = self._events.take() if self._subscribe else []
        if events:
            extra["rebalance"] = events
        return Completion(type_, value, error, extra=extra or None, **kw)

    def open(self, op: Invocation) -> Completion:
        """Makes the process's producer and consumer, then assigns or subscribes. Handles are
        made here, not at construction, so that a JVM that is gone ends an op, not a slot."""
        try:
            # Pipelined transactions (txn_sends) batch their sends as pipelined producers do.
            conf = producer_conf(self.wl, self._tid, bool(self.wl.gen.get("txn_sends")))
            self.host.call("producer", self._p, *conf_args(conf), timeout=30)
            self._opened.append(self._p)
            conf = consumer_conf(self.wl, self._group, self._subscribe)
            self.host.call("consumer", self._c, *conf_args(conf), timeout=30)
            self._opened.append(self._c)
            if op.f == "subscribe":
                self.host.call("subscribe", self._c, self._topic, timeout=30)
            else:
                keys = ",".join(map(str, op.value))
                self.host.call("assign", self._c, self._topic, keys, timeout=30)
        except JavaError as exc:
            return self._done("fail", op.value, str(exc))
        except JavaGone as exc:
            time.sleep(0.5)  # the JVM is gone: every later process would end here at once
            return self._done("info", op.value, str(exc))
        return self._done("ok", op.value)

    def next_op(self) -> Invocation:
        # The same generator as the librdkafka client's: a seed draws the same ops on either.
        return self.ops.next_op(self.wl.leaders.leaders)

    # Application ------------------------------------------------------------------------------
    def apply(self, op: Invocation) -> Completion:
        assert op.f in QUEUE_FS
        if op.f == "poll":
            return self._poll_op(op)
        if self._txn or op.f == "txn":
            return self._txn_op(op)
        return self._send_op(op)

    def _send_op(self, op: Invocation) -> Completion:
        _, key, value = op.value[0]
        try:
            offset = self.host.call(
                "send", self._p, self._topic, key, key, value, timeout=SEND_TIMEOUT_S + GRACE_S
            )
        except (JavaError, JavaGone) as exc:
            return self._done(send_outcome(exc), op.value, str(exc), node=op.node)
        at = offset if isinstance(offset, int) and offset >= 0 else None
        self.wl.note_acked(key, at, value)
        node = self.wl.leaders.leaders.get(key, op.node)
        return self._done("ok", [["send", key, [at, value]]], node=node)

    def _poll(self) -> tuple[dict[str, list[list[int]]], list[list[Any]]]:
        """What one poll returned (partition -> [[offset, value]]) and records of other
        topics; raises JavaError / JavaGone."""
        timeout_ms = int(self.wl.gen["poll_timeout_ms"])
        got = self.host.call(
            "poll", self._c, self._topic, timeout_ms, timeout=timeout_ms / 1000 + 15
        )
        read: dict[str, list[list[int]]] = {}
        for p, offset, value in got["recs"]:
            if value is not None:
                read.setdefault(str(p), []).append([offset, value])
        return read, got.get("foreign", [])

    def _poll_op(self, op: Invocation) -> Completion:
        try:
            read, foreign = self._poll()
        except (JavaError, JavaGone) as exc:
            # A read has no effect on the data, but the consumer's position is now unknown.
            return self._done("info", [["poll", {}]], str(exc))
        extra: dict[str, Any] = {"foreign": foreign} if foreign else {}
        if read and self._subscribe:
            # A lost commit only means re-reading later, which subscribe mode tolerates.
            try:
                committed = self.host.call("commit", self._c, timeout=15)
                extra["commit"] = committed
            except (JavaError, JavaGone) as exc:
                extra["commit_error"] = str(exc)
        return self._done("ok", [["poll", read]], extra=extra)

    def _txn_op(self, op: Invocation) -> Completion:
        results: dict[int, Any] = {}
        # When the harness heard each send acknowledged (the history's clock): the first is
        # after the partition joined the transaction, so the coordinator's timer began before.
        acked_at: list[int] = []
        lock = threading.Lock()
        out: list[list[Any]] = []
        foreign: list[list[Any]] = []
        start = self._positions()
        asked: int | None = None
        call = self.host.call
        wait = TXN_TIMEOUT_S + GRACE_S
        try:
            if not self._txn_ready:
                call("init", self._p, timeout=wait)
                self._txn_ready = True
            call("begin", self._p, timeout=wait)
        except (JavaError, JavaGone) as exc:
            # Nothing of the transaction was sent; the producer's own state is unknown.
            return self._done("fail", op.value, f"not begun: {exc}", retire=True)
        try:
            for mop in op.value:
                if mop[0] == "send":
                    _, key, value = mop

                    def got(reply: dict[str, Any], value: int = value) -> None:
                        with lock:
                            results[value] = reply
                            if "e" not in reply:
                                acked_at.append(self.wl.clock())

                    self.host.call_async(
                        "send", self._p, self._topic, key, key, value, callback=got
                    )
                    out.append(mop)
                else:
                    read, more = self._poll()
                    foreign.extend(more)
                    out.append(["poll", read])
            asked = self.wl.clock()
            held_ms = call("commit-txn", self._p, timeout=wait)
        except (JavaError, JavaGone) as exc:
            held_ms = exc.held_ms if isinstance(exc, JavaError) else 0
            held = held_record(asked, acked_at, held_ms, wants_processes(self.wl.gen))
            return self._abort(op, out, start, exc, foreign, held)
        held = held_record(asked, acked_at, held_ms, wants_processes(self.wl.gen))
        if held:
            foreign_extra: dict[str, Any] = {"foreign": foreign} if foreign else {}
            extra_ok: dict[str, Any] | None = {**foreign_extra, HELD_FIELD: held}
        else:
            extra_ok = {"foreign": foreign} if foreign else None
        done = []
        for mop in out:
            if mop[0] == "send":
                reply = results.get(mop[2], {})
                offset = reply.get("r")
                at = offset if isinstance(offset, int) and offset >= 0 else None
                self.wl.note_acked(mop[1], at, mop[2])
                done.append(["send", mop[1], [at, mop[2]]])
            else:
                done.append(mop)
        return self._done("ok", done, extra=extra_ok)

    def _abort(
        self,
        op: Invocation,
        out: list[list[Any]],
        start: dict[int, int] | None,
        exc: JavaError | JavaGone,
        foreign: list[list[Any]],
        held: dict[str, Any] | None = None,
    ) -> Completion:
        value = [*out, *op.value[len(out) :]]
        extra: dict[str, Any] | None = {"foreign": foreign} if foreign else None
        if held:
            extra = {**(extra or {}), HELD_FIELD: held}
        why = str(exc)
        if isinstance(exc, JavaGone) or exc.category == "fatal":
            # A fenced or broken producer cannot abort; whether the coordinator committed what
            # it had is not known here.
            return self._done("info", value, why, extra=extra)
        try:
            self.host.call("abort-txn", self._p, timeout=TXN_TIMEOUT_S + GRACE_S)
        except (JavaError, JavaGone) as abort_exc:
            return self._done("info", value, f"{why}; abort failed: {abort_exc}", extra=extra)
        # A completed abort is definite: read_committed consumers never see these sends. The
        # consumer goes back to where the transaction began (REWIND, as the librdkafka client).
        rewound = self._rewind(start)
        if not rewound:
            return self._done(
                "fail", value, f"aborted: {why}; consumer not rewound", retire=True, extra=extra
            )
        return self._done("fail", value, f"aborted: {why}", extra=extra)

    def _positions(self) -> dict[int, int] | None:
        try:
            got = self.host.call("position", self._c, timeout=15)
        except (JavaError, JavaGone):
            return None
        return {int(p): int(o) for p, o in got.items()}

    def _rewind(self, start: dict[int, int] | None) -> bool:
        now = self._positions()
        if start is None or now is None:
            return False
        try:
            for p, offset in now.items():
                was = start.get(p)
                if was is None:
                    if self._subscribe:
                        return False  # assigned during the transaction: its start is unknown
                    was = -2  # the beginning, where an assigned consumer's reading starts
                if was != offset:
                    self.host.call("seek", self._c, self._topic, p, was, timeout=15)
        except (JavaError, JavaGone):
            return False
        return True

    def close(self) -> None:
        for h in self._opened:
            with contextlib.suppress(JavaError, JavaGone):
                self.host.call("close", h, 0, timeout=15)
            self.host.forget(h)


def held_record(
    asked: int | None, acked_at: list[int], held_ms: Any, always: bool = False
) -> dict[str, Any] | None:
    """The `commit_held` field of a transaction whose commit the client held (nemesis/client.py
    pause-commit): when the commit was asked (history ns), how long the client held it before it
    called commitTransaction, when the transaction's first send was acknowledged (None: none
    was), and the timeouts (checkers/families/fenced_acks.py zombie-commit). None: the commit
    was not held, unless `always` (a run with client faults, whose SIGSTOP or network cut may
    delay any commit past the timeout: each is judged, with `ms` 0)."""
    if asked is None or isinstance(held_ms, bool) or not isinstance(held_ms, int):
        return None
    if held_ms <= 0 and not always:
        return None
    return {
        "point": "commit",
        "asked": asked,
        "ms": held_ms,
        "first_ack": min(acked_at) if acked_at else None,
        TXN_TIMEOUT_MS: int(TXN_TIMEOUT_S * 1000),
        TXN_ABORT_CHECK: TXN_ABORT_CHECK_MS,
    }


class JavaPipelinedProducer:
    """A KafkaProducer with many sends in flight, one per worker slot (workloads/pipelined.py's
    contract): replies arrive on the JVM reader's thread and wait in a queue until the slot's
    thread `poll`s, so completions are recorded on the thread that invokes."""

    def __init__(self, wl: QueueState, host: JavaHost, producer: int, rng: random.Random) -> None:
        self.wl = wl
        self.host = host
        self.producer = producer
        self.rng = rng
        self.broken = False
        self._keys = wl.keys
        self._topic = wl.topic
        self._next_value = producer * int(wl.gen["value_stride"])
        self._h = host.handle()
        self._ready: deque[tuple[Any, ...]] = deque()
        self._cond = threading.Condition()
        self._counts: InFlight = getattr(wl, "sends_in_flight", None) or InFlight(wl.keys)
        self._in_flight = self._counts.register(producer)
        host.call("producer", self._h, *conf_args(producer_conf(wl, None, True)), timeout=30)

    def next_op(self) -> Invocation:
        key = self.rng.randrange(self._keys)
        self._next_value += 1
        return Invocation(
            "send", [["send", key, self._next_value]], self.wl.leaders.leaders.get(key)
        )

    def send(self, op: Invocation, done: Callable[[Completion], None]) -> Completion | None:
        _, key, value = op.value[0]

        def replied(reply: dict[str, Any]) -> None:
            with self._cond:
                self._ready.append((op, key, value, reply, done))
                self._cond.notify()

        try:
            self.host.call_async("send", self._h, self._topic, key, key, value, callback=replied)
        except JavaGone as exc:
            self.broken = True
            return Completion("info", op.value, str(exc), op.node)
        self._in_flight[key] += 1
        return None

    def completion(self, op: Invocation, key: int, value: int, reply: dict[str, Any]) -> Completion:
        err = error_of(reply)
        if err is not None:
            if isinstance(err, JavaGone) or err.category == "fatal":
                self.broken = True
            return Completion(send_outcome(err), op.value, str(err), op.node)
        offset = reply.get("r")
        at = offset if isinstance(offset, int) and offset >= 0 else None
        self.wl.note_acked(key, at, value)
        node = self.wl.leaders.leaders.get(key, op.node)
        return Completion("ok", [["send", key, [at, value]]], None, node)

    def poll(self, timeout: float) -> None:
        with self._cond:
            if not self._ready and timeout > 0:
                self._cond.wait(timeout)
            ready, self._ready = self._ready, deque()
        for op, key, value, reply, done in ready:
            self._in_flight[key] -= 1
            done(self.completion(op, key, value, reply))

    def close(self) -> None:
        self._counts.unregister(self.producer)
        with contextlib.suppress(JavaError, JavaGone):
            self.host.call("close", self._h, 0, timeout=15)
