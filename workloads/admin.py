"""The admin workload: topics created, deleted and reconfigured, and the cluster described.

Every operation goes through an AdminClient bootstrapped from one broker only, so the history can
name the broker that was asked (`node`). librdkafka learns the other brokers from the first and
may route a request elsewhere (CreateTopics to the controller it was told of, for example); what
is known is the broker asked, and for describe-cluster, the controller the answer named.

Topic names are unique in the run (process p's n-th topic is ``adm-p-n``), so an error saying a
topic already exists, or does not exist, may be the trace of our own earlier attempt that the
client retried: those are `info`, never `fail`.

confluent-kafka (2.16) has no DescribeFeatures: finalized feature levels and their epoch
(KIP-584) are not recorded here; the observer records each node's metadata.version over JMX.

Two librdkafka behaviours shape the clients (docs/clients.md tells the whole story): an admin
request waiting for a controller that refuses connections makes librdkafka reconnect to it in a
busy loop when connections are sparse (its default), and librdkafka's DescribeCluster aborts
the process on a Metadata answer that lists no brokers, which a ZooKeeper-mode broker gives
right after it starts. So connections are not sparse, and describe-cluster is a Metadata request
made the way list-topics makes it, whose failures librdkafka returns as errors.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable
from typing import Any, ClassVar

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from clusters.topology import BROKER_PORT, Topology
from workloads.api import KindBase, Options
from workloads.client import Completion, Invocation
from workloads.kafka_errors import describe, kafka_error

REQUEST_TIMEOUT_S = 10.0

# Errors the broker returns before changing anything, and that depend only on the request: the
# same request would have been refused the same way on any earlier attempt. librdkafka resends a
# CreateTopics whose answer did not arrive (up to its default retries), so an error that depends
# on the cluster's state can be the answer to a retry of an attempt that took effect:
# INVALID_REPLICATION_FACTOR (too few live brokers now) is `info`, as are TOPIC_ALREADY_EXISTS and
# UNKNOWN_TOPIC_OR_PART (see the module docstring).
DEFINITE_ADMIN = frozenset(
    {
        KafkaError.INVALID_CONFIG,
        KafkaError.INVALID_PARTITIONS,
        KafkaError.TOPIC_EXCEPTION,
        KafkaError.TOPIC_DELETION_DISABLED,
        KafkaError.POLICY_VIOLATION,
        KafkaError.INVALID_REQUEST,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.CLUSTER_AUTHORIZATION_FAILED,
        KafkaError._INVALID_ARG,
    }
)

ADMIN_FS = ("create-topic", "delete-topic", "alter-config", "describe-cluster")


# librdkafka's reconnect backoff grows to this; its default (10 s) would leave a broker that is
# back after a fault unasked for up to 10 s, longer than a request's timeout.
RECONNECT_BACKOFF_MAX_MS = 1000


def admin_conf(ip: str, port: int = BROKER_PORT) -> dict[str, Any]:
    """One broker's AdminClient configuration (docs/clients.md says why each setting)."""
    return {
        "bootstrap.servers": f"{ip}:{port}",
        "log_level": 0,
        "error_cb": lambda err: None,
        # With sparse connections, a request waiting for the controller asks librdkafka to
        # connect to it now, past the reconnect backoff, on every broker state change, and a
        # refused connect is one: while the controller's port refuses (a broker restarting),
        # each client's thread for it reconnects as fast as the kernel answers (about 1000
        # times a second, one core per two clients). Without them every broker stays
        # connected and a down one is retried at the backoff's pace.
        "enable.sparse.connections": False,
        "reconnect.backoff.max.ms": RECONNECT_BACKOFF_MAX_MS,
    }


def classify(exc: BaseException) -> str:
    """`fail` only for errors that prove nothing changed; anything else is `info`."""
    err = kafka_error(exc)
    return "fail" if err is not None and err.code() in DEFINITE_ADMIN else "info"


