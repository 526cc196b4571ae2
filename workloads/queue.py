"""The queue workload, modelled on Jepsen's Kafka test: micro-ops on integer keys.

Key k is partition k of one topic. Every value is unique in the run (process p's n-th value is
p * stride + n), so a value read names the one send that wrote it. Producers use acks=all and
idempotence; with transactions on, writes run inside Kafka transactions and every consumer reads
read_committed. Consumers either assign themselves keys or subscribe as one group.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

import numpy as np
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_STORED,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from clusters.client_net import ClientNet
from clusters.topology import Topology
from history.format import (
    ASSIGNED,
    COMMIT_ERROR_FIELD,
    COMMIT_FIELD,
    CONSUMER_AFTER_ABORT,
    FOREIGN_FIELD,
    HELD_FIELD,
    JVM_RECORDER,
    LOST,
    REBALANCE_FIELD,
    REVOKED,
    REWIND,
    SEND_RECORDER_FIELD,
    TXN_ABORT_CHECK,
    TXN_ID_PER_SLOT,
    TXN_TIMEOUT_MS,
    UNREADABLE_FIELD,
)
from history.options import Option, Values
from workloads import client_choice, durability, pipelined
from workloads.api import KindBase, SideRecorder
from workloads.client import Completion, Invocation
from workloads.client_choice import (
    CLIENT_VERSION_FIELD,
    JAVA,
    client_of,
    client_params,
    consumer_settings,
)
from workloads.client_procs import (
    ABORT,
    CLIENT_PROCS_HINT,
    CLIENT_TIMEOUTS_HINT,
    COMMIT,
    SEND,
    SlotProcesses,
    net_prefix,
    wants_processes,
)
from workloads.java_client import (
    TXN_ABORT_CHECK_MS,
    JavaPipelinedProducer,
    JavaQueueClient,
    held_record,
)
from workloads.java_final import final_reads_java
from workloads.java_host import JavaHost, client_dist
from workloads.java_procs import SLOT_HEAP, SlotJvms
from workloads.java_recorded import JvmRecordedProducer
from workloads.kafka_errors import describe, kafka_error, produce_is_definite
from workloads.pipelined import (
    InFlight,
    PipelinedProducer,
    ProducerClient,
    SlotSetup,
    generator_params,
    has_lanes,
    lanes_of,
    pollers_of,
    slot_mix,
)
from workloads.queue_ops import FINAL_READ_RATE, OpChooser, final_outcome, final_poll_records
from workloads.rdk_proc import ProcPipelinedProducer, ProcQueueClient
from workloads.readback import AckedSends, FinalTally, ReadDeadline

SEND_TIMEOUT_S = 10.0
TXN_TIMEOUT_S = 15.0
QUEUE_MODES = ("assign", "subscribe")

# The queue's own options apply to its runs only (history/options.py refuse_inapplicable).
_QUEUE = ("workload", ("queue",))

# The queue's run options: its shape here, then the send mode's (workloads/pipelined.py), the
# client's (workloads/client_choice.py) and the topic's durability (workloads/durability.py).
# The first three were in the first plans, so every spec (an admin run's too) carries them.

OPTIONS: tuple[Option, ...] = (
    Option(
        "keys",
        int,
        8,
        help="Queue keys (topic partitions).",
        minimum=1,
        maximum=10_000,
        applies_with=_QUEUE,
    ),
    Option("txn", bool, False, help="Queue writes in Kafka transactions.", applies_with=_QUEUE),
    Option(
        "mode",
        str,
        "assign",
        choices=QUEUE_MODES,
        noun="queue mode",
        applies_with=_QUEUE,
        help="How consumers get partitions: assign (each its own) or subscribe (a group).",
    ),
    *pipelined.OPTIONS,
    *client_choice.OPTIONS,
    *durability.OPTIONS,
)


class WorkloadSetupError(RuntimeError):
    """The topic is not what the run asked for; the message is the whole story."""


def _quiet(conf: dict[str, Any]) -> dict[str, Any]:
    # librdkafka logs every broker disconnect to stderr, which during faults drowns the display.
    conf = dict(conf)
    conf["log_level"] = 0
    conf["error_cb"] = lambda err: None
    return conf


def replication_of(gen: dict[str, Any], topology: Topology) -> tuple[int, int]:
    """(replication factor, min.insync.replicas) as the plan asked, each at most what holds it
    on this cluster (a stored plan may ask for 3 on fewer brokers)."""
    replication = min(int(gen["replication"]), len(topology.brokers))
    return replication, min(int(gen["min_insync_replicas"]), replication)


def create_topic(
    bootstrap: str,
    gen: dict[str, Any],
    topic: str,
    partitions: int,
    topology: Topology,
    deadline: float,
) -> tuple[AdminClient, int, dict[str, str]]:
    """Creates the run's topic with the generator's replication and durability configs
    (workloads/durability.py; replication and min.insync.replicas at most the brokers there
    are); raises past `deadline`. Returns the admin client, the replication factor and the
    configs asked for, which the queue checks Kafka against."""
    replication, min_isr = replication_of(gen, topology)
    admin = AdminClient(_quiet({"bootstrap.servers": bootstrap}))
    configs = durability.topic_configs(gen, min_isr)
    new = NewTopic(topic, partitions, replication, config=configs)
    # A just-started cluster drops admin connections now and then; a retry whose first
    # attempt did create the topic sees TOPIC_ALREADY_EXISTS, which is success.
    while True:
        try:
            for fut in admin.create_topics([new], operation_timeout=30).values():
                fut.result(timeout=60)
            return admin, replication, configs
        except KafkaException as exc:
            err = kafka_error(exc)
            if err is not None and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                return admin, replication, configs
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


class LeaderMap:
    """Which node leads each partition, as the cluster metadata last said; for `node` fields."""

    def __init__(self, bootstrap: str, topic: str, topology: Topology) -> None:
        self._admin = AdminClient(_quiet({"bootstrap.servers": bootstrap}))
        self._topic = topic
        self._names = {n.node_id: n.name for n in topology.brokers}
        self.leaders: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="leader-map", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def refresh(self) -> None:
        try:
            md = self._admin.list_topics(self._topic, timeout=2)
        except KafkaException:
            return
        t = md.topics.get(self._topic)
        if t is None or t.error is not None:
            return
        self.leaders = {p: self._names.get(pm.leader) for p, pm in t.partitions.items()}

    def _loop(self) -> None:
        while not self._stop.wait(1.0):
            self.refresh()

    def await_all(self, partitions: int, deadline: float) -> None:
        """Until every partition has a leader; TimeoutError past `deadline` (monotonic s)."""
        while True:
            self.refresh()
            if len(self.leaders) == partitions and all(self.leaders.values()):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {self._topic} has partitions without leaders")
            time.sleep(0.2)

    def stop(self) -> None:
        """Stops the refresher and destroys its client's handle here, not in a later garbage
        collection (workloads/admin.py AdminWorkload.close says why)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5.0)
        if not self._thread.is_alive():
            with contextlib.suppress(Exception):
                self._admin.__exit__(None, None, None)


