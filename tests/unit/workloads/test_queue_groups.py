"""The queue client's consumer group records (docs/history.md, "Consumer groups"): its
configuration under each group protocol, what a commit's answer becomes, and the rebalance
listener and commits end to end on librdkafka's own in-process mock cluster (both the classic
protocol and KIP-848's), recorded through the real Recorder and Clients.do."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from confluent_kafka import Consumer, KafkaError, Producer

from harness.run.recorder import Recorder
from harness.run.workers import Clients, ProcessIds
from history.reader import read_history
from workloads.api import SizedFinal
from workloads.client_choice import JAVA, LIBRDKAFKA
from workloads.queue import QueueClient, QueueWorkload, commit_fields
from workloads.queue_ops import FINAL_READ_RATE, final_poll_records

TOPIC = "kchaos-queue"
KEYS = 4  # librdkafka's mock cluster creates a topic with 4 partitions on first use


def _gen(**over: Any) -> dict[str, Any]:
    gen = {
        "topic": TOPIC,
        "keys": KEYS,
        "mode": "subscribe",
        "txn": False,
        "mix": {"poll": 1},
        "max_txn_ops": 4,
        "poll_max_messages": 64,
        "poll_timeout_ms": 100,
        "value_stride": 1_000_000,
        "replication": 3,
        "min_insync_replicas": 2,
        "concurrency": 2,
    }
    gen.update(over)
    return gen


def _topology(bootstrap: str, ids: list[int]) -> Any:
    brokers = [SimpleNamespace(node_id=i, name=f"n{i}") for i in ids]
    return SimpleNamespace(brokers=brokers, bootstrap_servers=lambda: bootstrap)


CLASSIC_CONF = {
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
    "isolation.level": "read_uncommitted",
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 1000,
}


def _conf_of(wl: QueueWorkload, group: str, subscriber: bool) -> dict[str, Any]:
    conf = wl.consumer_conf(group, subscriber)
    return {
        k: v for k, v in conf.items() if k not in ("log_level", "error_cb", "bootstrap.servers")
    }


@pytest.mark.parametrize("mode", ["subscribe", "assign"])
def test_classic_consumers_are_configured_as_before(mode):
    wl = QueueWorkload(_gen(mode=mode), _topology("127.0.0.1:1", [1]), 1, "r/1")
    try:
        assert _conf_of(wl, "g", mode == "subscribe") == {"group.id": "g", **CLASSIC_CONF}
    finally:
        wl.close()


def test_kip848_subscribers_leave_session_and_heartbeat_to_the_brokers():
    wl = QueueWorkload(_gen(group_protocol="consumer"), _topology("127.0.0.1:1", [1]), 1, "r/1")
    try:
        conf = _conf_of(wl, "g", True)
        assert conf["group.protocol"] == "consumer"
        assert "session.timeout.ms" not in conf and "heartbeat.interval.ms" not in conf
        # The final reads' consumer assigns itself partitions: no group protocol to speak of.
        assert _conf_of(wl, "g-final", False) == {"group.id": "g-final", **CLASSIC_CONF}
        # librdkafka takes both (it refuses session.timeout.ms with group.protocol=consumer).
        for subscriber in (True, False):
            Consumer(wl.consumer_conf("g", subscriber)).close()
    finally:
        wl.close()


def _tp(partition: int, offset: int, topic: str = TOPIC, error: Any = None) -> Any:
    # confluent-kafka's TopicPartition has a read-only `error`: a stand-in with its fields.
    return SimpleNamespace(topic=topic, partition=partition, offset=offset, error=error)


def test_commit_fields_are_what_the_answer_says_was_stored():
    answer = [_tp(0, 12), _tp(1, -1001), _tp(2, 7), _tp(0, 3, topic="other")]
    assert commit_fields(answer, TOPIC) == {"commit": {"0": 12, "2": 7}}
    assert commit_fields([], TOPIC) == {}
    assert commit_fields([_tp(3, -1001)], TOPIC) == {}


def test_a_partially_refused_commit_names_the_refused_partitions():
    refused = KafkaError(KafkaError.REBALANCE_IN_PROGRESS)
    fields = commit_fields([_tp(0, 5), _tp(1, 9, error=refused)], TOPIC)
    assert fields["commit"] == {"0": 5}
    assert fields["commit_error"].startswith("partitions refused: 1: REBALANCE_IN_PROGRESS")


# librdkafka's mock cluster ------------------------------------------------------------------------
@pytest.fixture
def mock_cluster() -> Iterator[tuple[str, list[int], Producer]]:
    """Three mock brokers in this process, reachable on loopback by other handles; the topic
    made by a first send (the mock answers no CreateTopics)."""
    owner = Producer({"test.mock.num.brokers": 3, "log_level": 0, "error_cb": lambda e: None})
    md = owner.list_topics(timeout=10)
    bootstrap = ",".join(f"{b.host}:{b.port}" for b in md.brokers.values())
    owner.produce(TOPIC, b"-1", partition=0)
    assert owner.flush(10) == 0
    yield bootstrap, sorted(md.brokers), owner
    owner.flush(0)


def _subscribers(
    mock: tuple[str, list[int], Producer], tmp_path: Any, protocol: str | None
) -> tuple[QueueWorkload, Recorder, Clients]:
    bootstrap, ids, _ = mock
    gen = _gen(**({"group_protocol": protocol} if protocol else {}))
    wl = QueueWorkload(gen, _topology(bootstrap, ids), 7, "groups/1")
    rec = Recorder(tmp_path / "history.jsonl", "groups/1")
    wl.clock = rec.now_ns  # as the interpreter does (workloads/api.py Clocked)
    clients = Clients(wl, rec, 7, 2, 0, ProcessIds(2), threading.Event())
    return wl, rec, clients


def _send(owner: Producer, n: int, start: int) -> None:
    for i in range(n):
        value = start + i
        owner.produce(TOPIC, str(value).encode(), partition=value % KEYS)
    assert owner.flush(10) == 0


def _assigned(ops: list[dict[str, Any]], process: int) -> set[int]:
    """The process's assignment after its recorded listener events."""
    owned: set[int] = set()
    for op in ops:
        if op["process"] != process:
            continue
        for event, keys, _ in op.get("rebalance", []):
            if event == "assigned":
                owned |= set(keys)
            else:
                owned -= set(keys)
    return owned