class AdminWorkload(KindBase):
    """One single-broker AdminClient per broker; clients of every process share them."""

    NAME: ClassVar[str] = "admin"
    # No consumer: nothing for the history to declare.
    HISTORY_HEADER: ClassVar[dict[str, Any]] = {}
    FINAL_KEY: ClassVar[str] = "final_views"
    FINAL_SAYS: ClassVar[str] = "final views: every broker describes the cluster and lists topics"

    @staticmethod
    def generator(options: Options) -> dict[str, Any]:
        """The operation mix and its choices; see docs/history.md. Reads no queue option."""
        return {
            "mix": {"create-topic": 4, "delete-topic": 2, "alter-config": 3, "describe-cluster": 3},
            "partitions": [1, 3],
            "replication": 3,
            "configs": {
                "retention.ms": [60000, 3600000, 86400000, -1],
                "min.insync.replicas": [1, 2],
            },
            "topic_prefix": "adm",
        }

    @staticmethod
    def final_sentence(outcome: dict[str, Any]) -> str:
        answered = outcome.get("answered") or {}
        return f"final views from {sum(bool(v) for v in answered.values())}/{len(answered)} brokers"

    def __init__(self, gen: dict[str, Any], topology: Topology, seed: int, run_id: str) -> None:
        self.gen = gen
        self.topology = topology
        self.seed = seed
        self.run_id = run_id
        self.brokers = {n.name: n for n in topology.brokers}
        self.ids = {n.node_id: n.name for n in topology.brokers}
        self.admins = {name: AdminClient(admin_conf(n.ip)) for name, n in self.brokers.items()}
        self.topic = f"{gen['topic_prefix']}-*"

    def setup_says(self) -> str:
        return "workload setup: every broker answers DescribeCluster"

    def setup(self, timeout: float = 120.0) -> None:
        """Waits until every broker's admin client can describe the cluster."""
        deadline = time.monotonic() + timeout
        for name in self.admins:
            while True:
                try:
                    self.describe_cluster(name, timeout=5)
                    break
                except KafkaException:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"{name} does not answer DescribeCluster") from None
                    time.sleep(0.5)

    def client(self, process: int, rng: random.Random) -> AdminOpsClient:
        return AdminOpsClient(self, process, rng)

    def hints(self) -> dict[str, Any]:
        return {}

    def final(
        self, new_process: Callable[[], int], record: Callable[..., Any], timeout: float
    ) -> dict[str, Any]:
        return final_views(self, new_process, record, timeout)

    def close(self) -> None:
        """Destroys each client's librdkafka handle here and now (its context manager's exit).
        Dropped and left to the garbage collector, a handle caught in a reference cycle was
        destroyed in the middle of a later collection, and the client host died of SIGSEGV
        while the check imported matplotlib (CI, then 2 of 4 runs of test_run_admin)."""
        for admin in self.admins.values():
            with contextlib.suppress(Exception):  # a handle already gone has nothing to destroy
                admin.__exit__(None, None, None)
        self.admins.clear()

    # Operations, each against one broker's client ---------------------------------------------
    def create_topic(self, node: str, value: dict[str, Any]) -> dict[str, Any]:
        topic = NewTopic(value["topic"], value["partitions"], value["replication"])
        futures = self.admins[node].create_topics(
            [topic], operation_timeout=REQUEST_TIMEOUT_S, request_timeout=REQUEST_TIMEOUT_S
        )
        futures[value["topic"]].result(timeout=REQUEST_TIMEOUT_S + 5)
        return value

    def delete_topic(self, node: str, value: dict[str, Any]) -> dict[str, Any]:
        futures = self.admins[node].delete_topics(
            [value["topic"]], operation_timeout=REQUEST_TIMEOUT_S, request_timeout=REQUEST_TIMEOUT_S
        )
        futures[value["topic"]].result(timeout=REQUEST_TIMEOUT_S + 5)
        return value

    def alter_config(self, node: str, value: dict[str, Any]) -> dict[str, Any]:
        entries = [
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
            for k, v in sorted(value["config"].items())
        ]
        resource = ConfigResource(ResourceType.TOPIC, value["topic"], incremental_configs=entries)
        futures = self.admins[node].incremental_alter_configs(
            [resource], request_timeout=REQUEST_TIMEOUT_S
        )
        for fut in futures.values():
            fut.result(timeout=REQUEST_TIMEOUT_S + 5)
        return value

    def describe_cluster(self, node: str, timeout: float = REQUEST_TIMEOUT_S) -> dict[str, Any]:
        """The cluster as one broker's metadata has it. librdkafka's DescribeCluster sends this
        same Metadata request, but aborts the process when the answer lists no brokers (see the
        module docstring); asked this way, such an answer is retried and then raised."""
        md = self.admins[node].list_topics(timeout=timeout)
        return cluster_view(md, self.ids)

    def list_topics(self, node: str) -> dict[str, Any]:
        md = self.admins[node].list_topics(timeout=REQUEST_TIMEOUT_S)
        topics = sorted(t for t in md.topics if not t.startswith("__"))
        return {"topics": topics, "answered_by": self.ids.get(md.orig_broker_id)}