class QueueWorkload(KindBase):
    """Shared state of one queue run: the topic, acknowledged sends, and client construction."""

    NAME: ClassVar[str] = "queue"
    OPTIONS: ClassVar[tuple[Option, ...]] = OPTIONS
    # What the history's header says of this client (docs/history.md): the checker's poll-skip
    # rule depends on where a consumer stands after a transaction that polled and then aborted.
    HISTORY_HEADER: ClassVar[dict[str, Any]] = {CONSUMER_AFTER_ABORT: REWIND}
    FINAL_KEY: ClassVar[str] = "final_reads"
    FINAL_SAYS: ClassVar[str] = "final reads: every key from the beginning"

    @staticmethod
    def check(values: Values) -> None:
        pipelined.check(values)
        client_choice.check_values(values)
        durability.check(values)

    @staticmethod
    def transactional(values: Values) -> bool:
        return bool(values.txn) and values.workload == QueueWorkload.NAME

    @classmethod
    def history_header(cls, gen: dict[str, Any]) -> dict[str, Any]:
        return {
            **cls.HISTORY_HEADER,
            **pipelined.history_header(gen),
            **client_choice.history_header(gen),
            **durability.history_header(gen),
        }

    @staticmethod
    def lanes(gen: dict[str, Any]) -> int:
        # A pipelined producer owns one process id per send in flight (harness/run/workers.py
        # Lanes).
        return lanes_of(gen)

    @staticmethod
    def flush_by_time(gen: dict[str, Any]) -> bool:
        # Pipelined sends write thousands of lines a second.
        return bool(pipelined.history_header(gen))

    @staticmethod
    def format_features(gen: dict[str, Any]) -> dict[str, int]:
        # --txn-protocol: the transaction.version the storage is formatted with; --elr: the
        # eligible.leader.replicas.version.
        return {**client_choice.format_features(gen), **durability.format_features(gen)}

    @staticmethod
    def generator(options: Any) -> dict[str, Any]:
        """How clients choose operations (docs/history.md); plan.json keeps it."""
        mix = {"send": 5, "poll": 4}
        replication, min_isr = durability.replication_of(options)
        if options.txn:
            mix["txn"] = 2
        return {
            "keys": options.keys,
            "mode": options.mode,
            "txn": options.txn,
            "mix": mix,
            "max_txn_ops": 4,
            "poll_max_messages": 64,
            "poll_timeout_ms": 200,
            # Values are unique across the run: process p's n-th value is p * stride + n.
            "value_stride": 1_000_000,
            "transactional_id": TXN_ID_PER_SLOT,
            "topic": "kchaos-queue",
            "replication": replication,
            "min_insync_replicas": min_isr,
            # --flush-messages, --unclean-leader-election, --elr: absent when not asked for.
            **durability.generator_params(options),
            # Pipelined sends (--send-mode async) only: absent otherwise.
            **generator_params(options),
            # --client, --group-protocol, --txn-protocol: absent when not asked for.
            **client_params(options),
        }

    @staticmethod
    def final_sentence(outcome: dict[str, Any]) -> str:
        return (
            f"final reads read {outcome.get('read_acknowledged', '?')}/"
            f"{outcome.get('acknowledged', '?')} acknowledged sends"
        )

    def __init__(self, gen: dict[str, Any], topology: Topology, seed: int, run_id: str) -> None:
        self.gen = gen
        self.topology = topology
        self.seed = seed
        self.run_id = run_id
        self.topic = gen["topic"]
        self.keys = int(gen["keys"])
        # Process p runs on slot p % concurrency (harness ProcessIds).
        self.concurrency = int(gen.get("concurrency") or 1)
        self.bootstrap = topology.bootstrap_servers()
        # (key, value) of every send acknowledged ok; final reads must find them all.
        self.acked = AckedSends()
        # What the Java client's final reads write beside the harness's recorder (their side
        # file; workloads/api.py SideRecorded): the interpreter gives its recorder.
        self.side_recorder: SideRecorder | None = None
        self.leaders = LeaderMap(self.bootstrap, self.topic, topology)
        self.sends_in_flight = InFlight(self.keys)
        # Kafka's own Java client (--client java): its JVM, started by setup.
        self.java: JavaHost | None = None
        # With client faults that stop one client (generator client_procs): each slot's JVM.
        self.procs: SlotJvms | None = None
        # Each slot's network where the run cuts one client alone (generator client_nets): the
        # harness gives them before setup (workloads/api.py ClientNetted).
        self.client_nets: Mapping[int, ClientNet] | None = None
        # librdkafka's clients each in a process of its own (the generator's client_procs, for
        # the client faults), else in their slots' threads (workloads/rdk_proc.py).
        self.rdk_procs = (
            SlotProcesses(self._role, lambda s: net_prefix(self.client_nets, s))
            if wants_processes(gen) and client_of(gen) != JAVA
            else None
        )
        # The history's clock for the times clients write into op fields (workloads/api.py
        # Clocked): the interpreter gives its recorder's; this stand-in counts from here.
        born = time.monotonic_ns()
        self.clock: Callable[[], int] = lambda: time.monotonic_ns() - born

    def setup_says(self) -> str:
        replication, min_isr = replication_of(self.gen, self.topology)
        configs = durability.topic_configs(self.gen, min_isr)
        asked = "".join(
            f", {k} {v}" for k, v in configs.items() if k != "unclean.leader.election.enable"
        )
        unclean = ", unclean elections on" if self.gen.get(durability.UNCLEAN) else ""
        return (
            f"workload setup: topic {self.topic} with {self.keys} partitions (replication "
            f"{replication}{asked}{unclean})"
        )

    def setup(self, timeout: float = 120.0) -> None:
        """Creates the topic and waits until every partition has a leader; with the Java
        client, first starts its JVM (compiling it on a release's first use)."""
        if client_of(self.gen) == JAVA and self.java is None:
            dist = client_dist(str(self.gen[CLIENT_VERSION_FIELD]))
            self.java = JavaHost(dist)
            # Pipelined producers live in the shared JVM: only sync clients are one slot's.
            if wants_processes(self.gen) and not self.pipelined_lanes():
                role = "transactional producer+consumer" if self.gen["txn"] else "producer+consumer"
                self.procs = SlotJvms(
                    range(self.concurrency),
                    lambda s: role,
                    lambda s: JavaHost(
                        dist, heap=SLOT_HEAP, prefix=net_prefix(self.client_nets, s)
                    ),
                )
        deadline = time.monotonic() + timeout
        admin, replication, configs = create_topic(
            self.bootstrap, self.gen, self.topic, self.keys, self.topology, deadline
        )
        self.leaders.await_all(self.keys, deadline)
        # What the run's durability rests on must be what Kafka has, not only what was sent.
        self._verify_topic(admin, replication, configs, deadline)
        if self.gen["txn"]:
            self._await_transactions(deadline)
        self.leaders.start()

    def _verify_topic(
        self, admin: AdminClient, replication: int, configs: dict[str, str], deadline: float
    ) -> None:
        """Raises WorkloadSetupError when Kafka describes the topic otherwise than it was
        created: each partition's replicas, and each config as DescribeConfigs answers it."""
        while True:
            try:
                md = admin.list_topics(self.topic, timeout=10).topics[self.topic]
                res = ConfigResource(ResourceType.TOPIC, self.topic)
                described = admin.describe_configs([res])[res].result(timeout=30)
            except (KafkaException, KeyError):
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
                continue
            # A broker whose metadata lags the creation answers with an error or no
            # partitions yet: asked again, as the leader wait above does.
            if (md.error is None and len(md.partitions) == self.keys) or (
                time.monotonic() > deadline
            ):
                break
            time.sleep(0.5)
        counts = sorted({len(p.replicas) for p in md.partitions.values()})
        if counts != [replication]:
            raise WorkloadSetupError(
                f"topic {self.topic} has partitions of {'/'.join(map(str, counts))} replicas, "
                f"not {replication} as created"
            )
        differ = {
            k: (described[k].value if k in described else None)
            for k, v in configs.items()
            if k not in described or described[k].value != v
        }
        if differ:
            said = ", ".join(f"{k}={v}" for k, v in differ.items())
            raise WorkloadSetupError(
                f"topic {self.topic}: Kafka describes {said}, not what it was created with "
                f"({', '.join(f'{k}={configs[k]}' for k in differ)})"
            )

    def _await_transactions(self, deadline: float) -> None:
        """Until a transactional producer initialises: the first InitProducerId creates
        __transaction_state, which on a fresh cluster took 20-30 s and timed out the run's first
        transactions. A throwaway id, so no client's producer epoch is touched."""
        conf = {
            "bootstrap.servers": self.bootstrap,
            "transactional.id": f"kchaos-{self.run_id}-ready",
        }
        while True:
            producer = Producer(_quiet(conf))
            try:
                producer.init_transactions(10)
                return
            except KafkaException:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        "no transaction coordinator answered InitProducerId"
                    ) from None
            finally:
                producer.flush(0)

    def note_acked(self, key: int, offset: int | None, value: int) -> None:
        # The offset is the history's; the final reads look for the (key, value).
        self.acked.add(key, value)

    def final_timeout(self, base: float) -> float:
        """`base` (--final-timeout) and the time to read back what was acknowledged at the
        client's `FINAL_READ_RATE` (workloads/api.py SizedFinal): a pipelined run acknowledges
        millions. The reads' deadline then extends while they make progress
        (workloads/readback.py ReadDeadline)."""
        return base + len(self.acked) / FINAL_READ_RATE[client_of(self.gen)]

    def acked_bulk(self, keys: np.ndarray, values: np.ndarray) -> None:
        """Sends acknowledged where the harness did not see them (recorded in the JVM)."""
        self.acked.add_many(keys, values)

    def client(self, process: int, rng: random.Random) -> QueueClient | JavaQueueClient:
        if self.java is not None:
            tid = (
                transactional_id(self.run_id, process, self.concurrency)
                if self.gen["txn"]
                else None
            )
            slot = process % self.concurrency
            own = None if self.procs is None else self.procs.host(slot, process)
            return JavaQueueClient(self, own or self.java, process, rng, tid)
        if self.rdk_procs is not None:
            slot = self.rdk_procs.slot(self._slot_of(process))
            timeouts = (TXN_TIMEOUT_S, SEND_TIMEOUT_S)
            return ProcQueueClient(self, process, rng, slot, self._child_config(), timeouts)
        return QueueClient(self, process, rng)

    def _slot_of(self, process: int) -> int:
        # Slot s's processes are s*lanes + j + k*concurrency*lanes (harness ProcessIds).
        return (process // lanes_of(self.gen)) % self.concurrency

    def _role(self, slot: int) -> str:
        """What a slot's client does, for the client faults: a poller slot consumes, a slot
        whose mix has no poll produces, the queue's sync mix does both."""
        mix = set(slot_mix(self.gen, slot * lanes_of(self.gen)))
        if mix == {"poll"}:
            return "consumer"
        return "producer" if "poll" not in mix else "producer-consumer"

    def _child_config(self) -> dict[str, Any]:
        """What a child's QueueClient reads of this workload (workloads/rdk_child.py)."""
        # The history's zero on CLOCK_MONOTONIC, for the times the child writes into op fields.
        if self.side_recorder is not None:
            t0 = self.side_recorder.t0_ns
        else:
            t0 = time.monotonic_ns() - self.clock()
        return {
            "gen": self.gen,
            "run_id": self.run_id,
            "concurrency": self.concurrency,
            "bootstrap": self.bootstrap,
            "topic": self.topic,
            "t0_ns": t0,
        }

    def pipelined_lanes(self) -> int:
        """Sends in flight per producer with --send-mode async (workloads/pipelined.py); 0:
        the run's sends are synchronous, one per process."""
        return lanes_of(self.gen) if has_lanes(self.gen) else 0

    def poller_slots(self) -> int:
        """Worker slots that only poll beside pipelined producers (--pollers)."""
        return pollers_of(self.gen)

    def records_sends(self) -> bool:
        """Do the run's pipelined producers record their own sends (in the Java client's
        JVM, workloads/java_recorded.py)?"""
        return self.java is not None and self.gen.get(SEND_RECORDER_FIELD) == JVM_RECORDER

    def recorded_producer(self, slot: int, setup: SlotSetup) -> JvmRecordedProducer:
        assert self.java is not None
        return JvmRecordedProducer(self, self.java, slot, setup)

    def producer_client(self, producer: int, rng: random.Random) -> ProducerClient:
        if self.java is not None:
            return JavaPipelinedProducer(self, self.java, producer, rng)
        if self.rdk_procs is not None:
            # Slot s's k-th producer is number s + k * concurrency (harness/run/workers.py).
            slot = self.rdk_procs.slot(producer % self.concurrency)
            config = self._child_config()
            return ProcPipelinedProducer(self, producer, rng, slot, config, SEND_TIMEOUT_S)
        return PipelinedProducer(self, producer, rng)

    def hints(self) -> dict[str, Any]:
        hints: dict[str, Any] = {
            "topic": self.topic,
            "partition_leaders": dict(self.leaders.leaders),
        }
        # For the busiest-leader and txn-coordinator targets (nemesis/targets.py).
        if self.pipelined_lanes():
            hints["in_flight"] = self.sends_in_flight.by_partition()
        if self.gen["txn"]:
            hints["transactional_ids"] = [
                transactional_id(self.run_id, slot, self.concurrency)
                for slot in range(self.concurrency)
            ]
        if self.procs is not None:
            hints[CLIENT_PROCS_HINT] = self.procs.hint()
            hints[CLIENT_TIMEOUTS_HINT] = client_timeouts(self.gen)
        # librdkafka's clients in processes of their own (workloads/rdk_proc.py).
        elif self.rdk_procs is not None:
            hints[CLIENT_PROCS_HINT] = self.rdk_procs.by_slot()
            hints[CLIENT_TIMEOUTS_HINT] = client_timeouts(self.gen)
        return hints

    def consumer_conf(self, group: str, subscriber: bool = False) -> dict[str, Any]:
        """A librdkafka consumer's configuration (workloads/client_choice.consumer_settings)."""
        return _quiet(consumer_settings(self.gen, self.bootstrap, group, subscriber))

    def final(
        self, new_process: Callable[[], int], record: Callable[..., Any], timeout: float
    ) -> dict[str, Any]:
        if self.java is not None:
            if self.side_recorder is None:
                raise RuntimeError("the Java client's final reads need the run's recorder")
            return final_reads_java(self, self.java, new_process, self.side_recorder, timeout)
        return final_reads(self, new_process, record, timeout)

    def close(self) -> None:
        self.leaders.stop()
        if self.procs is not None:
            self.procs.close()
        if self.rdk_procs is not None:
            self.rdk_procs.close()
        if self.java is not None:
            self.java.close()


def client_timeouts(gen: dict[str, Any]) -> dict[str, int]:
    """The timeouts a paused queue client may outlast (nemesis/targets.py CLIENT_TIMEOUTS_HINT),
    ms: its transactions' and the brokers' check for timed-out ones (Kafka's default, which
    kchaos leaves), and a subscriber's session (the client's or, under KIP-848, the brokers':
    both 6 s here, clusters/config.py CONSUMER_GROUP)."""
    out: dict[str, int] = {}
    if gen["txn"]:
        out[TXN_TIMEOUT_MS] = int(TXN_TIMEOUT_S * 1000)
        out[TXN_ABORT_CHECK] = TXN_ABORT_CHECK_MS
    if gen["mode"] == "subscribe":
        out["session.timeout.ms"] = 6000
    return out


def transactional_id(run_id: str, process: int, concurrency: int) -> str:
    """The id of the worker slot the process runs on, shared by every process of that slot."""
    return f"kchaos-{run_id}-slot{process % concurrency}"


def _parse_value(raw: bytes | None) -> int | None:
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def unreadable(partition: int, offset: int, raw: bytes | None) -> list[Any]:
    """A record of the run's topic whose value is not one of the run's integers, as the
    history's `unreadable` field keeps it (a damaged segment can serve one: docs/disk.md)."""
    shown = "no value" if raw is None else f"value {raw[:64]!r}" + ("..." if len(raw) > 64 else "")
    return [partition, offset, shown]


def commit_fields(answered: list[TopicPartition], topic: str) -> dict[str, Any]:
    """The op fields of a synchronous commit that did not raise, from its answer: `commit`
    {"<key>": offset} for each partition of `topic` it stored, and `commit_error` naming each
    partition the coordinator refused (a partial failure: librdkafka raises only when every
    partition failed). A partition answered with a negative (logical) offset was not sent:
    librdkafka leaves out what it had nothing new to store for; it is not listed."""
    stored: dict[str, int] = {}
    refused: list[str] = []
    for tp in answered:
        if tp.topic != topic:
            continue
        if tp.error is not None:
            refused.append(f"{tp.partition}: {describe(tp.error)}")
        elif tp.offset >= 0:
            stored[str(tp.partition)] = tp.offset
    fields: dict[str, Any] = {}
    if stored:
        fields[COMMIT_FIELD] = stored
    if refused:
        fields[COMMIT_ERROR_FIELD] = "partitions refused: " + "; ".join(refused)
    return fields


class QueueClient:
    """One process's producer and consumer. Retired (closed) after any indefinite outcome."""

    def __init__(self, wl: QueueWorkload, process: int, rng: random.Random) -> None:
        self.wl = wl
        self.process = process
        self.rng = rng
        self.ops = OpChooser(wl.gen, process, rng)
        self._txn = bool(wl.gen["txn"])
        conf = {
            "bootstrap.servers": wl.bootstrap,
            "acks": "all",
            "enable.idempotence": True,
            "message.timeout.ms": int(SEND_TIMEOUT_S * 1000),
            # Pipelined transactions batch their sends as pipelined producers do.
            "linger.ms": float(wl.gen.get("linger_ms", 0)),
        }
        if wl.gen.get("batch_size") is not None:
            conf["batch.size"] = int(wl.gen["batch_size"])
        if self._txn:
            conf["transactional.id"] = transactional_id(wl.run_id, process, wl.concurrency)
            conf["transaction.timeout.ms"] = int(TXN_TIMEOUT_S * 1000)
        self.producer = Producer(_quiet(conf))
        self._txn_ready = False
        group = f"kchaos-{wl.run_id}"
        subscriber = wl.gen["mode"] == "subscribe"
        if not subscriber:
            group = f"{group}-{process}"
        self.consumer = Consumer(wl.consumer_conf(group, subscriber))
        # What the op in progress saw beside its value (docs/history.md): the rebalance
        # listener's events (it runs inside consume() and close(), on this client's thread)
        # and records of another topic; each completion takes them (`_finish`).
        self._rebalance: list[list[Any]] = []
        self._foreign: list[list[Any]] = []
        self._unreadable: list[list[Any]] = []
        self.setup_op = self.ops.assignment()
        # Where a client fault holds it (workloads/client_procs.py Gate.at, in a process of
        # its own): just before each produce(), commit_transaction() and abort_transaction().
        self.at: Callable[[str], None] = _unheld

    def open(self, op: Invocation) -> Completion:
        """Applies the assign/subscribe chosen at construction."""
        try:
            if op.f == "subscribe":
                self.consumer.subscribe(
                    [self.wl.topic],
                    on_assign=self._listener(ASSIGNED),
                    on_revoke=self._listener(REVOKED),
                    on_lost=self._listener(LOST),
                )
            else:
                self.consumer.assign(
                    [TopicPartition(self.wl.topic, k, OFFSET_BEGINNING) for k in op.value]
                )
        except KafkaException as exc:
            return self._finish(Completion("fail", op.value, describe(exc)))
        return self._finish(Completion("ok", op.value))

    def _listener(self, event: str) -> Callable[[Consumer, list[TopicPartition]], None]:
        """The rebalance callback for `event`: records the partitions it was given, on the
        history's clock. Under KIP-848 and cooperative protocols librdkafka gives the change
        (incremental); under the classic eager protocol the whole assignment. It does not
        assign: confluent-kafka then does what librdkafka needs (assign or incremental_assign,
        by the rebalance protocol), as it did without a listener."""

        def heard(consumer: Consumer, partitions: list[TopicPartition]) -> None:
            keys = sorted(tp.partition for tp in partitions if tp.topic == self.wl.topic)
            self._rebalance.append([event, keys, self.wl.clock()])

        return heard

    def _finish(self, done: Completion, fields: dict[str, Any] | None = None) -> Completion:
        """`done` with what the op saw beside its value (`fields`, the listener's events, the
        records of other topics) as its further fields; the buffers start empty again."""
        extra: dict[str, Any] = {}
        if self._rebalance:
            extra[REBALANCE_FIELD], self._rebalance = self._rebalance, []
        extra.update(fields or {})
        if self._foreign:
            extra[FOREIGN_FIELD], self._foreign = self._foreign, []
        if self._unreadable:
            extra[UNREADABLE_FIELD], self._unreadable = self._unreadable, []
        if extra:
            done.extra = {**(done.extra or {}), **extra}
        return done

    def next_op(self) -> Invocation:
        return self.ops.next_op(self.wl.leaders.leaders)

    # Application -----------------------------------------------------------------------------
    def apply(self, op: Invocation) -> Completion:
        if op.f == "poll":
            return self._finish(*self._poll_op(op))
        if self._txn or op.f == "txn":
            return self._finish(self._txn_op(op))
        return self._finish(self._send_op(op))

    def _produce(
        self,
        key: int,
        value: int,
        results: dict[int, Any],
        acked_at: list[int] | None = None,
    ) -> None:
        """Queues one send; its delivery report puts the offset (None when librdkafka does not
        know it: delivered all the same) or the KafkaError into `results[value]`, and, given
        `acked_at` (a transaction's), the history's time of an acknowledgement."""

        def delivered(err, msg) -> None:
            results[value] = err if err is not None else msg.offset()
            if err is None and acked_at is not None:
                acked_at.append(self.wl.clock())

        self.at(SEND)
        self.producer.produce(
            self.wl.topic,
            value=str(value).encode(),
            key=str(key).encode(),
            partition=key,
            on_delivery=delivered,
        )

    def _wait_delivery(self, results: dict[int, Any], n: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while len(results) < n and time.monotonic() < deadline:
            self.producer.poll(0.05)

    def _send_op(self, op: Invocation) -> Completion:
        _, key, value = op.value[0]
        results: dict[int, Any] = {}
        try:
            self._produce(key, value, results)
        except KafkaException as exc:
            err = kafka_error(exc)
            kind = "fail" if err is not None and produce_is_definite(err) else "info"
            return Completion(kind, op.value, describe(exc), op.node)
        except BufferError as exc:
            return Completion("fail", op.value, f"local queue full: {exc}", op.node)
        self._wait_delivery(results, 1, SEND_TIMEOUT_S + 2)
        if value not in results:
            return Completion("info", op.value, "no delivery report in time", op.node)
        got = results[value]
        if isinstance(got, KafkaError):
            kind = "fail" if produce_is_definite(got) else "info"
            return Completion(kind, op.value, describe(got), op.node)
        self.wl.note_acked(key, got, value)
        node = self.wl.leaders.leaders.get(key, op.node)
        return Completion("ok", [["send", key, [got, value]]], None, node)

    def _poll(
        self, max_messages: int | None = None
    ) -> tuple[dict[str, list[list[int]]], KafkaException | None]:
        """What one consume() returned, and the error that ended it if one did: the records
        before the error were delivered (the position moved past them), so they are kept."""
        n = max_messages or int(self.wl.gen["poll_max_messages"])
        timeout = int(self.wl.gen["poll_timeout_ms"]) / 1000
        read: dict[str, list[list[int]]] = defaultdict(list)
        try:
            msgs = self.consumer.consume(n, timeout)
        except KafkaException as exc:
            return {}, exc
        for msg in msgs:
            err = msg.error()
            if err is not None:
                if err.code() == err._PARTITION_EOF:
                    continue
                return dict(read), KafkaException(err)
            value = _parse_value(msg.value())
            if msg.topic() != self.wl.topic:
                # Never in a poll's value, whose keys are the run's topic's partitions.
                self._foreign.append([msg.topic(), msg.partition(), msg.offset(), value])
                continue
            if value is not None:
                read[str(msg.partition())].append([msg.offset(), value])
            else:
                self._unreadable.append(unreadable(msg.partition(), msg.offset(), msg.value()))
        return dict(read), None

    def _poll_op(self, op: Invocation) -> tuple[Completion, dict[str, Any]]:
        """The poll's completion and, in subscribe mode, what its commit stored."""
        read, exc = self._poll()
        if exc is not None:
            # A read has no effect on the data, but the consumer's position is now unknown.
            return Completion("info", [["poll", read]], describe(exc)), {}
        fields: dict[str, Any] = {}
        if read and self.wl.gen["mode"] == "subscribe":
            # A lost commit only means re-reading later, which subscribe mode tolerates: the
            # poll stays ok, and the history says what was committed or what went wrong.
            fields = self._commit()
        return Completion("ok", [["poll", read]]), fields

    def _commit(self) -> dict[str, Any]:
        """Commits the consumer's positions synchronously; the op fields saying what it stored
        (`commit`, from commit()'s own answer) or why not (`commit_error`)."""
        try:
            answered = self.consumer.commit(asynchronous=False)
        except KafkaException as exc:
            return {COMMIT_ERROR_FIELD: describe(exc)}
        return commit_fields(answered or [], self.wl.topic)

    def _txn_op(self, op: Invocation) -> Completion:
        results: dict[int, Any] = {}
        # What each micro-op did so far: a fail or info completion records the polls that
        # happened (their records were delivered) and the sends as invoked.
        out: list[list[Any]] = []
        start = self._positions()
        # When this transaction's sends were acknowledged, and what a held commit records
        # (HELD_FIELD: zombie-commit judges a commit held past the transaction's timeout).
        acked_at: list[int] = []
        held: dict[str, Any] | None = None
        try:
            if not self._txn_ready:
                self.producer.init_transactions(TXN_TIMEOUT_S)
                self._txn_ready = True
            self.producer.begin_transaction()
            for mop in op.value:
                if mop[0] == "send":
                    self._produce(mop[1], mop[2], results, acked_at)
                    out.append(mop)
                else:
                    read, exc = self._poll()
                    out.append(["poll", read])
                    if exc is not None:
                        raise exc
            remaining = self.producer.flush(SEND_TIMEOUT_S)
            bad = [v for v in results.values() if isinstance(v, KafkaError)]
            if remaining or bad or len(results) < sum(m[0] == "send" for m in op.value):
                why = describe(bad[0]) if bad else "sends not delivered in time"
                return self._abort(op, out, start, why)
            asked = self.wl.clock()
            self.at(COMMIT)
            held_ms = (self.wl.clock() - asked) // 1_000_000
            held = held_record(asked, acked_at, held_ms, wants_processes(self.wl.gen))
            self.producer.commit_transaction(TXN_TIMEOUT_S)
        except BufferError as exc:
            # The send was not queued, so none of it reached a broker; the rest is aborted.
            return self._abort(op, out, start, f"local queue full: {exc}")
        except KafkaException as exc:
            err = kafka_error(exc)
            extra = {HELD_FIELD: held} if held else None
            if err is not None and err.txn_requires_abort():
                return self._abort(op, out, start, describe(exc), extra)
            return Completion("info", _as_done(op, out), describe(exc), extra=extra)
        done = []
        for mop in out:
            if mop[0] == "send":
                offset = results[mop[2]]
                self.wl.note_acked(mop[1], offset, mop[2])
                done.append(["send", mop[1], [offset, mop[2]]])
            else:
                done.append(mop)
        return Completion("ok", done, extra={HELD_FIELD: held} if held else None)

    def _positions(self) -> dict[int, int] | None:
        """Where the consumer stands on each assigned partition (the offset its next poll
        returns first; negative before its first record), None when librdkafka cannot say."""
        try:
            parts = self.consumer.position(self.consumer.assignment())
        except (KafkaException, RuntimeError):
            return None
        return {tp.partition: tp.offset for tp in parts if tp.error is None}

    def _abort(
        self,
        op: Invocation,
        out: list[list[Any]],
        start: dict[int, int] | None,
        why: str,
        extra: dict[str, Any] | None = None,
    ) -> Completion:
        """`extra`: the transaction's further fields (a held commit's record)."""
        value = _as_done(op, out)
        try:
            self.at(ABORT)
            self.producer.abort_transaction(TXN_TIMEOUT_S)
        except KafkaException as exc:
            return Completion("info", value, f"{why}; abort failed: {describe(exc)}", extra=extra)
        # An abort that completed is definite: read_committed consumers never see these sends.
        # Its polls are undone too, as a consume-transform-produce loop undoes them: the
        # consumer goes back to where it stood when the transaction began (REWIND), so its next
        # poll starts where its last committed one ended. Where that cannot be done, its
        # position is unknown and the process retires.
        if not self._rewind(start):
            why = f"{why}; consumer not rewound"
            return Completion("fail", value, f"aborted: {why}", retire=True, extra=extra)
        return Completion("fail", value, f"aborted: {why}", extra=extra)

    def _rewind(self, start: dict[int, int] | None) -> bool:
        now = self._positions()
        if start is None or now is None:
            return False
        subscribe = self.wl.gen["mode"] == "subscribe"
        # A partition that had returned nothing goes back to where its reading starts.
        first = OFFSET_STORED if subscribe else OFFSET_BEGINNING
        try:
            for p, offset in now.items():
                was = start.get(p)
                if was is None and subscribe:
                    return False  # assigned during the transaction: where it began is unknown
                if was is None or was < 0:
                    if offset < 0:
                        continue  # still nothing returned: nothing to undo
                    was = first
                if was != offset:
                    self.consumer.seek(TopicPartition(self.wl.topic, p, was))
        except (KafkaException, RuntimeError):
            return False
        return True

    def close(self) -> None:
        with contextlib.suppress(KafkaException, RuntimeError):
            self.consumer.close()
        # Unsent messages of a retired process are abandoned, never waited for. A producer in a
        # fatal state (fenced, or a failed EndTxn) raises here; it is being dropped anyway.
        with contextlib.suppress(KafkaException):
            self.producer.purge(in_queue=True, in_flight=False)
            self.producer.flush(0)


def _unheld(point: str) -> None:
    """A client in a thread is never held."""


def _as_done(op: Invocation, out: list[list[Any]]) -> list[list[Any]]:
    """A transaction's micro-ops as far as they went (`out`), the rest as invoked."""
    return [*out, *op.value[len(out) :]]


def final_reads(
    wl: QueueWorkload,
    new_process: Callable[[], int],
    record: Callable[..., Any],
    timeout: float,
) -> dict[str, Any]:
    """Reads every key from the beginning until every acknowledged send has been seen and
    every partition's position reached the high watermark it had when the reads began.

    Bounded by `timeout`, extended while records are still being read (ReadDeadline); the
    outcome says how many acknowledged sends were read and names the first missing ones, so a
    run that ends early says so instead of looking clean. One history line per poll; per
    record only what the poll's value needs (its offset and value) and one int64 for the tally.
    """
    started = time.monotonic()
    consumer = Consumer(wl.consumer_conf(f"kchaos-{wl.run_id}-final"))
    partitions = [TopicPartition(wl.topic, k, OFFSET_BEGINNING) for k in range(wl.keys)]
    consumer.assign(partitions)
    tally = FinalTally(wl.acked.wanted())
    batch = final_poll_records(tally.acknowledged)
    ends: dict[int, int] = {}
    for k in range(wl.keys):
        try:
            _, high = consumer.get_watermark_offsets(TopicPartition(wl.topic, k), timeout=5)
            ends[k] = high
        except KafkaException:
            ends[k] = -1
    polls = 0
    deadline = ReadDeadline(started, timeout)
    process = new_process()

    def caught_up() -> bool:
        if tally.remaining:
            return False
        positions = consumer.position([TopicPartition(wl.topic, k) for k in range(wl.keys)])
        return all(p.offset >= ends[p.partition] for p in positions)

    try:
        while not deadline.over(time.monotonic()):
            record("invoke", "poll", [["poll"]], process)
            read: dict[int, list[list[int]]] = {}
            values: dict[int, list[int]] = {}
            odd: list[list[Any]] = []
            try:
                msgs = consumer.consume(batch, 0.5)
            except KafkaException as exc:
                record("info", "poll", [["poll"]], process, error=describe(exc))
                process = new_process()  # as any process that saw an indefinite outcome
                continue
            for msg in msgs:
                err = msg.error()
                if err is not None:
                    if err.code() != err._PARTITION_EOF:  # what the client got in a record's place
                        # An error of no partition or offset is at -1.
                        where = [-1 if x is None else x for x in (msg.partition(), msg.offset())]
                        odd.append([*where, f"error: {err.str()}"[:200]])
                    continue
                try:  # _parse_value inline: this loop runs once per record read back
                    value = int(msg.value())
                except (TypeError, ValueError):
                    odd.append(unreadable(msg.partition(), msg.offset(), msg.value()))
                    continue
                p = msg.partition()
                got = read.get(p)
                if got is None:
                    got = read[p] = []
                    values[p] = []
                got.append([msg.offset(), value])
                values[p].append(value)
            polled = [["poll", {str(p): got for p, got in read.items()}]]
            record("ok", "poll", polled, process, extra={UNREADABLE_FIELD: odd} if odd else None)
            polls += 1
            if read:
                deadline.progressed(time.monotonic())
                for p, vals in values.items():
                    tally.saw(p, np.array(vals, dtype=np.int64))
            elif caught_up():
                break
    finally:
        consumer.close()
    return final_outcome(tally.acknowledged, tally.remaining, tally.missing(), polls, started, ends)