def _poll_until(
    path: Any, clients: Clients, members: list[QueueClient], done: Any
) -> list[dict[str, Any]]:
    """Polls every member in turn until `done(completions so far)`; at most 20 s."""
    deadline = time.monotonic() + 20.0
    ops: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        for c in members:
            clients.do(c, c.next_op(), c.apply)
        ops = [op for op in read_history(path).ops if op["type"] != "invoke"]
        if done(ops):
            return ops
    raise AssertionError(f"not reached in time: {ops[-6:]}")


@pytest.mark.parametrize("protocol", [None, "consumer"])
def test_rebalances_and_commits_are_recorded_on_the_op_that_saw_them(
    mock_cluster, tmp_path, protocol
):
    wl, rec, clients = _subscribers(mock_cluster, tmp_path, protocol)
    path = tmp_path / "history.jsonl"
    owner = mock_cluster[2]
    first = wl.client(0, random.Random(0))
    second = wl.client(1, random.Random(1))
    try:
        assert clients.do(first, first.setup_op, first.open)
        _send(owner, 40, 1)
        # Alone in the group, the first member is given every partition.
        _poll_until(path, clients, [first], lambda ops: _assigned(ops, 0) == set(range(KEYS)))
        assert clients.do(second, second.setup_op, second.open)
        _send(owner, 40, 100)

        def shared(ops: list[dict[str, Any]]) -> bool:
            mine, theirs = _assigned(ops, 0), _assigned(ops, 1)
            return bool(mine) and bool(theirs) and not mine & theirs

        _poll_until(path, clients, [first, second], shared)
        _send(owner, 40, 200)

        def both_committed(ops: list[dict[str, Any]]) -> bool:
            return {op["process"] for op in ops if "commit" in op} == {0, 1}

        ops = _poll_until(path, clients, [first, second], both_committed)
    finally:
        for c in (first, second):
            c.close()
        wl.close()
        rec.close()

    events = 0
    invoked_at: dict[Any, int] = {}
    for op in read_history(path).ops:
        if op["type"] == "invoke":
            invoked_at[op["process"]] = op["time"]
            continue
        for event, keys, t in op.get("rebalance", []):
            events += 1
            assert event in ("assigned", "revoked", "lost")
            assert all(0 <= k < KEYS for k in keys)
            # The listener ran during the op, on the history's clock: between its two lines.
            assert invoked_at[op["process"]] <= t <= op["time"]
    assert events >= 3
    revoked = [
        keys
        for op in ops
        if op["process"] == 0
        for e, keys, _ in op.get("rebalance", [])
        if e == "revoked"
    ]
    assert revoked, "the first member gave partitions up to the second"
    if protocol is None:
        # The classic protocol's default assignors are eager: a revocation takes back the whole
        # assignment, which is what the listener was given.
        assert sorted(revoked[0]) == list(range(KEYS))
    else:
        # KIP-848's assignments are incremental: only what moves to the other member.
        assert revoked[0] and len(revoked[0]) < KEYS
    committed = 0
    for op in ops:
        if op["f"] != "poll" or op["type"] != "ok":
            continue
        read = op["value"][0][1]
        if not read:
            assert "commit" not in op and "commit_error" not in op
            continue
        if "commit_error" in op:
            # A coordinator may refuse a commit while the group rebalances (the mock's classic
            # groups do: REBALANCE_IN_PROGRESS); the poll stays ok and says so.
            assert "commit" not in op and op["commit_error"], op
            continue
        committed += 1
        # A synchronous commit of the positions stores, for each partition read, the offset
        # after the last record read.
        for key, pairs in read.items():
            assert op["commit"][key] == pairs[-1][0] + 1
    assert committed >= 2


def test_the_final_reads_grow_with_what_was_acknowledged():
    wl = QueueWorkload(_gen(), _topology("127.0.0.1:1", [1]), 1, "r/1")
    try:
        assert isinstance(wl, SizedFinal)
        assert wl.final_timeout(60.0) == 60.0  # nothing acknowledged: --final-timeout as given
        k = np.arange(50_000)
        wl.acked_bulk(k % 8, 10**9 + k)
        wl.note_acked(3, None, 7)
        assert wl.final_timeout(60.0) == 60.0 + 50_001 / FINAL_READ_RATE[LIBRDKAFKA]
        # The rate is the client's (bench/bench_final_reads.py measures each).
        java = QueueWorkload(_gen(client=JAVA), _topology("127.0.0.1:1", [1]), 1, "r/2")
        try:
            java.acked_bulk(k % 8, 10**9 + k)
            assert java.final_timeout(60.0) == 60.0 + 50_000 / FINAL_READ_RATE[JAVA]
        finally:
            java.close()
    finally:
        wl.close()


@pytest.mark.parametrize(
    ("acknowledged", "records"),
    [(0, 500), (100_000, 500), (1_000_000, 5_000), (7_700_000, 20_000)],
)
def test_a_final_poll_asks_for_more_records_when_millions_were_acknowledged(
    acknowledged: int, records: int
):
    assert final_poll_records(acknowledged) == records