def cluster_view(md: Any, ids: dict[int, str]) -> dict[str, Any]:
    """describe-cluster's value from a Metadata answer (confluent-kafka's ClusterMetadata)."""
    # -1: the broker knows no controller.
    controller = md.controller_id if md.controller_id >= 0 else None
    return {
        "cluster_id": md.cluster_id,
        "controller": controller,
        "controller_node": ids.get(controller) if controller is not None else None,
        "brokers": sorted(md.brokers),
        "answered_by": ids.get(md.orig_broker_id),
    }


class AdminOpsClient:
    """One process: its own random stream, its own topic names, one operation at a time."""

    setup_op = None  # nothing to open: the workload's admin clients are shared

    def __init__(self, wl: AdminWorkload, process: int, rng: random.Random) -> None:
        self.wl = wl
        self.process = process
        self.rng = rng
        self._n = 0
        # Topics this process asked to create and not yet to delete: chosen from invocations,
        # not outcomes, so that the sequence of operations depends only on the seed.
        self.topics: list[str] = []

    def open(self, op: Invocation) -> Completion:
        return Completion("ok", op.value)  # never asked: there is no setup_op

    def next_op(self) -> Invocation:
        return next_admin_op(self.wl.gen, self.rng, self.process, self, sorted(self.wl.brokers))

    def apply(self, op: Invocation) -> Completion:
        node = op.node
        assert node is not None
        try:
            if op.f == "create-topic":
                value = self.wl.create_topic(node, op.value)
            elif op.f == "delete-topic":
                value = self.wl.delete_topic(node, op.value)
            elif op.f == "alter-config":
                value = self.wl.alter_config(node, op.value)
            elif op.f == "describe-cluster":
                value = self.wl.describe_cluster(node)
            else:
                raise ValueError(f"unknown admin operation {op.f!r}")
        except KafkaException as exc:
            return Completion(classify(exc), op.value, describe(exc), node)
        return Completion("ok", value, None, node)

    def close(self) -> None:
        pass


def next_admin_op(
    gen: dict[str, Any], rng: random.Random, process: int, state: Any, nodes: list[str]
) -> Invocation:
    """The next operation of a process: pure in (gen, rng draws, state.topics, state._n)."""
    mix: dict[str, int] = gen["mix"]
    f = rng.choices(sorted(mix), weights=[mix[k] for k in sorted(mix)])[0]
    node = rng.choice(nodes)
    if f in ("delete-topic", "alter-config") and not state.topics:
        f = "create-topic"
    if f == "create-topic":
        state._n += 1
        topic = f"{gen['topic_prefix']}-{process}-{state._n}"
        state.topics.append(topic)
        value: Any = {
            "topic": topic,
            "partitions": rng.choice(gen["partitions"]),
            "replication": int(gen["replication"]),
        }
    elif f == "delete-topic":
        topic = state.topics.pop(rng.randrange(len(state.topics)))
        value = {"topic": topic}
    elif f == "alter-config":
        name = rng.choice(sorted(gen["configs"]))
        value = {
            "topic": rng.choice(state.topics),
            "config": {name: str(rng.choice(gen["configs"][name]))},
        }
    else:
        value = None
    return Invocation(f, value, node)


def final_views(
    wl: AdminWorkload,
    new_process: Callable[[], int],
    record: Callable[..., Any],
    timeout: float,
) -> dict[str, Any]:
    """Every broker, asked in turn: describe-cluster, then list-topics, by one fresh process.

    A checker can compare what each broker says. A broker that does not answer is recorded as
    such (`info`, and the next question goes from a fresh process).
    """
    started = time.monotonic()
    process = new_process()
    answered: dict[str, bool] = {}
    for node in sorted(wl.brokers):
        ok = True
        for f, ask in (("describe-cluster", wl.describe_cluster), ("list-topics", wl.list_topics)):
            if time.monotonic() - started > timeout:
                ok = False
                break
            record("invoke", f, None, process, node)
            try:
                value = ask(node)
            except KafkaException as exc:
                record(classify(exc), f, None, process, node, error=describe(exc))
                process = new_process()
                ok = False
                continue
            record("ok", f, value, process, node)
        answered[node] = ok
    return {
        "complete": all(answered.values()),
        "answered": answered,
        "seconds": round(time.monotonic() - started, 2),
    }
